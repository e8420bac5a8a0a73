/// A point on a monotonic clock, in nanoseconds since an arbitrary origin.
///
/// The sans-IO core never reads a clock: every input carries the caller's `now` as a
/// `MonotonicInstant`. All instants handed to one component must come from the same clock
/// (for example `TetherRealtime.MonotonicClock.nanoseconds()` in production, a manual clock in tests).
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the clock's origin.
    public var nanoseconds: UInt64

    /// The clock's origin (0 ns).
    public static let zero = MonotonicInstant(nanoseconds: 0)

    /// Creates an instant from nanoseconds since the clock's origin.
    public init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    /// Creates an instant from whole milliseconds since the clock's origin (saturating).
    public init(milliseconds: UInt64) {
        let (product, overflow) = milliseconds.multipliedReportingOverflow(by: 1_000_000)
        self.nanoseconds = overflow ? .max : product
    }

    /// This instant moved later by a duration in nanoseconds (saturating at `UInt64.max`).
    public func advanced(byNanoseconds duration: UInt64) -> MonotonicInstant {
        let (sum, overflow) = nanoseconds.addingReportingOverflow(duration)
        return MonotonicInstant(nanoseconds: overflow ? .max : sum)
    }

    /// This instant moved later by a duration in milliseconds (saturating).
    public func advanced(byMilliseconds duration: UInt64) -> MonotonicInstant {
        let (product, overflow) = duration.multipliedReportingOverflow(by: 1_000_000)
        return advanced(byNanoseconds: overflow ? .max : product)
    }

    /// This instant moved later by a non-negative duration in seconds, rounded to the nearest
    /// nanosecond (saturating).
    ///
    /// - Precondition: `duration` is finite and not negative.
    public func advanced(bySeconds duration: Double) -> MonotonicInstant {
        advanced(byNanoseconds: MonotonicInstant.nanoseconds(fromSeconds: duration))
    }

    /// The time from `earlier` to this instant in nanoseconds, or 0 if `earlier` is later.
    public func nanoseconds(since earlier: MonotonicInstant) -> UInt64 {
        nanoseconds >= earlier.nanoseconds ? nanoseconds - earlier.nanoseconds : 0
    }

    /// The time from `earlier` to this instant in seconds, or 0 if `earlier` is later.
    public func seconds(since earlier: MonotonicInstant) -> Double {
        Double(nanoseconds(since: earlier)) / 1_000_000_000
    }

    /// Converts a non-negative duration in seconds to nanoseconds, rounded to the nearest
    /// nanosecond and saturating at `UInt64.max`.
    ///
    /// - Precondition: `seconds` is finite and not negative.
    public static func nanoseconds(fromSeconds seconds: Double) -> UInt64 {
        precondition(seconds.isFinite && seconds >= 0, "a duration must be finite and not negative")
        let value = (seconds * 1_000_000_000).rounded()
        return value >= 18_446_744_073_709_551_615.0 ? .max : UInt64(value)
    }

    public static func < (lhs: MonotonicInstant, rhs: MonotonicInstant) -> Bool {
        lhs.nanoseconds < rhs.nanoseconds
    }

    /// The instant in seconds with nanosecond precision, for logs (for example `12.345000000 s`).
    public var description: String {
        let whole = nanoseconds / 1_000_000_000
        let fraction = String(nanoseconds % 1_000_000_000)
        return "\(whole).\(String(repeating: "0", count: 9 - fraction.count))\(fraction) s"
    }
}
