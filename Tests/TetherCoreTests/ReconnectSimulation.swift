import TetherCore

// A tiny simulated event loop for `ReconnectStateMachine`: a manual clock, a peer that sends a
// packet every 20 ms (or DTX every 400 ms, or RTCP only while on hold), a path that can go down,
// a simulated ICE session that restarts on request, and a peer that answers restart offers.

/// An instant given in whole milliseconds.
func reconnectInstant(_ milliseconds: UInt64) -> MonotonicInstant {
    MonotonicInstant(milliseconds: milliseconds)
}

/// One action the machine returned, with the instant it returned it.
struct LoggedAction: Equatable, CustomStringConvertible {
    var at: MonotonicInstant
    var action: ReconnectStateMachine.Action

    var description: String { "\(at.nanoseconds / 1_000_000) ms: \(action)" }
}

/// Shorthand for an expected log entry at a whole millisecond.
func logged(_ milliseconds: UInt64, _ action: ReconnectStateMachine.Action) -> LoggedAction {
    LoggedAction(at: reconnectInstant(milliseconds), action: action)
}

/// What every simulated call starts with: media started at 0 ms, first frame (sent at 0 ms)
/// decoded 40 ms later.
let callSetUpLog = [
    logged(0, .changeState(to: .connecting)),
    logged(40, .changeState(to: .established)),
]

struct ReconnectSimulation {
    /// The machine under test.
    private(set) var machine: ReconnectStateMachine
    /// Every action returned, in order.
    private(set) var log: [LoggedAction] = []
    /// The simulated clock, in nanoseconds.
    private(set) var now: UInt64 = 0

    // MARK: Scenario (all times in milliseconds)

    /// Half-open intervals during which nothing from the peer reaches us.
    var inboundOutagesMilliseconds: [Range<UInt64>] = []
    /// Half-open intervals during which nothing we send reaches the peer (its RTCP still comes).
    var outboundOutagesMilliseconds: [Range<UInt64>] = []
    /// From this instant the peer uses DTX: one packet every 400 ms instead of every 20 ms.
    var peerDTXFromMilliseconds: UInt64?
    /// The peer sends RTP before this instant only (on hold afterwards).
    var peerRTPStopsAtMilliseconds: UInt64?
    /// RTCP-only packets from the peer (used while it is on hold).
    var peerRTCPAtMilliseconds: [UInt64] = []
    /// Period of the peer's receiver reports about our stream, if it sends them.
    var peerReportIntervalMilliseconds: UInt64?
    /// Period of our own packets (20 ms; 400 ms with our DTX).
    var ourPacketIntervalMilliseconds: UInt64 = 20
    /// Delay between our restart offer and the peer's answer; `nil`: never answers.
    var answerDelayMilliseconds: UInt64? = 150
    /// Delay from an applied answer (and a working path) to a usable ICE pair.
    var connectDelayMilliseconds: UInt64 = 100
    /// Delay from a packet's arrival to its frame being decoded (jitter buffer).
    var decodeDelayMilliseconds: UInt64 = 40
    /// Inputs fed at given instants, in order (media start at 0 ms is added automatically).
    var scripted: [(milliseconds: UInt64, input: ReconnectStateMachine.Input)] = []

    // MARK: Simulated session state (nanoseconds)

    /// Instant from which the ICE session carries packets; `nil` while a restart is unanswered.
    private var sessionReadyAt: UInt64? = 0
    private var nextPeerSlot: UInt64? = 0
    private var nextOurSlot: UInt64 = 0
    private var ourHighestDelivered: UInt32 = 0
    private var nextReport: UInt64?
    private var rtcpIndex = 0
    private var scriptIndex = 0
    private var pendingDecodes: [UInt64] = []
    private var pendingAnswers: [(at: UInt64, attempt: Int)] = []
    private var pendingConnected: [UInt64] = []
    private var prepared = false

    init(policy: ReconnectionPolicy = twoSecondRenewal, glareRole: ReconnectStateMachine.GlareRole = .keepsOwnOffer) {
        machine = ReconnectStateMachine(policy: policy, glareRole: glareRole)
    }

    private static let millisecond: UInt64 = 1_000_000

    /// Runs the event loop until `milliseconds` (inclusive).
    mutating func run(untilMilliseconds milliseconds: UInt64) {
        if !prepared {
            prepared = true
            // ICE selected its pair before the first media (a working path): no send-path grace.
            scripted.insert((0, .iceConnected), at: 0)
            scripted.insert((0, .mediaStarted), at: 0)
            scripted.sort { $0.milliseconds < $1.milliseconds }
            nextReport = peerReportIntervalMilliseconds.map { $0 * Self.millisecond }
        }
        let end = milliseconds * Self.millisecond
        while let t = nextEventTime(), t <= end {
            now = t
            step()
        }
        now = max(now, end)
    }

