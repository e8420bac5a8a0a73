import Testing
import TetherCore

@Suite("Arrival delay estimator")
struct ArrivalDelayEstimatorTests {
    let frame: Int64 = 20_000_000

    @Test func aSteadyStreamNeedsNoExtraDelay() {
        let e = ArrivalDelayEstimator()
        for i in 0..<300 {
            e.record(arrivalNanoseconds: 5_000_000_000 + UInt64(i) * UInt64(frame), mediaNanoseconds: Int64(i) * frame)
        }
        #expect(e.spreadNanoseconds == 0)
    }

    @Test func theSpreadIsTheChosenPercentileOfLatenessOverTheFastestPacket() {
        let e = ArrivalDelayEstimator(windowPackets: 100, percentile: 0.95)
        // Lateness 0, 1, …, 99 ms (shuffled): the 95th percentile over the fastest is 95 ms
        // (rank ⌈99 × 0.95⌉ = 95).
        for i in 0..<100 {
            let lateMs = Int64((i * 37) % 100)
            e.record(arrivalNanoseconds: UInt64(Int64(i) * frame + lateMs * 1_000_000), mediaNanoseconds: Int64(i) * frame)
        }
        #expect(e.spreadNanoseconds == 95_000_000)
    }

    @Test func oldJitterLeavesTheWindow() {
        let e = ArrivalDelayEstimator(windowPackets: 50, percentile: 0.95)
        for i in 0..<50 {
            let lateMs = Int64(i % 2 == 0 ? 0 : 60)
            e.record(arrivalNanoseconds: UInt64(Int64(i) * frame + lateMs * 1_000_000), mediaNanoseconds: Int64(i) * frame)
        }
        #expect(e.spreadNanoseconds == 60_000_000)
        for i in 50..<100 {
            e.record(arrivalNanoseconds: UInt64(Int64(i) * frame), mediaNanoseconds: Int64(i) * frame)
        }
        #expect(e.spreadNanoseconds == 0)
    }

    @Test func resetForgetsEverything() {
        let e = ArrivalDelayEstimator(windowPackets: 10)
        e.record(arrivalNanoseconds: 0, mediaNanoseconds: 0)
        e.record(arrivalNanoseconds: 90_000_000, mediaNanoseconds: 20_000_000)
        #expect(e.spreadNanoseconds == 70_000_000)
        e.reset()
        #expect(e.spreadNanoseconds == 0)
    }
}
