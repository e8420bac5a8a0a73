import Foundation
import Testing
@testable import TetherCore

@Suite("telephone-event negotiation (RFC 4733 DTMF)")
struct TelephoneEventNegotiationTests {
    private static let chromeFingerprint = try! DTLSFingerprint(attributeValue: "sha-256 " + Array(repeating: "AB", count: 32).joined(separator: ":"))

    /// Chromium offers telephone-event at 48000 (110) and 8000 (126): the answer takes 48000,
    /// the Opus clock, on the browser's payload type.
    @Test func chromiumOfferIsAnsweredWithTelephoneEventAt48000() throws {
        var local = try Fixtures.localParameters(crypto: [])
        local.dtls = LocalDTLSParameters(fingerprint: Self.chromeFingerprint)
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.chromeOffer), local: local)
        #expect(negotiated.telephoneEvent == TelephoneEventFormat(payloadType: 110, clockRateHz: 48_000))
        #expect(answer.media[0].formats == ["111", "63", "110"])
        #expect(answer.serialized().contains("a=rtpmap:110 telephone-event/48000\r\na=fmtp:110 0-15\r\n"))
    }

    @Test func anOfferWithoutTelephoneEventIsAnsweredWithOpusAlone() throws {
        let offer = try SessionDescription.parse(Fixtures.chromeOffer.replacingOccurrences(of: " 110 126", with: ""))
        var local = try Fixtures.localParameters(crypto: [])
        local.dtls = LocalDTLSParameters(fingerprint: Self.chromeFingerprint)
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: offer, local: local)
        #expect(negotiated.telephoneEvent == nil)
        #expect(answer.media[0].formats == ["111", "63"])
    }

    @Test func aCallWithoutDTMFNeitherOffersNorAcceptsIt() throws {
        var local = try Fixtures.localParameters()
        local.telephoneEvents = []
        #expect(AudioOfferAnswer.makeOffer(local).media[0].formats == ["111", "63"])
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.baresipOffer), local: local)
        #expect(negotiated.telephoneEvent == nil)
        #expect(answer.media[0].formats == ["96"])
    }

    /// Our offer carries both rates; an answer taking 8000 (a SIP peer) or 48000 is followed, and
    /// one mapping telephone-event to a payload type we never offered gets no DTMF (not an error).
    @Test func theAnswersTelephoneEventIsTheOneWeOffered() throws {
        let local = try Fixtures.localParameters()
        let offer = AudioOfferAnswer.makeOffer(local)
        var peer = try Fixtures.localParameters()
        peer.iceUfrag = "peer"
        peer.telephoneEvents = [TelephoneEventFormat(payloadType: 100, clockRateHz: 8000)]
        let eightOnly = try AudioOfferAnswer.makeAnswer(to: offer, local: peer).answer
        // The answerer picks from the offer (48000 first), whatever its own list says.
        #expect(try AudioOfferAnswer.processAnswer(eightOnly, to: offer).telephoneEvent?.clockRateHz == 48_000)

        var answer = eightOnly
        answer.media[0].formats = ["111", "100"]
        answer.media[0].rtpMaps = [answer.media[0].rtpMaps[0], RTPMapAttribute(payloadType: 100, encodingName: "telephone-event", clockRateHz: 8000)]
        answer.media[0].formatParameters = [FormatParametersAttribute(payloadType: 100, parameters: [FormatParameter(name: "0-16", value: nil)])]
        #expect(try AudioOfferAnswer.processAnswer(answer, to: offer).telephoneEvent == TelephoneEventFormat(payloadType: 100, clockRateHz: 8000))

        // An answer keeping both rates (Chromium's does): we send at 48000, and take either.
        answer.media[0].formats = ["111", "100", "101"]
        answer.media[0].rtpMaps.append(RTPMapAttribute(payloadType: 101, encodingName: "telephone-event", clockRateHz: 48_000))
        let both = try AudioOfferAnswer.processAnswer(answer, to: offer)
        #expect(both.telephoneEvent == TelephoneEventFormat(payloadType: 101, clockRateHz: 48_000))
        #expect(both.receivableTelephoneEvents == [
            TelephoneEventFormat(payloadType: 101, clockRateHz: 48_000), TelephoneEventFormat(payloadType: 100, clockRateHz: 8000),
        ])
        answer.media[0].formats = ["111", "100"]
        answer.media[0].rtpMaps.removeLast()

        answer.media[0].formats = ["111", "120"]
        answer.media[0].rtpMaps[1].payloadType = 120
        answer.media[0].formatParameters = []
        #expect(try AudioOfferAnswer.processAnswer(answer, to: offer).telephoneEvent == nil)
    }

    @Test(arguments: [
        ("0-15", true), ("0-16", true), ("0-11,12-15", true), ("0-9,10,11,12-15", true),
        ("0-11", false), ("1-15", false), ("16", false), ("x-y", false), ("15-0", false), ("", false),
    ])
    func eventListsMustCoverTheSixteenDTMFEvents(list: String, covers: Bool) {
        #expect(TelephoneEventFormat.coversDTMF(list) == covers)
    }
}
