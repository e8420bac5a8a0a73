import Testing
import TetherAudio
import TetherRealtime

@Suite("DiscardSink")
struct DiscardSinkTests {
    @Test("drops one frame per tick and counts underruns once the ring is empty")
    func dropsFramesAndCountsUnderruns() throws {
        let endpoint = AudioEndpoint(ringCapacityFrames: 8)
        for _ in 0..<3 { #expect(push(Array(repeating: 7, count: 960), into: endpoint.ring)) }
        push(Array(repeating: 7, count: 100), into: endpoint.ring)  // a partial frame is never taken
        let sink = DiscardSink()
        try sink.start(endpoint)
        #expect(waitForSignals(endpoint, count: 6))
        sink.stop()

        let statistics = sink.statistics
        #expect(statistics.framesTransferred == 3)
        #expect(statistics.underruns >= 3)
        // Each tick without a frame counts a frame's time as played in the ring's place (the echo
        // canceller's reference takes it).
        #expect(endpoint.demand.silenceSamples == statistics.underruns * 960)
        #expect(statistics.overruns == 0)
        #expect(endpoint.ring.availableToRead == 100)
    }

    @Test("ticks at real-time pace")
    func ticksAtRealTimePace() throws {
        let endpoint = AudioEndpoint()
        let sink = DiscardSink()
        let started = MonotonicClock.nanoseconds()
        try sink.start(endpoint)
        var signals = 0
        let end = started + 500_000_000
        while endpoint.wakeup.waitForNextSignal(untilMonotonicNanoseconds: end) { signals += 1 }
        sink.stop()
        #expect(signals >= 12)
        #expect(signals <= 34)
        #expect(sink.statistics.underruns >= signals)
    }
}
