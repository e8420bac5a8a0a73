/// Decides, from packet arrivals and peer receiver reports, whether media is flowing in each
/// direction. Sans-IO: every input carries the caller's `now`; queries take `now` too.
///
/// ## Inbound
/// Any valid RTP or RTCP packet from the peer (after SRTP/SRTCP authentication) counts as life.
/// Inbound media is disrupted when the *silence* reaches the current threshold:
/// ``ReconnectionPolicy/disruptionThresholdSeconds`` while the peer is supposed to send media,
/// ``ReconnectionPolicy/onHoldDisruptionThresholdSeconds`` while it is not (on hold: its
/// direction is recvonly or inactive, so only RTCP is expected, every 2.5–5 s; RTCP alone keeps
/// an on-hold call alive). Silence is measured from ``silenceStart``: the later of the last
/// inbound packet and the last change of ``peerSendsMedia`` (a new expectation gets a full
/// threshold). Before anything was received or expected there is no silence to measure and
/// inbound media is never disrupted.
///
/// The peer's mute and DTX never trip the check: a muted or silent Opus sender with DTX still
/// sends a packet at least every 0.4 s, and RTCP keeps flowing.
///
/// ## Outbound (one-way audio)
/// While ``weSendMedia`` is true, each receiver report block the peer sends about *our* stream
/// carries the extended highest sequence number it has received. Outbound media is disrupted when
/// at least ``ReconnectionPolicy/outboundStallReports`` consecutive reports carry the same value
/// and the last of them came at least ``ReconnectionPolicy/outboundStallSeconds`` after the first
/// (the *baseline*). Reports arriving at all show that the path back from the peer works, so a
/// stall means the peer does not receive what we send, even when inbound media is fine. The flag
/// clears on the first report whose value differs from the baseline. A single report the driver
/// marks as missing recent packets (the peer has received none of what we sent more than a round
/// trip and a margin before it) sets the flag at once: that is one-way audio without waiting for
/// a second report; the next report that is not so marked and shows progress clears it.
///
/// The media loop keeps sending while we are muted (it encodes silence; with DTX at least one
/// packet every 0.4 s), so our mute or DTX never looks like a stall. When we stop sending media
/// (``weSendMedia(_:at:)`` false: we are on hold or inactive) the outbound check is off and its
/// history is cleared; it starts afresh when we send again.
public struct MediaLivenessDetector: Sendable, Equatable {
    /// Inbound silence threshold while the peer sends media, in nanoseconds.
    public let disruptionThresholdNanoseconds: UInt64
    /// Inbound silence threshold while the peer is on hold, in nanoseconds.
    public let onHoldDisruptionThresholdNanoseconds: UInt64
    /// Minimum span of non-advancing peer reports, in nanoseconds.
    public let outboundStallNanoseconds: UInt64
    /// Minimum number of consecutive reports (baseline included) with the same sequence number.
    public let outboundStallReports: Int

    /// Arrival instant of the last valid RTP or RTCP packet from the peer, if any.
    public private(set) var lastInboundPacket: MonotonicInstant?
    /// Instant the last frame from the peer was decoded, if any.
    public private(set) var lastMediaDecoded: MonotonicInstant?
    /// Whether the peer is supposed to send media (false while it is on hold).
    public private(set) var peerSendsMedia = true
    /// Whether we send media (false while we are on hold or inactive).
    public private(set) var weSendMedia = true
    /// Whether outbound media is disrupted (one-way audio), as of the last report.
    public private(set) var isOutboundDisrupted = false

    /// Instant ``peerSendsMedia`` last changed, if it ever did.
    private var expectationChangedAt: MonotonicInstant?
    /// Sequence number and arrival instant of the first report carrying the current value.
    private var baselineSequence: UInt32?
    private var baselineAt: MonotonicInstant?
    /// Reports carrying the baseline value, baseline included.
    private var reportsAtBaseline = 0

    /// Creates a detector using the policy's thresholds.
    ///
    /// - Precondition: `policy.validate()` returns `nil`.
    public init(policy: ReconnectionPolicy = ReconnectionPolicy()) {
        precondition(policy.validate() == nil, "invalid reconnection policy: \(policy.validate() ?? "")")
        disruptionThresholdNanoseconds = MonotonicInstant.nanoseconds(fromSeconds: policy.disruptionThresholdSeconds)
        onHoldDisruptionThresholdNanoseconds = MonotonicInstant.nanoseconds(
            fromSeconds: policy.onHoldDisruptionThresholdSeconds)
        outboundStallNanoseconds = MonotonicInstant.nanoseconds(fromSeconds: policy.outboundStallSeconds)
        outboundStallReports = policy.outboundStallReports
    }

