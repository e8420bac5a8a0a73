/// The sans-IO reconnection core of a call: decides when media is disrupted, when to renew it
/// with an ICE restart, how often to retry, and when to give up.
///
/// Like swift-nio's Happy Eyeballs state machine or str0m, it never reads a clock, never sleeps
/// and never touches the network. The driver (`CallSession`) reports every event with
/// ``handle(_:now:)``, carries out the returned ``Action``s in order, and calls
/// `handle(.tick, now:)` when ``nextDeadline()`` is reached (re-reading the deadline after every
/// call). Every input first fires any deadline that is already due, exactly as if a `tick` had
/// come first, so a late timer never reorders events. Deadlines are computed from the instants
/// of the events (not from the instant a late tick arrives), so retries and the give-up stay on
/// schedule.
///
/// ## Rules
/// - Inbound liveness is judged by a ``MediaLivenessDetector``: any RTP or RTCP keeps media
///   alive, so our mute, the peer's DTX and silence never disrupt a call. Inbound media is only
///   checked from `established` on.
/// - A disruption begins at the last inbound packet before the silence (``MediaLivenessDetector/silenceStart``);
///   the machine gives up exactly ``ReconnectionPolicy/giveUpSeconds`` later, in any state of
///   the disruption, unless media was restored first.
/// - Restored means: a frame decoded from a packet that arrived after the disruption began (while
///   the peer is on hold, any packet after it: RTCP alone keeps an on-hold call alive), and, for a
///   renewal caused by an outbound stall, the peer's reports advancing again.
///   ``Input/iceConnected`` never restores anything.
/// - Renewal starts ``ReconnectionPolicy/renewalDelaySeconds`` after entering `mediaDisrupted`
///   if inbound is still silent then; at once on ICE failure or a local network change (the
///   latter with re-gathering, even from `established`). If ICE failed while established and
///   media then stops, renewal starts as soon as the disruption is detected.
/// - No network, no renewal: when the path's local network went away with nothing usable left
///   (``Input/localNetworkLost``), or an attempt's gathering found nothing
///   (``Input/gatheringFoundNothing(attempt:)``), the machine waits in `mediaDisrupted` with no
///   attempt and no renewal timer (from `renewingMedia` too) until ``Input/localNetworkChanged``
///   says a network is back, which starts a re-gathering attempt at once. Such an attempt is not
///   counted, and the give-up runs throughout. Media resuming by itself (the old path came back)
///   restores the call as usual.
/// - Each attempt gets ``ReconnectionPolicy/renewalAttemptTimeoutSeconds`` (from its
///   ``Action/restartICE(attempt:regatherCandidates:)``); a timed-out or ICE-failed attempt is
///   abandoned and the next one starts after ``ReconnectionPolicy/retryDelaySeconds(afterAttempt:)``
///   (1, 2, 4, 8, 8 … s by default). If the next attempt could not start before the give-up
///   instant, a timed-out attempt is kept open until the give-up instead (abandoning it would
///   leave nothing running).
/// - Glare: see ``GlareRole``. The caller (initial offerer) keeps its own restart offer; the
///   callee yields and answers the caller's.
/// - Media that establishes the call before ICE connected (``Input/iceConnected``: a pair to
///   send on) starts ``ReconnectionPolicy/sendPathGraceSeconds``; if ICE still has not
///   connected at its end, the path is renewed at once (cause
///   ``RecoveryTimeline/Cause/noSendPath``): our checks failed while the peer's succeeded, and
///   the peer, hearing nothing, waits in `connecting` and renews nothing. The side that yields
///   in glare offers this renewal itself, with fresh candidates.
/// - A local network change before media is established only marks the next renewal (or answer)
///   as needing re-gathering. ICE failure while `connecting` is left to the call set-up logic.
///
/// ## State table
/// "attempt" = ``Action/restartICE(attempt:regatherCandidates:)`` with the next number;
/// "regather" = its `regatherCandidates` is true (also true whenever a network change is pending,
/// and for every restart offer of ours after the first of a disruption: fresh candidates, fresh
/// allocations).
/// Rows not listed leave the state unchanged with no actions. Every state except `ended` also
/// feeds the liveness detector and emits ``Action/outboundDisruption(started:)`` when the
/// one-way-audio flag changes (not in `idle`).
///
/// | state | input / deadline | next state | actions |
/// |---|---|---|---|
/// | idle | mediaStarted | connecting | changeState |
/// | idle, connecting | localNetworkChanged | (same) | — (re-gather on the next renewal or answer) |
/// | connecting | mediaDecoded (or any packet while the peer is on hold) | established | changeState |
/// | connecting | peerRenewalOffer | connecting | answerRenewalOffer |
/// | established | silence reaches the threshold (deadline) | mediaDisrupted | changeState (then, if ICE failed since the last packet: changeState(renewingMedia), attempt 1) |
/// | established | localNetworkChanged | renewingMedia | changeState, attempt 1 (regather) |
/// | established | peerRenewalOffer, outbound stalled | renewingMedia | changeState, answerRenewalOffer (attempt 1) |
/// | established | peerRenewalOffer, outbound fine | established | answerRenewalOffer |
/// | established | iceFailed | established | — (remembered until the next packet) |
/// | established | consentLost | renewingMedia | changeState, attempt 1 (cause consentLost); restored once ICE connects again and media flows |
/// | mediaDisrupted | consentLost | renewingMedia | changeState, attempt 1 (unless waiting for a network); restored as above |
/// | renewingMedia | consentLost | renewingMedia | — (the attempt in flight goes on; restored as above) |
/// | established | send-path grace over, ICE never connected (the peer's media came, we have no pair to send on; deadline) | renewingMedia | changeState, attempt 1 (regather on the `yieldsToPeer` side: the peer does not know to offer); restored once ICE connects and media flows |
/// | mediaDisrupted | media restored | established | changeState (record: mediaResumedWithoutRenewal) |
/// | mediaDisrupted | renewal delay over and still silent (deadline) | renewingMedia | changeState, attempt 1 |
/// | mediaDisrupted | iceFailed / localNetworkChanged | renewingMedia | changeState, attempt 1 (regather for a network change) |
/// | mediaDisrupted | peerRenewalOffer | renewingMedia | changeState, answerRenewalOffer (attempt 1) |
/// | mediaDisrupted, renewingMedia | give-up instant (deadline) | ended(mediaTimeout) | changeState, giveUp |
/// | renewingMedia | media restored | established | changeState (record: renewed(attempts:)) |
/// | renewingMedia | attempt timeout (deadline), next attempt fits the budget | renewingMedia | abandonAttempt(k); attempt k+1 after the retry delay (deadline) |
/// | renewingMedia | attempt timeout (deadline), next attempt would not fit | renewingMedia | — (attempt k stays open until the give-up) |
/// | renewingMedia | retry delay over (deadline) | renewingMedia | attempt k+1 |
/// | renewingMedia | iceFailed, attempt in flight | renewingMedia | abandonAttempt(k); attempt k+1 after the retry delay if it fits |
/// | renewingMedia | iceFailed, between attempts | renewingMedia | — |
/// | renewingMedia | localNetworkChanged | renewingMedia | abandonAttempt(k) if in flight, attempt k+1 (regather) at once |
/// | established | localNetworkLost | mediaDisrupted (waiting for a network) | changeState |
/// | mediaDisrupted | localNetworkLost | mediaDisrupted (waiting for a network) | — |
/// | renewingMedia | localNetworkLost, or gatheringFoundNothing(k) for the attempt in flight | mediaDisrupted (waiting for a network) | abandonAttempt(k), changeState |
/// | mediaDisrupted, waiting for a network | localNetworkChanged | renewingMedia | changeState, attempt (regather) |
/// | mediaDisrupted, waiting for a network | renewal delay, iceFailed | mediaDisrupted | — (nothing to renew on) |
/// | idle, connecting | localNetworkLost | (same) | — (re-gather on the next renewal or answer) |
/// | renewingMedia | peerRenewalOffer colliding with our unanswered offer, keepsOwnOffer | renewingMedia | declineRenewalOffer |
/// | renewingMedia | peerRenewalOffer otherwise | renewingMedia | abandonAttempt(k) if in flight, answerRenewalOffer (attempt k+1; regather when k was our unanswered re-gathering attempt) |
/// | any but ended | renewalAnswered(k), k = our latest unanswered offer | (same) | applyRenewalAnswer(k) |
/// | any but ended | renewalAnswered(k), otherwise | (same) | discardRenewalAnswer(k) |
/// | any but ended | hangUp | ended(localHangup) | changeState (record: hungUpDuring if disrupted) |
/// | ended | anything | ended | — |
///
/// `iceConnected`, `tick` with nothing due, and packets or reports that
/// restore nothing cause no transition.
///
/// A value type: copy it freely; use it from one isolation domain at a time.
public struct ReconnectStateMachine: Sendable {
    /// The timers and limits in force.
    public let policy: ReconnectionPolicy
    /// How this side resolves colliding restart offers.
    public let glareRole: GlareRole
    /// The current state.
    public private(set) var state: State = .idle
    /// Inbound/outbound liveness as fed by the inputs.
    public private(set) var liveness: MediaLivenessDetector
    /// Every disruption of the call so far.
    public private(set) var timeline = RecoveryTimeline()

