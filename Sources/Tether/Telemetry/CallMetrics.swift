import CoreMetrics
import Synchronization

/// The call's swift-metrics instruments: what a server running many calls watches. All go to
/// the configuration's factory (`CallConfiguration.metricsFactory`, by default the process's
/// `MetricsSystem.factory`: a no-op until the embedder bootstraps a backend), with the
/// configuration's dimensions. Labels (Prometheus style):
///
/// - `tether_calls_active` (meter): calls created and not yet ended.
/// - `tether_calls_ended_total` (counter, dimension `cause`: `local hang-up`, `remote hang-up`,
///   `connection failed`, `connection timeout`, `media timeout`, `error`).
/// - `tether_give_ups_total` (counter): calls given up after the reconnection budget.
/// - `tether_disruptions_total` (counter): times a call's media was disrupted.
/// - `tether_ice_restarts_total` (counter, dimension `side`: `offered` or `answered`).
/// - `tether_packets_sent_total`, `tether_packets_received_total`, `tether_packets_lost_total`
///   (counters): RTP packets, and the peer's packets lost on the way (updated once a second).
/// - `tether_call_heard_loss_percent`, `tether_call_mos` (recorders): each call's heard loss
///   and mean estimated MOS, recorded when it ends.
final class CallMetrics: Sendable {
    private let factory: any MetricsFactory
    private let dimensions: [(String, String)]
    private let active: Meter
    private let giveUps: Counter
    private let disruptions: Counter
    private let restartsOffered: Counter
    private let restartsAnswered: Counter
    private let packetsSent: Counter
    private let packetsReceived: Counter
    private let packetsLost: Counter
    private let heardLoss: Recorder
    private let score: Recorder
    /// Packets counted so far (sent, received, lost), and whether the call's end was counted.
    private let state = Mutex((sent: 0, received: 0, lost: 0, ended: false))

    init(factory: any MetricsFactory, dimensions: [(String, String)]) {
        self.factory = factory
        self.dimensions = dimensions
        active = Meter(label: "tether_calls_active", dimensions: dimensions, factory: factory)
        giveUps = Counter(label: "tether_give_ups_total", dimensions: dimensions, factory: factory)
        disruptions = Counter(label: "tether_disruptions_total", dimensions: dimensions, factory: factory)
        restartsOffered = Counter(label: "tether_ice_restarts_total", dimensions: dimensions + [("side", "offered")], factory: factory)
        restartsAnswered = Counter(label: "tether_ice_restarts_total", dimensions: dimensions + [("side", "answered")], factory: factory)
        packetsSent = Counter(label: "tether_packets_sent_total", dimensions: dimensions, factory: factory)
        packetsReceived = Counter(label: "tether_packets_received_total", dimensions: dimensions, factory: factory)
        packetsLost = Counter(label: "tether_packets_lost_total", dimensions: dimensions, factory: factory)
        heardLoss = Recorder(label: "tether_call_heard_loss_percent", dimensions: dimensions, aggregate: true, factory: factory)
        score = Recorder(label: "tether_call_mos", dimensions: dimensions, aggregate: true, factory: factory)
        active.increment()
    }

    /// A call event (the session's event broadcaster, as it delivers it).
    func observe(_ event: CallEvent) {
        guard case .stateChanged(_, let to, _) = event else { return }
        switch to {
        case .mediaDisrupted:
            disruptions.increment()
        case .ended(let reason):
            guard state.withLock({ s in
                defer { s.ended = true }
                return !s.ended
            }) else { return }
            Counter(label: "tether_calls_ended_total", dimensions: dimensions + [("cause", reason.cause.description)], factory: factory)
                .increment()
            if reason.cause == .mediaTimeout { giveUps.increment() }
            active.decrement()
        default:
            break
        }
    }

    func restartOffered() { restartsOffered.increment() }
    func restartAnswered() { restartsAnswered.increment() }

    /// Adds the packets sent, received and lost since the last update.
    func update(_ s: CallStatistics) {
        let delta = state.withLock { c in
            let d = (sent: max(0, s.packetsSent - c.sent), received: max(0, s.packetsReceived - c.received), lost: max(0, s.packetsLost - c.lost))
            c.sent = max(c.sent, s.packetsSent)
            c.received = max(c.received, s.packetsReceived)
            c.lost = max(c.lost, s.packetsLost)
            return d
        }
        if delta.sent > 0 { packetsSent.increment(by: delta.sent) }
        if delta.received > 0 { packetsReceived.increment(by: delta.received) }
        if delta.lost > 0 { packetsLost.increment(by: delta.lost) }
    }

    /// The ended call's summary (after its last `update`).
    func recordEnd(_ report: CallReport) {
        if report.quality.packetsReceived > 0 { heardLoss.record(report.quality.heardLossPercent) }
        if let mos = report.quality.meanOpinionScoreMean { score.record(mos) }
    }

    /// A session dropped without ending still leaves the active calls.
    func sessionReleased() {
        let wasActive = state.withLock { s in
            defer { s.ended = true }
            return !s.ended
        }
        if wasActive { active.decrement() }
    }
}