    // MARK: Inputs

    /// A valid RTP or RTCP packet from the peer arrived at `now`.
    public mutating func inboundPacket(at now: MonotonicInstant) {
        lastInboundPacket = max(lastInboundPacket ?? now, now)
    }

    /// A frame from the peer was decoded at `now` (not concealment: a real packet's frame).
    public mutating func inboundMediaDecoded(at now: MonotonicInstant) {
        lastMediaDecoded = max(lastMediaDecoded ?? now, now)
    }

    /// The negotiated direction changed whether the peer sends media (false while it is on hold).
    /// A change restarts the silence measurement at `now`.
    public mutating func peerSendsMedia(_ sends: Bool, at now: MonotonicInstant) {
        guard sends != peerSendsMedia else { return }
        peerSendsMedia = sends
        expectationChangedAt = now
    }

    /// The negotiated direction changed whether we send media. Either way the outbound history is
    /// cleared and outbound media is no longer disrupted.
    public mutating func weSendMedia(_ sends: Bool, at now: MonotonicInstant) {
        guard sends != weSendMedia else { return }
        weSendMedia = sends
        clearOutboundHistory()
    }

    /// The peer's RTCP receiver report block about our stream arrived at `now`, carrying the
    /// extended highest sequence number it has received from us.
    ///
    /// The report's packet itself is inbound traffic: report it with ``inboundPacket(at:)`` too.
    public mutating func peerReport(extendedHighestSequenceReceived sequence: UInt32, missesRecentPackets: Bool = false, at now: MonotonicInstant) {
        guard weSendMedia else { return }
        guard let baseline = baselineSequence, let since = baselineAt, baseline == sequence else {
            baselineSequence = sequence
            baselineAt = now
            reportsAtBaseline = 1
            isOutboundDisrupted = missesRecentPackets
            return
        }
        if missesRecentPackets { isOutboundDisrupted = true }
        reportsAtBaseline += 1
        if reportsAtBaseline >= outboundStallReports && now.nanoseconds(since: since) >= outboundStallNanoseconds {
            isOutboundDisrupted = true
        }
    }

    private mutating func clearOutboundHistory() {
        baselineSequence = nil
        baselineAt = nil
        reportsAtBaseline = 0
        isOutboundDisrupted = false
    }

    // MARK: Queries

    /// The inbound silence threshold in force, in nanoseconds (depends on ``peerSendsMedia``).
    public var currentThresholdNanoseconds: UInt64 {
        peerSendsMedia ? disruptionThresholdNanoseconds : onHoldDisruptionThresholdNanoseconds
    }

    /// Where inbound silence is measured from: the later of the last inbound packet and the last
    /// change of ``peerSendsMedia``; `nil` before either happened.
    public var silenceStart: MonotonicInstant? {
        switch (lastInboundPacket, expectationChangedAt) {
        case (nil, nil): nil
        case (let packet?, nil): packet
        case (nil, let change?): change
        case (let packet?, let change?): max(packet, change)
        }
    }

    /// The instant inbound media becomes disrupted if nothing arrives before it, or `nil` when
    /// there is no silence to measure yet.
    public func inboundDisruptionDeadline() -> MonotonicInstant? {
        silenceStart?.advanced(byNanoseconds: currentThresholdNanoseconds)
    }

    /// Inbound silence at `now`, in seconds (0 when there is nothing to measure from).
    public func inboundSilenceSeconds(now: MonotonicInstant) -> Double {
        silenceStart.map { now.seconds(since: $0) } ?? 0
    }

    /// Whether inbound media is disrupted at `now`: the silence has reached the threshold in force.
    public func isInboundDisrupted(now: MonotonicInstant) -> Bool {
        guard let deadline = inboundDisruptionDeadline() else { return false }
        return now >= deadline
    }

    /// Arrival instant of the baseline report (the first report carrying the value the peer is
    /// stuck at) while outbound media is disrupted: the last moment the peer was known to receive
    /// our stream. `nil` when outbound media is not disrupted.
    public var outboundStallStart: MonotonicInstant? {
        isOutboundDisrupted ? baselineAt : nil
    }
}
