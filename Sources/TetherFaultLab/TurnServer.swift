import Foundation
import Glibc

/// A real coturn (`turnserver`, Debian's `coturn`) with long-term credentials, listening on UDP and
/// TCP (and, given a certificate, TLS) on its listening addresses and relaying on one address. In
/// a `relayed` fault-lab row it runs in the relay namespace (10.92.1.1 and 10.92.2.1, relaying on
/// 10.92.0.1); tests run it on loopback.
public final class TurnServer: @unchecked Sendable {
    public static let username = "tether"
    public static let password = "fault-lab"
    /// UDP and TCP port.
    public static let port = 3478
    /// The TLS port in the fault lab: the HTTPS port, the only one many corporate networks let out.
    public static let tlsPort = 443

    /// What TLS needs: the server's certificate and key (PEM) and its TLS port.
    public struct TLS: Sendable {
        public var certificatePath: String
        public var keyPath: String
        public var port: Int

        public init(certificatePath: String, keyPath: String, port: Int) {
            self.certificatePath = certificatePath
            self.keyPath = keyPath
            self.port = port
        }
    }

    private let process = Process()
    private let log: FileHandle?
    private let namespace: String?
    private let relayAddress: String
    private let plainPort: Int

    /// Starts the server and returns once it listens on every transport it serves.
    /// - Parameters:
    ///   - namespace: the network namespace to run in (nil: this one).
    ///   - port: the UDP and TCP port (TLS takes `tls.port`).
    ///   - allowLoopbackPeers: relay to 127.0.0.1 and ::1 (a test on loopback).
    public init(
        namespace: String? = nil, listeningAddresses: [String] = ["10.92.1.1", "10.92.2.1"], relayAddress: String = "10.92.0.1",
        port: Int = TurnServer.port, tls: TLS? = nil, allowLoopbackPeers: Bool = false, logPath: String
    ) async throws(FaultLabError) {
        guard Shell.has("turnserver") else { throw .unavailable("turnserver (Debian's coturn) is not installed") }
        self.namespace = namespace
        self.relayAddress = relayAddress
        plainPort = port
        log = FileManager.default.createFile(atPath: logPath, contents: nil) ? FileHandle(forWritingAtPath: logPath) : nil
        var arguments = ["turnserver", "-n"] + listeningAddresses.map { "--listening-ip=\($0)" }
        arguments += [
            "--relay-ip=\(relayAddress)", "--listening-port=\(port)", "--lt-cred-mech", "--user=\(Self.username):\(Self.password)",
            "--realm=tether", "--no-dtls", "--no-cli", "--fingerprint", "--log-file=stdout", "--simple-log", "--no-software-attribute",
            "-v",
        ]
        if let tls {
            arguments += ["--tls-listening-port=\(tls.port)", "--cert=\(tls.certificatePath)", "--pkey=\(tls.keyPath)"]
        } else {
            arguments.append("--no-tls")
        }
        if allowLoopbackPeers { arguments.append("--allow-loopback-peers") }
        if let namespace {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            process.arguments = ["netns", "exec", namespace] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/turnserver")
            process.arguments = Array(arguments.dropFirst())
        }
        process.standardOutput = log ?? FileHandle.nullDevice
        process.standardError = log ?? FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { throw .processFailed("turnserver: \(error)") }
        // Ready when it listens on UDP and TCP on every address (and on the TLS port).
        let ports = [port] + (tls.map { [$0.port] } ?? [])
        for _ in 0..<250 {
            let listening = ss("-Hlnut").split(separator: "\n")
            let ready = listeningAddresses.allSatisfy { address in
                ports.allSatisfy { p in listening.filter { $0.contains("\(address):\(p) ") }.count >= (p == port ? 2 : 1) }
            }
            if ready { return }
            if !process.isRunning { break }
            await pause(0.02)
        }
        stop()
        throw .processFailed("turnserver did not listen within 5 s (log: \(logPath))")
    }

    /// `--turn` (and `--turn-transport`) for `tether call`: the server as seen from A (10.92.1.1)
    /// or B (10.92.2.1). TLS goes to ``tlsPort``, trusting `certificate` for `serverName`.
    static func option(forSide side: String, transport: String, certificate: LabCertificate? = nil) -> [String] {
        let address = side == "A" ? "10.92.1.1" : "10.92.2.1"
        let port = transport == "tls" ? tlsPort : port
        var options = ["--turn", "\(address):\(port):\(username):\(password)", "--turn-transport", transport]
        if let certificate { options += ["--turn-ca", certificate.certificatePath, "--turn-server-name", certificate.name] }
        return options
    }

    /// Stops the server (SIGKILL: processes started through Foundation's `Process` inherit a
    /// signal mask that blocks SIGTERM). Idempotent.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? log?.close()
    }

    /// The relayed sockets the server holds now, one per allocation (UDP sockets of this
    /// process bound on the relay address).
    public var allocations: Int {
        let pid = "pid=\(process.processIdentifier),"
        return ss("-Hanup src \(relayAddress)").split(separator: "\n").filter { $0.contains(pid) && !$0.contains(":\(plainPort) ") }.count
    }

    private func ss(_ arguments: String) -> String {
        namespace.map { Shell.run(in: $0, "ss \(arguments)").output } ?? Shell.run("ss \(arguments)").output
    }

    deinit { stop() }
}

/// A self-signed certificate the lab makes for its TURN server (ECDSA P-256, `openssl req`), and
/// the one file a client trusts it by.
public struct LabCertificate: Sendable {
    /// The DNS name it is issued to (also in its subject alternative names).
    public var name: String
    public var certificatePath: String
    public var keyPath: String

    /// Makes a certificate for `name` and `addresses` in `folder`.
    public static func make(in folder: String, name: String, addresses: [String]) throws(FaultLabError) -> LabCertificate {
        let certificate = LabCertificate(name: name, certificatePath: folder + "/\(name).pem", keyPath: folder + "/\(name).key")
        let alternatives = (["DNS:\(name)"] + addresses.map { "IP:\($0)" }).joined(separator: ",")
        try Shell.must(
            "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=\(name) "
                + "-addext subjectAltName=\(alternatives) -keyout \(Shell.quoted(certificate.keyPath)) -out \(Shell.quoted(certificate.certificatePath))")
        return certificate
    }
}
