import Synchronization
import TetherRealtime

/// Counters a device thread updates and control threads read.
///
/// Every access uses relaxed ordering: each counter is an independent tally read for reporting;
/// none of them publishes other memory (samples travel through the ring, whose own
/// acquire/release ordering covers them), so no ordering between counters is needed.
final class DeviceCounters: Sendable {
    let framesTransferred = Atomic<Int>(0)
    let overruns = Atomic<Int>(0)
    let underruns = Atomic<Int>(0)
    let resynchronizations = Atomic<Int>(0)
    /// `ThreadScheduling` of the device thread, encoded by `schedulingCode(_:)`.
    let scheduling = Atomic<Int>(0)
    /// Set by a source that played its whole content and will only produce silence from now on.
    let reachedEnd = Atomic<Bool>(false)
    /// First errno a device thread met (0: none); the thread stops retrying the failing call.
    let errorNumber = Atomic<Int32>(0)
    /// The device's own latency as it last reported it, in microseconds (−1: not reported):
    /// playback, from a sample handed to it until it sounds; capture, from a sample recorded
    /// until it is read.
    let latencyMicroseconds = Atomic<Int>(-1)

    func reset() {
        framesTransferred.store(0, ordering: .relaxed)
        overruns.store(0, ordering: .relaxed)
        underruns.store(0, ordering: .relaxed)
        resynchronizations.store(0, ordering: .relaxed)
        scheduling.store(0, ordering: .relaxed)
        reachedEnd.store(false, ordering: .relaxed)
        errorNumber.store(0, ordering: .relaxed)
        latencyMicroseconds.store(-1, ordering: .relaxed)
    }

    var snapshot: AudioDeviceStatistics {
        let latency = latencyMicroseconds.load(ordering: .relaxed)
        return AudioDeviceStatistics(
            framesTransferred: framesTransferred.load(ordering: .relaxed),
            overruns: overruns.load(ordering: .relaxed),
            underruns: underruns.load(ordering: .relaxed),
            resynchronizations: resynchronizations.load(ordering: .relaxed),
            scheduling: Self.scheduling(code: scheduling.load(ordering: .relaxed)),
            latencyMilliseconds: latency < 0 ? nil : Double(latency) / 1000)
    }

    static func schedulingCode(_ scheduling: ThreadScheduling) -> Int {
        switch scheduling {
        case .notStarted: 0
        case .realtimeFIFO: 1
        case .realtimeRoundRobin: 2
        case .normal: 3
        }
    }

    static func scheduling(code: Int) -> ThreadScheduling {
        switch code {
        case 1: .realtimeFIFO
        case 2: .realtimeRoundRobin
        case 3: .normal
        default: .notStarted
        }
    }
}

/// What the per-frame work of a device thread may touch: the ring, the wake-up and the counters,
/// held unretained so the loop does no reference counting. The device keeps the endpoint and the
/// counters alive (strongly) until the thread has been joined.
struct DeviceThreadIO: Sendable {
    let samplesPerFrame: Int
    private let ring: Unmanaged<SPSCRing<Int16>>
    private let wakeup: Unmanaged<EventCount>
    private let demand: Unmanaged<PlaybackDemand>
    private let counters: Unmanaged<DeviceCounters>

    init(endpoint: AudioEndpoint, counters: DeviceCounters) {
        samplesPerFrame = endpoint.format.samplesPerFrame
        ring = .passUnretained(endpoint.ring)
        wakeup = .passUnretained(endpoint.wakeup)
        demand = .passUnretained(endpoint.demand)
        self.counters = .passUnretained(counters)
    }

    /// Samples the ring holds for a playback device.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    var availableToRead: Int { ring._withUnsafeGuaranteedRef { $0.availableToRead } }

    /// Moves up to `count` samples from the ring to `destination` (a playback device that takes
    /// what it needs rather than whole frames); counts whole frames moved, carrying the rest in
    /// `residue`.
    /// - Returns: the samples moved (0 when the ring is empty).
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func pull(into destination: UnsafeMutablePointer<Int16>, count: Int, residue: inout Int) -> Int {
        let moved = ring._withUnsafeGuaranteedRef { $0.read(into: UnsafeMutableBufferPointer(start: destination, count: count)) }
        residue += moved
        if residue >= samplesPerFrame {
            let frames = residue / samplesPerFrame
            residue -= frames * samplesPerFrame
            counters._withUnsafeGuaranteedRef { _ = $0.framesTransferred.add(frames, ordering: .relaxed) }
        }
        return moved
    }

    /// Tells the media loop how many samples to keep queued in the ring (see `PlaybackDemand`).
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func setDemand(queuedSamples: Int) {
        demand._withUnsafeGuaranteedRef { $0.set(queuedSamples: queuedSamples) }
    }

