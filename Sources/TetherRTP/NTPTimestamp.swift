/// A 64-bit NTP timestamp (RFC 5905 format: 32-bit seconds since 1900-01-01 00:00 UTC,
/// 32-bit binary fraction of a second), plus the RTCP-specific conversions of
/// RFC 3550 §6.4.1.
///
/// Seconds wrap every 2^32 s (NTP era); conversions to Unix time resolve the era using
/// the RFC 4330 §3 convention (seconds with the top bit clear are in era 1, i.e. 2036+).
public struct NTPTimestamp: Sendable, Equatable, Hashable, Comparable {
    /// Seconds between the NTP epoch (1900) and the Unix epoch (1970).
    public static let unixEpochOffsetSeconds: Int64 = 2_208_988_800
    private static let nanosecondsPerSecond: Int64 = 1_000_000_000

    /// The raw 64-bit value: seconds in the high 32 bits, fraction in the low 32 bits.
    public var rawValue: UInt64

    /// Wraps a raw 64-bit NTP timestamp.
    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    /// Builds a timestamp from whole seconds since 1900 (mod 2^32) and a fraction in
    /// units of 1/2^32 s.
    public init(seconds: UInt32, fraction: UInt32) {
        self.rawValue = UInt64(seconds) << 32 | UInt64(fraction)
    }

    /// Converts a wall-clock Unix time, in nanoseconds since 1970-01-01 UTC, to NTP.
    /// The fraction is truncated (not rounded) to 1/2^32 s.
    public init(unixNanoseconds: Int64) {
        var wholeSeconds = unixNanoseconds / NTPTimestamp.nanosecondsPerSecond
        var remainderNanoseconds = unixNanoseconds % NTPTimestamp.nanosecondsPerSecond
        if remainderNanoseconds < 0 {
            wholeSeconds -= 1
            remainderNanoseconds += NTPTimestamp.nanosecondsPerSecond
        }
        let ntpSeconds = UInt32(truncatingIfNeeded: wholeSeconds &+ NTPTimestamp.unixEpochOffsetSeconds)
        // remainder < 1e9 < 2^30, so remainder << 32 < 2^62 fits.
        let fraction = UInt32((UInt64(remainderNanoseconds) << 32) / UInt64(NTPTimestamp.nanosecondsPerSecond))
        self.init(seconds: ntpSeconds, fraction: fraction)
    }

    /// Whole seconds since 1900 (mod 2^32).
    public var seconds: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 32) }

    /// Fraction of a second in units of 1/2^32 s.
    public var fraction: UInt32 { UInt32(truncatingIfNeeded: rawValue) }

    /// The middle 32 bits (16.16 fixed-point seconds) used by RTCP LSR and for RTT.
    public var middle32: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 16) }

    /// The Unix time in nanoseconds this timestamp denotes (fraction truncated to ns),
    /// resolving the NTP era per RFC 4330 §3 (1968...2104).
    public var unixNanoseconds: Int64 {
        var ntpSeconds = Int64(seconds)
        if seconds & 0x8000_0000 == 0 {
            ntpSeconds += 1 << 32  // era 1 (from 2036-02-07)
        }
        let unixSeconds = ntpSeconds - NTPTimestamp.unixEpochOffsetSeconds
        let fractionNanoseconds = Int64((UInt64(fraction) * UInt64(NTPTimestamp.nanosecondsPerSecond)) >> 32)
        return unixSeconds * NTPTimestamp.nanosecondsPerSecond + fractionNanoseconds
    }

    public static func < (lhs: NTPTimestamp, rhs: NTPTimestamp) -> Bool {
        lhs.rawValue < rhs.rawValue
    }

    /// Middle 32 bits of a raw 64-bit NTP timestamp.
    public static func middle32(of ntpTimestamp: UInt64) -> UInt32 {
        UInt32(truncatingIfNeeded: ntpTimestamp >> 16)
    }

    /// Converts a duration in nanoseconds to RTCP DLSR units (1/65536 s), truncating.
    /// Negative durations give 0; durations beyond the field (~65536 s) saturate.
    public static func delaySinceLastSenderReport(nanoseconds: Int64) -> UInt32 {
        guard nanoseconds > 0 else { return 0 }
        let wholeSeconds = nanoseconds / nanosecondsPerSecond
        guard wholeSeconds < 65_536 else { return UInt32.max }
        let remainder = nanoseconds % nanosecondsPerSecond
        let units = (wholeSeconds << 16) + (remainder << 16) / nanosecondsPerSecond
        return UInt32(units)
    }

    /// Round-trip time in seconds from a reception report (RFC 3550 §6.4.1):
    /// RTT = A − LSR − DLSR, all in 1/65536 s, computed modulo 2^32.
    /// - Parameters:
    ///   - arrivalNTPMiddle32: middle 32 bits of the NTP time at which the report block
    ///     arrived (A).
    ///   - lastSenderReport: the block's LSR field.
    ///   - delaySinceLastSenderReport: the block's DLSR field (1/65536 s).
    /// - Returns: RTT in seconds, or nil when LSR is 0 (no SR received yet) or the
    ///   result would be negative (clock skew or a bogus report).
    public static func roundTripTime(
        arrivalNTPMiddle32: UInt32,
        lastSenderReport: UInt32,
        delaySinceLastSenderReport: UInt32
    ) -> Double? {
        guard lastSenderReport != 0 else { return nil }
        let sinceLastSenderReport = arrivalNTPMiddle32 &- lastSenderReport
        // A wrapped (huge) elapsed value means the arrival precedes LSR.
        guard sinceLastSenderReport < 0x8000_0000,
              delaySinceLastSenderReport <= sinceLastSenderReport else { return nil }
        return Double(sinceLastSenderReport - delaySinceLastSenderReport) / 65_536.0
    }
}
