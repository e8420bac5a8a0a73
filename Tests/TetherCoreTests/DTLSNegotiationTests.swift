import Foundation
import Testing

@testable import TetherCore

/// DTLS-SRTP offer/answer against real Chromium 156 descriptions (Tests/Fixtures/interop/chromium).
@Suite("DTLS-SRTP negotiation")
struct DTLSNegotiationTests {
    static let chromiumFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/interop/chromium")

    static func chromium(_ name: String) throws -> SessionDescription {
        try SessionDescription.parse(String(contentsOf: chromiumFolder.appendingPathComponent(name), encoding: .utf8))
    }

    static let ourFingerprint = try! DTLSFingerprint(hashFunction: "sha-256", digest: (0..<32).map { UInt8($0 * 7 & 0xff) })

    static func local(sdes: Bool = false, dtls: Bool = true, currentRole: DTLSRole? = nil, mid: String? = nil) throws -> LocalAudioParameters {
        var local = try Fixtures.localParameters(crypto: sdes ? nil : [])
        if dtls { local.dtls = LocalDTLSParameters(fingerprint: ourFingerprint, currentRole: currentRole) }
        local.mid = mid
        return local
    }

    @Test func fingerprintsParseFormatAndRefuseBadValues() throws {
        let text = "sha-256 B3:5C:BF:C6:A9:17:7D:C1:71:D9:A6:B6:EE:BC:04:41:3E:38:2A:B9:BA:A4:E9:61:FE:E8:AE:57:6D:2D:A4:60"
        let f = try DTLSFingerprint(attributeValue: text)
        #expect(f.digest.count == 32)
        #expect(f.digest[0] == 0xB3)
        #expect(f.attributeValue == text)
        #expect(try DTLSFingerprint(attributeValue: "SHA-256 " + text.dropFirst(8).lowercased()) == f)
        #expect(throws: DTLSFingerprintError.unsupportedHashFunction("sha-1")) { try DTLSFingerprint(attributeValue: "sha-1 AB:CD") }
        #expect(throws: DTLSFingerprintError.wrongDigestLength(hashFunction: "sha-256", expectedBytes: 32, actualBytes: 2)) {
            try DTLSFingerprint(attributeValue: "sha-256 AB:CD")
        }
        for bad in ["sha-256", "sha-256 AB:CD:", "sha-256 ABCD", "sha-256 AB:ZZ", "sha-256 AB CD"] {
            #expect(throws: DTLSFingerprintError.self) { try DTLSFingerprint(attributeValue: bad) }
        }
    }

    @Test func aMalformedFingerprintOrSetupLineIsAMalformedDescription() throws {
        let offer = try String(contentsOf: Self.chromiumFolder.appendingPathComponent("offer.sdp"), encoding: .utf8)
        let badFingerprint = offer.replacingOccurrences(of: "a=fingerprint:sha-256 B3:5C", with: "a=fingerprint:sha-256 B3:5")
        #expect(throws: SDPError.self) { try SessionDescription.parse(badFingerprint) }
        let badSetup = offer.replacingOccurrences(of: "a=setup:actpass", with: "a=setup:sometimes")
        #expect(throws: SDPError.self) { try SessionDescription.parse(badSetup) }
        // A sha-1 fingerprint is kept verbatim and not used.
        let sha1 = offer.replacingOccurrences(
            of: "a=fingerprint:sha-256 B3:5C:BF:C6:A9:17:7D:C1:71:D9:A6:B6:EE:BC:04:41:3E:38:2A:B9:BA:A4:E9:61:FE:E8:AE:57:6D:2D:A4:60",
            with: "a=fingerprint:sha-1 B3:5C:BF:C6:A9:17:7D:C1:71:D9:A6:B6:EE:BC:04:41:3E:38:2A:B9")
        let parsed = try SessionDescription.parse(sha1)
        #expect(parsed.media[0].fingerprints.isEmpty)
        #expect(parsed.media[0].attributeValues(named: "fingerprint").count == 1)
        #expect(throws: SDPError.missingFingerprint) { try AudioOfferAnswer.makeAnswer(to: parsed, local: try Self.local()) }
    }

    @Test(arguments: ["offer.sdp", "offer-opus-only.sdp", "offer-before-icerestart.sdp"])
    func aChromiumOfferIsAnsweredActiveWithOurFingerprintInItsBundle(file: String) throws {
        let offer = try Self.chromium(file)
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: offer, local: try Self.local())
        let theirs = try #require(offer.media[0].fingerprints.first)
        #expect(negotiated.keying == .dtls(role: .client, remoteFingerprint: theirs))
        #expect(negotiated.opusPayloadType == 111)
        #expect(negotiated.mid == "0")
        #expect(negotiated.cryptoSuite == nil)
        // UDP only: the TCP candidate is ignored.
        #expect(negotiated.remoteCandidates.allSatisfy { $0.transport.isUDP })
        let audio = answer.media[0]
        #expect(audio.transportProtocol == .udpTLSRTPSAVPF)
        #expect(audio.setup == .active)
        #expect(audio.fingerprints == [Self.ourFingerprint])
        #expect(audio.crypto.isEmpty)
        #expect(audio.rtcpMux)
        #expect(audio.mid == "0")
        #expect(answer.attributeValues(named: "group") == ["BUNDLE 0"])
        let text = answer.serialized()
        #expect(text.contains("a=setup:active\r\n"))
        #expect(text.contains("a=fingerprint:" + Self.ourFingerprint.attributeValue + "\r\n"))
        #expect(!text.contains("a=setup:actpass"))
        // What we answer parses back to the same keying.
        let reparsed = try SessionDescription.parse(text)
        #expect(reparsed.media[0].fingerprints == [Self.ourFingerprint])
        #expect(reparsed.media[0].setup == .active)
    }

    @Test func ourDTLSOfferIsWhatAChromiumAnswerCompletes() throws {
        let local = try Self.local(mid: "0")
        let offer = AudioOfferAnswer.makeOffer(local)
        let audio = offer.media[0]
        #expect(audio.transportProtocol == .udpTLSRTPSAVPF)
        #expect(audio.setup == .actpass)
        #expect(audio.fingerprints == [Self.ourFingerprint])
        #expect(audio.crypto.isEmpty)
        #expect(offer.attributeValues(named: "group") == ["BUNDLE 0"])

        // Chromium's answer (its answer.sdp) says active: we are the DTLS server.
        let answer = try Self.chromium("answer.sdp")
        let negotiated = try AudioOfferAnswer.processAnswer(answer, to: offer)
        let theirs = try #require(answer.media[0].fingerprints.first)
        #expect(negotiated.keying == .dtls(role: .server, remoteFingerprint: theirs))
        #expect(negotiated.remoteICEUfrag == answer.media[0].iceUfrag)
    }

    @Test func bothKeyingsOfferedUseSAVPFAndTheAnswerPicksOne() throws {
        let offerer = try Self.local(sdes: true, dtls: true, mid: "0")
        let offer = AudioOfferAnswer.makeOffer(offerer)
        #expect(offer.media[0].transportProtocol == .rtpSAVPF)
        #expect(offer.media[0].crypto.count == 2)
        #expect(offer.media[0].setup == .actpass)
        let reparsed = try SessionDescription.parse(offer.serialized())

        // An answerer that takes DTLS answers with a fingerprint and no keys …
        let (dtlsAnswer, dtlsView) = try AudioOfferAnswer.makeAnswer(to: reparsed, local: try Self.local())
        #expect(dtlsAnswer.media[0].transportProtocol == .rtpSAVPF)
        #expect(dtlsAnswer.media[0].crypto.isEmpty)
        #expect(dtlsView.keying == .dtls(role: .client, remoteFingerprint: Self.ourFingerprint))
        let offererView = try AudioOfferAnswer.processAnswer(try SessionDescription.parse(dtlsAnswer.serialized()), to: offer)
        #expect(offererView.keying == .dtls(role: .server, remoteFingerprint: Self.ourFingerprint))

        // … one that takes SDES only answers a=crypto, and the offerer keys with SDES.
        let (sdesAnswer, sdesView) = try AudioOfferAnswer.makeAnswer(to: reparsed, local: try Self.local(sdes: true, dtls: false))
        #expect(sdesAnswer.media[0].fingerprints.isEmpty)
        #expect(sdesView.cryptoSuite == .AES_CM_128_HMAC_SHA1_80)
        let sdesOffererView = try AudioOfferAnswer.processAnswer(try SessionDescription.parse(sdesAnswer.serialized()), to: offer)
        #expect(sdesOffererView.cryptoSuite == .AES_CM_128_HMAC_SHA1_80)
        #expect(sdesOffererView.localCrypto?.keyAndSalt == offer.media[0].crypto[0].keyAndSalt)
    }

    @Test func anSDESOnlyOfferToADTLSOnlyCallIsRefusedWithTheReason() throws {
        let offer = AudioOfferAnswer.makeOffer(try Self.local(sdes: true, dtls: false))
        #expect(throws: SDPError.noSupportedKeying(offered: "SDES (a=crypto) only, and this call takes DTLS-SRTP")) {
            try AudioOfferAnswer.makeAnswer(to: offer, local: try Self.local())
        }
    }

    @Test func aDTLSOfferWithoutFingerprintIsRefused() throws {
        var offer = try Self.chromium("offer.sdp")
        offer.media[0].fingerprints = []
        #expect(throws: SDPError.missingFingerprint) { try AudioOfferAnswer.makeAnswer(to: offer, local: try Self.local()) }
    }

    @Test func anAnswerMustNotSayActpass() throws {
        let offer = AudioOfferAnswer.makeOffer(try Self.local(mid: "0"))
        var answer = try Self.chromium("answer.sdp")
        answer.media[0].setup = .actpass
        #expect(throws: SDPError.self) { try AudioOfferAnswer.processAnswer(answer, to: offer) }
        answer.media[0].setup = .passive
        #expect(try AudioOfferAnswer.processAnswer(answer, to: offer).keying
            == .dtls(role: .client, remoteFingerprint: try #require(answer.media[0].fingerprints.first)))
    }

    @Test func answeringARestartKeepsTheRoleWeHoldAndTheAssociation() throws {
        // Chromium's ICE-restart re-offer keeps actpass and its fingerprint; we hold the server
        // role from the first negotiation, so we answer passive and keep the association.
        let before = try Self.chromium("offer-before-icerestart.sdp")
        let restart = try Self.chromium("offer-icerestart.sdp")
        #expect(restart.media[0].setup == .actpass)
        #expect(restart.media[0].fingerprints == before.media[0].fingerprints)
        #expect(restart.media[0].iceUfrag != before.media[0].iceUfrag)
        let (answer, view) = try AudioOfferAnswer.makeAnswer(to: restart, local: try Self.local(currentRole: .server))
        #expect(answer.media[0].setup == .passive)
        guard case let .dtls(role, fingerprint) = view.keying else {
            Issue.record("not DTLS")
            return
        }
        #expect(DTLSNegotiation.keepsAssociation(
            currentRole: .server, currentFingerprint: try #require(before.media[0].fingerprints.first),
            role: role, remoteFingerprints: [fingerprint]))
        // A new fingerprint, or a role swapped by the peer, means a new handshake.
        let stranger = try DTLSFingerprint(hashFunction: "sha-256", digest: [UInt8](repeating: 1, count: 32))
        #expect(!DTLSNegotiation.keepsAssociation(currentRole: .server, currentFingerprint: stranger, role: role, remoteFingerprints: [fingerprint]))
        #expect(!DTLSNegotiation.keepsAssociation(currentRole: .client, currentFingerprint: fingerprint, role: role, remoteFingerprints: [fingerprint]))
    }

    @Test func rolesFollowRFC5763() throws {
        #expect(try DTLSNegotiation.answererRole(offered: .actpass, current: nil) == .client)
        #expect(try DTLSNegotiation.answererRole(offered: .actpass, current: .server) == .server)
        #expect(try DTLSNegotiation.answererRole(offered: .active, current: .client) == .server)
        #expect(try DTLSNegotiation.answererRole(offered: .passive, current: nil) == .client)
        #expect(throws: SDPError.unsupportedDTLSSetup("holdconn")) { try DTLSNegotiation.answererRole(offered: .holdconn, current: nil) }
        #expect(try DTLSNegotiation.offererRole(answered: .active) == .server)
        #expect(try DTLSNegotiation.offererRole(answered: .passive) == .client)
        #expect(throws: SDPError.self) { try DTLSNegotiation.offererRole(answered: .actpass) }
    }

    @Test func aSessionLevelFingerprintAndSetupApplyToTheSection() throws {
        var offer = try Self.chromium("offer-opus-only.sdp")
        offer.fingerprints = offer.media[0].fingerprints
        offer.setup = .passive
        offer.media[0].fingerprints = []
        offer.media[0].setup = nil
        let reparsed = try SessionDescription.parse(offer.serialized())
        #expect(reparsed.fingerprints.count == 1)
        let view = try AudioOfferAnswer.makeAnswer(to: reparsed, local: try Self.local()).negotiated
        #expect(view.keying == .dtls(role: .client, remoteFingerprint: reparsed.fingerprints[0]))
    }

    @Test func mDNSCandidatesAreKeptForTheTransportToResolveOrSkip() throws {
        // Chromium without the test flags sends `.local` names; they parse as hostnames.
        var offer = try Self.chromium("offer.sdp")
        offer.media[0].candidates.append(try ICECandidate.parse(
            "candidate:1 1 udp 2122260223 0d7a4c2e-7a11-4c1a-9b0e-1b2c3d4e5f60.local 52641 typ host generation 0"))
        let view = try AudioOfferAnswer.makeAnswer(to: offer, local: try Self.local()).negotiated
        #expect(view.remoteCandidates.contains { $0.addressKind == .hostname })
    }
}
