import Synchronization
import TetherRealtime

/// One device's per-frame work as the shared clock sees it: a class, so the clock thread calls it
/// through an unretained reference (no reference counting, no existential boxes).
class ClockedTask: @unchecked Sendable {
    let io: DeviceThreadIO

    init(io: DeviceThreadIO) {
        self.io = io
    }

    /// Produces or consumes one frame. Clock thread only; must not allocate.
    func tick() {}

    /// Releases the work's resources. Control thread, after the clock has let go of the task.
    func finish(counters: DeviceCounters) {}
}

/// `ClockedTask` for a concrete `ClockedFrameWork`.
final class ClockedWorkTask<Work: ClockedFrameWork>: ClockedTask, @unchecked Sendable {
    /// Mutated by the clock thread only, while the task is registered.
    private var work: Work

    init(work: Work, io: DeviceThreadIO) {
        self.work = work
        super.init(io: io)
    }

    override func tick() { work.processFrame(io) }

    override func finish(counters: DeviceCounters) { work.finish(counters: counters) }
}

/// One thread that ticks every clocked virtual device of the same frame period in the process.
///
/// A device thread per virtual device costs two wake-ups per frame for every call (capture and
/// playback), and each wake-up is a context switch: with tens of calls in a process those
/// dominated the kernel's share of the CPU. Virtual devices have no hardware clock of their own,
/// so they can all tick together: frame `n` of every registered device is processed at
/// `epoch + n × period`, on one thread, in slot order.
///
/// Adding and removing devices never makes the clock thread lock or allocate (`ServiceSlots`).
/// The thread starts with the first device and lives for the rest of the process, asleep while no
/// device is registered. It runs above the media threads' priority: it stands for the sound card,
/// and a media thread woken by a device must not preempt the clock before the other devices of
/// the same tick have run (that preemption cost a context switch per device).
final class SharedDeviceClock: @unchecked Sendable {
    /// Devices one clock can hold; further devices get a thread of their own.
    static let capacity = 1024
    /// SCHED_FIFO priority of the clock thread (media threads ask for 20).
    static let realtimePriority: Int32 = 30

    /// The clock for a frame period, created on first use.
    static func clock(periodNanoseconds: UInt64) -> SharedDeviceClock {
        clocks.withLock { clocks in
            if let clock = clocks[periodNanoseconds] { return clock }
            let clock = SharedDeviceClock(periodNanoseconds: periodNanoseconds)
            clocks[periodNanoseconds] = clock
            return clock
        }
    }

    private static let clocks = Mutex<[UInt64: SharedDeviceClock]>([:])

    let periodNanoseconds: UInt64
    private let slots = ServiceSlots<ClockedTask>(capacity: SharedDeviceClock.capacity)
    /// Wakes the clock thread from idle when a device registers.
    private let wakeup = Wakeup()
    private let thread = RealtimeThread(name: "tether-devclock", realtimePriority: SharedDeviceClock.realtimePriority)

    private init(periodNanoseconds: UInt64) {
        self.periodNanoseconds = periodNanoseconds
    }

    /// A slot the task now occupies, or nil when the clock is full or its thread cannot start.
    /// The task's first frame is processed at the clock's next tick (within one period).
    func register(_ task: ClockedTask) -> Int? {
        do throws(RealtimeThread.StartError) {
            try thread.startIfNeeded { _ in self.run() }  // the clocks live for the process
        } catch {
            return nil
        }
        guard let slot = slots.insert(task) else { return nil }
        wakeup.signal()
        return slot
    }

    /// Removes the task in `slot`; on return the clock thread no longer touches it.
    func unregister(slot: Int) {
        slots.remove(slot: slot, nudge: {})
    }

    /// The clock thread: idle while nothing is registered, otherwise one tick per period on
    /// absolute deadlines (a late tick never accumulates into drift).
    /// - Note: Must not allocate, lock or log.
    private func run() {
        let schedulingCode = DeviceCounters.schedulingCode(thread.scheduling)
        while true {
            if slots.count == 0 {
                wakeup.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 1_000_000_000)
                continue
            }
            var clock = FrameDeadlines(periodNanoseconds: periodNanoseconds)
            while slots.count > 0 {
                clock.sleepUntilNextFrame()
                slots.visit(
                    active: { task in
                        task.io.recordScheduling(schedulingCode)
                        task.tick()
                    },
                    last: { _ in })
                if clock.resynchronizeIfLate() {
                    // Rare (the clock thread was held off for five periods): every device lost
                    // the same frames.
                    slots.visit(active: { $0.io.countResynchronization() }, last: { _ in })
                }
            }
        }
    }
}
