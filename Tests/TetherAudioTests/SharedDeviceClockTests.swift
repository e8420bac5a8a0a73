import Foundation
import Testing
import TetherAudio
import TetherRealtime

@Suite("Shared device clock")
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
        endpoint.wakeup.drain()
        try source.start(endpoint)
        #expect(waitForSignals(endpoint, count: 2))
        source.stop()
    }
}
