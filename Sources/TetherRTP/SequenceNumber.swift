/// Wrap-aware arithmetic for 16-bit RTP sequence numbers (serial number arithmetic,
/// RFC 1982 with SERIAL_BITS = 16).
///
/// Two numbers exactly 32768 apart are ambiguous under RFC 1982; this type resolves the
/// ambiguity by treating the second as *older* (distance −32768).
public enum SequenceNumber {
    /// Signed distance in packets from `a` to `b`, in −32768...32767.
    /// Positive when `b` is newer than `a` (e.g. `distance(from: 65535, to: 0) == 1`).
    @inline(__always)
    public static func distance(from a: UInt16, to b: UInt16) -> Int {
        Int(Int16(bitPattern: b &- a))
    }

    /// True when `a` is newer (later in sending order) than `b`, accounting for wrap.
    @inline(__always)
    public static func isNewer(_ a: UInt16, than b: UInt16) -> Bool {
        distance(from: b, to: a) > 0
    }

    /// True when `a` is older (earlier in sending order) than `b`, accounting for wrap.
    @inline(__always)
    public static func isOlder(_ a: UInt16, than b: UInt16) -> Bool {
        distance(from: b, to: a) < 0
    }

    /// Returns whichever of `a` and `b` is newer, accounting for wrap.
    @inline(__always)
    public static func newer(_ a: UInt16, _ b: UInt16) -> UInt16 {
        isNewer(a, than: b) ? a : b
    }
}
