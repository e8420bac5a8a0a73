import CTetherSystem
import Glibc

/// The media path's wake-up: an event count. Producers (device threads, the GLib receive
/// callback) publish their data and `signal()`; that costs them a system call only when the
/// consumer is asleep or about to be, so a consumer already at work is not woken again for every
/// message of a burst (a semaphore posted on every message made the ring hand-off no faster than
/// a mutex queue).
///
/// The consumer, one thread, never misses a signal by following the order: take a ticket
/// (`prepareToWait()`), look at every ring once more, and wait on the ticket (`wait(_:until…)`)
/// only if nothing was there. A signal after the ticket was taken ends that wait at once. The
/// wait may spin a little before it sleeps: a signal that comes while it spins costs the producer
/// no system call and the consumer no wake-up (the state tells a spinning consumer from a
/// sleeping one).
public final class EventCount: @unchecked Sendable {
    /// The longest the media path's consumer (the media worker) spins before it sleeps, in
    /// nanoseconds: a producer that signals within it costs neither side a system call. It
    /// spins only while its waits have lately been shorter than that (see `wait`).
    public static let mediaSpinNanoseconds: UInt64 = 100_000

    /// Bit 0: a ticket is out (the consumer may sleep); bit 1: it is asleep (or about to be);
    /// bits 2…: the epoch, advanced by each signal that found a ticket out.
    private let word: UnsafeMutablePointer<UInt32>
    /// The consumer's recent waits, a moving average (each weighs 1/8) of their lengths capped at
    /// four spin budgets, in nanoseconds. Consumer only.
    @exclusivity(unchecked) private var typicalWaitNanoseconds: UInt64 = .max / 16

    /// What `prepareToWait()` hands out: the state the wait sleeps on.
    public struct Ticket: Sendable, Equatable {
        fileprivate let value: UInt32
    }

    public init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit { word.deallocate() }

    /// Ends the consumer's wait if it holds a ticket.
    /// - Returns: whether a wake-up was sent (false: nobody was waiting, or the consumer was
    ///   still spinning; no system call made).
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

    /// Consumer: waits until a signal that came after `ticket` was taken, or until the monotonic
    /// instant `deadlineNanoseconds`: asleep, or first spinning for up to `spinNanoseconds` when
    /// the consumer's recent waits (a moving average) were shorter than that — a consumer fed
    /// every 20 ms never spins, one fed every few tens of microseconds does. A signal that finds
    /// the consumer spinning ends the wait with no system call on either side and no wake-up
    /// latency; one that finds it asleep makes one `futex` wake.
    /// - Returns: `true` when signalled (at once if the signal came before the call), `false` on
    ///   time-out (the ticket is still good for another wait).
    @discardableResult
    public func wait(_ ticket: Ticket, untilMonotonicNanoseconds deadlineNanoseconds: UInt64, spinNanoseconds: UInt64 = 0) -> Bool {
        var ts = timespec(
            tv_sec: Int(deadlineNanoseconds / 1_000_000_000),
            tv_nsec: Int(deadlineNanoseconds % 1_000_000_000))
        guard spinNanoseconds > 0 else { return CTetherSystem_eventcount_wait(word, ticket.value, &ts, 0) != 0 }
        let start = MonotonicClock.nanoseconds()
        // Not past the deadline: a wait that ends sooner is a time-out, not a spin.
        let spin = typicalWaitNanoseconds < spinNanoseconds && deadlineNanoseconds > start &+ spinNanoseconds ? spinNanoseconds : 0
        let signalled = CTetherSystem_eventcount_wait(word, ticket.value, &ts, spin) != 0
        let waited = min(MonotonicClock.nanoseconds() &- start, 4 * spinNanoseconds)
        typicalWaitNanoseconds = min(typicalWaitNanoseconds, 4 * spinNanoseconds) / 8 * 7 + waited / 8
        return signalled
    }
}
