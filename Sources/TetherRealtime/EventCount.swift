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

    /// The window over which the consumer's time awake (working or spinning) is capped.
    public let spinWindowNanoseconds: UInt64
    /// Start of the current window, monotonic nanoseconds. Consumer only.
    @exclusivity(unchecked) private var windowStartNanoseconds: UInt64 = 0
    /// Time awake in the current window: between waits, and spinning in them. Consumer only.
    @exclusivity(unchecked) private var awakeInWindowNanoseconds: UInt64 = 0
    /// When the last wait returned (0: none yet). Consumer only.
    @exclusivity(unchecked) private var lastReturnNanoseconds: UInt64 = 0
    /// A `spin(…)` that ran out (or did not spin): when it began and its budget, so that the
    /// `wait` after it books the whole wait (start 0: none; budget 0: not for the average).
    /// Consumer only.
    @exclusivity(unchecked) private var pendingSpinStartNanoseconds: UInt64 = 0
    @exclusivity(unchecked) private var pendingSpinBudgetNanoseconds: UInt64 = 0
    /// Totals since creation. Consumer only.
    @exclusivity(unchecked) private var totals = ConsumerTimes()

    /// Where the consumer's waits went, since the event count was created.
    public struct ConsumerTimes: Sendable, Equatable {
        /// Time spent spinning (in waits that spun).
        public var spinningNanoseconds: UInt64 = 0
        /// Time spent asleep in the kernel.
        public var asleepNanoseconds: UInt64 = 0
        /// Waits that would have spun (short recent waits, a budget given) but slept because the
        /// window's awake time was used up.
        public var spinsRefusedForTheWindow = 0
        /// Waits in all.
        public var waits = 0
    }

    /// What `prepareToWait()` hands out: the state the wait sleeps on.
    public struct Ticket: Sendable, Equatable {
        fileprivate let value: UInt32
    }

    /// - Parameter spinWindowNanoseconds: the consumer spins only while its time awake (working
    ///   between waits, or spinning in them) stays under three quarters of each window of this
    ///   length (10 ms by default; a spin budget above three quarters of it never spins).
    public init(spinWindowNanoseconds: UInt64 = 10_000_000) {
        self.spinWindowNanoseconds = spinWindowNanoseconds
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit { word.deallocate() }

    /// Where the consumer's waits went.
    /// - Note: The consumer's thread, or another after the consumer has stopped (its figures are
    ///   plain fields: read only once a join or a lock ordered them).
    public var consumerTimes: ConsumerTimes { totals }

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
    ///
    /// Spinning is capped: the consumer spins only while its time awake in the current window
    /// (`spinWindowNanoseconds`; working between waits and spinning in them) plus this spin stays
    /// under three quarters of the window. A realtime (`SCHED_FIFO`) thread that never sleeps is
    /// stopped by the kernel for 50 ms of every second (`sched_rt_runtime_us`, 950 000 of
    /// 1 000 000 on Debian); a consumer fed faster than its spin budget would spin without end
    /// and be stopped with every call it serves. Capped, it sleeps for at least a quarter of each
    /// window it is not busy working.
    /// - Returns: `true` when signalled (at once if the signal came before the call), `false` on
    ///   time-out (the ticket is still good for another wait).
    /// - Note: Consumer thread only. No allocation, no lock; two clock reads, one more when it
    ///   sleeps and one every few hundred nanoseconds while it spins.
    @discardableResult
    public func wait(_ ticket: Ticket, untilMonotonicNanoseconds deadlineNanoseconds: UInt64, spinNanoseconds: UInt64 = 0) -> Bool {
        var ts = timespec(
            tv_sec: Int(deadlineNanoseconds / 1_000_000_000),
            tv_nsec: Int(deadlineNanoseconds % 1_000_000_000))
        let start = MonotonicClock.nanoseconds()
        countAwake(until: start)
        let decision = maySpin(spinNanoseconds, from: start, deadline: deadlineNanoseconds)
        let spin = decision == .spin ? spinNanoseconds : 0
        var asleepFrom: UInt64 = 0
        let signalled = CTetherSystem_eventcount_wait(word, ticket.value, &ts, spin, &asleepFrom) != 0
        let end = MonotonicClock.nanoseconds()
        let awake = asleepFrom == 0 ? end &- start : asleepFrom &- start
        if spin > 0 { totals.spinningNanoseconds &+= awake }
        if asleepFrom != 0 { totals.asleepNanoseconds &+= end &- asleepFrom }
        if pendingSpinStartNanoseconds != 0 {
            // This wait began with a spin on the consumer's input: the wait's length is from there.
            waited(from: pendingSpinStartNanoseconds, to: end, awake: awake, budget: pendingSpinBudgetNanoseconds)
            pendingSpinStartNanoseconds = 0
        } else {
            // A wait that slept only because the window was used up says nothing about how long
            // waits are (its wake-up latency would teach the average that they are long, and a
            // consumer fed just under its budget would never spin again).
            waited(from: start, to: end, awake: awake, budget: decision == .refusedForTheWindow ? 0 : spinNanoseconds)
        }
        return signalled
    }

    /// Consumer, before it takes a ticket: spins for up to `spinNanoseconds` (not past
    /// `deadlineNanoseconds`) until `ready()` is true, under `wait`'s rules (recent waits shorter
    /// than the budget, the window's cap on time awake). No ticket is out meanwhile, so the
    /// producers' signals cost them nothing: the consumer watches its input, not the event count.
    /// For a consumer of one ring, which it can look at as cheaply as at the count; the media
    /// worker, fed by many rings, spins in `wait` instead.
    /// - Returns: whether `ready()` became true. When false, the caller takes a ticket, looks
    ///   once more and waits (giving `wait` no spin budget: this was its spin).
    /// - Note: Consumer thread only. No allocation, no lock.
    public func spin(upToNanoseconds spinNanoseconds: UInt64, untilMonotonicNanoseconds deadlineNanoseconds: UInt64, until ready: () -> Bool) -> Bool {
        let start = MonotonicClock.nanoseconds()
        countAwake(until: start)
        pendingSpinStartNanoseconds = 0  // one left by a spin whose caller found work without waiting
        if ready() {
            // Nothing to wait for: a wait of no length (it teaches the average that waits are short).
            waited(from: start, to: start, awake: 0, budget: spinNanoseconds)
            return true
        }
        let decision = maySpin(spinNanoseconds, from: start, deadline: deadlineNanoseconds)
        guard decision == .spin else {
            // Not spinning is still the start of a wait whose length the average needs (unless
            // only the window's cap stopped it: see `wait`).
            pendingSpinStartNanoseconds = start
            pendingSpinBudgetNanoseconds = decision == .refusedForTheWindow ? 0 : spinNanoseconds
            lastReturnNanoseconds = start
            return false
        }
        var now = start
        var isReady = false
        while !isReady && now &- start < spinNanoseconds {
            CTetherSystem_relax()
            isReady = ready()
            if !isReady { now = MonotonicClock.nanoseconds() }
        }
        let end = MonotonicClock.nanoseconds()
        totals.spinningNanoseconds &+= end &- start
        // A spin that ended in work is a whole wait for the average; one that ran out is the
        // start of the `wait` that follows, which books the whole length from here.
        if isReady {
            waited(from: start, to: end, awake: end &- start, budget: spinNanoseconds)
        } else {
            awakeInWindowNanoseconds &+= end &- start
            lastReturnNanoseconds = end
            pendingSpinStartNanoseconds = start
            pendingSpinBudgetNanoseconds = spinNanoseconds
        }
        return isReady
    }

    /// Counts the consumer's time awake since its last wait against the window (a new window
    /// from `now` once the current one is over).
    private func countAwake(until now: UInt64) {
        if lastReturnNanoseconds != 0 { awakeInWindowNanoseconds &+= now &- lastReturnNanoseconds }
        lastReturnNanoseconds = 0
        if now &- windowStartNanoseconds >= spinWindowNanoseconds {
            // A new window: what was awake before it does not count against it.
            windowStartNanoseconds = now
            awakeInWindowNanoseconds = 0
        }
    }

    private enum SpinDecision { case spin, no, refusedForTheWindow }

    /// Whether a wait starting at `start` may spin for `budget`: its recent waits were shorter,
    /// the deadline is further, and the window's time awake allows it.
    private func maySpin(_ budget: UInt64, from start: UInt64, deadline: UInt64) -> SpinDecision {
        // Not past the deadline: a wait that ends sooner is a time-out, not a spin.
        guard budget > 0, typicalWaitNanoseconds < budget, deadline > start &+ budget else { return .no }
        guard awakeInWindowNanoseconds &+ budget <= spinWindowNanoseconds / 4 * 3 else {
            totals.spinsRefusedForTheWindow += 1
            return .refusedForTheWindow
        }
        return .spin
    }

    /// Books a finished wait: `awake` of it against the window, its length into the average of
    /// recent waits (only for callers that spin).
    private func waited(from start: UInt64, to end: UInt64, awake: UInt64, budget: UInt64) {
        awakeInWindowNanoseconds &+= awake
        totals.waits += 1
        lastReturnNanoseconds = end
        if budget > 0 {
            let length = min(end &- start, 4 * budget)
            typicalWaitNanoseconds = min(typicalWaitNanoseconds, 4 * budget) / 8 * 7 + length / 8
        }
    }
}