    private struct Attempt {
        var number: Int
        /// Abandon instant; `nil` once the attempt is kept open until the give-up.
        var deadline: MonotonicInstant?
        var offeredByUs: Bool
        var answered = false
        /// The attempt gathers fresh candidates (a network change of ours, or a later offer).
        var regathers = false
    }

    private struct Disruption {
        var start: MonotonicInstant
        var giveUpAt: MonotonicInstant
        var cause: RecoveryTimeline.Cause
        /// Earliest renewal instant while `mediaDisrupted`.
        var renewalAt: MonotonicInstant
        var attempts = 0
        var attempt: Attempt?
        var nextAttemptAt: MonotonicInstant?
        var decodedSinceStart = false
        /// No usable local network: no attempt, no renewal timer, until one is back.
        var waitingForNetwork = false
    }

    private var disruption: Disruption?
    /// A local network change has not yet been served by a re-gathering restart or answer.
    private var regatherPending = false
    /// libnice reported FAILED and no packet arrived since.
    private var iceFailedSinceLastPacket = false
    /// The send-path grace ran out, or consent was lost, and ``Input/iceConnected`` has not come
    /// since: there is no pair to send on.
    private var sendPathMissing = false
    /// ``Input/iceConnected`` came at least once: we have had a pair to send on.
    private var iceHasConnected = false
    /// End of ``ReconnectionPolicy/sendPathGraceSeconds`` (armed while `established` with no pair yet).
    private var sendPathDeadline: MonotonicInstant?
    /// The attempt whose answer we still accept (our latest offer, not yet answered).
    private var awaitedAnswerAttempt: Int?

