/// The reconnection core as a call drives it, sans-IO: the `ReconnectStateMachine`, what of the
/// media loop's observations it has been fed already, and when to probe a quiet path.
///
/// The media loop publishes the instants of the last packet that arrived, the last peer report
/// and the last decoded frame; the call hands them to `observe(_:now:)` on every pass. Each is
/// fed once (an instant already fed is not fed again), and no input is ever fed at an instant
/// earlier than one fed before: arrivals are published late, so an arrival stamped before the
/// last `now` is fed at that `now`. The caller carries out the actions returned, in order.
public struct RecoveryDriver: Sendable {
    /// What the media loop saw, by its counters (monotonic nanoseconds; 0: never).
    public struct Observation: Sendable, Equatable {
        public var lastMediaArrivalNanoseconds: UInt64
        public var peerReportArrivalNanoseconds: UInt64
        public var peerReportedHighestSequence: UInt32
        public var peerReportMissesRecentPackets: Bool
        public var lastDecodedNanoseconds: UInt64

        public init(
            lastMediaArrivalNanoseconds: UInt64 = 0, peerReportArrivalNanoseconds: UInt64 = 0,
            peerReportedHighestSequence: UInt32 = 0, peerReportMissesRecentPackets: Bool = false, lastDecodedNanoseconds: UInt64 = 0
        ) {
            self.lastMediaArrivalNanoseconds = lastMediaArrivalNanoseconds
            self.peerReportArrivalNanoseconds = peerReportArrivalNanoseconds
            self.peerReportedHighestSequence = peerReportedHighestSequence
            self.peerReportMissesRecentPackets = peerReportMissesRecentPackets
            self.lastDecodedNanoseconds = lastDecodedNanoseconds
        }
    }

    public private(set) var machine: ReconnectStateMachine
    public private(set) var pathProbes: PathProbeSchedule
    /// The latest instant fed to the machine.
    public private(set) var lastFed = MonotonicInstant.zero
    private var fed = Observation()

    public init(machine: ReconnectStateMachine, pathProbeSeconds: Double) {
        self.machine = machine
        pathProbes = PathProbeSchedule(silenceSeconds: pathProbeSeconds)
    }

    /// When the machine next needs a pass (nil: only inputs move it).
    public var nextDeadline: MonotonicInstant? { machine.nextDeadline() }

    /// Feeds one input at `instant` (moved up to the latest instant fed, if earlier).
    public mutating func handle(_ input: ReconnectStateMachine.Input, at instant: MonotonicInstant) -> [ReconnectStateMachine.Action] {
        lastFed = max(lastFed, instant)
        return machine.handle(input, now: lastFed)
    }

    /// What to do with the answer to our restart offer of `attempt`.
    public enum RenewalAnswerVerdict: Sendable, Equatable {
        /// Take it up: apply the peer's candidates and keys.
        case apply
        /// Drop it: the attempt was abandoned or overtaken (nothing of it changes the call).
        case discard
    }

    /// What to do with a restart offer from the peer.
    public enum PeerRenewalOfferVerdict: Sendable, Equatable {
        /// Answer it, with fresh candidates when `regatherCandidates` (our own re-gathering
        /// attempt was overtaken by it), else with the restarted transport's candidates.
        case answer(regatherCandidates: Bool)
        /// Refuse it: it collides with our unanswered offer, and ours wins.
        case decline
    }

    /// The answer to our restart offer of `attempt` arrived: the verdict, and the other actions
    /// to carry out (state changes), in order.
    public mutating func renewalAnswered(attempt: Int, at instant: MonotonicInstant) -> (
        verdict: RenewalAnswerVerdict, actions: [ReconnectStateMachine.Action]
    ) {
        var verdict = RenewalAnswerVerdict.apply
        let actions = handle(.renewalAnswered(attempt: attempt), at: instant).filter { action in
            switch action {
            case .discardRenewalAnswer: verdict = .discard
            case .applyRenewalAnswer: break
            default: return true
            }
            return false
        }
        return (verdict, actions)
    }

    /// The peer offered an ICE restart: the verdict, and the other actions to carry out (state
    /// changes, an attempt of ours abandoned), in order.
    public mutating func peerRenewalOffer(at instant: MonotonicInstant) -> (
        verdict: PeerRenewalOfferVerdict, actions: [ReconnectStateMachine.Action]
    ) {
        var verdict = PeerRenewalOfferVerdict.answer(regatherCandidates: false)
        let actions = handle(.peerRenewalOffer, at: instant).filter { action in
            switch action {
            case .declineRenewalOffer: verdict = .decline
            case .answerRenewalOffer(let regather): verdict = .answer(regatherCandidates: regather)
            default: return true
            }
            return false
        }
        return (verdict, actions)
    }

    /// One pass: what the media loop saw since the last one (a packet arrived, a peer report, a
    /// decoded frame, each at its own instant), then a tick at `now` (deadlines due).
    public mutating func observe(_ seen: Observation, now: MonotonicInstant) -> [ReconnectStateMachine.Action] {
        var actions: [ReconnectStateMachine.Action] = []
        if seen.lastMediaArrivalNanoseconds > fed.lastMediaArrivalNanoseconds {
            fed.lastMediaArrivalNanoseconds = seen.lastMediaArrivalNanoseconds
            actions += handle(.inboundPacket, at: MonotonicInstant(nanoseconds: seen.lastMediaArrivalNanoseconds))
            pathProbes.packetArrived(at: lastFed)
        }
        if seen.peerReportArrivalNanoseconds > fed.peerReportArrivalNanoseconds {
            fed.peerReportArrivalNanoseconds = seen.peerReportArrivalNanoseconds
            actions += handle(
                .peerReport(extendedHighestSequence: seen.peerReportedHighestSequence, missesRecentPackets: seen.peerReportMissesRecentPackets),
                at: MonotonicInstant(nanoseconds: seen.peerReportArrivalNanoseconds))
        }
        if seen.lastDecodedNanoseconds > fed.lastDecodedNanoseconds {
            fed.lastDecodedNanoseconds = seen.lastDecodedNanoseconds
            actions += handle(.mediaDecoded, at: MonotonicInstant(nanoseconds: seen.lastDecodedNanoseconds))
        }
        actions += handle(.tick, at: now)
        return actions
    }

    /// The first decoded frame, told at once (before the counters publish it): fed at `now`, and
    /// its instant in the counters, which is earlier, is not fed again.
    public mutating func firstFrameDecoded(now: MonotonicInstant) -> [ReconnectStateMachine.Action] {
        let actions = handle(.mediaDecoded, at: now)
        fed.lastDecodedNanoseconds = max(fed.lastDecodedNanoseconds, lastFed.nanoseconds)
        return actions
    }

    /// Whether to send a connectivity check of our own on a quiet path now (a rebound NAT
    /// mapping is found by it); the schedule counts it as sent.
    public mutating func probeIfDue(now: MonotonicInstant) -> Bool {
        pathProbes.probeIfDue(now: max(lastFed, now), peerSendsMedia: machine.liveness.peerSendsMedia)
    }
}
