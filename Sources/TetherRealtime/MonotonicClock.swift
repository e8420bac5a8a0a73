import Glibc

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
