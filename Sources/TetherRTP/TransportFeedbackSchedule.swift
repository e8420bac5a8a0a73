/// When a receiver sends transport-cc feedback (sans-IO: `now` in monotonic nanoseconds).
///
/// One feedback per interval while the peer's packets keep coming, none while they do not. The
/// interval, as libwebrtc's, keeps the feedback near 5 % of what the peer sends (a feedback is
/// ~70 bytes on the wire): 100 ms at 90 kb/s and up, 350 ms at 10 kb/s, never over 500 ms.
/// It counts from the last feedback, not from the first packet after it: counted from the
/// packet, a 60 ms stream drew a feedback every packet or two — on a 24 kb/s link 8 a second,
/// a third of the link going back the other way, taken from our own media.
///
/// A value type; no allocation.
public struct TransportFeedbackSchedule: Sendable {
    /// When the last feedback left (nil: none yet).
    public private(set) var lastSent: UInt64?

    public init() {}

    /// The interval for a peer sending us `receivingBitsPerSecond`, nanoseconds.
    public static func interval(receivingBitsPerSecond: Int) -> UInt64 {
        let receiving = max(8_000.0, Double(max(0, receivingBitsPerSecond)) + 20_000)
        let seconds = min(0.5, max(0.1, 560 / (0.05 * receiving)))
        return UInt64(seconds * 1e9)
    }

    /// When the next feedback is due: an interval after the last one (at once before the first),
    /// or nil with nothing to report (the peer paused, holds, or its path is down) — no deadline
    /// then, as one left in the past would have the worker spin until the next packet.
    /// `unreported`: the peer's packets since the last feedback.
    public func due(unreported: Int, interval: UInt64) -> UInt64? {
        guard unreported > 0 else { return nil }
        return lastSent.map { $0 &+ interval } ?? 0
    }

    /// A feedback left at `now`.
    public mutating func sent(now: UInt64) {
        lastSent = now
    }
}