    private let renewalDelayNanoseconds: UInt64
    private let attemptTimeoutNanoseconds: UInt64
    private let giveUpNanoseconds: UInt64
    private let sendPathGraceNanoseconds: UInt64

    /// Creates an idle machine.
    ///
    /// - Parameters:
    ///   - policy: timers and limits; must be valid (see ``ReconnectionPolicy/validate()``).
    ///   - glareRole: ``GlareRole/keepsOwnOffer`` on the side that sent the call's initial offer,
    ///     ``GlareRole/yieldsToPeer`` on the other.
    /// - Precondition: `policy.validate()` returns `nil`.
    public init(policy: ReconnectionPolicy = ReconnectionPolicy(), glareRole: GlareRole) {
        precondition(policy.validate() == nil, "invalid reconnection policy: \(policy.validate() ?? "")")
        self.policy = policy
        self.glareRole = glareRole
        liveness = MediaLivenessDetector(policy: policy)
        renewalDelayNanoseconds = MonotonicInstant.nanoseconds(fromSeconds: policy.renewalDelaySeconds)
        attemptTimeoutNanoseconds = MonotonicInstant.nanoseconds(fromSeconds: policy.renewalAttemptTimeoutSeconds)
        giveUpNanoseconds = MonotonicInstant.nanoseconds(fromSeconds: policy.giveUpSeconds)
        sendPathGraceNanoseconds = MonotonicInstant.nanoseconds(fromSeconds: policy.sendPathGraceSeconds)
    }

    /// The number of the renewal attempt in flight (ours or our answer to the peer's), if any.
    public var attemptInFlight: Int? { disruption?.attempt?.number }

    /// Whether renewal waits for a usable local network (see "No network, no renewal").
    public var isWaitingForNetwork: Bool { disruption?.waitingForNetwork ?? false }