    private func nextEventTime() -> UInt64? {
        var candidates: [UInt64?] = [
            machine.nextDeadline()?.nanoseconds, nextPeerSlot, nextOurSlot, nextReport,
            pendingDecodes.min(), pendingAnswers.map(\.at).min(), pendingConnected.min(),
        ]
        if rtcpIndex < peerRTCPAtMilliseconds.count { candidates.append(peerRTCPAtMilliseconds[rtcpIndex] * Self.millisecond) }
        if scriptIndex < scripted.count { candidates.append(scripted[scriptIndex].milliseconds * Self.millisecond) }
        return candidates.compactMap { $0 }.min()
    }

    private func inboundUp(_ t: UInt64) -> Bool {
        !inboundOutagesMilliseconds.contains { inRange($0, t) }
    }

    private func inRange(_ range: Range<UInt64>, _ t: UInt64) -> Bool {
        t >= range.lowerBound * Self.millisecond && t < range.upperBound * Self.millisecond
    }

    private func outboundUp(_ t: UInt64) -> Bool {
        !outboundOutagesMilliseconds.contains { inRange($0, t) }
    }

    private func sessionReady(_ t: UInt64) -> Bool {
        guard let ready = sessionReadyAt else { return false }
        return t >= ready
    }

    /// First instant at or after `t` when the inbound path is up.
    private func firstInboundUp(from t: UInt64) -> UInt64 {
        var instant = t
        while let outage = inboundOutagesMilliseconds.first(where: { inRange($0, instant) }) {
            instant = outage.upperBound * Self.millisecond
        }
        return instant
    }

    private mutating func step() {
        let t = now
        if let deadline = machine.nextDeadline()?.nanoseconds, deadline <= t { feed(.tick) }
        while scriptIndex < scripted.count, scripted[scriptIndex].milliseconds * Self.millisecond == t {
            let input = scripted[scriptIndex].input
            scriptIndex += 1
            feed(input)
        }
        for answer in pendingAnswers where answer.at == t { feed(.renewalAnswered(attempt: answer.attempt)) }
        pendingAnswers.removeAll { $0.at == t }
        if pendingConnected.contains(t) { feed(.iceConnected) }
        pendingConnected.removeAll { $0 == t }
        if nextOurSlot == t {
            if outboundUp(t) && sessionReady(t) {
                ourHighestDelivered = UInt32(t / (20 * Self.millisecond))
            }
            nextOurSlot = t + ourPacketIntervalMilliseconds * Self.millisecond
        }
        if let slot = nextPeerSlot, slot == t {
            if inboundUp(t) && sessionReady(t) {
                feed(.inboundPacket)
                pendingDecodes.append(t + decodeDelayMilliseconds * Self.millisecond)
            }
            let interval = (peerDTXFromMilliseconds.map { t >= $0 * Self.millisecond } ?? false ? 400 : 20) * Self.millisecond
            let next = (t / interval + 1) * interval
            nextPeerSlot = peerRTPStopsAtMilliseconds.map { next < $0 * Self.millisecond } ?? true ? next : nil
        }
        if rtcpIndex < peerRTCPAtMilliseconds.count, peerRTCPAtMilliseconds[rtcpIndex] * Self.millisecond == t {
            rtcpIndex += 1
            if inboundUp(t) && sessionReady(t) { feed(.inboundPacket) }
        }
        if let report = nextReport, report == t, let interval = peerReportIntervalMilliseconds {
            if inboundUp(t) && sessionReady(t) {
                feed(.inboundPacket)
                feed(.peerReport(extendedHighestSequence: ourHighestDelivered))
            }
            nextReport = t + interval * Self.millisecond
        }
        let decodes = pendingDecodes.filter { $0 == t }.count
        pendingDecodes.removeAll { $0 == t }
        for _ in 0..<decodes { feed(.mediaDecoded) }
    }

    private mutating func feed(_ input: ReconnectStateMachine.Input) {
        let t = now
        let actions = machine.handle(input, now: MonotonicInstant(nanoseconds: t))
        for action in actions {
            log.append(LoggedAction(at: MonotonicInstant(nanoseconds: t), action: action))
            switch action {
            case .restartICE(let attempt, _):
                sessionReadyAt = nil
                if let delay = answerDelayMilliseconds {
                    pendingAnswers.append((t + delay * Self.millisecond, attempt))
                }
            case .applyRenewalAnswer, .answerRenewalOffer:
                let ready = firstInboundUp(from: t) + connectDelayMilliseconds * Self.millisecond
                sessionReadyAt = ready
                pendingConnected.append(ready)
            default:
                break
            }
        }
    }
}

/// The policy most scenarios were written for: the defaults with a 2 s renewal delay (the
/// timeline 11 s disruption → 13 s first attempt reads in whole seconds).
let twoSecondRenewal = ReconnectionPolicy(renewalDelaySeconds: 2)
