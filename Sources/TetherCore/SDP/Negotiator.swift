/// One call's offer/answer state (RFC 3264), sans-IO: the description in force, our outstanding
/// offer and what it is for, the `o=` line's session and version, and hold (RFC 3264 §8.4) on
/// both sides.
///
/// The call hands it parsed descriptions and the parameters only it knows (candidates, ICE
/// credentials, keys), and gets descriptions and decisions back; it never gathers, keys or sends.
/// Time enters only as `now`: an unanswered hold or resume offer is withdrawn at
/// `nextDeadline`, when the call passes an instant at or after it to `expireOffer(now:)`.
///
/// Hold is kept as four facts: what the embedder asked for (`wantsHold`), the hold our
/// outstanding offer or last answer carried (`offeredHold`), the hold the last completed
/// exchange put in force (`holdInForce`), and whether the peer holds us (`remoteHold`: its
/// direction does not receive).
public struct Negotiator: Sendable {
    /// What an outstanding re-offer of ours is for.
    public enum OfferPurpose: Sendable, Equatable {
        /// An ICE restart (it carries our direction too).
        case restart
        /// A direction change alone: hold or resume.
        case direction
    }

    /// Which offer goes on when both sides offered at once (glare).
    public enum Glare: Sendable, Equatable {
        /// No offer of ours is outstanding: answer the peer's.
        case none
        /// Ours wins: refuse the peer's (it answers ours instead).
        case oursWins(OfferPurpose)
        /// The peer's wins: ours is dropped (`yieldToPeerOffer()`) and the peer's answered.
        case theirsWins
    }

    /// The peer's answer to our re-offer, checked but not yet taken (`takeAnswer(_:)`): a
    /// restart's answer may still be discarded by the reconnection core.
    public struct ReofferAnswer: Sendable {
        public let purpose: OfferPurpose
        public let result: NegotiatedAudio
        /// The answer changes the peer's ICE credentials (always so for a restart; a peer that
        /// restarted ICE in answer to a hold is followed).
        public let restartsICE: Bool
        fileprivate let offer: SessionDescription
    }

    /// `o=` session ID, kept for every renegotiation (RFC 3264 §8).
    public let sessionID: UInt64
    /// `o=` version of the last description we made; bumped for every new one.
    public private(set) var sessionVersion: UInt64 = 1
    /// How long a hold or resume offer may stay unanswered before it is withdrawn (seconds).
    public let unansweredOfferSeconds: Double
    /// Our offer, until it is answered (the first one, or an outstanding re-offer).
    public private(set) var localOffer: SessionDescription?
    /// What the outstanding re-offer is for; nil when none is outstanding.
    public private(set) var pending: OfferPurpose?
    /// The session in force, once the first exchange completed.
    public private(set) var negotiated: NegotiatedAudio?
    public private(set) var wantsHold = false
    public private(set) var offeredHold = false
    public private(set) var holdInForce = false
    public private(set) var remoteHold = false
    /// When the outstanding direction offer is withdrawn.
    public private(set) var nextDeadline: MonotonicInstant?

    public init(sessionID: UInt64, unansweredOfferSeconds: Double) {
        self.sessionID = sessionID
        self.unansweredOfferSeconds = unansweredOfferSeconds
    }

    // MARK: What is in force

    /// Whether we send media: the direction lets us and we hold nothing.
    public var weSend: Bool { negotiated.map(sends(under:)) ?? false }

    /// Whether we send media under `result` (being put in force) and the hold in force.
    public func sends(under result: NegotiatedAudio) -> Bool { result.direction.isSending && !holdInForce }

    /// Whether the peer sends media: what we receive as negotiated (its offer's direction is not
    /// what it does once our answer narrowed it), unless it holds us — a `sendonly` peer may send
    /// nothing but RTCP.
    public var peerSends: Bool { negotiated.map { $0.direction.isReceiving && !remoteHold } ?? false }