    // MARK: Deadline

    /// When the driver must call `handle(.tick, now:)` next, or `nil` when no timer is needed.
    /// Re-read it after every ``handle(_:now:)``.
    public func nextDeadline() -> MonotonicInstant? {
        switch state {
        case .established:
            let silence = liveness.inboundDisruptionDeadline()
            guard let grace = sendPathDeadline else { return silence }
            return min(grace, silence ?? grace)
        case .mediaDisrupted:
            guard let disruption else { return nil }
            if disruption.waitingForNetwork { return disruption.giveUpAt }
            return min(disruption.giveUpAt, renewalDue(disruption))
        case .renewingMedia:
            guard let disruption else { return nil }
            return renewingDeadline(disruption)?.instant
        case .idle, .connecting, .ended:
            return nil
        }
    }

    private func renewalDue(_ disruption: Disruption) -> MonotonicInstant {
        max(disruption.renewalAt, liveness.inboundDisruptionDeadline() ?? disruption.renewalAt)
    }

    private enum RenewingEvent { case giveUp, attemptTimeout, nextAttempt }

    /// The earliest timer of `renewingMedia`; the give-up wins ties.
    private func renewingDeadline(_ disruption: Disruption) -> (instant: MonotonicInstant, event: RenewingEvent)? {
        var best = (instant: disruption.giveUpAt, event: RenewingEvent.giveUp)
        if let deadline = disruption.attempt?.deadline, deadline < best.instant {
            best = (deadline, .attemptTimeout)
        }
        if let next = disruption.nextAttemptAt, next < best.instant {
            best = (next, .nextAttempt)
        }
        return best
    }

    // MARK: Inputs

    /// Feeds one input that happened at `now` and returns what the driver must do, in order.
    ///
    /// Any deadline due at `now` fires first (as for `.tick`). After the machine has ended every
    /// input returns no actions; ``Input/hangUp`` returns only the change to `ended(localHangup)`.
    public mutating func handle(_ input: Input, now: MonotonicInstant) -> [Action] {
        if state.isEnded { return [] }
        var actions: [Action] = []
        if input == .hangUp {
            if disruption != nil { timeline.end(at: now, outcome: .hungUpDuring) }
            disruption = nil
            enter(.ended(.localHangup), &actions)
            return actions
        }
        fireDueTimers(now: now, &actions)
        if state.isEnded { return actions }

        switch input {
        case .mediaStarted:
            if state == .idle { enter(.connecting, &actions) }
        case .inboundPacket:
            liveness.inboundPacket(at: now)
            iceFailedSinceLastPacket = false
            checkRestored(now: now, &actions)
        case .mediaDecoded:
            liveness.inboundMediaDecoded(at: now)
            if var current = disruption, let last = liveness.lastInboundPacket, last > current.start {
                current.decodedSinceStart = true
                disruption = current
            }
            checkRestored(now: now, decoded: true, &actions)
        case .tick:
            break
        case .iceConnected:
            iceHasConnected = true
            sendPathDeadline = nil
            if sendPathMissing {
                sendPathMissing = false
                checkRestored(now: now, &actions)
            }
        case .iceFailed:
            iceFailed(now: now, &actions)
        case .consentLost:
            consentLost(now: now, &actions)
        case .localNetworkChanged:
            localNetworkChanged(now: now, &actions)
        case .localNetworkLost:
            localNetworkLost(now: now, &actions)
        case .gatheringFoundNothing(let attempt):
            if state == .renewingMedia, disruption?.attempt?.number == attempt {
                localNetworkLost(now: now, uncountedAttempt: attempt, &actions)
            }
        case .renewalAnswered(let attempt):
            if attempt == awaitedAnswerAttempt {
                awaitedAnswerAttempt = nil
                if disruption?.attempt?.number == attempt { disruption?.attempt?.answered = true }
                actions.append(.applyRenewalAnswer(attempt: attempt))
            } else {
                actions.append(.discardRenewalAnswer(attempt: attempt))
            }
        case .peerRenewalOffer:
            peerRenewalOffer(now: now, &actions)
        case .peerSendsMedia(let sends):
            liveness.peerSendsMedia(sends, at: now)
            checkRestored(now: now, &actions)
        case .weSendMedia(let sends):
            let wasDisrupted = liveness.isOutboundDisrupted
            liveness.weSendMedia(sends, at: now)
            reportOutboundChange(from: wasDisrupted, &actions)
            checkRestored(now: now, &actions)
        case .peerReport(let sequence, let missesRecent):
            let wasDisrupted = liveness.isOutboundDisrupted
            liveness.peerReport(extendedHighestSequenceReceived: sequence, missesRecentPackets: missesRecent, at: now)
            reportOutboundChange(from: wasDisrupted, &actions)
            checkRestored(now: now, &actions)
        case .hangUp:
            break  // handled above
        }
        return actions
    }

