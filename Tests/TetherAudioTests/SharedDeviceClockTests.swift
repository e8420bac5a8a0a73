import CAllocationCounter
import Foundation
import Synchronization
import Testing
import TetherRealtime

@testable import TetherAudio

/// A task on the shared clock that counts every allocation the clock thread makes over 100
/// ticks (its own and every other device's): the counter is per thread, and this runs on it.
private final class AllocationProbe: ClockedTask, @unchecked Sendable {
    private var ticks = 0
    let allocations = Atomic<Int>(-1)
    let done = Wakeup()

    override func tick() {
        ticks += 1
        if ticks == 10 { CAllocationCounter_begin() }  // after the other devices' first frames
        if ticks == 110 {
            allocations.store(CAllocationCounter_end(), ordering: .releasing)
            done.signal()
        }
    }
}

/// A task that holds the clock thread for ten periods on its third tick, then notes when its
/// next ticks come.
private final class StallProbe: ClockedTask, @unchecked Sendable {
    private var ticks = 0
    /// Arrival of every tick from the fourth (the first after the stall) to the twentieth.
    let stamps = Mutex<[UInt64]>([])
    let done = Wakeup()

    override func tick() {
        ticks += 1
        if ticks == 3 { usleep(200_000) }
        if ticks >= 4 && ticks <= 20 {
            let now = MonotonicClock.nanoseconds()
            stamps.withLock { $0.append(now) }
        }
        if ticks == 20 { done.signal() }
    }
}

/// Serialized: the tests share one clock thread (one per period), and the stall test's probe
/// allocates on it (its stamps), which the allocation test counted when the two ran at once.
@Suite("Shared device clock", .serialized)
struct SharedDeviceClockTests {
    private func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
    }

    @Test("forty virtual devices tick on one shared thread, each at real-time pace, and stop at once")
    func manyDevicesShareOneThread() throws {
        let threadsBefore = threadCount()
        var sources: [(TestSignalSource, AudioEndpoint)] = []
        var sinks: [(DiscardSink, AudioEndpoint)] = []
        for i in 0..<20 {
            let source = TestSignalSource(frequencyHertz: 300 + Double(i))
            let sourceEndpoint = AudioEndpoint(ringCapacityFrames: 64)
            try source.start(sourceEndpoint)
            sources.append((source, sourceEndpoint))
            let sink = DiscardSink()
            let sinkEndpoint = AudioEndpoint()
            try sink.start(sinkEndpoint)
            sinks.append((sink, sinkEndpoint))
        }
        // Not a thread per device (that was 40): the shared clock's one at most, plus slack for
        // threads other tests running alongside may start.
        #expect(threadCount() - threadsBefore <= 3)
        let before = sources.map { $0.1.ring.availableToRead / 960 }
        usleep(500_000)
        let after = sources.map { $0.1.ring.availableToRead / 960 }
        for (frames, source) in zip(zip(before, after).map { $1 - $0 }, sources) {
            // 25 frames in 0.5 s, with a generous margin for a loaded machine.
            #expect(frames >= 12 && frames <= 34)
            #expect(source.0.statistics.scheduling != .notStarted)
        }
        for (source, endpoint) in sources {
            source.stop()
            #expect(source.statistics.framesTransferred == endpoint.ring.availableToRead / 960)
        }
        for (sink, _) in sinks {
            sink.stop()
            #expect(sink.statistics.underruns >= 12)
        }
        // Stopped devices are left alone: nothing more reaches their rings.
        let levels = sources.map { $0.1.ring.availableToRead }
        usleep(60_000)
        #expect(sources.map { $0.1.ring.availableToRead } == levels)
        // And a device started again ticks again.
        let (source, endpoint) = sources[0]
        _ = endpoint.ring.discard(endpoint.ring.availableToRead)
        try source.start(endpoint)
        #expect(waitForSignals(endpoint, count: 2))
        source.stop()
    }

    @Test("a clock held off for more than five periods restarts from now for every device instead of bursting")
    func aStalledClockResynchronizes() throws {
        let tone = TestSignalSource()
        let toneEndpoint = AudioEndpoint(ringCapacityFrames: 64)
        try tone.start(toneEndpoint)
        defer { tone.stop() }
        let probeEndpoint = AudioEndpoint()
        let probeCounters = DeviceCounters()  // the IO holds these unretained: kept alive here
        let probe = StallProbe(io: DeviceThreadIO(endpoint: probeEndpoint, counters: probeCounters))
        let clock = SharedDeviceClock.clock(periodNanoseconds: probeEndpoint.format.frameDurationNanoseconds)
        let slot = try #require(clock.register(probe))
        #expect(probe.done.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 20_000_000_000))
        clock.unregister(slot: slot)
        withExtendedLifetime(probeCounters) {}
        #expect(tone.statistics.resynchronizations >= 1)
        #expect(probeCounters.snapshot.resynchronizations >= 1)
        // Paced from the restart: about 5 ticks in the 100 ms after the first tick that follows
        // the stall. Catching up on the ten missed deadlines would run those back to back: 15 or
        // more. Fewer than 10 holds even when that first tick itself came up to five periods
        // late (any later and the clock restarts again).
        let stamps = probe.stamps.withLock { $0 }
        let first = try #require(stamps.first)
        let inWindow = stamps.filter { $0 &- first < 100_000_000 }.count
        #expect(inWindow < 10, "\(inWindow) ticks in the 100 ms after the stall: \(stamps.map { Double($0 &- first) / 1e6 })")
    }

    @Test(
        "the clock thread allocates nothing while it ticks a tone, a WAV source and a discard sink",
        .enabled(if: CAllocationCounter_isAvailable() == 1, "the sanitizers own malloc; counting runs in the plain build"))
    func clockThreadAllocatesNothing() throws {
        let tone = TestSignalSource()
        let toneEndpoint = AudioEndpoint(ringCapacityFrames: 8)
        try tone.start(toneEndpoint)
        defer { tone.stop() }
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("ramp.wav")
        try WAVFile.write(samples: (0..<4800).map { Int16(truncatingIfNeeded: $0 * 7) }, sampleRateHertz: 48_000, to: path)
        let wav = WAVFileSource(path: path, loop: true)
        let wavEndpoint = AudioEndpoint(ringCapacityFrames: 8)
        try wav.start(wavEndpoint)
        defer { wav.stop() }
        let sink = DiscardSink()
        let sinkEndpoint = AudioEndpoint()
        try sink.start(sinkEndpoint)
        defer { sink.stop() }

        let probeEndpoint = AudioEndpoint()
        let probeCounters = DeviceCounters()  // the IO holds these unretained: kept alive here
        let probe = AllocationProbe(io: DeviceThreadIO(endpoint: probeEndpoint, counters: probeCounters))
        let clock = SharedDeviceClock.clock(periodNanoseconds: probeEndpoint.format.frameDurationNanoseconds)
        let slot = try #require(clock.register(probe))
        #expect(probe.done.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 20_000_000_000))
        clock.unregister(slot: slot)
        withExtendedLifetime(probeCounters) {}
        #expect(probe.allocations.load(ordering: .acquiring) == 0)
        // The devices really ran meanwhile (full rings overrun, the sink underruns).
        #expect(tone.statistics.framesTransferred + tone.statistics.overruns >= 100)
        #expect(wav.statistics.framesTransferred + wav.statistics.overruns >= 100)
        #expect(sink.statistics.underruns >= 100)
    }
}
