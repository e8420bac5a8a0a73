import CTetherSystem
import Glibc

/// A counting wake-up between threads, built on a POSIX semaphore.
///
/// Producers (device threads, the GLib receive callback) call `signal()`, which never allocates,
/// locks or blocks (`sem_post` is async-signal-safe). The media loop waits on it with a deadline.
public final class Wakeup: @unchecked Sendable {
    private let semaphore: UnsafeMutablePointer<sem_t>

    public init() {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// Wakes the waiter.
    /// - Note: Safe on device threads: no allocation, no lock.
    @inline(__always)
    public func signal() {
        sem_post(semaphore)
    }

    /// Waits until signalled or until the monotonic instant `deadlineNanoseconds`.
    /// - Returns: `true` when signalled, `false` on time-out.
    @discardableResult
    public func wait(untilMonotonicNanoseconds deadlineNanoseconds: UInt64) -> Bool {
        var ts = timespec(
            tv_sec: Int(deadlineNanoseconds / 1_000_000_000),
            tv_nsec: Int(deadlineNanoseconds % 1_000_000_000))
        while true {
            if CTetherSystem_sem_wait_monotonic(semaphore, &ts) == 0 { return true }
            let e = errno
            if e == EINTR { continue }
            return false
        }
    }
}