    // MARK: Transitions

    private mutating func enter(_ next: State, _ actions: inout [Action]) {
        guard next != state else { return }
        state = next
        actions.append(.changeState(to: next))
    }

    private mutating func fireDueTimers(now: MonotonicInstant, _ actions: inout [Action]) {
        while true {
            switch state {
            case .established:
                let silence = liveness.inboundDisruptionDeadline()
                if let grace = sendPathDeadline, grace <= now, grace <= silence ?? grace {
                    sendPathDeadline = nil
                    noSendPath(now: grace, &actions)
                    continue
                }
                guard let due = silence, due <= now else { return }
                beginDisruption(start: liveness.silenceStart ?? due, cause: .inboundSilence, at: due)
                enter(.mediaDisrupted, &actions)
                if iceFailedSinceLastPacket { startRenewal(at: due, regather: false, &actions) }
            case .mediaDisrupted:
                guard let current = disruption else { return }
                let due = current.waitingForNetwork ? current.giveUpAt : renewalDue(current)
                if due < current.giveUpAt {
                    guard due <= now else { return }
                    startRenewal(at: due, regather: false, &actions)
                } else {
                    guard current.giveUpAt <= now else { return }
                    giveUp(&actions)
                    return
                }
            case .renewingMedia:
                guard let current = disruption, let (due, event) = renewingDeadline(current), due <= now else {
                    return
                }
                switch event {
                case .giveUp:
                    giveUp(&actions)
                    return
                case .attemptTimeout:
                    endAttempt(at: due, keepOpenIfLast: true, &actions)
                case .nextAttempt:
                    startAttempt(at: due, byUs: true, regather: false, &actions)
                }
            case .idle, .connecting, .ended:
                return
            }
        }
    }

    private mutating func beginDisruption(start: MonotonicInstant, cause: RecoveryTimeline.Cause, at now: MonotonicInstant) {
        disruption = Disruption(
            start: start, giveUpAt: start.advanced(byNanoseconds: giveUpNanoseconds), cause: cause,
            renewalAt: now.advanced(byNanoseconds: renewalDelayNanoseconds))
        timeline.begin(start: start, cause: cause)
    }

    /// Enters `renewingMedia` from `established` or `mediaDisrupted` with our first attempt.
    private mutating func startRenewal(at now: MonotonicInstant, regather: Bool, _ actions: inout [Action]) {
        enter(.renewingMedia, &actions)
        startAttempt(at: now, byUs: true, regather: regather, &actions)
    }

    /// Starts the next attempt: our restart offer (`byUs`) or our answer to the peer's offer.
    private mutating func startAttempt(at now: MonotonicInstant, byUs: Bool, regather: Bool, _ actions: inout [Action]) {
        guard var current = disruption else { return }
        current.attempts += 1
        current.attempt = Attempt(
            number: current.attempts, deadline: now.advanced(byNanoseconds: attemptTimeoutNanoseconds), offeredByUs: byUs,
            answered: !byUs)
        current.nextAttemptAt = nil
        current.waitingForNetwork = false
        disruption = current
        timeline.setAttempts(current.attempts)
        // Our second offer never reuses the first's local candidates: a failed attempt may have
        // failed on them (a TURN allocation the server dropped, a reflexive mapping gone stale).
        // An answer re-gathers only for a network change of ours: the peer's offer brings what
        // the peer changed, and answering at once restores sooner.
        let regatherCandidates = regather || regatherPending || (byUs && current.attempts > 1)
        regatherPending = false
        current.attempt?.regathers = regatherCandidates
        disruption = current
        if byUs {
            awaitedAnswerAttempt = current.attempts
            actions.append(.restartICE(attempt: current.attempts, regatherCandidates: regatherCandidates))
        } else {
            awaitedAnswerAttempt = nil
            actions.append(.answerRenewalOffer(regatherCandidates: regatherCandidates))
        }
    }

