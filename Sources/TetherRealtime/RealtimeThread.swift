import CTetherSystem
import Glibc
import Synchronization

/// The scheduling a thread actually got.
public enum ThreadScheduling: String, Sendable, Equatable {
    /// SCHED_FIFO was granted.
    case realtimeFIFO = "SCHED_FIFO"
    /// SCHED_RR was granted.
    case realtimeRoundRobin = "SCHED_RR"
    /// The system refused realtime scheduling; the thread runs under SCHED_OTHER.
    case normal = "SCHED_OTHER"
    /// The thread has not started yet.
    case notStarted = "not started"
}

/// A dedicated thread for device and media loops, asking for realtime scheduling and falling back
/// quietly when the system refuses.
///
/// The body is called once on the new thread and receives a stop flag to poll; `stop()` sets it
/// and joins. The thread is created (and its closure allocated) at start, never in the loop.
public final class RealtimeThread: @unchecked Sendable {
    /// Why a thread could not be created.
    public struct StartError: Error, CustomStringConvertible {
        /// The `pthread_create` result (an errno value).
        public let code: Int32
        public var description: String { "pthread_create failed: \(String(cString: strerror(code)))" }
    }

    /// Set by `stop()`; the body polls it. Release/acquire, so that what the stopper wrote before
    /// `stop()` (for example "send a BYE on the way out") is visible to the loop once it sees the flag.
    private let stopRequested = Atomic<Bool>(false)
    private let granted = Atomic<Int>(0)
    private var handle: pthread_t?
    private let name: String
    private let realtimePriority: Int32
    private var body: (@Sendable (RealtimeThread) -> Void)?
    /// `startIfNeeded`'s progress: 0 not started, 1 a caller is creating the thread, 2 started.
    /// Acquire/release: a caller that sees 2 sees the started thread's state. (Atomics rather than
    /// a `Mutex`: under contention the thread sanitizer reported a race inside `Mutex.withLock`,
    /// whose waits it does not see.)
    private let startOnDemand = Atomic<Int>(0)

    /// - Parameters:
    ///   - name: thread name shown by tools (truncated to 15 bytes).
    ///   - realtimePriority: SCHED_FIFO priority to ask for (1...99); 0 asks for none.
    public init(name: String, realtimePriority: Int32 = 10) {
        self.name = name
        self.realtimePriority = realtimePriority
    }

    /// True once `stop()` was called. Cheap to poll from the loop: one acquiring atomic load.
    @inline(__always)
    public var isStopRequested: Bool { stopRequested.load(ordering: .acquiring) }

    /// The scheduling the thread got.
    public var scheduling: ThreadScheduling {
        switch granted.load(ordering: .acquiring) {
        case 1: .realtimeFIFO
        case 2: .realtimeRoundRobin
        case 3: .normal
        default: .notStarted
        }
    }

    /// Starts the thread running `body`.
    public func start(_ body: @escaping @Sendable (RealtimeThread) -> Void) throws(StartError) {
        precondition(handle == nil, "RealtimeThread started twice")
        self.body = body
        let unmanaged = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let me = Unmanaged<RealtimeThread>.fromOpaque(raw!).takeRetainedValue()
                me.run()
                return nil
            }, unmanaged.toOpaque())
        if rc != 0 {
            unmanaged.release()
            throw StartError(code: rc)
        }
        handle = thread
    }

    /// Starts the thread unless an earlier call did: for a service thread that whichever of
    /// several callers comes first starts. Safe to call from any thread, unlike `start`.
    /// A caller that comes while another creates the thread yields until it is done (a
    /// `pthread_create`), and tries again itself if that one failed.
    public func startIfNeeded(_ body: @escaping @Sendable (RealtimeThread) -> Void) throws(StartError) {
        while true {
            switch startOnDemand.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing) {
            case (true, _):
                do throws(StartError) {
                    try start(body)
                } catch {
                    startOnDemand.store(0, ordering: .releasing)
                    throw error
                }
                startOnDemand.store(2, ordering: .releasing)
                return
            case (false, 2):
                return
            default:
                sched_yield()
            }
        }
    }

    private func run() {
        _ = CTetherSystem_set_thread_name(name)
        var result = 3
        if realtimePriority > 0 {
            var param = sched_param(sched_priority: realtimePriority)
            if pthread_setschedparam(pthread_self(), Int32(SCHED_FIFO), &param) == 0 {
                result = 1
            } else if pthread_setschedparam(pthread_self(), Int32(SCHED_RR), &param) == 0 {
                result = 2
            }
        }
        // Release: readers of `scheduling` see the final value.
        granted.store(result, ordering: .releasing)
        body?(self)
        body = nil
    }

    /// Asks the loop to stop and waits for the thread to end. Idempotent.
    /// - Note: Must not be called from the thread itself.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        join()
    }

    /// Waits for the thread to end without asking it to stop.
    public func join() {
        if let h = handle {
            handle = nil
            pthread_join(h, nil)
        }
    }
}
