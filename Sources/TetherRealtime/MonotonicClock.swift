import Glibc

/// A monotonic clock in nanoseconds that a realtime thread can read: a C function pointer, so
/// calling it captures nothing, allocates nothing and touches no ARC-managed object.
///
/// Drivers that stamp or judge time on their threads (the ICE receive callback's arrival stamps,
/// a media worker's passes) take one, `MonotonicClock.system` by default, so a test can run them
/// on a clock it advances by hand (a global `Atomic<UInt64>` read by a capture-free closure).
public typealias MonotonicTimeSource = @convention(c) () -> UInt64

/// The monotonic clock drivers read. The sans-IO core never reads it: drivers pass `now` in.
public enum MonotonicClock {
    /// Nanoseconds since an arbitrary boot-time origin (CLOCK_MONOTONIC).
    /// - Note: Safe on device threads (vDSO, no allocation).
    @inline(__always)
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// `nanoseconds()` as a `MonotonicTimeSource`.
    public static let system: MonotonicTimeSource = { MonotonicClock.nanoseconds() }

    /// Wall-clock time in nanoseconds since the Unix epoch (for RTCP NTP timestamps only).
    public static func realtimeNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Sleeps until the monotonic instant `deadlineNanoseconds` (absolute, so periodic loops do not drift).
    public static func sleep(untilNanoseconds deadlineNanoseconds: UInt64) {
        var ts = timespec(
            tv_sec: Int(deadlineNanoseconds / 1_000_000_000),
            tv_nsec: Int(deadlineNanoseconds % 1_000_000_000))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
    }
}
