/// The history of media disruptions in one call, kept by ``ReconnectStateMachine`` and exposed
/// by the driver in call statistics.
///
/// At most ``maximumRecords`` records are kept (the oldest are dropped first); the counters
/// ``disruptionCount`` and ``totalDisruptedNanoseconds(now:)`` cover every disruption of the call.
public struct RecoveryTimeline: Sendable, Equatable {
    /// What started a disruption.
    public enum Cause: Sendable, Equatable {
        /// No inbound RTP or RTCP for the disruption threshold.
        case inboundSilence
        /// A local address or link changed while media was established; renewal started at once.
        case localNetworkChange
        /// The peer's reports showed it no longer received our stream, and it started a renewal.
        case outboundStall
        /// The peer's media arrived but our ICE had no pair to send on (our checks failed while
        /// the peer's succeeded); renewal started at once.
        case noSendPath
        /// The peer stopped consenting to receive on the selected pair (RFC 7675), so we stopped
        /// sending on it; renewal started at once.
        case consentLost
    }

    /// How a disruption ended.
    public enum Outcome: Sendable, Equatable {
        /// Media came back by itself before any renewal attempt.
        case mediaResumedWithoutRenewal
        /// Media came back during renewal, after this many attempts (ours and the peer's).
        case renewed(attempts: Int)
        /// The give-up budget ran out; the call ended with a media timeout.
        case gaveUp
        /// We hung up while media was disrupted.
        case hungUpDuring
    }

    /// One disruption.
    public struct Record: Sendable, Equatable {
        /// When the disruption began: the last inbound packet before the silence (or the last
        /// report showing progress, for ``Cause/outboundStall``).
        public var start: MonotonicInstant
        /// When it ended (media decoded again, give-up or hang-up), `nil` while it lasts.
        public var end: MonotonicInstant?
        /// What started it.
        public var cause: Cause
        /// Renewal attempts made during it (ours and answered peer restarts).
        public var attempts: Int
        /// How it ended, `nil` while it lasts.
        public var outcome: Outcome?

        /// Creates a record.
        public init(start: MonotonicInstant, end: MonotonicInstant? = nil, cause: Cause, attempts: Int = 0,
                    outcome: Outcome? = nil) {
            self.start = start
            self.end = end
            self.cause = cause
            self.attempts = attempts
            self.outcome = outcome
        }

        /// Duration in nanoseconds: to ``end``, or to `now` while the disruption lasts.
        public func durationNanoseconds(now: MonotonicInstant) -> UInt64 {
            (end ?? now).nanoseconds(since: start)
        }
    }

    /// Most records kept; older ones are dropped (the totals still count them).
    public static let maximumRecords = 64

    /// The most recent disruptions, oldest first; the last one may still be open.
    public private(set) var records: [Record] = []
    /// Disruptions in the whole call, including records no longer kept.
    public private(set) var disruptionCount = 0
    /// Summed duration of ended disruptions in the whole call, in nanoseconds.
    private var endedNanoseconds: UInt64 = 0

    /// Creates an empty timeline.
    public init() {}

    /// The disruption in progress, if any.
    public var current: Record? {
        guard let last = records.last, last.end == nil else { return nil }
        return last
    }

    /// Total disrupted time of the call in nanoseconds, counting an open disruption up to `now`.
    public func totalDisruptedNanoseconds(now: MonotonicInstant) -> UInt64 {
        endedNanoseconds + (current?.durationNanoseconds(now: now) ?? 0)
    }

    /// Total disrupted time of the call in seconds, counting an open disruption up to `now`.
    public func totalDisruptedSeconds(now: MonotonicInstant) -> Double {
        Double(totalDisruptedNanoseconds(now: now)) / 1_000_000_000
    }

    // MARK: Updates (by the state machine)

    mutating func begin(start: MonotonicInstant, cause: Cause) {
        if records.count == Self.maximumRecords { records.removeFirst() }
        records.append(Record(start: start, cause: cause))
        disruptionCount += 1
    }

    mutating func setAttempts(_ attempts: Int) {
        guard current != nil else { return }
        records[records.count - 1].attempts = attempts
    }

    mutating func end(at instant: MonotonicInstant, outcome: Outcome) {
        guard current != nil else { return }
        let index = records.count - 1
        records[index].end = max(instant, records[index].start)
        records[index].outcome = outcome
        endedNanoseconds += records[index].durationNanoseconds(now: instant)
    }
}
