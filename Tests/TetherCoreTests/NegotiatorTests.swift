import Foundation
import Testing

@testable import TetherCore

/// The call's offer/answer state (hold, re-offers, glare, unanswered offers) driven through
/// descriptions on the wire, with explicit instants.
@Suite("Negotiator (offer/answer, hold, glare)")
struct NegotiatorTests {
    static let t0 = MonotonicInstant(milliseconds: 1_000)

    /// Our side's parameters with these ICE credentials (a restart changes them).
    static func base(ufrag: String, crypto: [CryptoAttribute]? = nil) throws -> LocalAudioParameters {
        var local = try Fixtures.localParameters(crypto: crypto)
        local.iceUfrag = ufrag
        local.icePwd = ufrag + "passwordpasswordpassword"
        return local
    }

    /// What the other side reads: the description as text, parsed again.
    static func wire(_ d: SessionDescription) throws -> SessionDescription {
        try SessionDescription.parse(d.serialized())
    }

    static func direction(_ d: SessionDescription) -> MediaDirection? {
        d.media.first?.effectiveDirection(sessionDirection: d.direction)
    }

    /// A (the offerer) and B after their first exchange.
    static func established() throws -> (a: Negotiator, b: Negotiator) {
        var a = Negotiator(sessionID: 11, unansweredOfferSeconds: 10)
        var b = Negotiator(sessionID: 22, unansweredOfferSeconds: 10)
        var offerParameters = try base(ufrag: "aaaa")
        offerParameters.sessionID = a.sessionID
        let offer = AudioOfferAnswer.makeOffer(offerParameters)
        a.offered(offer)
        // The first answer is version 1, as the session makes it (re-answers are the negotiator's).
        var answerParameters = try base(ufrag: "bbbb")
        answerParameters.sessionID = b.sessionID
        let (answer, bResult) = try AudioOfferAnswer.makeAnswer(to: wire(offer), local: answerParameters)
        b.established(bResult)
        let aResult = try #require(try a.processFirstAnswer(wire(answer)))
        a.established(aResult)
        return (a, b)
    }

    /// `from` offers `purpose`; `to` answers; `from` takes the answer.
    static func exchange(
        _ from: inout Negotiator, _ to: inout Negotiator, _ purpose: Negotiator.OfferPurpose,
        fromUfrag: String, toUfrag: String, now: MonotonicInstant = t0
    ) throws -> (offer: SessionDescription, answer: SessionDescription) {
        let offer = from.makeReoffer(purpose, base: try base(ufrag: fromUfrag), now: now)
        let received = try wire(offer)
        #expect(to.glare(peerRestartsICE: to.restartsICE(received), controlling: false) == .none)
        let (answer, result) = try to.makeAnswer(to: received, base: base(ufrag: toUfrag))
        to.answered(result)
        let taken = try #require(try from.processReofferAnswer(wire(answer)))
        #expect(taken.purpose == purpose)
        from.takeAnswer(taken)
        return (offer, answer)
    }

    @Test func theFirstExchangeSendsBothWaysAndHoldsNothing() throws {
        let (a, b) = try Self.established()
        for side in [a, b] {
            #expect(side.weSend && side.peerSends)
            #expect(side.capturesNow(muted: false) && !side.capturesNow(muted: true))
            #expect(!side.holdInForce && !side.remoteHold && !side.holdChangeDue)
            #expect(side.localOffer == nil && side.pending == nil && side.nextDeadline == nil)
        }
        // No re-offer outstanding: an answer has nothing to answer.
        #expect(try a.processReofferAnswer(Self.wire(AudioOfferAnswer.makeOffer(Self.base(ufrag: "bbbb")))) == nil)
    }

    @Test func aHoldIsOfferedSendonlyAndIsInForceOnBothSidesOnceAnswered() throws {
        var (a, b) = try Self.established()
        let asked = a.setWantsHold(true)
        #expect(asked)
        let askedAgain = a.setWantsHold(true)
        #expect(!askedAgain)  // idempotent
        #expect(a.holdChangeDue)
        #expect(!a.capturesNow(muted: false))  // the microphone closes at once
        let (offer, answer) = try Self.exchange(&a, &b, .direction, fromUfrag: "aaaa", toUfrag: "bbbb")
        #expect(Self.direction(offer) == .sendonly)
        #expect(Self.direction(answer) == .recvonly)
        #expect(offer.origin.sessionID == 11 && offer.origin.sessionVersion == 2)
        #expect(answer.origin.sessionID == 22 && answer.origin.sessionVersion == 2)
        #expect(a.holdInForce && !a.remoteHold && !a.weSend && !a.holdChangeDue && a.pending == nil)
        #expect(b.remoteHold && !b.holdInForce && !b.peerSends && !b.weSend)  // recvonly: RTCP only
        #expect(!b.capturesNow(muted: false))  // held: B's microphone is released too

        // Resume: sendrecv again on both sides.
        let resumed = a.setWantsHold(false)
        #expect(resumed)
        let (resume, _) = try Self.exchange(&a, &b, .direction, fromUfrag: "aaaa", toUfrag: "bbbb")
        #expect(Self.direction(resume) == .sendrecv)
        #expect(!a.holdInForce && a.weSend && b.peerSends && !b.remoteHold)
    }

