import CoreMetrics
import Foundation
import Logging
import Synchronization
import TetherAudio
import TetherCodec
import TetherCore
import TetherDTLS
import TetherICE
import TetherNetworkMonitor
import TetherRTP
import TetherRealtime

/// Renegotiation: ICE restarts by offer and answer, glare, hold and resume, and what a completed
/// exchange changes (direction, microphone, hold state). The decisions are the `Negotiator`'s;
/// this part gathers, keys and applies them.
extension CallSession {
    /// Starts an ICE restart by offer. Glare rule: the ICE-controlling side (the original
    /// offerer) offers restarts; the controlled side offers only after its own network changed
    /// (it needs to send new candidates), and when both offers cross, the controlling side's wins:
    /// the controlled side drops its own and answers, the controlling side refuses the other with
    /// error 5003. Media keeps flowing on the old pair meanwhile, and SRTP keys and counters are
    /// kept (the same a=crypto line is offered again).
    /// A description is never sent without candidates: when gathering finds none (the network
    /// went away), nothing is offered and the reconnection core waits for a usable network.
    /// - Returns: what became of the attempt.
    /// - Parameter attempt: the reconnection core's attempt this offer is for; when the core moved
    ///   on while candidates were gathered (the peer's offer was answered instead, the network
    ///   went away), nothing is sent.
    @discardableResult
    func startICERestart(attempt: Int? = nil, regather: Bool) async -> RestartOutcome {
        guard let negotiated, let transport, !state.isClosing else { return .notSent }
        let controlling = transport.configuration.controlling
        if !controlling && !regather { return .notSent }  // wait for the controlling side's offer
        func superseded() -> Bool { state.isEnded || (attempt != nil && machine?.attemptInFlight != attempt) }
        let candidates: [String]
        var complete = true
        if regather {
            let regathered = await regatherCandidates(trickle: configuration.trickleICE && trickle.peerTakesTrickle)
            let (fresh, token) = (regathered.candidates, regathered.token)
            complete = regathered.complete
            if superseded() {
                abandonRegather(token)
                return .notSent
            }
            guard let fresh else {
                abandonRegather(token)
                logger.notice("ICE restart: gathering found no candidate (no usable network)")
                return .foundNothing
            }
            candidates = fresh
        } else {
            // A gathering of ours may still be running (a re-gather): its candidates, not a part.
            if gathered == nil { _ = await awaitGathering() }
            if superseded() { return .notSent }
            stopTrickling()
            guard let r = transport.restart() else { return .notSent }
            candidates = r.candidates
        }
        guard !candidates.isEmpty else { return .foundNothing }
        var base = reofferBase(candidates: candidates, negotiated: negotiated)
        base.endOfCandidates = complete
        let offer = negotiation.makeReoffer(.restart, base: base, now: instantNow())
        trickle.peerNeedsCompleteOffer = false  // the restart's description carries this generation's
        restartsOffered += 1
        telemetry.metrics.restartOffered()
        logger.notice(
            "ICE restart offered",
            metadata: [
                "attempt": "\(attempt.map(String.init) ?? "manual")", "regather": "\(regather)", "candidates": "\(candidates.count)",
            ])
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .offer, sdp: offer.serialized(), isRestart: true)))
        if !complete { startTrickling(generation: base.iceUfrag, mid: offer.media.first?.mid, announced: candidates) }
        return .sent
    }

    /// What `startICERestart` did.
    enum RestartOutcome: Equatable {
        /// The restart offer went out.
        case sent
        /// Nothing to do (the call ended, or the other side offers restarts).
        case notSent
        /// Gathering found no candidate: no offer (the network is gone).
        case foundNothing
    }

    /// The peer's answer to our re-offer (an ICE restart, or hold/resume).
    func applyRenegotiationAnswer(_ sdp: String) throws(TetherError) {
        let notOutstanding = TetherError.invalidState("applyAnswer(_:) without an outstanding re-offer; the call is \(state.name)")
        guard negotiation.pending != nil, let current = negotiated, let transport, !state.isEnded else { throw notOutstanding }
        let parsed = try Self.parse(sdp)
        let processed: Negotiator.ReofferAnswer?
        do throws(SDPError) {
            processed = try negotiation.processReofferAnswer(parsed)
        } catch {
            throw Self.negotiationError(error)
        }
        guard let answer = processed else { throw notOutstanding }
        let result = answer.result
        if answer.purpose == .direction {
            // Hold or resume: the same ICE session (a peer that restarted ICE anyway is followed).
            try rekeyIfNeeded(current: current, new: result)
            if answer.restartsICE { try Self.applyRemoteICE(result, to: transport, describing: "answer") } else { addDescribedCandidates(result, to: transport) }
            negotiation.takeAnswer(answer)
            adopted()
            if answer.restartsICE { peerDescriptionApplied(parsed, endOfCandidates: result.remoteEndOfCandidates) }
            return
        }
        if let attempt = offeredAttempt, var r = recovery {
            let (verdict, actions) = r.renewalAnswered(attempt: attempt, at: instantNow())
            recovery = r
            perform(actions)
            if verdict == .discard { return }
        }
        // Only an answer that is taken up re-keys (a discarded one changes nothing).
        try rekeyIfNeeded(current: current, new: result)
        try Self.applyRemoteICE(result, to: transport, describing: "restart answer")
        negotiation.takeAnswer(answer)
        adopted()
        peerDescriptionApplied(parsed, endOfCandidates: result.remoteEndOfCandidates)
    }

    /// A re-offer from the peer: an ICE restart (new ICE credentials) and/or a direction change.
    func acceptRenegotiationOffer(_ sdp: String) async throws(TetherError) -> String {
        guard let current = negotiated, let transport, !state.isClosing else {
            throw .invalidState("acceptOffer(_:) on a call that is \(state.name)")
        }
        let offer = try Self.parse(sdp)
        let isICERestart = negotiation.restartsICE(offer)
        // Glare: the losing side drops its offer and answers; the winner refuses with 5003.
        switch negotiation.glare(peerRestartsICE: isICERestart, controlling: transport.configuration.controlling) {
        case .none:
            break
        case .oursWins(let pending):
            throw TetherError(
                code: .renegotiationConflict, isTerminal: false, canRetry: true,
                message: "both sides offered at once; this side's \(pending == .restart ? "restart" : "re-")offer wins, answer it instead")
        case .theirsWins:
            negotiation.yieldToPeerOffer()
        }
        var candidates: [String] = gathered ?? []
        var complete = true
        if isICERestart {
            var regather = false
            if var r = recovery {
                let (verdict, actions) = r.peerRenewalOffer(at: instantNow())
                recovery = r
                perform(actions)
                switch verdict {
                case .decline:
                    throw TetherError(
                        code: .renegotiationConflict, isTerminal: false, canRetry: true,
                        message: "both sides offered at once; this side's restart offer wins, answer it instead")
                case .answer(let fresh):
                    regather = fresh
                }
            }
            let answering = machine?.attemptInFlight
            var regathered: UInt64?
            if regather {
                let fresh = await regatherCandidates(trickle: configuration.trickleICE && Self.advertisesTrickle(offer))
                guard !state.isEnded else { throw .invalidState("the call ended while ICE was gathering") }
                candidates = fresh.candidates ?? []
                regathered = fresh.token
                complete = fresh.complete
            } else {
                if gathered == nil { _ = await awaitGathering() }  // our own re-gather may be running
                guard !state.isEnded else { throw .invalidState("the call ended while ICE was gathering") }
                stopTrickling()
                candidates = transport.restart()?.candidates ?? []
            }
            // Another offer from the peer was taken up while we gathered: this one is stale.
            guard machine?.attemptInFlight == answering else {
                if let regathered { abandonRegather(regathered) }
                throw .invalidState("a newer restart offer from the peer was answered while this one waited for candidates")
            }
            // Never answer without candidates: the network is gone; wait for it.
            guard !candidates.isEmpty else {
                if let regathered { abandonRegather(regathered) }
                if let attempt = machine?.attemptInFlight { feed(.gatheringFoundNothing(attempt: attempt)) }
                throw TetherError(
                    code: .iceGatheringFailed, isTerminal: false, canRetry: true,
                    message: "no local candidate to answer the peer's restart offer with (no usable network); the call waits for one")
            }
        }
        if candidates.isEmpty { candidates = transport.localCandidates() }  // a re-gather still running
        let (answer, result): (SessionDescription, NegotiatedAudio)
        var base = localParameters(candidates: candidates, crypto: current.localCrypto.map { [$0] } ?? [], dtls: dtls?.localParameters)
        base.endOfCandidates = complete
        do throws(SDPError) {
            (answer, result) = try negotiation.makeAnswer(to: offer, base: base)
        } catch {
            throw Self.negotiationError(error)
        }
        try rekeyIfNeeded(current: current, new: result)
        if !isICERestart { addDescribedCandidates(result, to: transport) }
        if isICERestart {
            trickle.peerNeedsCompleteOffer = false
            try Self.applyRemoteICE(result, to: transport, describing: "restart offer")
            restartsAnswered += 1
            telemetry.metrics.restartAnswered()
            logger.notice("ICE restart: answering the peer's restart offer")
        }
        negotiation.answered(result)
        adopted()
        if isICERestart { peerDescriptionApplied(offer, endOfCandidates: result.remoteEndOfCandidates) }
        let text = answer.serialized()
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .answer, sdp: text, isRestart: true)))
        if !complete, let index = answer.media.firstIndex(where: { $0.port != 0 }) {
            startTrickling(generation: base.iceUfrag, mid: answer.media[index].mid, mLineIndex: index, announced: candidates)
        }
        return text
    }

    /// A re-offer or its answer in the same ICE session (hold, resume, or the complete
    /// candidates of a peer that trickled its first description): candidates it names that ICE
    /// does not have yet are added (libnice keeps the ones it has).
    func addDescribedCandidates(_ result: NegotiatedAudio, to transport: ICETransport) {
        // Only new transport addresses: updating one libnice has (a learnt peer-reflexive one)
        // recomputes pair priorities and may move a working call's selected pair for nothing.
        func endpoint(_ candidate: ICECandidate) -> String { "\(candidate.address.lowercased()) \(candidate.port)" }
        let known = Set(transport.remoteCandidates().compactMap { try? ICECandidate.parse($0) }.map(endpoint))
        let usable = Self.reachableCandidates(result.remoteCandidates.filter { !known.contains(endpoint($0)) })
        guard !usable.isEmpty else { return }
        do throws(ICETransportError) {
            try transport.addRemoteCandidates(usable)
        } catch {
            logger.warning("ICE refused the candidates of the peer's re-offer: \(error)")
        }
    }

    /// Gives ICE the peer's credentials and UDP candidates from a negotiated description.
    static func applyRemoteICE(
        _ result: NegotiatedAudio, to transport: ICETransport, describing what: String
    ) throws(TetherError) {
        do throws(ICETransportError) {
            try transport.setRemote(
                ufrag: result.remoteICEUfrag, password: result.remoteICEPwd,
                candidates: Self.reachableCandidates(result.remoteCandidates))
        } catch {
            throw TetherError(
                code: .incompatibleSessionDescription, isTerminal: false, canRetry: false,
                message: "ICE refused the peer's \(what): \(error)", cause: error)
        }
    }

    /// The peer's candidates ICE can use: UDP with an IP address. A browser hides its addresses
    /// behind mDNS names (`….local`, RFC 8828 mode 3) that nothing here resolves: they are left
    /// out, and the peer's checks, which arrive from its real address, make peer-reflexive
    /// candidates that carry the call instead (RFC 8445 §7.3.1.3).
    static func reachableCandidates(_ candidates: [ICECandidate]) -> [String] {
        candidates.filter { $0.transport.isUDP && $0.addressKind != .hostname }.map { $0.serialized() }
    }

    /// A renegotiation completed (the negotiator took its description and hold): the media loop
    /// takes its DTMF format and direction. A hold asked for meanwhile is the negotiator's
    /// `holdChangeDue`, offered on the driver's next pass.
    func adopted() {
        guard let result = negotiated else { return }
        media?.setTelephoneEvents(send: result.telephoneEvent, receivable: result.receivableTelephoneEvents)
        applyDirection()
    }

    /// Media, capture and liveness for the direction and hold in force. On hold (either side)
    /// no RTP is sent (RTCP goes on), the microphone is released as mute does, and liveness is
    /// judged by RTCP: the side that does not receive media does not expect any.
    func applyDirection() {
        guard negotiated != nil else { return }
        let sending = negotiation.weSend
        media?.sendsMedia.store(sending, ordering: .relaxed)
        feed(.peerSendsMedia(negotiation.peerSends))
        feed(.weSendMedia(sending))
        updateMicrophone()
        publishHold()
    }

    /// Publishes the hold in force (`holdState`, statistics) and reports a change.
    func publishHold() {
        publishTelemetry()
        let hold = HoldState(local: negotiation.holdInForce, remote: negotiation.remoteHold)
        guard hold != reportedHold else { return }
        reportedHold = hold
        eventSink.yield(.holdChanged(hold))
    }

    /// The microphone follows mute and hold: the media loop sends silence while either is on,
    /// and the capture device runs only while media runs, we are neither muted nor holding, and
    /// the direction lets us send.
    func updateMicrophone() {
        media?.muted.store(isMuted || negotiation.wantsHold, ordering: .relaxed)
        guard mediaRunning else { return }
        if negotiation.capturesNow(muted: isMuted) { startSource() } else { stopSource() }
    }

    /// What a re-offer (restart, hold, resume) is built on: this call's candidates, credentials
    /// and the keys in force (the negotiator adds the session's payload types, mid and direction).
    func reofferBase(candidates: [String], negotiated: NegotiatedAudio) -> LocalAudioParameters {
        localParameters(candidates: candidates, crypto: negotiated.localCrypto.map { [$0] } ?? [], dtls: dtls?.localParameters)
    }

    /// Puts the call on hold (RFC 3264 §8.4): a re-offer with `a=sendonly` (`inactive` when the
    /// peer holds us already) goes out as a `.localDescription` event, like a restart offer, to
    /// be answered through `applyAnswer(_:)`. The microphone is released at once (silence is sent
    /// until the answer); once answered no RTP is sent, RTCP keeps the call alive both ways, and
    /// neither side reports `mediaDisrupted` while it flows; a peer that vanishes meanwhile is
    /// still given up on after the give-up time. `.holdChanged` reports when the hold is in
    /// force. While an offer of either side is outstanding or a renewal runs, the hold rides on
    /// the next offer or answer instead. Idempotent.
    /// - Throws: 5002 before negotiation or once the call ends.
    public func hold() throws(TetherError) {
        try setHold(true)
    }

    /// Takes the call off hold: a re-offer with `a=sendrecv` (the peer answers `sendonly` if it
    /// holds us). The microphone reopens (unless muted) and RTP flows once the answer is applied.
    /// Idempotent.
    /// - Throws: 5002 before negotiation or once the call ends.
    public func resume() throws(TetherError) {
        try setHold(false)
    }

    func setHold(_ hold: Bool) throws(TetherError) {
        guard negotiated != nil, !state.isClosing else {
            throw .invalidState("\(hold ? "hold()" : "resume()") needs a negotiated call; the call is \(state.name)")
        }
        guard negotiation.setWantsHold(hold) else { return }
        updateMicrophone()
        offerHoldChangeIfNeeded()
    }

    /// Sends a direction-only re-offer when the hold asked for differs from the one in force,
    /// no offer is outstanding, and no renewal is gathering or offering (its offer or answer
    /// will carry the hold). Called when the embedder asks, and on every driver pass: a hold that
    /// had to wait is a value (`Negotiator.holdChangeDue`), not a retry.
    func offerHoldChangeIfNeeded() {
        // While media is disrupted the restart that renews it carries the hold.
        guard negotiation.holdChangeDue, regathers.running == nil, !manualRenewalRunning,
            machine?.attemptInFlight == nil, state == .established || state == .connecting,
            let negotiated, let transport
        else { return }
        // An offer nobody answers (lost by the signaling, refused without word) would block every
        // later one: the negotiator withdraws it at its deadline (the set-up time).
        var base = reofferBase(candidates: gathered ?? transport.localCandidates(), negotiated: negotiated)
        base.endOfCandidates = gathered != nil  // while a trickled gathering runs, more may come
        if let gathered { trickle.described.formUnion(gathered) }
        let offer = negotiation.makeReoffer(.direction, base: base, now: instantNow())
        if let deadline = negotiation.nextDeadline { arm(.unansweredOffer, at: deadline) }
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .offer, sdp: offer.serialized(), isRestart: true)))
    }

    /// Withdraws a hold or resume offer left unanswered past its deadline, and says so.
    func expireUnansweredOffer(now: MonotonicInstant) {
        let holdInForce = negotiation.holdInForce
        guard let carriedHold = negotiation.expireOffer(now: now) else { return }
        // A re-offer that changed no hold gave the peer our complete candidates (trickle ICE).
        let what = carriedHold == holdInForce ? "candidates" : carriedHold ? "hold" : "resume"
        updateMicrophone()
        let seconds = negotiation.unansweredOfferSeconds
        eventSink.yield(
            .error(
                TetherError(
                    code: .renegotiationUnanswered, isTerminal: false, canRetry: true,
                    message: "the peer did not answer the \(what) re-offer within \(seconds) s; the call stays as it was")))
    }

    /// The peer refused our outstanding re-offer (SIP 488 or 491, a browser whose
    /// `setRemoteDescription` failed, a Tether that threw 3002 or 5003): call this when the
    /// signaling says so. The offer is dropped; a hold or resume it carried did not happen (call
    /// `hold()`/`resume()` again to retry, after a 491 for instance); a restart offer's attempt
    /// is retried by the reconnection core. Nothing happens without an outstanding re-offer.
    public func offerRejected() {
        guard negotiation.pending != nil, !state.isEnded else { return }
        // A direction change it carried is given up: the microphone follows the hold in force.
        if negotiation.withdrawOffer() { updateMicrophone() }
    }

    /// Renews the media path now, on freshly gathered candidates (an ICE restart on a new stream,
    /// new TURN allocations), as the session does by itself when a local address or link
    /// changes: for a change Tether cannot see (a VPN coming up, a captive portal passed, a user
    /// asking to reconnect), like libwebrtc's `restartIce()`. Media keeps flowing on the current
    /// pair until the new one works, and the old stream's TURN allocation is then released.
    /// While established the call stays established (media flows all along: nothing to show);
    /// while media is disrupted it is what a local network change does (a re-gathering attempt
    /// now). Does nothing before media runs, once the call ends, or while our own restart offer
    /// is unanswered.
    public func renewMedia() {
        guard mediaRunning, machine != nil else { return }
        switch state {
        case .established:
            // Media flows: the call stays established (the reconnection core would take the
            // first decoded frame for a restored path and drop the renewal half-way); a restart
            // offer on fresh candidates, answered as any restart is.
            guard negotiation.pending == nil, !manualRenewalRunning else { return }
            manualRenewalRunning = true
            Task { [weak self] in await self?.renewEstablishedMedia() }
        case .mediaDisrupted, .renewingMedia:
            feed(.localNetworkChanged)
        default:
            return
        }
    }

    func renewEstablishedMedia() async {
        offeredAttempt = nil
        _ = await startICERestart(attempt: nil, regather: true)
        manualRenewalRunning = false
    }
}
