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
