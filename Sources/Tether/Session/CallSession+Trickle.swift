import TetherCore
import TetherICE

/// Trickle ICE (RFC 8838/8840): what a call has told the peer, and what the peer may still tell it.
struct TrickleState: Sendable {
    /// The local username fragment of the description that left with its candidates incomplete
    /// (later ones and the end go out as `.localCandidate` events); nil when nothing is trickling.
    var localGeneration: String?
    /// That description's audio section: its `a=mid` and its index.
    var mid: String?
    var mLineIndex = 0
    /// Candidates the peer has been given for `localGeneration` (in the description or since).
    var announced: Set<String> = []
    /// The peer's description advertised trickle and did not end its candidates; no end came yet.
    var peerMayTrickle = false
    /// The peer's last description advertised trickle: it takes trickled candidates (a restart
    /// of ours may then trickle too).
    var peerTakesTrickle = false
    /// Candidates that arrived before the description they belong to was applied (the first
    /// one, or a restart's being answered), at most `earlyLimit`, oldest dropped first.
    var early: [ICECandidateMessage] = []
    static let earlyLimit = 64
    /// The peer has trickled at least one candidate to this call.
    var peerTrickled = false
    /// ICE checks failed while the peer could still add candidates: the failure waits for them.
    var failureHeld = false
    /// Our offer went out with its candidates incomplete and the peer's answer did not advertise
    /// trickle: it takes no trickled candidate, so once gathering ends it gets a re-offer (the
    /// same ICE session) with all of them.
    var peerNeedsCompleteOffer = false
    /// The candidates the peer has in a description of ours (the first offer's), to tell whether
    /// gathering found more.
    var described: Set<String> = []
}

extension CallSession {
    /// Whether a description advertises trickle ICE (`a=ice-options:trickle`, at session or
    /// media level).
    static func advertisesTrickle(_ description: SessionDescription) -> Bool {
        description.iceOptions.contains("trickle") || description.media.contains { $0.iceOptions.contains("trickle") }
    }

    /// A description whose candidates are incomplete left: from now on each further candidate
    /// of this generation, and the end, go out as `.localCandidate` events.
    func startTrickling(generation: String, mid: String?, mLineIndex: Int = 0, announced: [String]) {
        trickle.described = Set(announced)
        trickle.localGeneration = generation
        trickle.mid = mid
        trickle.mLineIndex = mLineIndex
        trickle.announced = Set(announced)
        // Gathering may have ended while the description was made (a restart's re-gathering
        // that found its servers at once): the rest and the end go now.
        if let gathered { localGatheringFinished(gathered) }
    }

    /// Stops trickling (a new generation of candidates is being gathered for a restart, whose
    /// description carries them complete).
    func stopTrickling() {
        trickle.localGeneration = nil
        trickle.announced = []
    }

    /// libnice found a local candidate: announced if a trickling description left without it.
    func localCandidateGathered(_ line: String) {
        guard let generation = trickle.localGeneration, !state.isEnded, trickle.announced.insert(line).inserted else { return }
        eventSink.yield(
            .localCandidate(ICECandidateMessage(candidate: line, sdpMid: trickle.mid, sdpMLineIndex: trickle.mLineIndex, usernameFragment: generation)))
    }

    /// Gathering finished: whatever was not announced yet, then the end of candidates. The
    /// gathering must be the trickling generation's (a replaced stream's signal can still be
    /// queued): its stream's credentials are asked.
    func localGatheringFinished(_ candidates: [String]) {
        guard let generation = trickle.localGeneration, !state.isEnded, transport?.localCredentials().ufrag == generation else { return }
        for line in candidates { localCandidateGathered(line) }
        eventSink.yield(
            .localCandidate(ICECandidateMessage(candidate: "", sdpMid: trickle.mid, sdpMLineIndex: trickle.mLineIndex, usernameFragment: generation)))
        logger.debug("trickle ICE: end of candidates sent", metadata: ["candidates": "\(trickle.announced.count)"])
        stopTrickling()
        // A failure held for our own late candidates: their checks now have their time.
        if trickle.failureHeld && !trickle.peerMayTrickle { arm(.trickledChecks, afterSeconds: Self.trickledCheckSeconds) }
        offerCompleteCandidatesIfNeeded()
    }

