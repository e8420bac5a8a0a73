/// The recovery timeline of a call: every disruption, what was tried, how it ended.
public struct CallRecovery: Sendable, Equatable {
    /// One disruption of inbound media.
    public struct Disruption: Sendable, Equatable {
        /// When media stopped (the last packet before the silence), in seconds since the session was created.
        public var startSeconds: Double
        /// When it ended, in seconds since the session was created; nil while it lasts.
        public var endSeconds: Double?
        /// What started it (`media silence`, `ICE failure`, `local network change`, `peer restart`).
        public var cause: String
        /// ICE restart attempts made during it.
        public var attempts: Int
        /// How it ended: `media resumed`, `renewed`, `gave up`, `hung up`; nil while it lasts.
        public var outcome: String?

        public init(startSeconds: Double, endSeconds: Double?, cause: String, attempts: Int, outcome: String?) {
            self.startSeconds = startSeconds
            self.endSeconds = endSeconds
            self.cause = cause
            self.attempts = attempts
            self.outcome = outcome
        }

        /// Duration in seconds (up to `nowSeconds` while it lasts).
        public func durationSeconds(nowSeconds: Double) -> Double { (endSeconds ?? nowSeconds) - startSeconds }
    }

    /// Every disruption so far, oldest first (the most recent 64 are kept).
    public var disruptions: [Disruption] = []
    /// Total time disrupted, in seconds.
    public var totalDisruptedSeconds: Double = 0
    /// ICE restarts this side offered.
    public var restartsOffered = 0
    /// ICE restarts the peer offered and this side answered.
    public var restartsAnswered = 0
    /// Times the peer stopped receiving what we send while our inbound media was fine (one-way audio).
    public var outboundDisruptions = 0
    /// Whether the peer currently does not receive what we send.
    public var outboundDisrupted = false

    /// ICE restarts in total, both directions.
    public var restartCount: Int { restartsOffered + restartsAnswered }

    public init() {}
}
