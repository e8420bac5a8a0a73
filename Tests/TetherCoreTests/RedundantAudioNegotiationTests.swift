import Foundation
import Testing
@testable import TetherCore

@Suite("RFC 2198 redundant audio (RED) negotiation")
struct RedundantAudioNegotiationTests {
    private static let chromeFingerprint = try! DTLSFingerprint(attributeValue: "sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":"))

    func webRTCLocal() throws -> LocalAudioParameters {
        var local = try Fixtures.localParameters(crypto: [])
        local.dtls = LocalDTLSParameters(fingerprint: Self.chromeFingerprint)
        return local
    }

    /// Chromium offers `red/48000/2` on 63 with `111/111` after Opus: the answer takes it on 63,
    /// after Opus as offered.
    @Test func chromiumsOfferedRedIsAnsweredOnItsPayloadType() throws {
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.chromeOffer), local: webRTCLocal())
        #expect(negotiated.redundantAudio == RedundantAudioFormat(payloadType: 63, blockPayloadType: 111))
        #expect(answer.media[0].formats.prefix(2) == ["111", "63"])
        #expect(answer.serialized().contains("a=rtpmap:63 red/48000/2\r\na=fmtp:63 111/111\r\n"))
    }

    /// The real Chromium offer kept in the interop fixtures, and one with RED preferred (as
    /// `setCodecPreferences` puts it): the answer keeps RED first, so Chromium sends it.
    @Test func aRedFirstOfferKeepsRedFirst() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/interop/chromium/offer.sdp")
        let real = try String(contentsOf: url, encoding: .utf8)
        let (plainAnswer, plain) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(real), local: webRTCLocal())
        #expect(plain.redundantAudio?.payloadType == 63)
        #expect(plainAnswer.media[0].formats.prefix(2) == ["111", "63"])
        let redFirst = real.replacingOccurrences(of: "SAVPF 111 63 ", with: "SAVPF 63 111 ")
        #expect(redFirst != real)
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(redFirst), local: webRTCLocal())
        #expect(negotiated.redundantAudio?.payloadType == 63)
        #expect(answer.media[0].formats.prefix(2) == ["63", "111"])
    }

    /// RED over anything but our Opus is not taken; nor is RED when the call does not want it;
    /// baresip offers none.
    @Test func redForOtherBlocksOrUnwantedIsNotNegotiated() throws {
        let otherBlocks = Fixtures.chromeOffer.replacingOccurrences(of: "a=fmtp:63 111/111", with: "a=fmtp:63 111/9")
        #expect(try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(otherBlocks), local: webRTCLocal()).negotiated.redundantAudio == nil)
        var unwanted = try webRTCLocal()
        unwanted.redundantAudioPayloadType = nil
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.chromeOffer), local: unwanted)
        #expect(negotiated.redundantAudio == nil)
        #expect(!answer.media[0].formats.contains("63"))
        #expect(AudioOfferAnswer.makeOffer(unwanted).media[0].formats == ["111", "101", "100"])
        let baresip = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.baresipOffer), local: try Fixtures.localParameters())
        #expect(baresip.negotiated.redundantAudio == nil)
    }

    /// An offer that prefers RED lists it first (Chromium, answering, then sends RED).
    @Test func anOfferPreferringRedListsItFirst() throws {
        var local = try Fixtures.localParameters()
        local.prefersRedundantAudio = true
        #expect(AudioOfferAnswer.makeOffer(local).media[0].formats == ["63", "111", "101", "100"])
    }

    /// Our offer with RED: an answer that keeps it negotiates it; one without it, or with RED on a
    /// payload type we did not offer RED on, does not.
    @Test func theAnswersRedIsTheOneWeOffered() throws {
        let local = try Fixtures.localParameters()
        let offer = AudioOfferAnswer.makeOffer(local)
        var peer = try Fixtures.localParameters()
        peer.sessionID = 99
        let (answer, answered) = try AudioOfferAnswer.makeAnswer(to: offer, local: peer)
        #expect(answered.redundantAudio == RedundantAudioFormat(payloadType: 63, blockPayloadType: 111))
        #expect(try AudioOfferAnswer.processAnswer(answer, to: offer).redundantAudio == answered.redundantAudio)
        let text = answer.serialized()
        let without = try SessionDescription.parse(
            text.replacingOccurrences(of: " 111 63 ", with: " 111 ").replacingOccurrences(of: "a=rtpmap:63 red/48000/2\r\na=fmtp:63 111/111\r\n", with: ""))
        #expect(try AudioOfferAnswer.processAnswer(without, to: offer).redundantAudio == nil)
        let moved = try SessionDescription.parse(
            text.replacingOccurrences(of: " 111 63 ", with: " 111 64 ").replacingOccurrences(of: "a=rtpmap:63 red/48000/2\r\na=fmtp:63 111/111", with: "a=rtpmap:64 red/48000/2\r\na=fmtp:64 111/111"))
        #expect(try AudioOfferAnswer.processAnswer(moved, to: offer).redundantAudio == nil)
    }
}

