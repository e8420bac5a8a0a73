import Glibc
import Synchronization
import TetherRealtime

/// The threads that run media loops: one per core, each serving the loops of many calls.
///
/// A thread per call woke for every captured frame, every played frame and every datagram, and
/// with tens of calls in a process those context switches cost more than the sessions' own work
/// outside Opus. A worker serves its loops in one pass per wake-up: the devices and transports of
/// all its calls signal the worker's one `Wakeup`, and signals that come together (the shared
/// device clock's tick for every call at once, a burst of datagrams) are drained into one pass.
///
/// A call is assigned to the worker with the fewest calls when its session is created
/// (`lease()`), so the workers' loads stay even; workers start on first use and then live for
/// the process, asleep while they have no loop. Adding and removing loops never makes a worker
/// lock or allocate (`ServiceSlots`).
final class MediaWorker: @unchecked Sendable {
    /// SCHED_FIFO priority of the worker threads (below the device clock, above GLib).
    static let realtimePriority: Int32 = 20
    /// Loops one worker can serve.
    static let capacity = 1024

    /// One worker per online core (at least one, at most 16).
    static let workers: [MediaWorker] = {
        let cores = max(1, min(16, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
        return (0..<cores).map { _ in MediaWorker() }
    }()

    /// A session's claim on a worker; the worker counts it until the lease is released.
    final class Lease: Sendable {
        let worker: MediaWorker
        fileprivate init(_ worker: MediaWorker) { self.worker = worker }
        deinit { worker.leases.subtract(1, ordering: .relaxed) }
    }

    /// The worker with the fewest sessions, for a new session.
    static func lease() -> Lease {
        let worker = assignment.withLock { _ in
            let w = workers.min { $0.leases.load(ordering: .relaxed) < $1.leases.load(ordering: .relaxed) }!
            w.leases.add(1, ordering: .relaxed)
            return w
        }
        return Lease(worker)
    }

    /// Serialises `lease()` so two sessions created together do not both pick the same worker.
    private static let assignment = Mutex<Void>(())

    /// Signalled by every producer of every loop this worker serves; it costs them a system call
    /// only while the worker waits or is about to (an event count).
    let wakeup = EventCount()
    /// Taken before each pass reads the loops' rings: a signal during the pass ends the wait
    /// that follows it at once. Worker thread (or the driving caller) only.
    private var ticket: EventCount.Ticket
    /// Sessions assigned here (relaxed: a load-balancing hint).
    fileprivate let leases = Atomic<Int>(0)
    private let slots = ServiceSlots<MediaLoop>(capacity: MediaWorker.capacity)
    private let thread = RealtimeThread(name: "tether-media", realtimePriority: MediaWorker.realtimePriority)
    /// No thread: whoever created the worker runs its passes (`serviceOnce`), on its own thread.
    private let driven: Bool
    /// The `now` each pass gives its loops.
    private let clock: MonotonicTimeSource

    /// - Parameters:
    ///   - driven: for tests: the worker starts no thread; the caller runs its passes with
    ///     `serviceOnce(waitingUntil:)` (removing a loop runs them too).
    ///   - clock: the `now` of every pass (for tests: a clock the test advances, the same one
    ///     that stamps the arrivals of the loops' datagrams).
    init(driven: Bool = false, clock: MonotonicTimeSource = MonotonicClock.system) {
        self.driven = driven
        self.clock = clock
        ticket = wakeup.prepareToWait()
    }

    /// The scheduling the worker thread got.
    var scheduling: ThreadScheduling { thread.scheduling }

    /// Why a loop could not be put on a worker.
    enum StartError: Error, CustomStringConvertible {
        /// The worker thread could not be created.
        case threadFailed(RealtimeThread.StartError)
        /// The worker already serves `capacity` loops.
        case full(capacity: Int)

        var description: String {
            switch self {
            case .threadFailed(let error): "media worker thread: \(error)"
            case .full(let capacity): "the media worker already serves \(capacity) calls"
            }
        }
    }

    /// Starts serving `loop` (its first pass follows at once).
    /// - Returns: the loop's slot, for `unregister(slot:)`.
    func register(_ loop: MediaLoop) throws(StartError) -> Int {
        if !driven {
            do throws(RealtimeThread.StartError) {
                try thread.startIfNeeded { _ in self.run() }  // workers live for the process
            } catch {
                throw .threadFailed(error)
            }
        }
        guard let slot = slots.insert(loop) else { throw .full(capacity: Self.capacity) }
        wakeup.signal()
        return slot
    }

    /// Stops serving the loop in `slot`: the worker gives it a last pass (`finishOnWorker()`), and
    /// on return never touches it again.
    /// - Note: Never from the worker thread.
    func unregister(slot: Int) {
        slots.remove(slot: slot) {
            if driven { serviceOnce(waitingUntil: 0) } else { wakeup.signal() }
        }
    }

    /// The worker thread: waits for a signal or the earliest deadline of its loops, then gives
    /// every loop one pass.
    /// - Note: Must not allocate, lock or log.
    private func run() {
        var deadline = MonotonicClock.nanoseconds()
        while true { deadline = serviceOnce(waitingUntil: deadline) }
    }

    /// Waits for a signal or until `waitDeadline`, then gives every loop one pass.
    /// - Returns: the earliest instant a loop must run by.
    /// - Note: Worker thread (or, for a driven worker, the caller's). Must not allocate, lock or log.
    @discardableResult
    func serviceOnce(waitingUntil waitDeadline: UInt64) -> UInt64 {
        wakeup.wait(ticket, untilMonotonicNanoseconds: waitDeadline, spinNanoseconds: EventCount.mediaSpinNanoseconds)
        // Signals that come together are served by this one pass: the ticket is taken before any
        // ring is read, so a signal that arrives after this point ends the next wait at once, and
        // producers do not wake the worker again until then.
        ticket = wakeup.prepareToWait()
        var next = clock() + 1_000_000_000
        // Playout first for every loop (decoding is cheap), then the encodes: the last loop's
        // playback device gets its frame as soon as the first one's.
        slots.visit(
            active: { loop in loop.receiveAndPlay(now: clock()) },
            last: { loop in loop.finishOnWorker() })
        slots.visit(
            active: { loop in
                let now = clock()
                loop.sendAndReport(now: now)
                next = min(next, loop.nextDeadline(now: now))
            },
            last: { loop in loop.finishOnWorker() })
        return next
    }
}