    @Test func holdingAHeldCallOffersInactiveAndTheForcedAnswerSaysNothingOfThePeer() throws {
        var (a, b) = try Self.established()
        _ = a.setWantsHold(true)
        _ = try Self.exchange(&a, &b, .direction, fromUfrag: "aaaa", toUfrag: "bbbb")
        // B, held by A, holds too: its offer is inactive (RFC 3264 §8.4).
        _ = b.setWantsHold(true)
        let (offer, answer) = try Self.exchange(&b, &a, .direction, fromUfrag: "bbbb", toUfrag: "aaaa")
        #expect(Self.direction(offer) == .inactive)
        #expect(Self.direction(answer) == .inactive)
        #expect(b.holdInForce && b.remoteHold)
        #expect(a.holdInForce && a.remoteHold)
        // A resumes; B still holds, so its answer is sendonly and A stays held.
        _ = a.setWantsHold(false)
        let (resume, reply) = try Self.exchange(&a, &b, .direction, fromUfrag: "aaaa", toUfrag: "bbbb")
        #expect(Self.direction(resume) == .sendrecv)
        #expect(Self.direction(reply) == .sendonly)
        #expect(!a.holdInForce && a.remoteHold && !a.weSend && !a.peerSends)
    }

    @Test func aReofferKeepsThePayloadTypesAndMidTheFirstExchangeGave() throws {
        // B answered a baresip offer: Opus 96 and telephone-event 101 are the call's numbers.
        var b = Negotiator(sessionID: 22, unansweredOfferSeconds: 10)
        let (_, result) = try AudioOfferAnswer.makeAnswer(to: SessionDescription.parse(Fixtures.baresipOffer), local: Self.base(ufrag: "bbbb"))
        b.established(result)
        _ = b.setWantsHold(true)
        let offer = b.makeReoffer(.direction, base: try Self.base(ufrag: "bbbb"), now: Self.t0)
        let audio = try #require(offer.media.first)
        #expect(audio.rtpMap(forPayloadType: 96)?.encodingName == "opus")
        #expect(audio.rtpMap(forPayloadType: 111) == nil)
        #expect(audio.rtpMap(forPayloadType: 101)?.encodingName == "telephone-event")
        #expect(audio.mid == result.mid)
        #expect(offer.origin.sessionID == 22 && offer.origin.sessionVersion == 2)  // answer 1, re-offer 2
    }

    @Test func aHoldAskedForWhileARestartIsOutstandingIsOfferedOnceItIsAnswered() throws {
        var (a, b) = try Self.established()
        let restart = a.makeReoffer(.restart, base: try Self.base(ufrag: "aaa2"), now: Self.t0)
        #expect(a.nextDeadline == nil)  // restarts are the reconnection core's to retry
        _ = a.setWantsHold(true)
        #expect(!a.holdChangeDue)  // queued behind the restart, not polled into a second offer
        let received = try Self.wire(restart)
        #expect(b.restartsICE(received))
        let (answer, result) = try b.makeAnswer(to: received, base: Self.base(ufrag: "bbb2"))
        b.answered(result)
        let taken = try #require(try a.processReofferAnswer(Self.wire(answer)))
        #expect(taken.purpose == .restart && taken.restartsICE)
        a.takeAnswer(taken)
        #expect(!a.holdInForce)  // the restart offer was made before the hold was asked for
        #expect(a.holdChangeDue)
        let (hold, _) = try Self.exchange(&a, &b, .direction, fromUfrag: "aaa2", toUfrag: "bbb2")
        #expect(Self.direction(hold) == .sendonly)
        #expect(a.holdInForce && b.remoteHold)
    }

    @Test func aHoldAskedForBeforeARestartRidesOnTheRestartOffer() throws {
        var (a, b) = try Self.established()
        _ = a.setWantsHold(true)
        let (offer, _) = try Self.exchange(&a, &b, .restart, fromUfrag: "aaa2", toUfrag: "bbb2")
        #expect(Self.direction(offer) == .sendonly)
        #expect(a.holdInForce && !a.holdChangeDue && b.remoteHold)
    }

