import Foundation
import Testing
import TetherCore
import TetherRTP

@testable import TetherDTLS

/// Two connections joined in memory: datagrams are handed across (optionally dropped) until both
/// sides are done; the retransmission timer runs on OpenSSL's clock, so a lost flight costs a
/// real 50 ms or more.
struct DTLSPair {
    let client: DTLSConnection
    let server: DTLSConnection
    var clientKeys: DTLSSRTPKeys?
    var serverKeys: DTLSSRTPKeys?
    var toServer: [[UInt8]] = []
    var toClient: [[UInt8]] = []
    var datagramSizes: [Int] = []
    /// Called for each datagram in flight; false drops it.
    var deliver: (_ fromClient: Bool, _ datagram: [UInt8]) -> Bool = { _, _ in true }

    init(clientFingerprint: DTLSFingerprint? = nil, serverFingerprint: DTLSFingerprint? = nil,
         clientProfiles: [SRTPCryptoSuite] = DTLSConnection.defaultProfiles,
         serverProfiles: [SRTPCryptoSuite] = DTLSConnection.defaultProfiles, mtuBytes: Int = 1200) throws {
        let clientCertificate = try DTLSCertificate()
        let serverCertificate = try DTLSCertificate()
        client = try DTLSConnection(
            role: .client, certificate: clientCertificate, remoteFingerprint: serverFingerprint ?? serverCertificate.fingerprint,
            profiles: clientProfiles, mtuBytes: mtuBytes)
        server = try DTLSConnection(
            role: .server, certificate: serverCertificate, remoteFingerprint: clientFingerprint ?? clientCertificate.fingerprint,
            profiles: serverProfiles, mtuBytes: mtuBytes)
    }

    mutating func take(_ output: DTLSConnection.Output, fromClient: Bool) {
        datagramSizes += output.datagrams.map(\.count)
        for d in output.datagrams where deliver(fromClient, d) {
            if fromClient { toServer.append(d) } else { toClient.append(d) }
        }
        if let keys = output.keys {
            if fromClient { clientKeys = keys } else { serverKeys = keys }
        }
    }

    var settled: Bool {
        func done(_ c: DTLSConnection) -> Bool { c.state != .handshaking }
        return done(client) && done(server) && toServer.isEmpty && toClient.isEmpty
    }

    /// Runs until both sides have finished (or failed) and nothing is in flight, or `seconds` pass.
    mutating func run(seconds: Double = 20) async throws {
        take(server.start(), fromClient: false)
        take(client.start(), fromClient: true)
        let deadline = Date().addingTimeInterval(seconds)
        while !settled, Date() < deadline {
            if !toServer.isEmpty {
                let d = toServer.removeFirst()
                take(server.receive(d), fromClient: false)
                continue
            }
            if !toClient.isEmpty {
                let d = toClient.removeFirst()
                take(client.receive(d), fromClient: true)
                continue
            }
            // Nothing in flight: wait for the earliest retransmission.
            let delays = [client.retransmitDelaySeconds, server.retransmitDelaySeconds].compactMap { $0 }
            try await Task.sleep(nanoseconds: UInt64(((delays.min() ?? 0.01) + 0.001) * 1e9))
            take(client.handleTimer(), fromClient: true)
            take(server.handleTimer(), fromClient: false)
        }
    }
}

@Suite("DTLS-SRTP handshake")
struct DTLSConnectionTests {
    @Test func aHandshakeExportsTheSameKeysCrosswiseAndTheyCarrySRTP() async throws {
        var pair = try DTLSPair()
        try await pair.run()
        #expect(pair.client.state == .connected)
        #expect(pair.server.state == .connected)
        let c = try #require(pair.clientKeys)
        let s = try #require(pair.serverKeys)
        #expect(c.suite == .aeadAES128GCM)
        #expect(c.local == s.remote)
        #expect(c.remote == s.local)
        #expect(c.local != c.remote)

        // A packet protected with the client's key opens with the server's view of it.
        let sender = try SRTPContext(direction: .outbound, key: c.local)
        let receiver = try SRTPContext(direction: .inbound, key: s.remote)
        var packet = [UInt8](repeating: 0, count: 12 + 40 + SRTPContext.maximumRTPTrailerBytes)
        packet[0] = 0x80
        packet[1] = 111
        packet[11] = 7
        for i in 12..<52 { packet[i] = UInt8(i) }
        let plain = Array(packet[0..<52])
        let protected = try packet.withUnsafeMutableBytes { try sender.protectRTP($0, length: 52) }
        #expect(Array(packet[12..<52]) != Array(plain[12..<52]))
        let opened = try packet.withUnsafeMutableBytes { try receiver.unprotectRTP($0, length: protected) }
        #expect(opened == 52)
        #expect(Array(packet[0..<52]) == plain)
    }

    @Test(arguments: [SRTPCryptoSuite.aesCM128HMACSHA1_80, .aeadAES128GCM])
    func eachSRTPProfileCanBeAgreed(suite: SRTPCryptoSuite) async throws {
        var pair = try DTLSPair(serverProfiles: [suite])
        try await pair.run()
        #expect(pair.clientKeys?.suite == suite)
        #expect(pair.serverKeys?.suite == suite)
        #expect(pair.client.suite == suite)
    }

    @Test func noCommonSRTPProfileFailsTheHandshake() async throws {
        var pair = try DTLSPair(clientProfiles: [.aesCM128HMACSHA1_80], serverProfiles: [.aeadAES128GCM])
        try await pair.run()
        #expect(pair.clientKeys == nil)
        #expect(pair.client.state != .connected)
    }