    /// Counts one underrun: the device played `silenceSamples` of silence because the ring ran dry.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func countUnderrun(silenceSamples: Int) {
        counters._withUnsafeGuaranteedRef { _ = $0.underruns.add(1, ordering: .relaxed) }
        countSilence(samples: silenceSamples)
    }

    /// Counts silence the device played in the ring's place (`PlaybackDemand.silenceSamples`).
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func countSilence(samples: Int) {
        demand._withUnsafeGuaranteedRef { $0.add(silenceSamples: samples) }
    }

    /// Records the device's own latency as it reports it.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func recordLatency(microseconds: Int) {
        counters._withUnsafeGuaranteedRef { $0.latencyMicroseconds.store(max(0, microseconds), ordering: .relaxed) }
    }

    /// Writes the whole frame into the ring, or counts an overrun and drops it.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func pushFrame(_ frame: UnsafeBufferPointer<Int16>) {
        let written = ring._withUnsafeGuaranteedRef { $0.writeAll(frame) }
        counters._withUnsafeGuaranteedRef { counters in
            _ = written
                ? counters.framesTransferred.add(1, ordering: .relaxed)
                : counters.overruns.add(1, ordering: .relaxed)
        }
    }

    /// Fills `frame` from the ring, or fills it with silence and counts an underrun.
    /// - Returns: `true` when a frame came from the ring.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    @discardableResult
    func pullFrame(into frame: UnsafeMutableBufferPointer<Int16>) -> Bool {
        if ring._withUnsafeGuaranteedRef({ $0.readAll(into: frame) }) {
            counters._withUnsafeGuaranteedRef { _ = $0.framesTransferred.add(1, ordering: .relaxed) }
            return true
        }
        frame.update(repeating: 0)
        countUnderrun(silenceSamples: frame.count)
        return false
    }

    /// Drops one frame from the ring, or counts an underrun when less than a frame is there.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func discardFrame() {
        let ok = ring._withUnsafeGuaranteedRef { ring in
            ring.availableToRead >= samplesPerFrame && ring.discard(samplesPerFrame) == samplesPerFrame
        }
        if ok {
            counters._withUnsafeGuaranteedRef { _ = $0.framesTransferred.add(1, ordering: .relaxed) }
        } else {
            countUnderrun(silenceSamples: samplesPerFrame)
        }
    }

    /// Wakes the media loop.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func signal() {
        _ = wakeup._withUnsafeGuaranteedRef { $0.signal() }
    }

    /// Records that the source has played all its content.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func markReachedEnd() {
        counters._withUnsafeGuaranteedRef { $0.reachedEnd.store(true, ordering: .relaxed) }
    }

    /// Records the first error the device thread met.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func recordError(_ code: Int32) {
        counters._withUnsafeGuaranteedRef {
            _ = $0.errorNumber.compareExchange(expected: 0, desired: code, ordering: .relaxed)
        }
    }

    /// Records the scheduling of the thread that runs the device (a `schedulingCode`).
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func recordScheduling(_ code: Int) {
        counters._withUnsafeGuaranteedRef { $0.scheduling.store(code, ordering: .relaxed) }
    }

    /// Counts a resynchronization of the frame clock.
    /// - Note: Called on the device thread; must not allocate.
    @inline(__always)
    func countResynchronization() {
        counters._withUnsafeGuaranteedRef { _ = $0.resynchronizations.add(1, ordering: .relaxed) }
    }
}

/// The per-frame work of a clocked virtual device.
///
/// Conformers are value types holding only plain values and raw pointers to storage allocated
/// before the thread starts; they are `@unchecked Sendable` because the device thread owns that
/// storage while it runs and the control thread frees it (`finish`) only after joining.
protocol ClockedFrameWork: Sendable {
    /// Produces or consumes one frame.
    /// - Note: Called on the device thread; must not allocate.
    mutating func processFrame(_ io: DeviceThreadIO)
    /// Releases the storage and descriptors acquired at start. Called on the control thread after
    /// the device thread has ended.
    func finish(counters: DeviceCounters)
}

/// Start/stop bookkeeping shared by the clocked virtual devices: a slot on the process's shared
/// device clock, or one `RealtimeThread` per run, ticking once per frame duration on absolute
/// deadlines.
final class ClockedDeviceRunner: Sendable {
    /// A device thread that falls further behind than this many frames restarts its clock from the
    /// current instant (and counts a resynchronization) rather than bursting to catch up.
    static let resynchronizationThresholdFrames: UInt64 = 5
    /// SCHED_FIFO priority the device threads ask for.
    static let realtimePriority: Int32 = 10

    let counters = DeviceCounters()
    private let threadName: String
    private let running = Mutex<Running?>(nil)

    private struct Running: Sendable {
        var endpoint: AudioEndpoint
        var driver: Driver
    }

    /// What ticks the device: its own thread, or a slot on the process's shared clock.
    private enum Driver: Sendable {
        case ownThread(RealtimeThread, any ClockedFrameWork)
        case sharedClock(SharedDeviceClock, slot: Int, task: ClockedTask)
    }