    /// Whether the microphone should be open: not muted, not holding or held, sending.
    public func capturesNow(muted: Bool) -> Bool {
        !muted && !wantsHold && (negotiated?.direction.isSending ?? true) && !remoteHold
    }

    /// The direction our offers carry: on hold `sendonly`, or `inactive` when the peer holds us
    /// too; `sendrecv` otherwise (a peer holding us answers `sendonly`).
    public var offerDirection: MediaDirection { wantsHold ? (remoteHold ? .inactive : .sendonly) : .sendrecv }

    /// A hold or resume is asked for that is neither in force nor offered, and nothing is
    /// outstanding: a direction offer is due (when the call's renewals leave room for one).
    public var holdChangeDue: Bool { negotiated != nil && wantsHold != holdInForce && pending == nil }

    // MARK: The first exchange

    /// Our first offer went out.
    public mutating func offered(_ offer: SessionDescription) {
        localOffer = offer
    }

    /// Checks the peer's answer to our first offer; nil when no first offer is outstanding.
    /// - Throws: `SDPError` for an answer that does not fit the offer.
    public func processFirstAnswer(_ answer: SessionDescription) throws(SDPError) -> NegotiatedAudio? {
        guard let offer = localOffer, negotiated == nil else { return nil }
        return try AudioOfferAnswer.processAnswer(answer, to: offer)
    }

    /// The first exchange completed (either role). A peer whose first description does not
    /// receive holds the call from the start.
    public mutating func established(_ result: NegotiatedAudio) {
        negotiated = result
        localOffer = nil
        remoteHold = !result.remoteDirection.isReceiving
    }

    // MARK: Our re-offers

    /// What a re-offer carries: `base` (the call's candidates, credentials and keys) with the
    /// session in force — payload types unchanged (RFC 3264 §8.3.2: Opus, telephone-event and RED
    /// keep the numbers the first exchange gave them, whichever side chose them), the same mid —
    /// and the direction our hold asks for.
    public func reofferParameters(_ base: LocalAudioParameters) -> LocalAudioParameters {
        var parameters = base
        parameters.sessionID = sessionID
        parameters.sessionVersion = sessionVersion
        parameters.direction = offerDirection
        if let negotiated {
            parameters.mid = negotiated.mid
            parameters.opusPayloadType = negotiated.opusPayloadType
            parameters.telephoneEvents = negotiated.receivableTelephoneEvents
            parameters.redundantAudioPayloadType = negotiated.redundantAudio?.payloadType
        }
        return parameters
    }

    /// Makes a re-offer for `purpose` and keeps it outstanding; a direction offer is withdrawn if
    /// still unanswered `unansweredOfferSeconds` after `now`.
    public mutating func makeReoffer(
        _ purpose: OfferPurpose, base: LocalAudioParameters, now: MonotonicInstant
    ) -> SessionDescription {
        sessionVersion &+= 1
        let offer = AudioOfferAnswer.makeOffer(reofferParameters(base))
        localOffer = offer
        pending = purpose
        offeredHold = wantsHold
        nextDeadline = purpose == .direction ? now.advanced(bySeconds: unansweredOfferSeconds) : nil
        return offer
    }

    /// Checks the peer's answer to our outstanding re-offer; nil when none is outstanding.
    /// - Throws: `SDPError` for an answer that does not fit the offer.
    public func processReofferAnswer(_ answer: SessionDescription) throws(SDPError) -> ReofferAnswer? {
        guard let offer = localOffer, let pending, let current = negotiated else { return nil }
        let result = try AudioOfferAnswer.processAnswer(answer, to: offer)
        return ReofferAnswer(
            purpose: pending, result: result, restartsICE: result.remoteICEUfrag != current.remoteICEUfrag, offer: offer)
    }