    @Test func glareARestartBeatsADirectionChangeAndTheControllingSideWinsATie() {
        var n = Negotiator(sessionID: 1, unansweredOfferSeconds: 10)
        #expect(n.glare(peerRestartsICE: true, controlling: true) == .none)
        let base = try! Self.base(ufrag: "aaaa")
        _ = n.makeReoffer(.direction, base: base, now: Self.t0)
        #expect(n.glare(peerRestartsICE: true, controlling: true) == .theirsWins)
        #expect(n.glare(peerRestartsICE: false, controlling: true) == .oursWins(.direction))
        #expect(n.glare(peerRestartsICE: false, controlling: false) == .theirsWins)
        _ = n.makeReoffer(.restart, base: base, now: Self.t0)
        #expect(n.glare(peerRestartsICE: false, controlling: false) == .oursWins(.restart))
        #expect(n.glare(peerRestartsICE: true, controlling: true) == .oursWins(.restart))
        #expect(n.glare(peerRestartsICE: true, controlling: false) == .theirsWins)
    }

    @Test func aRestartFromThePeerOvertakesOurHoldOfferAndOurAnswerCarriesTheHold() throws {
        var (a, b) = try Self.established()
        _ = a.setWantsHold(true)
        _ = a.makeReoffer(.direction, base: try Self.base(ufrag: "aaaa"), now: Self.t0)
        // B restarts ICE at the same time (its network changed).
        let restart = try Self.wire(b.makeReoffer(.restart, base: Self.base(ufrag: "bbb2"), now: Self.t0))
        #expect(a.glare(peerRestartsICE: a.restartsICE(restart), controlling: true) == .theirsWins)
        a.yieldToPeerOffer()
        #expect(a.pending == nil && a.nextDeadline == nil && a.wantsHold)
        let (answer, result) = try a.makeAnswer(to: restart, base: Self.base(ufrag: "aaa2"))
        a.answered(result)
        #expect(Self.direction(answer) == .sendonly)
        #expect(a.holdInForce && !a.holdChangeDue)
        let taken = try #require(try b.processReofferAnswer(Self.wire(answer)))
        b.takeAnswer(taken)
        #expect(b.remoteHold && !b.peerSends)
    }

    @Test func anUnansweredHoldOfferIsWithdrawnAtItsDeadlineAndTheHoldGivenUp() throws {
        var (a, _) = try Self.established()
        _ = a.setWantsHold(true)
        _ = a.makeReoffer(.direction, base: try Self.base(ufrag: "aaaa"), now: Self.t0)
        #expect(a.nextDeadline == Self.t0.advanced(bySeconds: 10))
        let early = a.expireOffer(now: Self.t0.advanced(byMilliseconds: 9_999))
        #expect(early == nil)
        #expect(a.pending == .direction)
        let carried = a.expireOffer(now: Self.t0.advanced(bySeconds: 10))
        #expect(carried == true)  // it carried a hold
        #expect(a.pending == nil && a.localOffer == nil && a.nextDeadline == nil)
        #expect(!a.wantsHold && !a.holdChangeDue)  // not retried behind the embedder's back
        let again = a.expireOffer(now: Self.t0.advanced(bySeconds: 20))
        #expect(again == nil)
    }

    @Test func aRefusedRestartOfferKeepsTheHoldAskedFor() throws {
        var (a, _) = try Self.established()
        _ = a.makeReoffer(.restart, base: try Self.base(ufrag: "aaa2"), now: Self.t0)
        _ = a.setWantsHold(true)
        let holdGivenUp = a.withdrawOffer()
        #expect(!holdGivenUp)
        #expect(a.wantsHold && a.holdChangeDue)
        // A refused hold offer gives the hold up.
        _ = a.makeReoffer(.direction, base: try Self.base(ufrag: "aaaa"), now: Self.t0)
        let holdDropped = a.withdrawOffer()
        #expect(holdDropped)
        #expect(!a.wantsHold && !a.holdChangeDue)
    }

