import Foundation
import Glibc
import Testing
import TetherFaultLab
import TetherRealtime

@testable import TetherICE

/// TURN over TLS against a real coturn on loopback, with a certificate the test makes: two agents
/// that are given only each other's relayed candidates, so every datagram crosses both tunnels,
/// TLS and the server.
@Suite(
    "TURN over TLS through a real coturn",
    .enabled(
        if: ["/usr/bin/turnserver", "/usr/bin/openssl"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) },
        "needs coturn and openssl (scripts/setup-debian.sh installs them)"))
struct TURNTLSTunnelTests {
    /// A coturn on 127.0.0.1 with TLS on a free port, its certificate, and a folder for both.
    struct Server {
        let turn: TurnServer
        let certificate: LabCertificate
        let tlsPort: UInt16
        let folder: String

        init() async throws {
            folder = NSTemporaryDirectory() + "tether-turn-tls-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            certificate = try LabCertificate.make(in: folder, name: "turn.tether.test", addresses: ["127.0.0.1"])
            let plain = Int.random(in: 20_000...29_999)
            tlsPort = UInt16(plain + 10_000)
            turn = try await TurnServer(
                listeningAddresses: ["127.0.0.1"], relayAddress: "127.0.0.1", port: plain,
                tls: .init(certificatePath: certificate.certificatePath, keyPath: certificate.keyPath, port: Int(tlsPort)),
                allowLoopbackPeers: true, logPath: folder + "/turnserver.log")
        }

        func server(serverName: String? = "turn.tether.test", trusting path: String? = nil) -> ICEServer {
            ICEServer(
                address: "127.0.0.1", port: tlsPort, username: TurnServer.username, password: TurnServer.password, transport: .tls,
                serverName: serverName, trustedCertificatesPath: path ?? certificate.certificatePath)
        }

        func finish() {
            turn.stop()
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    func peer(controlling: Bool, turn: ICEServer) throws -> Peer {
        try Peer(
            configuration: ICETransportConfiguration(controlling: controlling, localAddresses: ["127.0.0.1"], turnServer: turn))
    }

    @Test(.timeLimit(.minutes(1)))
    func relayedCandidatesOverTLSCarryDatagramsBothWaysAndAreReleasedAtClose() async throws {
        let server = try await Server()
        defer { server.finish() }
        let a = try peer(controlling: true, turn: server.server())
        let b = try peer(controlling: false, turn: server.server())
        let relayedA = try a.gather().filter { $0.contains("typ relay") }
        let relayedB = try b.gather().filter { $0.contains("typ relay") }
        let tunnelA = try #require(a.transport.turnTLSTunnel)
        #expect(relayedA.count == 1 && relayedB.count == 1, "relayed candidates: A \(relayedA), B \(relayedB); A's tunnel: \(tunnelA.lastFailure ?? "no failure")")
        #expect(tunnelA.sessions >= 1 && tunnelA.failures == 0)
        #expect(tunnelA.lastSession?.hasPrefix("TLSv1.") == true, "session: \(tunnelA.lastSession ?? "none")")
        // Only relayed candidates cross: the pair is relay ⇄ relay, through TLS at both ends.
        let credA = a.transport.localCredentials()
        let credB = b.transport.localCredentials()
        try a.transport.setRemote(ufrag: credB.ufrag, password: credB.password, candidates: relayedB)
        try b.transport.setRemote(ufrag: credA.ufrag, password: credA.password, candidates: relayedA)
        let pair = a.log.first(within: 10) { if case .selectedPairChanged(let p) = $0 { p } else { nil } }
        #expect(pair?.localType == "relay" && pair?.remoteType == "relay", "A's pair: \(String(describing: pair))")
        // B (controlled) selects its pair when A's nomination reaches it: later than A, by a
        // lot in a TSan build on a loaded machine (B's first datagrams then had no path).
        let pairB = b.log.first(within: 10) { if case .selectedPairChanged(let p) = $0 { p } else { nil } }
        #expect(pairB?.localType == "relay" && pairB?.remoteType == "relay", "B's pair: \(String(describing: pairB))")
        let sentBefore = tunnelA.bytesCarried.sent
        #expect(deliver(40, from: a, to: b, bytes: 80, within: 5) == 40)
        #expect(deliver(40, from: b, to: a, bytes: 80, within: 5) == 40)
        // Each datagram crossed A's tunnel: 40 of at least 64 bytes out, 40 in.
        #expect(tunnelA.bytesCarried.sent - sentBefore >= 40 * 64 && tunnelA.bytesCarried.received >= 40 * 64)
        #expect(server.turn.allocations == 2)
        // Closing releases the allocation through the tunnel (libnice's deallocation goes out
        // and is answered before the tunnel closes), not left to expire on the server.
        a.transport.close()
        b.transport.close()
        var left = server.turn.allocations
        for _ in 0..<40 where left > 0 {
            try await Task.sleep(for: .milliseconds(50))
            left = server.turn.allocations
        }
        #expect(left == 0, "\(left) allocations left after both closed")
    }

    @Test(.timeLimit(.minutes(1)))
    func aCertificateNotTrustedGivesNoRelayedCandidateAndSaysWhy() async throws {
        let server = try await Server()
        defer { server.finish() }
        // Another self-signed certificate is trusted instead of the server's.
        let stranger = try LabCertificate.make(in: server.folder, name: "stranger.tether.test", addresses: [])
        let a = try peer(controlling: true, turn: server.server(trusting: stranger.certificatePath))
        defer { a.transport.close() }
        // The tunnel refuses libnice's allocation at once: gathering ends in milliseconds (22 ms
        // here), where a connection closed under libnice leaves its gathering unfinished forever.
        let started = MonotonicClock.nanoseconds()
        let candidates = try a.gather(within: 60)
        #expect(MonotonicClock.nanoseconds() - started < 5_000_000_000)
        #expect(!candidates.contains { $0.contains("typ relay") })
        #expect(candidates.contains { $0.contains("typ host") })
        let tunnel = try #require(a.transport.turnTLSTunnel)
        #expect(tunnel.sessions == 0 && tunnel.failures >= 1)
        let why = tunnel.lastFailure ?? ""
        #expect(why.contains("certificate was refused") && why.contains("self-signed") || why.contains("unable to get local issuer"), "\(why)")
    }

    @Test(.timeLimit(.minutes(1)))
    func aCertificateForAnotherNameIsRefused() async throws {
        let server = try await Server()
        defer { server.finish() }
        let a = try peer(controlling: true, turn: server.server(serverName: "turn.example.org"))
        defer { a.transport.close() }
        #expect(!(try a.gather(within: 60)).contains { $0.contains("typ relay") })
        let why = a.transport.turnTLSTunnel?.lastFailure ?? ""
        #expect(why.contains("hostname mismatch"), "\(why)")
    }

    @Test func untrustedCertificateFileIsATypedErrorAtOnce() {
        let missing = ICEServer(address: "127.0.0.1", port: 5349, transport: .tls, trustedCertificatesPath: "/nonexistent/ca.pem")
        #expect {
            try ICETransport(
                configuration: ICETransportConfiguration(controlling: true, localAddresses: ["127.0.0.1"], turnServer: missing),
                receiveRing: PacketRing(slotCount: 8), receiveWakeup: EventCount(), eventHandler: { _ in })
        } throws: { error in
            guard case .turnTLSUnavailable(let why) = error as? ICETransportError else { return false }
            return why.contains("/nonexistent/ca.pem")
        }
    }
}