    /// Takes up the answer to our re-offer: its session is in force, and so is the hold our
    /// offer carried. The peer's hold is learnt from it unless our offer left it no choice (an
    /// answer to an `inactive` or `recvonly` offer cannot receive, and says nothing).
    public mutating func takeAnswer(_ answer: ReofferAnswer) {
        let ourDirection = answer.offer.media.first { $0.media == "audio" && $0.port != 0 }?
            .effectiveDirection(sessionDirection: answer.offer.direction)
        clearOffer()
        adopt(answer.result, peerCouldReceive: ourDirection?.isSending ?? true)
    }

    /// Forgets the outstanding offer (the peer refused it, or it timed out). A hold or resume it
    /// carried did not happen: the hold asked for returns to the one in force.
    /// - Returns: whether `wantsHold` changed (the microphone follows it).
    @discardableResult
    public mutating func withdrawOffer() -> Bool {
        let wasDirection = pending == .direction
        clearOffer()
        guard wasDirection && wantsHold != holdInForce else { return false }
        wantsHold = holdInForce
        return true
    }

    /// Withdraws a direction offer unanswered past its deadline.
    /// - Returns: the hold the withdrawn offer carried, or nil when nothing was due.
    public mutating func expireOffer(now: MonotonicInstant) -> Bool? {
        guard let deadline = nextDeadline, now >= deadline, pending == .direction else { return nil }
        let carried = offeredHold
        withdrawOffer()
        return carried
    }

    // MARK: The peer's re-offers

    /// Whether the peer's `offer` restarts ICE (new credentials).
    public func restartsICE(_ offer: SessionDescription) -> Bool {
        let remoteUfrag = offer.media.first { $0.media == "audio" }?.iceUfrag ?? offer.iceUfrag
        return remoteUfrag != negotiated?.remoteICEUfrag
    }

    /// Glare: the peer offered while an offer of ours is outstanding. A restart beats a direction
    /// change (it carries the path, and each side's answer carries its own hold); between two of
    /// a kind the ICE-controlling side's wins.
    public func glare(peerRestartsICE: Bool, controlling: Bool) -> Glare {
        guard let pending else { return .none }
        switch (pending, peerRestartsICE) {
        case (.restart, false): return .oursWins(pending)
        case (.direction, true): return .theirsWins
        default: return controlling ? .oursWins(pending) : .theirsWins
        }
    }

    /// Drops our outstanding offer to answer the peer's (glare lost). What it carried rides on
    /// our answer instead.
    public mutating func yieldToPeerOffer() {
        clearOffer()
    }

    /// Our answer to the peer's re-offer, from `base` with the direction our hold asks for (an
    /// answer can only narrow: `sendonly` on hold).
    /// - Throws: `SDPError` for an offer Tether cannot use.
    public mutating func makeAnswer(
        to offer: SessionDescription, base: LocalAudioParameters
    ) throws(SDPError) -> (answer: SessionDescription, result: NegotiatedAudio) {
        sessionVersion &+= 1
        var parameters = base
        parameters.sessionID = sessionID
        parameters.sessionVersion = sessionVersion
        parameters.direction = wantsHold ? .sendonly : .sendrecv
        let (answer, result) = try AudioOfferAnswer.makeAnswer(to: offer, local: parameters)
        return (answer, result)
    }

    /// Our answer went out: its session and the hold it carried are in force, and the peer's
    /// hold is what its offer said.
    public mutating func answered(_ result: NegotiatedAudio) {
        offeredHold = wantsHold
        adopt(result, peerCouldReceive: true)
    }

    // MARK: Hold

    /// The embedder asks for hold (true) or resume (false).
    /// - Returns: whether that changed what is asked for.
    public mutating func setWantsHold(_ hold: Bool) -> Bool {
        guard hold != wantsHold else { return false }
        wantsHold = hold
        return true
    }

    // MARK: Private

    private mutating func clearOffer() {
        localOffer = nil
        pending = nil
        nextDeadline = nil
    }

    private mutating func adopt(_ result: NegotiatedAudio, peerCouldReceive: Bool) {
        negotiated = result
        holdInForce = offeredHold
        if peerCouldReceive { remoteHold = !result.remoteDirection.isReceiving }
    }
}