    @Test func aServerWhoseCertificateDoesNotMatchItsFingerprintIsRefused() async throws {
        let stranger = try DTLSCertificate(commonName: "someone else")
        var pair = try DTLSPair(serverFingerprint: stranger.fingerprint)
        try await pair.run()
        #expect(pair.client.state == .failed(.fingerprintMismatch))
        #expect(pair.clientKeys == nil)
        // The client's alert ends the server's handshake too.
        #expect(pair.server.state != .connected)
        #expect(pair.serverKeys == nil)
    }

    @Test func aClientWhoseCertificateDoesNotMatchItsFingerprintIsRefused() async throws {
        let stranger = try DTLSCertificate(commonName: "someone else")
        var pair = try DTLSPair(clientFingerprint: stranger.fingerprint)
        try await pair.run()
        #expect(pair.server.state == .failed(.fingerprintMismatch))
        #expect(pair.serverKeys == nil)
        #expect(pair.clientKeys == nil || pair.client.state != .connected)
    }

    @Test func lostFlightsAreSentAgain() async throws {
        var pair = try DTLSPair()
        // The first two datagrams each way vanish (ClientHello, the server's first flight).
        var dropped = (client: 0, server: 0)
        pair.deliver = { fromClient, _ in
            if fromClient, dropped.client < 2 { dropped.client += 1; return false }
            if !fromClient, dropped.server < 2 { dropped.server += 1; return false }
            return true
        }
        try await pair.run()
        #expect(dropped.client == 2)
        #expect(dropped.server == 2)
        #expect(pair.client.state == .connected)
        #expect(pair.server.state == .connected)
        #expect(pair.clientKeys?.local == pair.serverKeys?.remote)
    }

    @Test func aLostFinalFlightIsAnsweredAfterTheHandshake() async throws {
        // The server's last flight (ChangeCipherSpec, Finished) is lost once: the client sends
        // its flight again, and the connected server must answer it.
        var pair = try DTLSPair()
        var droppedFinal = false
        pair.deliver = { [server = pair.server] fromClient, _ in
            if !fromClient, server.state == .connected, !droppedFinal {
                droppedFinal = true
                return false
            }
            return true
        }
        try await pair.run()
        #expect(droppedFinal)
        #expect(pair.client.state == .connected)
        #expect(pair.server.state == .connected)
    }

    @Test func flightsAreSplitToThePathMTU() async throws {
        var pair = try DTLSPair(mtuBytes: 300)
        try await pair.run()
        #expect(pair.client.state == .connected)
        #expect(pair.datagramSizes.allSatisfy { $0 <= 300 })
        #expect(pair.datagramSizes.count > 6)
    }

    @Test func closeNotifyEndsThePeersAssociation() async throws {
        var pair = try DTLSPair()
        try await pair.run()
        let bye = pair.client.close()
        #expect(pair.client.state == .closed)
        #expect(!bye.datagrams.isEmpty)
        for d in bye.datagrams { _ = pair.server.receive(d) }
        #expect(pair.server.state == .failed(.closedByPeer))
    }

    /// A peer that starts a renegotiation on the established association gets a no_renegotiation
    /// alert, not a new handshake: as server (the peer's ClientHello; OpenSSL 3 refuses a
    /// client's renegotiation by default) and as client (the peer's HelloRequest, which OpenSSL
    /// would answer with a new ClientHello). Our side answers with no handshake record, and both
    /// sides stay connected.
    @Test(arguments: [true, false])
    func aRenegotiationIsRefused(peerIsClient: Bool) async throws {
        var pair = try DTLSPair()
        try await pair.run()
        let (peer, us) = peerIsClient ? (pair.client, pair.server) : (pair.server, pair.client)
        let request = peer.renegotiateForTesting()
        #expect(!request.datagrams.isEmpty && request.datagrams.allSatisfy { $0.first == 22 })
        var answer: [UInt8] = []
        for d in request.datagrams { answer += us.receive(d).datagrams.joined() }
        // The answer's records by content type (13-byte headers, length at 11).
        var types: [UInt8] = []
        var i = 0
        while i + 13 <= answer.count {
            types.append(answer[i])
            i += 13 + (Int(answer[i + 11]) << 8 | Int(answer[i + 12]))
        }
        #expect(types == [21], "record types \(types) in the answer to a renegotiation")
        #expect(pair.server.state == .connected && pair.client.state == .connected)
    }

    @Test func recordsArePackedIntoDatagramsInOrder() {
        func record(_ type: UInt8, _ length: Int) -> [UInt8] {
            // type, version (DTLS 1.2), epoch (2), sequence (6), length (2), body
            [type, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, UInt8(length >> 8), UInt8(length & 0xff)]
                + [UInt8](repeating: type, count: length)
        }
        let a = record(22, 100), b = record(22, 50), c = record(20, 30), d = record(22, 400)
        let packed = DTLSConnection.packRecords(ArraySlice(a + b + c + d), mtuBytes: 200)
        #expect(packed == [a + b, c, d])
        #expect(DTLSConnection.packRecords([], mtuBytes: 200).isEmpty)
    }

    @Test func theProcessCertificateIsMadeOnceAndCarriesASHA256Fingerprint() throws {
        let a = try DTLSCertificate.shared()
        let b = try DTLSCertificate.shared()
        #expect(a === b)
        #expect(a.fingerprint.hashFunction == "sha-256")
        #expect(a.fingerprint.digest.count == 32)
        #expect(try DTLSCertificate().fingerprint != a.fingerprint)
    }
}