@Suite("RTCP XR Loss RLE negotiation (RFC 3611 §5)")
struct LossRunLengthNegotiationTests {
    /// Tether asks for Loss RLE in its offers and answers; between two Tethers each then sends it.
    @Test func tetherAsksForItAndTwoTethersEachSendIt() throws {
        let local = try Fixtures.localParameters()
        let offer = AudioOfferAnswer.makeOffer(local)
        #expect(offer.serialized().contains("a=rtcp-xr:pkt-loss-rle\r\n"))
        let (answer, answering) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(offer.serialized()), local: local)
        #expect(answering.peerRequestsLossRunLengthReports)
        #expect(answer.serialized().contains("a=rtcp-xr:pkt-loss-rle\r\n"))
        let offering = try AudioOfferAnswer.processAnswer(try SessionDescription.parse(answer.serialized()), to: offer)
        #expect(offering.peerRequestsLossRunLengthReports)
        var quiet = local
        quiet.requestsLossRunLengthReports = false
        #expect(!AudioOfferAnswer.makeOffer(quiet).serialized().contains("rtcp-xr"))
    }

    /// Chromium's real offer asks for receiver reference times (`a=rtcp-xr:rcvr-rtt=all`), not
    /// Loss RLE: nothing is sent to it. baresip asks for nothing.
    @Test func chromiumAndBaresipDoNotAskForIt() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/interop/chromium/offer.sdp")
        let real = try String(contentsOf: url, encoding: .utf8)
        #expect(real.contains("a=rtcp-xr:rcvr-rtt=all"))
        var local = try Fixtures.localParameters(crypto: [])
        local.dtls = LocalDTLSParameters(fingerprint: try DTLSFingerprint(attributeValue: "sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":")))
        #expect(try !AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(real), local: local).negotiated.peerRequestsLossRunLengthReports)
        let baresip = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.baresipOffer), local: try Fixtures.localParameters())
        #expect(!baresip.negotiated.peerRequestsLossRunLengthReports)
    }

    /// The attribute at session level counts unless the media section has its own; a size
    /// parameter (`pkt-loss-rle=512`) is accepted; an empty `a=rtcp-xr` asks for nothing.
    @Test func sessionLevelSizedAndEmptyAttributes() throws {
        let local = try Fixtures.localParameters()
        let base = AudioOfferAnswer.makeOffer({ var l = local; l.requestsLossRunLengthReports = false; return l }()).serialized()
        func asks(_ sdp: String) throws -> Bool {
            try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(sdp), local: local).negotiated.peerRequestsLossRunLengthReports
        }
        #expect(try !asks(base))
        let sessionLevel = base.replacingOccurrences(of: "t=0 0\r\n", with: "t=0 0\r\na=rtcp-xr:rcvr-rtt=all pkt-loss-rle\r\n")
        #expect(sessionLevel != base)
        #expect(try asks(sessionLevel))
        let overridden = sessionLevel.replacingOccurrences(of: "a=rtcp-mux\r\n", with: "a=rtcp-mux\r\na=rtcp-xr:stat-summary=loss\r\n")
        #expect(overridden != sessionLevel)
        #expect(try !asks(overridden))
        #expect(try asks(base.replacingOccurrences(of: "a=rtcp-mux\r\n", with: "a=rtcp-mux\r\na=rtcp-xr:pkt-loss-rle=512\r\n")))
        #expect(try !asks(base.replacingOccurrences(of: "a=rtcp-mux\r\n", with: "a=rtcp-mux\r\na=rtcp-xr\r\n")))
    }
}
