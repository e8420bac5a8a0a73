import Foundation
import Glibc

/// A real coturn (`turnserver`, Debian's `coturn`) in the relay namespace of a `relayed` lab,
/// with long-term credentials, listening on UDP and TCP 3478 on both of its links and relaying
/// on 10.92.0.1.
final class TurnServer: @unchecked Sendable {
    static let username = "tether"
    static let password = "fault-lab"
    static let port = 3478
    private let process = Process()
    private let log: FileHandle?

    init(namespace: String, logPath: String) async throws(FaultLabError) {
        guard Shell.has("turnserver") else { throw .unavailable("turnserver (Debian's coturn) is not installed") }
        log = FileManager.default.createFile(atPath: logPath, contents: nil) ? FileHandle(forWritingAtPath: logPath) : nil
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = [
            "netns", "exec", namespace, "turnserver", "-n", "--listening-ip=10.92.1.1", "--listening-ip=10.92.2.1",
            "--relay-ip=10.92.0.1", "--listening-port=\(Self.port)", "--lt-cred-mech", "--user=\(Self.username):\(Self.password)",
            "--realm=tether", "--no-tls", "--no-dtls", "--no-cli", "--fingerprint", "--log-file=stdout", "--simple-log",
            "--no-software-attribute", "-v",
        ]
        process.standardOutput = log ?? FileHandle.nullDevice
        process.standardError = log ?? FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { throw .processFailed("turnserver: \(error)") }
        // Ready when it listens on both transports.
        for _ in 0..<250 {
            let listening = Shell.run(in: namespace, "ss -Hlnut").output
            if listening.contains("10.92.2.1:\(Self.port)") && listening.split(separator: "\n").filter({ $0.contains(":\(Self.port)") }).count >= 4 {
                return
            }
            await pause(0.02)
        }
        stop()
        throw .processFailed("turnserver did not listen within 5 s (log: \(logPath))")
    }

    /// `--turn` for `tether call`: the server as seen from A (10.92.1.1) or B (10.92.2.1).
    static func option(forSide side: String, transport: String) -> [String] {
        let address = side == "A" ? "10.92.1.1" : "10.92.2.1"
        return ["--turn", "\(address):\(port):\(username):\(password)", "--turn-transport", transport]
    }

    /// Stops the server (SIGKILL: processes started through Foundation's `Process` inherit a
    /// signal mask that blocks SIGTERM). Idempotent.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? log?.close()
    }

    /// The relayed sockets the server holds now, one per allocation (UDP sockets bound on the
    /// relay address), counted in its namespace.
    static func allocations(namespace: String) -> Int {
        Shell.run(in: namespace, "ss -Hanu src 10.92.0.1").output.split(separator: "\n").filter { !$0.contains(":\(port) ") }.count
    }

    deinit { stop() }
}
