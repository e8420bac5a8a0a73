import Foundation
import Testing
@testable import TetherCore

@Suite("Audio offer/answer (RFC 3264)")
struct AudioOfferAnswerTests {
    // MARK: makeOffer

    @Test func offerCarriesOpusSDESCryptoICEAndRtcpMux() throws {
        let local = try Fixtures.localParameters()
        let offer = AudioOfferAnswer.makeOffer(local)

        #expect(offer.origin == SDPOrigin(sessionID: 4_242_424_242, sessionVersion: 1, address: "10.0.0.5"))
        #expect(offer.media.count == 1)
        let audio = offer.media[0]
        #expect(audio.media == "audio")
        #expect(audio.transportProtocol == .rtpSAVP)
        #expect(audio.formats == ["111", "63", "101", "100"])  // Opus, RED (of Opus), then telephone-event at 48000 and 8000
        #expect(audio.rtpMap(forPayloadType: 63) == RTPMapAttribute(payloadType: 63, encodingName: "red", clockRateHz: 48_000, channelCount: 2))
        #expect(audio.rtpMap(forPayloadType: 101) == RTPMapAttribute(payloadType: 101, encodingName: "telephone-event", clockRateHz: 48_000))
        #expect(audio.rtpMap(forPayloadType: 100) == RTPMapAttribute(payloadType: 100, encodingName: "telephone-event", clockRateHz: 8000))
        #expect(audio.port == 40_000)
        #expect(audio.connection == SDPConnectionData(address: "10.0.0.5"))
        #expect(audio.rtpMap(forPayloadType: 111) == RTPMapAttribute(
            payloadType: 111, encodingName: "opus", clockRateHz: 48_000, channelCount: 2))
        #expect(audio.formatParameters(forPayloadType: 111) == [
            FormatParameter(name: "minptime", value: "10"), FormatParameter(name: "useinbandfec", value: "1"),
        ])
        #expect(audio.ptimeMilliseconds == 20)
        #expect(audio.rtcpMux)
        #expect(audio.iceUfrag == "tthr")
        #expect(audio.icePwd == "Qm9vdHN0cmFwUGFzc3dvcmQx")
        #expect(audio.candidates == local.candidates)
        #expect(audio.endOfCandidates)
        #expect(audio.crypto.map(\.suite) == [.AES_CM_128_HMAC_SHA1_80, .AEAD_AES_128_GCM])
        #expect(audio.crypto.map(\.tag) == [1, 2])
        #expect(audio.crypto[0].keyAndSalt == Fixtures.localKey80)
        #expect(audio.direction == .sendrecv)

        let text = offer.serialized()
        #expect(text.contains("m=audio 40000 RTP/SAVP 111 63 101 100\r\nc=IN IP4 10.0.0.5\r\n"))
        #expect(text.contains("a=rtpmap:63 red/48000/2\r\na=fmtp:63 111/111\r\n"))
        #expect(text.contains("a=rtpmap:101 telephone-event/48000\r\na=fmtp:101 0-15\r\na=rtpmap:100 telephone-event/8000\r\na=fmtp:100 0-15\r\n"))
        #expect(text.contains("a=rtpmap:111 opus/48000/2\r\na=fmtp:111 minptime=10;useinbandfec=1\r\n"))
        #expect(text.contains("a=candidate:1 1 UDP 2130706431 10.0.0.5 40000 typ host\r\n"))
        #expect(text.contains("a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Data(Fixtures.localKey80).base64EncodedString())\r\n"))
        #expect(try SessionDescription.parse(text) == offer)
    }

    @Test func offerWithoutUsableCandidateUsesTrickleDefaults() throws {
        var local = try Fixtures.localParameters()
        local.candidates = [ICECandidate(foundation: "5", priority: 2_122_194_687, address: "abc.local", port: 5000, type: .host)]
        local.endOfCandidates = false
        local.iceOptions = ["trickle"]
        let audio = AudioOfferAnswer.makeOffer(local).media[0]
        #expect(audio.port == 9)
        #expect(audio.connection == SDPConnectionData(address: "0.0.0.0"))
        #expect(audio.iceOptions == ["trickle"])
        #expect(!audio.endOfCandidates)
    }

    // MARK: makeAnswer

    @Test func baresipOfferIsAnsweredWithItsOpusPayloadTypeAndThe80Suite() throws {
        let offer = try SessionDescription.parse(Fixtures.baresipOffer)
        let local = try Fixtures.localParameters()
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: offer, local: local)

        #expect(negotiated.opusPayloadType == 96)
        #expect(negotiated.cryptoSuite == .AES_CM_128_HMAC_SHA1_80)
        #expect(negotiated.remoteCrypto?.tag == 2)
        #expect(negotiated.remoteCrypto.map { Array($0.keyAndSalt) } == Fixtures.bytes(Fixtures.remoteKey80Base64))
        #expect(negotiated.localCryptoTag == 2)
        #expect(negotiated.localCrypto?.suite == .AES_CM_128_HMAC_SHA1_80)
        #expect(negotiated.localCrypto.map { Array($0.keyAndSalt) } == Fixtures.localKey80)
        #expect(negotiated.remoteICEUfrag == "Xa8K")
        #expect(negotiated.remoteICEPwd == "c2f6a3bb4e0c9d8e7f6a5b4c")
        #expect(negotiated.remoteCandidates.map(\.address) == ["192.168.1.20", "203.0.113.50"])
        #expect(negotiated.remoteCandidates.allSatisfy { $0.transport == .udp && $0.componentID == 1 })
        #expect(negotiated.remoteEndOfCandidates)
        #expect(negotiated.remoteOpusParameters.stereo == true)
        #expect(negotiated.remoteOpusParameters.spropStereo == true)
        #expect(negotiated.remotePtimeMilliseconds == 20)
        #expect(negotiated.remoteDirection == .sendrecv)
        #expect(negotiated.direction == .sendrecv)

        // The answer on the wire.
        #expect(answer.media.count == 1)
        let audio = answer.media[0]
        #expect(audio.transportProtocol == .rtpSAVP)
        // baresip's telephone-event/8000 (RFC 4733 DTMF) is answered on its payload type.
        #expect(audio.formats == ["96", "101"])
        #expect(negotiated.telephoneEvent == TelephoneEventFormat(payloadType: 101, clockRateHz: 8000))
        #expect(audio.rtpMap(forPayloadType: 101) == RTPMapAttribute(payloadType: 101, encodingName: "telephone-event", clockRateHz: 8000))
        #expect(audio.formatParameters(forPayloadType: 101) == [FormatParameter(name: "0-15", value: nil)])
        #expect(audio.rtpMap(forPayloadType: 96)?.isOpus == true)
        #expect(audio.opusParameters(forPayloadType: 96) == local.opusParameters)
        #expect(audio.rtcpMux)
        #expect(audio.iceUfrag == "tthr")
        #expect(audio.icePwd == "Qm9vdHN0cmFwUGFzc3dvcmQx")
        #expect(audio.crypto.count == 1)
        #expect(audio.crypto[0].tag == 2)
        #expect(audio.crypto[0].suite == .AES_CM_128_HMAC_SHA1_80)
        #expect(audio.crypto[0].keyAndSalt == Fixtures.localKey80)
        #expect(audio.direction == .sendrecv)
        let text = answer.serialized()
        #expect(text.contains("m=audio 40000 RTP/SAVP 96 101\r\n"))
        #expect(text.contains("a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:\(Data(Fixtures.localKey80).base64EncodedString())\r\n"))
        #expect(text.contains("a=rtcp-mux\r\n"))
        #expect(!text.contains(Fixtures.remoteKey80Base64))
        #expect(try SessionDescription.parse(text) == answer)
    }

    @Test func offererPreferenceOrderDecidesTheSuite() throws {
        // Offer lists GCM before _80; we support both, so the offer's first wins.
        let text = Fixtures.baresipOffer
            .replacingOccurrences(
                of: "a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:\(Fixtures.remoteKey32Base64)",
                with: "a=crypto:1 AEAD_AES_128_GCM inline:\(Fixtures.gcm128Base64)")
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(
            to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        #expect(negotiated.cryptoSuite == .AEAD_AES_128_GCM)
        #expect(negotiated.localCryptoTag == 1)
        #expect(negotiated.localCrypto.map { Array($0.keyAndSalt) } == Fixtures.localKeyGCM)
        #expect(answer.media[0].crypto.map(\.tag) == [1])
    }

    @Test func cryptoLinesWithMKIOrSessionParametersAreSkippedByDefault() throws {
        let text = Fixtures.baresipOffer
            .replacingOccurrences(
                of: "a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:\(Fixtures.remoteKey32Base64)",
                with: "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey32Base64)|2^31|1:1")
            .replacingOccurrences(of: "a=crypto:3 AES_256_CM", with: "a=crypto:4 AEAD_AES_128_GCM inline:\(Fixtures.gcm128Base64) UNENCRYPTED_SRTP\r\na=crypto:3 AES_256_CM")
        let offer = try SessionDescription.parse(text)
        var local = try Fixtures.localParameters()
        #expect(try AudioOfferAnswer.makeAnswer(to: offer, local: local).negotiated.localCryptoTag == 2)
        local.acceptsRemoteMKI = true
        let negotiated = try AudioOfferAnswer.makeAnswer(to: offer, local: local).negotiated
        #expect(negotiated.localCryptoTag == 1)
        #expect(negotiated.remoteCrypto?.keyParameters[0].mki == SRTPMasterKeyIdentifier(value: 1, lengthBytes: 1))
    }

    /// Found by fuzzing (Fuzz/regressions/sdp/repeated-crypto-tag-…): two lines with one tag are
    /// ambiguous in an answer, so neither is chosen; a line with a tag of its own still is.
    @Test func cryptoLinesSharingATagAreSkipped() throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "a=crypto:3 AES_256_CM", with: "a=crypto:2 AES_256_CM")
        #expect(throws: SDPError.noSupportedCrypto(offered: ["AES_CM_128_HMAC_SHA1_32", "AES_CM_128_HMAC_SHA1_80", "AES_256_CM_HMAC_SHA1_80"])) {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        }
        let gcm = text.replacingOccurrences(
            of: "a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:\(Fixtures.remoteKey32Base64)",
            with: "a=crypto:7 AEAD_AES_128_GCM inline:\(Fixtures.gcm128Base64)")
        let offer = try SessionDescription.parse(gcm)
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: offer, local: try Fixtures.localParameters())
        #expect(negotiated.cryptoSuite == .AEAD_AES_128_GCM && negotiated.localCryptoTag == 7)
        #expect(try AudioOfferAnswer.processAnswer(try SessionDescription.parse(answer.serialized()), to: offer).cryptoSuite == .AEAD_AES_128_GCM)
    }

    @Test func mediaLevelICECredentialsWinOverSessionLevel() throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(
            of: "a=rtcp-mux\r\n", with: "a=rtcp-mux\r\na=ice-ufrag:MEDIA\r\na=ice-pwd:mediapasswordmediapassword\r\n")
        let negotiated = try AudioOfferAnswer.makeAnswer(
            to: try SessionDescription.parse(text), local: try Fixtures.localParameters()).negotiated
        #expect(negotiated.remoteICEUfrag == "MEDIA")
        #expect(negotiated.remoteICEPwd == "mediapasswordmediapassword")
    }

    @Test func sessionLevelEndOfCandidatesCounts() throws {
        let text = Fixtures.baresipOffer
            .replacingOccurrences(of: "a=end-of-candidates\r\n", with: "")
            .replacingOccurrences(of: "a=tool:baresip 3.10.1\r\n", with: "a=end-of-candidates\r\n")
        let offer = try SessionDescription.parse(text)
        #expect(offer.endOfCandidates)
        #expect(!offer.media[0].endOfCandidates)
        #expect(try SessionDescription.parse(offer.serialized()) == offer)
        let negotiated = try AudioOfferAnswer.makeAnswer(to: offer, local: try Fixtures.localParameters()).negotiated
        #expect(negotiated.remoteEndOfCandidates)
    }

    @Test(arguments: [
        (MediaDirection.sendrecv, MediaDirection.sendrecv, MediaDirection.sendrecv),
        (.sendonly, .sendrecv, .recvonly),
        (.recvonly, .sendrecv, .sendonly),
        (.inactive, .sendrecv, .inactive),
        (.sendrecv, .recvonly, .recvonly),
        (.sendrecv, .sendonly, .sendonly),
        (.sendonly, .sendonly, .inactive),
        (.recvonly, .recvonly, .inactive),
        (.sendrecv, .inactive, .inactive),
    ])
    func answerDirectionFollowsRFC3264(offered: MediaDirection, wanted: MediaDirection, answered: MediaDirection) throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "a=sendrecv", with: "a=\(offered.rawValue)")
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(
            to: try SessionDescription.parse(text), local: try Fixtures.localParameters(direction: wanted))
        #expect(answer.media[0].direction == answered)
        #expect(negotiated.direction == answered)
        #expect(negotiated.remoteDirection == offered)
    }

    @Test func extraMediaSectionsAreRejectedWithPortZero() throws {
        let text = Fixtures.baresipOffer + "m=video 10002 RTP/SAVP 97\r\na=rtpmap:97 H264/90000\r\na=mid:v\r\n"
        let (answer, _) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        #expect(answer.media.count == 2)
        #expect(answer.media[1].media == "video")
        #expect(answer.media[1].port == 0)
        #expect(answer.media[1].mid == "v")
        #expect(answer.media[0].port == 40_000)
    }

    @Test func browserDescriptionParsesAndAnSDESOnlyCallRefusesItsKeying() throws {
        let offer = try SessionDescription.parse(Fixtures.chromeOffer)
        let audio = offer.media[0]
        #expect(audio.transportProtocol == .udpTLSRTPSAVPF)
        #expect(audio.formats == ["111", "63", "9", "0", "8", "13", "110", "126"])
        #expect(audio.opusPayloadType == 111)
        #expect(audio.opusParameters(forPayloadType: 111).useInbandFEC == true)
        #expect(audio.opusParameters(forPayloadType: 111).minPtimeMilliseconds == 10)
        #expect(audio.iceUfrag == "EsAw")
        #expect(audio.icePwd == "P2uYro0UCOQ4zxjKXaWCBui1")
        #expect(audio.iceOptions == ["trickle"])
        #expect(audio.mid == "0")
        #expect(audio.rtcpMux)
        #expect(audio.rtcp == RTCPAttribute(port: 9, connection: SDPConnectionData(address: "0.0.0.0")))
        #expect(audio.candidates.count == 5)
        #expect(audio.candidates[0].extensions == [.init(name: "generation", value: "0"), .init(name: "network-id", value: "1")])
        #expect(audio.candidates[3].extensionValue("ufrag") == "EsAw")
        #expect(audio.candidates[4].addressKind == .hostname)
        #expect(audio.crypto.isEmpty)
        #expect(offer.attributeValues(named: "group") == ["BUNDLE 0"])
        #expect(offer.attributeValues(named: "msid-semantic") == [" WMS stream1"])
        #expect(audio.setup == .actpass)
        #expect(audio.attributeValues(named: "extmap").count == 2)
        #expect(audio.attributeValues(named: "ssrc") == ["1001 cname:4TOk42mSjXCkVIa6", "1001 msid:stream1 track1"])
        #expect(audio.attributeValues(named: "rtcp-fb") == ["111 transport-cc"])

        // A call that takes SDES only refuses the browser's DTLS keying, with the reason.
        #expect(throws: SDPError.noSupportedKeying(offered: "DTLS-SRTP (a=fingerprint), which this call does not accept")) {
            try AudioOfferAnswer.makeAnswer(to: offer, local: try Fixtures.localParameters())
        }
        let firefox = try SessionDescription.parse(Fixtures.firefoxOffer)
        #expect(firefox.media[0].opusPayloadType == 109)
        #expect(firefox.iceOptions == ["trickle"])
        #expect(firefox.media[0].iceUfrag == "a1b2c3d4")
        #expect(firefox.media[0].endOfCandidates)
        #expect(throws: SDPError.self) {
            try AudioOfferAnswer.makeAnswer(to: firefox, local: try Fixtures.localParameters())
        }
    }

    @Test func plainRTPIsRejectedAsUnsupportedProfile() throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "RTP/SAVP", with: "RTP/AVP")
        #expect(throws: SDPError.unsupportedProfile("RTP/AVP")) {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        }
    }

    @Test func savpfOfferIsAnsweredWithSavpf() throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "RTP/SAVP", with: "RTP/SAVPF")
        let (answer, _) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        #expect(answer.media[0].transportProtocol == .rtpSAVPF)
    }

    @Test func offerWithoutOpusIsRejected() throws {
        let text = Fixtures.baresipOffer
            .replacingOccurrences(of: "a=rtpmap:96 opus/48000/2\r\n", with: "a=rtpmap:96 speex/16000\r\n")
        #expect(throws: SDPError.noOpus) {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        }
    }

    @Test func offerWithoutCryptoLinesIsRejected() throws {
        var offer = try SessionDescription.parse(Fixtures.baresipOffer)
        offer.media[0].crypto = []
        #expect(throws: SDPError.noSupportedCrypto(offered: [])) {
            try AudioOfferAnswer.makeAnswer(to: offer, local: try Fixtures.localParameters())
        }
    }

    @Test func offerWithOnlyUnsupportedSuitesListsThem() throws {
        var offer = try SessionDescription.parse(Fixtures.baresipOffer)
        offer.media[0].crypto = [offer.media[0].crypto[0], offer.media[0].crypto[2]]
        #expect(throws: SDPError.noSupportedCrypto(offered: ["AES_CM_128_HMAC_SHA1_32", "AES_256_CM_HMAC_SHA1_80"])) {
            try AudioOfferAnswer.makeAnswer(to: offer, local: try Fixtures.localParameters())
        }
    }

    @Test func offerWithoutRtcpMuxIsRejected() throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "a=rtcp-mux\r\n", with: "")
        #expect(throws: SDPError.rtcpMuxRequired) {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        }
    }

    @Test func offerWithoutICECredentialsIsRejected() throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "a=ice-pwd:c2f6a3bb4e0c9d8e7f6a5b4c\r\n", with: "")
        #expect(throws: SDPError.missingICECredentials) {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
        }
    }

    @Test func offerWithoutAudioOrWithRejectedAudioIsRefused() throws {
        let video = Fixtures.baresipOffer.replacingOccurrences(of: "m=audio", with: "m=video")
        #expect(throws: SDPError.noAudioMedia) {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(video), local: try Fixtures.localParameters())
        }
        let rejected = Fixtures.baresipOffer.replacingOccurrences(of: "m=audio 10000", with: "m=audio 0")
        #expect(throws: SDPError.audioRejected) {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(rejected), local: try Fixtures.localParameters())
        }
    }

    // MARK: processAnswer

    /// Tether offers to a second Tether instance, which answers.
    private func offerAndAnswer(
        offerer: LocalAudioParameters? = nil, answerer: LocalAudioParameters? = nil
    ) throws -> (offer: SessionDescription, answer: SessionDescription, answererView: NegotiatedAudio) {
        let offer = AudioOfferAnswer.makeOffer(try offerer ?? Fixtures.localParameters())
        var remote = try answerer ?? Fixtures.localParameters()
        remote.iceUfrag = "peer"
        remote.icePwd = "peerpasswordpeerpassword"
        remote.crypto = [try CryptoAttribute(tag: 9, suite: .AES_CM_128_HMAC_SHA1_80, keyAndSalt: Fixtures.key(30, seed: 200))]
        remote.candidates = [ICECandidate(foundation: "8", priority: 2_130_706_431, address: "10.0.0.9", port: 41_000, type: .host)]
        let offerOnWire = try SessionDescription.parse(offer.serialized())
        let (answer, view) = try AudioOfferAnswer.makeAnswer(to: offerOnWire, local: remote)
        return (offer, try SessionDescription.parse(answer.serialized()), view)
    }

    @Test func bothSidesAgreeOnKeysPayloadTypeAndCandidates() throws {
        let (offer, answer, answererView) = try offerAndAnswer()
        let offererView = try AudioOfferAnswer.processAnswer(answer, to: offer)

        #expect(offererView.opusPayloadType == 111)
        #expect(answererView.opusPayloadType == 111)
        #expect(offererView.cryptoSuite == .AES_CM_128_HMAC_SHA1_80)
        #expect(offererView.localCryptoTag == 1)
        #expect(offererView.localCrypto!.keyAndSalt == Fixtures.localKey80)
        #expect(offererView.remoteCrypto!.keyAndSalt == Fixtures.key(30, seed: 200))
        #expect(answererView.remoteCrypto!.keyAndSalt == offererView.localCrypto!.keyAndSalt)
        #expect(answererView.localCrypto!.keyAndSalt == offererView.remoteCrypto!.keyAndSalt)
        #expect(offererView.remoteICEUfrag == "peer")
        #expect(offererView.remoteICEPwd == "peerpasswordpeerpassword")
        #expect(offererView.remoteCandidates.map(\.address) == ["10.0.0.9"])
        #expect(answererView.remoteICEUfrag == "tthr")
        #expect(offererView.remoteOpusParameters.useInbandFEC == true)
        #expect(offererView.direction == .sendrecv)
    }

    @Test func offererLearnsTheNegotiatedDirection() throws {
        let (offer, answer, _) = try offerAndAnswer(answerer: try Fixtures.localParameters(direction: .recvonly))
        let view = try AudioOfferAnswer.processAnswer(answer, to: offer)
        #expect(view.remoteDirection == .recvonly)
        #expect(view.direction == .sendonly)
    }

    @Test func answerWithACryptoTagWeNeverOfferedIsRejected() throws {
        let (offer, validAnswer, _) = try offerAndAnswer()
        var answer = validAnswer
        answer.media[0].crypto = [try CryptoAttribute(tag: 7, suite: .AES_CM_128_HMAC_SHA1_80, keyAndSalt: Fixtures.key(30, seed: 5))]
        #expect(throws: SDPError.answerDoesNotMatchOffer(reason: "answer crypto tag 7 was never offered")) {
            try AudioOfferAnswer.processAnswer(answer, to: offer)
        }
    }

    @Test func answerWithASuiteThatDoesNotMatchItsTagIsRejected() throws {
        let (offer, validAnswer, _) = try offerAndAnswer()
        var answer = validAnswer
        answer.media[0].crypto = [try CryptoAttribute(tag: 1, suite: .AEAD_AES_128_GCM, keyAndSalt: Fixtures.key(28, seed: 5))]
        let error = #expect(throws: SDPError.self) { try AudioOfferAnswer.processAnswer(answer, to: offer) }
        guard case let .answerDoesNotMatchOffer(reason) = error else {
            Issue.record("expected answerDoesNotMatchOffer, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("AEAD_AES_128_GCM"))
    }

    @Test func answerWithAnOpusPayloadTypeWeNeverOfferedIsRejected() throws {
        let (offer, validAnswer, _) = try offerAndAnswer()
        var answer = validAnswer
        answer.media[0].formats = ["100"]
        answer.media[0].rtpMaps = [RTPMapAttribute(payloadType: 100, encodingName: "opus", clockRateHz: 48_000, channelCount: 2)]
        #expect(throws: SDPError.answerDoesNotMatchOffer(reason: "answer maps opus to payload type 100, which we did not offer")) {
            try AudioOfferAnswer.processAnswer(answer, to: offer)
        }
        answer.media[0].rtpMaps = [RTPMapAttribute(payloadType: 100, encodingName: "PCMU", clockRateHz: 8_000)]
        #expect(throws: SDPError.noOpus) { try AudioOfferAnswer.processAnswer(answer, to: offer) }
    }

    @Test func answerWithoutRtcpMuxOrCredentialsOrCryptoIsRejected() throws {
        let (offer, answer, _) = try offerAndAnswer()
        var noMux = answer
        noMux.media[0].rtcpMux = false
        #expect(throws: SDPError.rtcpMuxRequired) { try AudioOfferAnswer.processAnswer(noMux, to: offer) }
        var noCredentials = answer
        noCredentials.media[0].iceUfrag = nil
        #expect(throws: SDPError.missingICECredentials) { try AudioOfferAnswer.processAnswer(noCredentials, to: offer) }
        var noCrypto = answer
        noCrypto.media[0].crypto = []
        #expect(throws: SDPError.noSupportedCrypto(offered: [])) { try AudioOfferAnswer.processAnswer(noCrypto, to: offer) }
    }

    @Test func rejectedOrMismatchedAnswerSectionsAreReported() throws {
        let (offer, answer, _) = try offerAndAnswer()
        var rejected = answer
        rejected.media[0].port = 0
        #expect(throws: SDPError.audioRejected) { try AudioOfferAnswer.processAnswer(rejected, to: offer) }
        var otherProfile = answer
        otherProfile.media[0].transportProtocol = .rtpSAVPF
        #expect(throws: SDPError.self) { try AudioOfferAnswer.processAnswer(otherProfile, to: offer) }
        var empty = answer
        empty.media = []
        #expect(throws: SDPError.self) { try AudioOfferAnswer.processAnswer(empty, to: offer) }
        var sendsToSendOnly = answer
        sendsToSendOnly.media[0].direction = .sendonly
        var sendOnlyOffer = offer
        sendOnlyOffer.media[0].direction = .sendonly
        #expect(throws: SDPError.answerDoesNotMatchOffer(reason: "answer is sendonly but we offered sendonly")) {
            try AudioOfferAnswer.processAnswer(sendsToSendOnly, to: sendOnlyOffer)
        }
    }

    @Test func negotiatedResultNeverPrintsKeys() throws {
        let (offer, answer, answererView) = try offerAndAnswer()
        let offererView = try AudioOfferAnswer.processAnswer(answer, to: offer)
        for view in [offererView, answererView] {
            var dumped = ""
            dump(view, to: &dumped)
            for text in [String(describing: view), String(reflecting: view), dumped] {
                for key in [view.localCrypto!.keyAndSalt, view.remoteCrypto!.keyAndSalt] {
                    #expect(!text.contains(Data(key).base64EncodedString()))
                    #expect(!text.contains("\(key[0]), \(key[1]), \(key[2])"))
                }
                #expect(text.contains("redacted"))
            }
        }
    }
}