    @Test func chromiumsRestartOfferIsARestartAndItsSendonlyHoldsUs() throws {
        var b = Negotiator(sessionID: 22, unansweredOfferSeconds: 10)
        var local = try DTLSNegotiationTests.local()
        let (_, first) = try AudioOfferAnswer.makeAnswer(to: DTLSNegotiationTests.chromium("offer-before-icerestart.sdp"), local: local)
        b.established(first)
        #expect(b.peerSends && b.weSend)
        let sameSession = try DTLSNegotiationTests.chromium("offer-before-icerestart.sdp")
        #expect(!b.restartsICE(sameSession))
        let text = try String(
            contentsOf: DTLSNegotiationTests.chromiumFolder.appendingPathComponent("offer-icerestart.sdp"), encoding: .utf8)
        let restart = try SessionDescription.parse(text.replacingOccurrences(of: "a=sendrecv", with: "a=sendonly"))
        #expect(b.restartsICE(restart))
        #expect(b.glare(peerRestartsICE: true, controlling: false) == .none)
        local.iceUfrag = "bbb2"
        let (answer, result) = try b.makeAnswer(to: restart, base: local)
        b.answered(result)
        #expect(Self.direction(answer) == .recvonly)
        #expect(answer.origin.sessionVersion == 2)
        #expect(b.remoteHold && !b.peerSends && !b.weSend && !b.holdInForce)
        #expect(b.negotiated?.remoteICEUfrag == "ije8")
    }

    @Test func anAnswerThatDoesNotFitOurOfferThrowsAndChangesNothing() throws {
        var (a, _) = try Self.established()
        _ = a.setWantsHold(true)
        _ = a.makeReoffer(.direction, base: try Self.base(ufrag: "aaaa"), now: Self.t0)
        let unrelated = try SessionDescription.parse(Fixtures.baresipOffer)
        #expect(throws: SDPError.self) { try a.processReofferAnswer(unrelated) }
        #expect(a.pending == .direction && !a.holdInForce && a.wantsHold)
    }

    // MARK: Re-keying

    @Test func aHoldOrRestartKeepsTheKeysAndANewKeyOrCertificateRekeys() throws {
        var (a, b) = try Self.established()
        let before = try #require(a.negotiated)
        _ = a.setWantsHold(true)
        _ = try Self.exchange(&a, &b, .restart, fromUfrag: "aaa2", toUfrag: "bbb2")
        let after = try #require(a.negotiated)
        #expect(before.keying.change(to: after.keying) == .keep)  // the same a=crypto lines again

        // The peer's re-offer with a new SDES key: new keys at once.
        var fresh = try Fixtures.localParameters(crypto: [
            CryptoAttribute(tag: 1, suite: .AES_CM_128_HMAC_SHA1_80, keyAndSalt: Fixtures.key(30, seed: 99))
        ])
        fresh.iceUfrag = "aaa2"
        let offer = try Self.wire(AudioOfferAnswer.makeOffer(fresh))
        let (_, rekeyed) = try b.makeAnswer(to: offer, base: Self.base(ufrag: "bbb2"))
        guard case let .sdes(suite, _, remote) = b.negotiated!.keying.change(to: rekeyed.keying) else {
            Issue.record("a new SDES key is not a re-key")
            return
        }
        #expect(suite == .AES_CM_128_HMAC_SHA1_80 && remote.keyAndSalt == Fixtures.key(30, seed: 99))
    }

    @Test func dtlsKeepsItsAssociationUnlessTheRoleOrCertificateChanges() throws {
        let chromium = try DTLSNegotiationTests.chromium("offer-before-icerestart.sdp")
        let restart = try DTLSNegotiationTests.chromium("offer-icerestart.sdp")
        let local = try DTLSNegotiationTests.local()
        let (_, first) = try AudioOfferAnswer.makeAnswer(to: chromium, local: local)
        let (_, second) = try AudioOfferAnswer.makeAnswer(to: restart, local: local)
        #expect(first.keying.change(to: second.keying) == .keep)  // Chromium's ICE restart
        guard case let .dtls(role, fingerprint) = first.keying else {
            Issue.record("Chromium's offer is not DTLS-keyed")
            return
        }
        let stranger = try DTLSFingerprint(hashFunction: "sha-256", digest: [UInt8](repeating: 1, count: 32))
        #expect(
            first.keying.change(to: .dtls(role: role, remoteFingerprint: stranger))
                == .newDTLSAssociation(role: role, remoteFingerprint: stranger))
        let otherRole: DTLSRole = role == .client ? .server : .client
        #expect(
            first.keying.change(to: .dtls(role: otherRole, remoteFingerprint: fingerprint))
                == .newDTLSAssociation(role: otherRole, remoteFingerprint: fingerprint))
        // From DTLS to SDES and back.
        let (a, _) = try Self.established()
        let sdes = try #require(a.negotiated).keying
        guard case .sdes = first.keying.change(to: sdes) else {
            Issue.record("DTLS to SDES keeps the association")
            return
        }
        #expect(sdes.change(to: first.keying) == .newDTLSAssociation(role: role, remoteFingerprint: fingerprint))
    }
}