    /// A peer that does not take trickled candidates (its answer did not advertise trickle) got
    /// only the candidates our offer had: once gathering has ended, a re-offer in the same ICE
    /// session (no restart) gives it all of them, if there are more. RFC 8838 §4 has an offerer
    /// that does not know whether the peer trickles send its candidates complete ("half
    /// trickle"); `trickleICE` says the embedder knows, and this covers it being wrong.
    func offerCompleteCandidatesIfNeeded() {
        guard trickle.peerNeedsCompleteOffer, trickle.localGeneration == nil, let gathered, let negotiated, !state.isClosing else { return }
        guard !Set(gathered).subtracting(trickle.described).isEmpty else {
            trickle.peerNeedsCompleteOffer = false
            return
        }
        // Wait for an outstanding offer or a renewal to finish (the driver's passes ask again;
        // a restart's description carries every candidate and clears the need).
        guard negotiation.pending == nil, regathers.running == nil, !manualRenewalRunning, machine?.attemptInFlight == nil,
            state == .established || state == .connecting
        else { return }
        trickle.peerNeedsCompleteOffer = false
        trickle.described = Set(gathered)
        let offer = negotiation.makeReoffer(.direction, base: reofferBase(candidates: gathered, negotiated: negotiated), now: instantNow())
        if let deadline = negotiation.nextDeadline { arm(.unansweredOffer, at: deadline) }
        logger.notice(
            "the peer takes no trickled candidates: re-offering with all of them", metadata: ["candidates": "\(gathered.count)"])
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .offer, sdp: offer.serialized(), isRestart: true)))
    }

    /// The peer's description was applied: whether it may still trickle, and the candidates
    /// that came before it (those of another generation still are an earlier one's: dropped).
    func peerDescriptionApplied(_ description: SessionDescription, endOfCandidates: Bool) {
        trickle.peerTakesTrickle = Self.advertisesTrickle(description)
        trickle.peerMayTrickle = trickle.peerTakesTrickle && !endOfCandidates
        trickle.failureHeld = false
        deadlines.disarm(.trickledChecks)
        let early = trickle.early
        trickle.early = []
        for message in early {
            do throws(TetherError) {
                try addRemote(message, keepingOtherGenerations: false)
            } catch {
                logger.warning("a trickled candidate that came before the description was refused: \(error.message)")
            }
        }
    }

    /// Adds a candidate the peer trickled (RFC 8838), or its end of candidates
    /// (``ICECandidateMessage/isEndOfCandidates``): ICE checks the new pairs at once. A candidate
    /// that comes before the description it belongs to (the first, or an ICE restart's still
    /// being answered: another `usernameFragment`) is kept until that is applied; one of an
    /// earlier generation is then dropped. mDNS names and IPv6 link-local addresses are
    /// skipped, as in descriptions.
    /// - Throws: 3001 (`malformedSessionDescription`) for a candidate that does not parse.
    public func addRemoteCandidate(_ message: ICECandidateMessage) throws(TetherError) {
        try addRemote(message, keepingOtherGenerations: true)
    }

    func addRemote(_ message: ICECandidateMessage, keepingOtherGenerations: Bool) throws(TetherError) {
        guard !state.isEnded else { return }
        // The peer's generation in force; a message without a fragment belongs to it.
        let fragment = message.usernameFragment ?? ""
        guard let current = negotiated?.remoteICEUfrag, fragment.isEmpty || fragment == current, let transport else {
            guard keepingOtherGenerations else {
                logger.debug("trickle ICE: dropped a candidate of an earlier generation", metadata: ["ufrag": "\(fragment)"])
                return
            }
            if trickle.early.count >= TrickleState.earlyLimit { trickle.early.removeFirst() }
            trickle.early.append(message)
            return
        }
        if message.isEndOfCandidates {
            trickle.peerMayTrickle = false
            logger.debug("trickle ICE: the peer's end of candidates")
            if trickle.failureHeld && trickle.localGeneration == nil { arm(.trickledChecks, afterSeconds: Self.trickledCheckSeconds) }
            return
        }
        var value = message.candidate.trimmingPrefix("a=")
        if !value.hasPrefix("candidate:") { value = "candidate:" + value }
        let candidate: ICECandidate
        do throws(SDPError) {
            candidate = try ICECandidate.parse(String(value))
        } catch {
            throw TetherError(
                code: .malformedSessionDescription, isTerminal: false, canRetry: false, message: "malformed trickled candidate: \(error)",
                cause: error)
        }
        let usable = Self.reachableCandidates([candidate])
        guard !usable.isEmpty else {
            logger.debug("trickle ICE: the peer's candidate is not one ICE can use (mDNS name, TCP)")
            return
        }
        trickle.peerTrickled = true
        do throws(ICETransportError) {
            let skipped = try transport.addRemoteCandidates(usable)
            if skipped == 0 { logger.debug("trickle ICE: the peer's candidate added", metadata: ["type": "\(candidate.type)"]) }
        } catch {
            if case .invalidRemoteCandidate = error { return }  // IPv6 link-local: skipped, as in descriptions
            throw TetherError(
                code: .incompatibleSessionDescription, isTerminal: false, canRetry: false,
                message: "ICE refused the peer's trickled candidate: \(error)", cause: error)
        }
    }

    /// How long checks on the last candidates trickled in may run, after the peer's end of
    /// candidates, before a failure held for them stands (libnice gives a pair 7 retransmissions
    /// over about 4 s).
    static let trickledCheckSeconds = 5.0

    /// ICE checks failed while the call was connecting. If candidates may still come (the peer
    /// may still trickle some, or our own trickled gathering still runs), the failure waits for
    /// them (libnice 0.1.21 records a peer's end of candidates but never reads it, so it fails a
    /// component whose pairs so far all failed); returns whether it waits.
    ///
    /// Only where trickling is under way: our own trickled gathering runs, or the peer may still
    /// trickle and either we trickle too or it has sent candidates so (a peer whose complete
    /// description merely lacks `a=end-of-candidates`, as browsers' do, is not waited for). The
    /// wait is capped at `trickleFailureCapSeconds`, and ends `trickledCheckSeconds` after the
    /// last candidates of both sides.
    func holdsFailureForTrickle() -> Bool {
        let peerStillTrickling = trickle.peerMayTrickle && (configuration.trickleICE || trickle.peerTrickled)
        guard peerStillTrickling || trickle.localGeneration != nil || deadlines.isArmed(.trickledChecks) else { return false }
        if !trickle.failureHeld {
            logger.notice("ICE checks failed so far; waiting for the candidates still to come")
            arm(.trickledChecks, afterSeconds: Self.trickleFailureCapSeconds)
        }
        trickle.failureHeld = true
        return true
    }

    /// The longest a connectivity failure waits for trickled candidates.
    static let trickleFailureCapSeconds = 10.0

    /// The peer's trickled candidates had their checks and none worked.
    func trickledChecksEnded() {
        guard trickle.failureHeld, state == .connecting else { return }
        trickle.failureHeld = false
        connectivityFailed()
    }
}
