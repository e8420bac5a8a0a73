import Foundation
import Testing
import TetherCore
import TetherTestSupport

@testable import Tether

/// Two real CallSessions over libnice on 127.0.0.1 keyed with DTLS-SRTP (OpenSSL both sides).
@Suite("DTLS-SRTP calls over libnice on loopback", .keepsLogPerTest, .serialized)
struct DTLSCallTests {
    func session(_ keying: CallConfiguration.Keying, frequency: Double = 440, recording: String? = nil) throws -> CallSession {
        var configuration = CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: frequency, levelDBFS: -12),
            audioSink: recording.map { WAVFileSink(path: $0) } ?? DiscardSink(), localAddresses: ["127.0.0.1"],
            connectTimeoutSeconds: 10, statisticsIntervalSeconds: 0)
        configuration.keying = keying
        return try CallSession(configuration: configuration)
    }

    /// Renews `session`'s media path and returns the restart offer it emits.
    func renewalOffer(from session: CallSession) async -> String {
        let descriptions = session.subscribeToEvents()
        await session.renewMedia()
        for await event in descriptions {
            if case let .localDescription(message) = event, message.kind == .offer, message.isRestart { return message.sdp }
        }
        return ""
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
        let restartOffer = await renewalOffer(from: a)
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

    /// The call moves to another device (a transfer through a B2BUA, a pick-up): A's restart offer
    /// is answered by a different endpoint with its own certificate. A new fingerprint means a new
    /// association: A runs a second handshake while media keeps the old keys, then hears the new
    /// endpoint.
    @Test func aPeerWithANewCertificateGetsANewHandshakeAndTheCallGoesOn() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try session(.dtls, recording: dir + "/a.wav")
        let b1 = try session(.sdes, frequency: 660)
        let ra = EventRecorder(a)
        try await connect(a, b1)
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        #expect(await a.dtlsHandshakesCompleted == 1)
        #expect(await !a.dtlsHandshakeDeadlineArmed)

        var configuration = CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: 880, levelDBFS: -12), localAddresses: ["127.0.0.1"],
            connectTimeoutSeconds: 10, statisticsIntervalSeconds: 0)
        configuration.dtlsCertificate = try DTLSCertificate(commonName: "another device")
        let b2 = try CallSession(configuration: configuration)
        try await b2.start()
        let restartOffer = await renewalOffer(from: a)
        // B2 takes the offer as a new call.
        let answer = try await b2.acceptOffer(restartOffer)
        try await a.applyAnswer(answer)
        #expect(await waitUntil(timeoutSeconds: 10) { b2.statistics().packetsReceived > 25 })
        #expect(await a.dtlsHandshakesCompleted == 2)
        #expect(await !a.dtlsHandshakeDeadlineArmed)  // the second association's deadline is disarmed too
        // A decrypts B2's packets with the new association's keys: a second of B2's audio decoded
        // (counted in frames: the rate control may lengthen B2's packets up to 120 ms).
        let decoded = a.statistics().framesDecoded
        #expect(await waitUntil(timeoutSeconds: 5) { a.statistics().framesDecoded > decoded + 50 })
        // B1, dropped, says BYE with the old keys: A no longer accepts them, and goes on.
        await b1.hangUp()
        try await Task.sleep(for: .milliseconds(1000))
        #expect(a.state == .established)
        await a.hangUp()
        await b2.hangUp()
        // The last second A played is B2's 880 Hz.
        let (samples, rate) = try WAVFile.read(path: dir + "/a.wav")
        let hertz = ToneAnalysis.dominantFrequencyHertz(samples.suffix(rate), sampleRateHertz: rate, searchRange: 100...2000)
        #expect(abs((hertz ?? 0) - 880) < 2, "A heard \(hertz ?? 0) Hz after the move")
    }

    /// SDES keys may change in a re-offer too (RFC 4568 §7.1.4): the new ones take over at once.
    @Test func newSDESKeysInARestartAnswerTakeOverAtOnce() async throws {
        let a = try session(.sdes)
        let b1 = try session(.sdes, frequency: 660)
        let ra = EventRecorder(a)
        try await connect(a, b1)
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        let b2 = try session(.sdes, frequency: 880)
        try await b2.start()
        let restartOffer = await renewalOffer(from: a)
        let answer = try await b2.acceptOffer(restartOffer)
        try await a.applyAnswer(answer)
        #expect(await waitUntil(timeoutSeconds: 10) { b2.statistics().packetsReceived > 25 })
        // A second of B2's audio decoded with the new keys (in frames, whatever B2's packets' length).
        let decoded = a.statistics().framesDecoded
        #expect(await waitUntil(timeoutSeconds: 5) { a.statistics().framesDecoded > decoded + 50 })
        await b1.hangUp()
        try await Task.sleep(for: .milliseconds(500))
        #expect(a.state == .established)
        await a.hangUp()
        await b2.hangUp()
    }
}
