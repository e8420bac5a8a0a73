/// When to probe the media path with an ICE connectivity check of our own: after a short inbound
/// silence, and again at the same interval while it lasts.
///
/// A NAT that rebinds (its state flushed or expired) gives our packets a new external address;
/// the peer drops media from an address it never checked, and sends its own to the old mapping.
/// libnice checks a selected pair only every 25 s, far beyond the disruption threshold, so the
/// call would wait for a restart. A check sent at once from the new mapping lets the peer learn
/// and select it within a round trip (see `ICETransport.probePath()`). Probing is cheap (one
/// ~100-byte STUN request per interval) and changes nothing on a path that did not change.
///
/// Sans-IO like the rest of the core: the caller reports packet arrivals and asks at `now`.
public struct PathProbeSchedule: Sendable, Equatable {
    /// Silence before the first probe, and the interval between probes, in nanoseconds (0: off).
    public let intervalNanoseconds: UInt64
    /// The last inbound packet (RTP or RTCP), nil before the first.
    public private(set) var lastInboundPacket: MonotonicInstant?
    /// The last probe of the current silence, nil when none was sent since the last packet.
    public private(set) var lastProbe: MonotonicInstant?

    /// Creates a schedule probing after `silenceSeconds` of inbound silence and every
    /// `silenceSeconds` after (0 turns probing off).
    /// - Precondition: `silenceSeconds` is finite and not negative.
    public init(silenceSeconds: Double) {
        intervalNanoseconds = MonotonicInstant.nanoseconds(fromSeconds: silenceSeconds)
    }

    /// A packet from the peer arrived at `now`: the silence, if any, is over.
    public mutating func packetArrived(at now: MonotonicInstant) {
        if let last = lastInboundPacket, last > now { return }
        lastInboundPacket = now
        lastProbe = nil
    }

    /// When the next probe is due, or nil when none will be (off, no packet yet, or the peer
    /// is not supposed to send: its silence then says nothing about the path).
    public func nextProbe(peerSendsMedia: Bool) -> MonotonicInstant? {
        guard intervalNanoseconds > 0, peerSendsMedia, let last = lastInboundPacket else { return nil }
        return (lastProbe ?? last).advanced(byNanoseconds: intervalNanoseconds)
    }

    /// Whether to send a probe at `now`; a `true` answer counts as sent.
    public mutating func probeIfDue(now: MonotonicInstant, peerSendsMedia: Bool) -> Bool {
        guard let due = nextProbe(peerSendsMedia: peerSendsMedia), now >= due else { return false }
        lastProbe = now
        return true
    }
}
