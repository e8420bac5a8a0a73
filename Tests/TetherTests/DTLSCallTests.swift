import Foundation
import Testing
import TetherCore

@testable import Tether

/// Two real CallSessions over libnice on 127.0.0.1 keyed with DTLS-SRTP (OpenSSL both sides).
@Suite("DTLS-SRTP calls over libnice on loopback", .serialized)
struct DTLSCallTests {
    func session(_ keying: CallConfiguration.Keying, frequency: Double = 440) throws -> CallSession {
        var configuration = CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: frequency, levelDBFS: -12), localAddresses: ["127.0.0.1"],
            connectTimeoutSeconds: 10, statisticsIntervalSeconds: 0)
        configuration.keying = keying
        return try CallSession(configuration: configuration)
    }

    @Test func aDTLSCallCarriesMediaBothWaysAndARestartKeepsTheAssociation() async throws {
        let a = try session(.dtls)
        let b = try session(.sdes, frequency: 660)  // answers follow the offer
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await a.start()
        try await b.start()
        let offer = try await a.makeOffer()
        #expect(offer.contains("UDP/TLS/RTP/SAVPF"))
        #expect(offer.contains("a=setup:actpass"))
        #expect(!offer.contains("a=crypto"))
        let answer = try await b.acceptOffer(offer)
        #expect(answer.contains("a=setup:active"))
        #expect(!answer.contains("a=crypto"))
        try await a.applyAnswer(answer)
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        #expect(await rb.waitFor("established", timeoutSeconds: 10) != nil)
        #expect(a.statistics().srtpSuite == "AEAD_AES_128_GCM")
        #expect(b.statistics().srtpSuite == "AEAD_AES_128_GCM")
        let before = a.statistics().packetsReceived
        #expect(await waitUntil(timeoutSeconds: 5) { a.statistics().packetsReceived > before + 25 && b.statistics().packetsReceived > 25 })

        // An ICE restart from A: new credentials, the same fingerprints and roles, no handshake.
        let descriptions = a.subscribeToEvents()
        await a.renewMedia()
        var restartOffer = ""
        for await event in descriptions {
            if case let .localDescription(message) = event, message.kind == .offer, message.isRestart {
                restartOffer = message.sdp
                break
            }
        }
        #expect(restartOffer.contains("a=setup:actpass"))
        let restartAnswer = try await b.acceptOffer(restartOffer)
        #expect(restartAnswer.contains("a=setup:active"))
        try await a.applyAnswer(restartAnswer)
        let afterRestart = b.statistics().packetsReceived
        #expect(await waitUntil(timeoutSeconds: 5) { b.statistics().packetsReceived > afterRestart + 25 })
        #expect(a.state == .established)
        #expect(await a.dtlsHandshakesCompleted == 1)
        #expect(await b.dtlsHandshakesCompleted == 1)

        await a.hangUp()
        #expect(await rb.waitFor("ended", timeoutSeconds: 3) != nil)
        #expect(rb.endReason?.cause == .remoteHangup)
    }

    @Test func bothKeyingsOfferedAreAnsweredWithDTLSOrSDES() async throws {
        for answererTakesDTLS in [true, false] {
            let a = try session(.both)
            let b = try session(.sdes)
            let rb = EventRecorder(b)
            try await a.start()
            try await b.start()
            var offer = try await a.makeOffer()
            #expect(offer.contains("RTP/SAVPF"))
            #expect(offer.contains("a=crypto") && offer.contains("a=fingerprint"))
            if !answererTakesDTLS {
                // A peer that knows no DTLS: the same offer without the fingerprint.
                offer = offer.split(separator: "\r\n", omittingEmptySubsequences: false)
                    .filter { !$0.hasPrefix("a=fingerprint") && !$0.hasPrefix("a=setup") }.joined(separator: "\r\n")
            }
            let answer = try await b.acceptOffer(offer)
            #expect(answer.contains("a=fingerprint") == answererTakesDTLS)
            #expect(answer.contains("a=crypto") != answererTakesDTLS)
            try await a.applyAnswer(answer)
            #expect(await rb.waitFor("established", timeoutSeconds: 10) != nil)
            #expect(await b.dtlsHandshakesCompleted == (answererTakesDTLS ? 1 : 0))
            await a.hangUp()
            await b.hangUp()
        }
    }

    @Test func aCertificateThatDoesNotMatchItsFingerprintEndsTheCallWithATerminalError() async throws {
        let a = try session(.dtls)
        let b = try session(.sdes)
        let ra = EventRecorder(a)
        try await a.start()
        try await b.start()
        let answer = try await b.acceptOffer(try await a.makeOffer())
        // Someone on the signaling path swapped the fingerprint.
        let forged = try DTLSFingerprint(hashFunction: "sha-256", digest: [UInt8](repeating: 0xAB, count: 32))
        let tampered = answer.split(separator: "\r\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("a=fingerprint:") ? "a=fingerprint:" + forged.attributeValue : String($0) }.joined(separator: "\r\n")
        try await a.applyAnswer(tampered)
        #expect(await ra.waitFor("ended", timeoutSeconds: 10) != nil)
        let reason = try #require(ra.endReason)
        #expect(reason.error?.code == .dtlsFingerprintMismatch)
        #expect(reason.error?.isTerminal == true && reason.error?.canRetry == false)
        #expect(a.statistics().packetsReceived == 0)
        await b.hangUp()
    }

    @Test func aPeerThatRefusesOurCertificateEndsTheHandshakeWithARetryableError() async throws {
        var configuration = CallConfiguration(localAddresses: ["127.0.0.1"], connectTimeoutSeconds: 1.5, statisticsIntervalSeconds: 0)
        configuration.keying = .dtls
        let a = try CallSession(configuration: configuration)
        let b = try session(.sdes)
        let ra = EventRecorder(a)
        try await a.start()
        // B answers DTLS but is told the offer's fingerprint was another: it refuses A's
        // certificate with an alert, which fails A's handshake.
        let offer = try await a.makeOffer()
        let forged = try DTLSFingerprint(hashFunction: "sha-256", digest: [UInt8](repeating: 0xCD, count: 32))
        let tampered = offer.split(separator: "\r\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("a=fingerprint:") ? "a=fingerprint:" + forged.attributeValue : String($0) }.joined(separator: "\r\n")
        try await b.start()
        try await a.applyAnswer(try await b.acceptOffer(tampered))
        #expect(await ra.waitFor("ended", timeoutSeconds: 10) != nil)
        let code = try #require(ra.endReason?.error?.code)
        #expect(code == .dtlsHandshakeFailed)
        #expect(ra.endReason?.error?.canRetry == true)
        await b.hangUp()
    }

    @Test func aHandshakeThatNeverFinishesEndsTheCallAtTheSetUpTime() async throws {
        var configuration = CallConfiguration(localAddresses: ["127.0.0.1"], connectTimeoutSeconds: 1.5, statisticsIntervalSeconds: 0)
        configuration.keying = .dtls
        let a = try CallSession(configuration: configuration)
        let b = try session(.sdes)
        let ra = EventRecorder(a)
        try await a.start()
        let answer = try await b.acceptOffer(try await a.makeOffer())
        // B (the DTLS client) is gone before it could send its ClientHello: A waits as server.
        await b.hangUp()
        try await a.applyAnswer(answer)
        #expect(await ra.waitFor("ended", timeoutSeconds: 10) != nil)
        let error = try #require(ra.endReason?.error)
        #expect(error.code == .dtlsHandshakeFailed)
        #expect(error.message.contains("did not finish within 1.5 s"))
        #expect(error.isTerminal && error.canRetry)
    }
}
