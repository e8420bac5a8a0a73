import Foundation
import Testing

@testable import TetherCore

/// Transport-wide congestion control and reduced-size RTCP in offer/answer, and the peer's
/// bandwidth caps.
struct TransportWideCongestionControlTests {
    /// Our offer carries the extension and the feedback (and rtcp-rsize); a Tether answering it
    /// takes them on the offer's ID; our side of it negotiates them from that answer.
    @Test func tetherToTetherNegotiatesTransportCC() throws {
        let local = try Fixtures.localParameters()
        let offer = AudioOfferAnswer.makeOffer(local)
        let text = offer.serialized()
        #expect(text.contains("a=extmap:3 \(TransportWideCongestionControl.extensionURI)"))
        #expect(text.contains("a=rtcp-fb:111 transport-cc"))
        #expect(text.contains("a=rtcp-rsize"))
        var answerer = try Fixtures.localParameters()
        answerer.transportWideCCExtensionID = 9  // an answer follows the offer's ID, not its own
        let (answer, answered) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: answerer)
        #expect(answered.transportWideCCExtensionID == 3 && answered.reducedSizeRTCP)
        #expect(answer.serialized().contains("a=extmap:3 \(TransportWideCongestionControl.extensionURI)"))
        let negotiated = try AudioOfferAnswer.processAnswer(try SessionDescription.parse(answer.serialized()), to: offer)
        #expect(negotiated.transportWideCCExtensionID == 3 && negotiated.reducedSizeRTCP)
    }

    /// The real Chromium offer (Tests/Fixtures/interop/chromium): transport-cc on extension 3
    /// among four, and rtcp-rsize; our answer takes both, on Chromium's ID.
    @Test func chromiumsOfferIsAnsweredWithTransportCC() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/interop/chromium/offer.sdp")
        let offer = try SessionDescription.parse(try String(contentsOf: url, encoding: .utf8))
        var local = try Fixtures.localParameters()
        local.crypto = []
        local.transportWideCCExtensionID = 9
        local.dtls = LocalDTLSParameters(fingerprint: try DTLSFingerprint(hashFunction: "sha-256", digest: [UInt8](repeating: 0xAB, count: 32)))
        let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: offer, local: local)
        #expect(negotiated.transportWideCCExtensionID == 3 && negotiated.reducedSizeRTCP)
        let text = answer.serialized()
        #expect(text.contains("a=extmap:3 \(TransportWideCongestionControl.extensionURI)\r\n"))
        #expect(text.contains("a=rtcp-fb:111 transport-cc\r\n") && text.contains("a=rtcp-rsize\r\n"))
        // The embedded fixture has the feedback line but not the extension: not negotiated.
        let (_, withoutExtension) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.chromeOffer), local: local)
        #expect(withoutExtension.transportWideCCExtensionID == nil)
    }

    /// A peer that offers neither (baresip), or the extension without the feedback: not
    /// negotiated; a peer whose answer drops it: not negotiated either.
    @Test func withoutBothAttributesItIsNotNegotiated() throws {
        let (_, fromBaresip) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(Fixtures.baresipOffer), local: try Fixtures.localParameters())
        #expect(fromBaresip.transportWideCCExtensionID == nil && !fromBaresip.reducedSizeRTCP)
        let offer = AudioOfferAnswer.makeOffer(try Fixtures.localParameters())
        var plain = try Fixtures.localParameters()
        plain.transportWideCCExtensionID = nil
        plain.reducedSizeRTCP = false
        let (answer, answered) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(offer.serialized()), local: plain)
        #expect(answered.transportWideCCExtensionID == nil && !answer.serialized().contains("transport-cc"))
        let negotiated = try AudioOfferAnswer.processAnswer(try SessionDescription.parse(answer.serialized()), to: offer)
        #expect(negotiated.transportWideCCExtensionID == nil && !negotiated.reducedSizeRTCP)
        // The extension alone, without a=rtcp-fb transport-cc: no feedback would come.
        let half = offer.serialized().replacingOccurrences(of: "a=rtcp-fb:111 transport-cc\r\n", with: "")
        let (_, halfAnswered) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(half), local: try Fixtures.localParameters())
        #expect(halfAnswered.transportWideCCExtensionID == nil)
    }

    /// `b=AS` (kb/s, headers included) and `b=TIAS` (b/s above UDP, so 28 bytes at 50 packets a
    /// second are added) cap what we send; media level first, then session level.
    @Test func bandwidthLinesCapWhatWeSend() throws {
        let base = AudioOfferAnswer.makeOffer(try Fixtures.localParameters()).serialized()
        func answered(_ insert: String, session: Bool = false) throws -> Int? {
            let marker = session ? "t=0 0\r\n" : "m=audio"
            var text = base
            if session {
                text = text.replacingOccurrences(of: marker, with: marker + insert)
            } else {
                let range = try #require(text.range(of: "c=IN IP4", range: text.range(of: "m=audio")!.upperBound..<text.endIndex))
                text.insert(contentsOf: insert, at: range.lowerBound)
            }
            let (_, n) = try AudioOfferAnswer.makeAnswer(to: try SessionDescription.parse(text), local: try Fixtures.localParameters())
            return n.remoteBandwidthLimitBitsPerSecond
        }
        #expect(try answered("b=AS:40\r\n") == 40_000)
        #expect(try answered("b=TIAS:24000\r\n") == 24_000 + 11_200)
        #expect(try answered("b=AS:64\r\n", session: true) == 64_000)
        #expect(try answered("") == nil)
    }
}