    /// Whether the device ticks on the process's shared clock (`SharedDeviceClock`) rather than a
    /// thread of its own. Devices whose frame work may block (file writes) keep their own thread,
    /// so a slow disk never delays the other devices.
    private let sharesClock: Bool

    init(threadName: String, sharesClock: Bool = true) {
        self.threadName = threadName
        self.sharesClock = sharesClock
    }

    var statistics: AudioDeviceStatistics { counters.snapshot }

    /// Validates `endpoint`, prepares the work (allocations, files) and starts the thread.
    func start<Work: ClockedFrameWork>(
        deviceName: String, endpoint: AudioEndpoint,
        prepare: (AudioEndpoint) throws(AudioDeviceError) -> Work
    ) throws(AudioDeviceError) {
        try running.withLock { (running: inout Running?) throws(AudioDeviceError) in
            guard running == nil else { throw .alreadyStarted(name: deviceName) }
            try endpoint.validateForMonoDevice(named: deviceName)
            let format = endpoint.format
            let work = try prepare(endpoint)
            counters.reset()
            let io = DeviceThreadIO(endpoint: endpoint, counters: counters)
            if sharesClock {
                let clock = SharedDeviceClock.clock(periodNanoseconds: format.frameDurationNanoseconds)
                let task = ClockedWorkTask(work: work, io: io)
                if let slot = clock.register(task) {
                    running = Running(endpoint: endpoint, driver: .sharedClock(clock, slot: slot, task: task))
                    return
                }
                // The shared clock is full (or could not start): a thread of its own, as before.
            }
            let counters = Unmanaged.passUnretained(self.counters)
            let thread = RealtimeThread(name: threadName, realtimePriority: Self.realtimePriority)
            do throws(RealtimeThread.StartError) {
                try thread.start { thread in
                    counters._withUnsafeGuaranteedRef {
                        $0.scheduling.store(DeviceCounters.schedulingCode(thread.scheduling), ordering: .relaxed)
                    }
                    var work = work
                    Self.runClocked(
                        stopFlag: .passUnretained(thread), periodNanoseconds: format.frameDurationNanoseconds,
                        io: io, work: &work)
                }
            } catch {
                work.finish(counters: self.counters)
                throw .deviceThreadFailed(code: error.code)
            }
            running = Running(endpoint: endpoint, driver: .ownThread(thread, work))
        }
    }

    /// Stops and joins the thread, then releases the work's resources. Idempotent.
    func stop() {
        running.withLock { running in
            guard let current = running else { return }
            switch current.driver {
            case .ownThread(let thread, let work):
                thread.stop()
                work.finish(counters: counters)
            case .sharedClock(let clock, let slot, let task):
                clock.unregister(slot: slot)
                task.finish(counters: counters)
            }
            running = nil
        }
    }

    /// The device loop on a thread of its own (see `FrameDeadlines`).
    /// - Note: Called on the device thread; must not allocate.
    static func runClocked<Work: ClockedFrameWork>(
        stopFlag: Unmanaged<RealtimeThread>, periodNanoseconds: UInt64, io: DeviceThreadIO, work: inout Work
    ) {
        var clock = FrameDeadlines(periodNanoseconds: periodNanoseconds)
        while true {
            clock.sleepUntilNextFrame()
            if stopFlag._withUnsafeGuaranteedRef({ $0.isStopRequested }) { break }
            work.processFrame(io)
            if clock.resynchronizeIfLate() { io.countResynchronization() }
        }
    }
}

/// The frame clock of a virtual device: frame `n` after the epoch is due at `epoch + n × period`,
/// absolute deadlines computed from the frame count, so scheduling jitter never accumulates into
/// drift. A loop that ends a frame more than `resynchronizationThresholdFrames` late restarts
/// the clock from that instant rather than bursting to catch up.
struct FrameDeadlines {
    let periodNanoseconds: UInt64
    private let lateLimitNanoseconds: UInt64
    private var epochNanoseconds = MonotonicClock.nanoseconds()
    private var framesSinceEpoch: UInt64 = 0
    private var deadlineNanoseconds: UInt64 = 0

    init(periodNanoseconds: UInt64) {
        self.periodNanoseconds = periodNanoseconds
        lateLimitNanoseconds = ClockedDeviceRunner.resynchronizationThresholdFrames &* periodNanoseconds
    }

    /// Sleeps until the next frame is due. Never allocates.
    mutating func sleepUntilNextFrame() {
        framesSinceEpoch &+= 1
        deadlineNanoseconds = epochNanoseconds &+ framesSinceEpoch &* periodNanoseconds
        MonotonicClock.sleep(untilNanoseconds: deadlineNanoseconds)
    }

    /// After the frame's work: true (and the clock restarted from now) when it ended too late.
    mutating func resynchronizeIfLate() -> Bool {
        let now = MonotonicClock.nanoseconds()
        guard now > deadlineNanoseconds &+ lateLimitNanoseconds else { return false }
        epochNanoseconds = now
        framesSinceEpoch = 0
        return true
    }
}
