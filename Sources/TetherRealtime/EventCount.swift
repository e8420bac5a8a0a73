import CTetherSystem
import Glibc

/// The media path's wake-up: an event count. Producers (device threads, the GLib receive
/// callback) publish their data and `signal()`; that costs them a system call only when the
/// consumer is asleep or about to be, so a consumer already at work is not woken again for every
/// message of a burst (a semaphore posted on every message made the ring hand-off no faster than
/// a mutex queue).
///
/// The consumer, one thread, never misses a signal by following the order: take a ticket
/// (`prepareToWait()`), look at every ring once more, and sleep on the ticket (`wait(_:until…)`)
/// only if nothing was there. A signal after the ticket was taken ends that wait at once.
public final class EventCount: @unchecked Sendable {
    /// Bit 0: a ticket is out (the consumer may sleep); bits 1…: the epoch, advanced by each
    /// signal that found a ticket out.
    private let word: UnsafeMutablePointer<UInt32>

    /// What `prepareToWait()` hands out: the state the wait sleeps on.
    public struct Ticket: Sendable, Equatable {
        fileprivate let value: UInt32
    }

    public init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit { word.deallocate() }

    /// Wakes the consumer if it holds a ticket.
    /// - Returns: whether a wake-up was sent (false: nobody was waiting, no system call made).
    /// - Note: Safe on device threads: no allocation, no lock, at most one `futex` wake.
    @inline(__always) @discardableResult
    public func signal() -> Bool {
        CTetherSystem_eventcount_signal(word) != 0
    }

    /// Consumer: announces that it is about to look for work a last time and then sleep.
    @inline(__always)
    public func prepareToWait() -> Ticket {
        Ticket(value: CTetherSystem_eventcount_prepare(word))
    }

    /// Consumer: sleeps until a signal that came after `ticket` was taken, or until the monotonic
    /// instant `deadlineNanoseconds`.
    /// - Returns: `true` when signalled (at once if the signal came before the call), `false` on time-out.
    @discardableResult
    public func wait(_ ticket: Ticket, untilMonotonicNanoseconds deadlineNanoseconds: UInt64) -> Bool {
        var ts = timespec(
            tv_sec: Int(deadlineNanoseconds / 1_000_000_000),
            tv_nsec: Int(deadlineNanoseconds % 1_000_000_000))
        return CTetherSystem_eventcount_wait(word, ticket.value, &ts) != 0
    }
}