    /// Ends the attempt in flight at `now` and schedules the next one if it fits the budget.
    /// With `keepOpenIfLast`, an attempt with no successor in the budget stays open instead.
    private mutating func endAttempt(at now: MonotonicInstant, keepOpenIfLast: Bool, _ actions: inout [Action]) {
        guard var current = disruption, let attempt = current.attempt else { return }
        let delay = MonotonicInstant.nanoseconds(fromSeconds: policy.retryDelaySeconds(afterAttempt: attempt.number))
        let next = now.advanced(byNanoseconds: delay)
        if next >= current.giveUpAt && keepOpenIfLast {
            current.attempt?.deadline = nil
            disruption = current
            return
        }
        current.attempt = nil
        current.nextAttemptAt = next < current.giveUpAt ? next : nil
        disruption = current
        actions.append(.abandonAttempt(attempt: attempt.number))
    }

    private mutating func giveUp(_ actions: inout [Action]) {
        if let current = disruption { timeline.end(at: current.giveUpAt, outcome: .gaveUp) }
        disruption = nil
        enter(.ended(.mediaTimeout), &actions)
        actions.append(.giveUp)
    }

    private mutating func iceFailed(now: MonotonicInstant, _ actions: inout [Action]) {
        switch state {
        case .established:
            iceFailedSinceLastPacket = true
        case .mediaDisrupted:
            if disruption?.waitingForNetwork == true { return }  // nothing to renew on
            startRenewal(at: now, regather: false, &actions)
        case .renewingMedia:
            if disruption?.attempt != nil { endAttempt(at: now, keepOpenIfLast: false, &actions) }
        case .idle, .connecting, .ended:
            break
        }
    }

    /// The send-path grace ran out while `established` (see the type's rules).
    private mutating func noSendPath(now: MonotonicInstant, _ actions: inout [Action]) {
        sendPathMissing = true
        beginDisruption(start: now, cause: .noSendPath, at: now)
        // The controlling peer hears nothing and stays `connecting`: it will not offer. The side
        // that otherwise waits for its offers must send one, and offers carry fresh candidates.
        startRenewal(at: now, regather: glareRole == .yieldsToPeer, &actions)
    }

    /// The peer no longer consents to receive on the selected pair: no path to send on until a
    /// new pair is selected, so renew at once.
    private mutating func consentLost(now: MonotonicInstant, _ actions: inout [Action]) {
        switch state {
        case .established:
            sendPathMissing = true
            sendPathDeadline = nil
            beginDisruption(start: now, cause: .consentLost, at: now)
            startRenewal(at: now, regather: false, &actions)
        case .mediaDisrupted:
            sendPathMissing = true
            if disruption?.waitingForNetwork == true { return }  // nothing to renew on
            startRenewal(at: now, regather: false, &actions)
        case .renewingMedia:
            sendPathMissing = true
        case .idle, .connecting, .ended:
            break  // before media, ICE failure is the set-up's to handle
        }
    }

    private mutating func localNetworkChanged(now: MonotonicInstant, _ actions: inout [Action]) {
        switch state {
        case .idle, .connecting:
            regatherPending = true
        case .established:
            beginDisruption(start: liveness.silenceStart ?? now, cause: .localNetworkChange, at: now)
            startRenewal(at: now, regather: true, &actions)
        case .mediaDisrupted:
            disruption?.waitingForNetwork = false
            startRenewal(at: now, regather: true, &actions)
        case .renewingMedia:
            if let attempt = disruption?.attempt { actions.append(.abandonAttempt(attempt: attempt.number)) }
            startAttempt(at: now, byUs: true, regather: true, &actions)
        case .ended:
            break
        }
    }

    /// The path's local network went away with nothing usable left (or an attempt's gathering
    /// found nothing): wait in `mediaDisrupted` for a network, keeping the give-up.
    private mutating func localNetworkLost(now: MonotonicInstant, uncountedAttempt: Int? = nil, _ actions: inout [Action]) {
        regatherPending = true
        switch state {
        case .idle, .connecting, .ended:
            return
        case .established:
            beginDisruption(start: liveness.silenceStart ?? liveness.lastInboundPacket ?? now, cause: .localNetworkChange, at: now)
        case .mediaDisrupted:
            break
        case .renewingMedia:
            if let attempt = disruption?.attempt {
                actions.append(.abandonAttempt(attempt: attempt.number))
                if attempt.number == uncountedAttempt {
                    disruption?.attempts -= 1
                    timeline.setAttempts(disruption?.attempts ?? 0)
                }
            }
            if awaitedAnswerAttempt == disruption?.attempt?.number { awaitedAnswerAttempt = nil }
        }
        disruption?.attempt = nil
        disruption?.nextAttemptAt = nil
        disruption?.waitingForNetwork = true
        enter(.mediaDisrupted, &actions)
    }

    private mutating func peerRenewalOffer(now: MonotonicInstant, _ actions: inout [Action]) {
        switch state {
        case .idle, .ended:
            break
        case .connecting:
            actions.append(.answerRenewalOffer(regatherCandidates: regatherPending))
            regatherPending = false
            awaitedAnswerAttempt = nil
        case .established:
            if liveness.isOutboundDisrupted {
                beginDisruption(start: liveness.outboundStallStart ?? now, cause: .outboundStall, at: now)
                enter(.renewingMedia, &actions)
                startAttempt(at: now, byUs: false, regather: false, &actions)
            } else {
                actions.append(.answerRenewalOffer(regatherCandidates: regatherPending))
                regatherPending = false
                awaitedAnswerAttempt = nil
            }
        case .mediaDisrupted:
            enter(.renewingMedia, &actions)
            startAttempt(at: now, byUs: false, regather: false, &actions)
        case .renewingMedia:
            if let attempt = disruption?.attempt, attempt.offeredByUs, !attempt.answered, glareRole == .keepsOwnOffer {
                actions.append(.declineRenewalOffer)
                return
            }
            // An attempt of ours that was re-gathering for a network change of ours, and whose
            // candidates never reached the peer, hands that need to the answer: answering from
            // the old stream would offer addresses the change took away.
            let carriesRegather = disruption?.attempt.map { $0.regathers && $0.offeredByUs && !$0.answered } ?? false
            if let attempt = disruption?.attempt { actions.append(.abandonAttempt(attempt: attempt.number)) }
            startAttempt(at: now, byUs: false, regather: carriesRegather, &actions)
        }
    }

    private mutating func reportOutboundChange(from wasDisrupted: Bool, _ actions: inout [Action]) {
        guard state != .idle, liveness.isOutboundDisrupted != wasDisrupted else { return }
        actions.append(.outboundDisruption(started: liveness.isOutboundDisrupted))
    }

    /// Enters `established`; without a pair to send on yet, the send-path grace starts.
    private mutating func enterEstablished(now: MonotonicInstant, _ actions: inout [Action]) {
        enter(.established, &actions)
        sendPathDeadline = iceHasConnected ? nil : now.advanced(byNanoseconds: sendPathGraceNanoseconds)
    }

    /// Moves to `established` when media flows again (see "Restored" in the type's rules).
    private mutating func checkRestored(now: MonotonicInstant, decoded: Bool = false, _ actions: inout [Action]) {
        switch state {
        case .connecting:
            if decoded || (!liveness.peerSendsMedia && liveness.lastInboundPacket != nil) {
                enterEstablished(now: now, &actions)
            }
        case .mediaDisrupted, .renewingMedia:
            guard let current = disruption, let last = liveness.lastInboundPacket, last > current.start,
                !liveness.isInboundDisrupted(now: now)
            else { return }
            guard current.decodedSinceStart || !liveness.peerSendsMedia else { return }
            if current.cause == .outboundStall && liveness.isOutboundDisrupted { return }
            // No pair to send on (the send-path grace ran out, or consent was lost): media from
            // the peer alone does not restore the call.
            if sendPathMissing { return }
            timeline.end(
                at: now,
                outcome: current.attempts == 0 ? .mediaResumedWithoutRenewal : .renewed(attempts: current.attempts))
            disruption = nil
            // Media flows on the path in use: a network change noted meanwhile needs no re-gathering.
            regatherPending = false
            enterEstablished(now: now, &actions)
        case .idle, .established, .ended:
            break
        }
    }
}
