import Testing
import TetherCore

/// The jitter buffer's adaptive target, on a manual clock.
@Suite("Jitter buffer: adaptive target")
struct AdaptiveJitterBufferTests {
    let frameNs: UInt64 = 20_000_000

    func buffer(marginFrames: Int = 1) -> JitterBuffer {
        var c = JitterBuffer.Configuration(targetDelayMilliseconds: 40, driftMarginFrames: marginFrames, driftSustainMilliseconds: 200)
        c.adaptiveTarget = true
        return JitterBuffer(configuration: c)
    }

    func insert(_ jb: JitterBuffer, _ i: Int, at arrival: UInt64) -> JitterBuffer.InsertOutcome {
        let payload: [UInt8] = [1, 2, 3]
        return payload.withUnsafeBytes {
            jb.insert(
                sequenceNumber: UInt16(truncatingIfNeeded: 1000 + i), rtpTimestamp: UInt32(truncatingIfNeeded: 90_000 + i * 960),
                payload: $0, arrivalNanoseconds: arrival)
        }
    }

    @Test func aBurstThenASteadyStreamShrinksToOneFramePlusMargin() {
        let jb = buffer()
        let t0: UInt64 = 1_000_000_000
        for i in 0..<10 { _ = insert(jb, i, at: t0) }  // 200 ms of audio at once
        var lastPull = t0
        for i in 10..<500 {
            let arrival = t0 + UInt64(i - 9) * frameNs
            _ = insert(jb, i, at: arrival)
            lastPull = arrival + frameNs / 2
            _ = jb.pull(now: lastPull)
        }
        let s = jb.statistics
        #expect(s.targetDelayMilliseconds == 20)  // the burst left the window; one frame is enough
        #expect(s.bufferedDelayMilliseconds <= 20 + 20)  // target + one frame of margin
        #expect(s.driftDrops >= 6)
        #expect(s.latePackets == 0)
    }

    @Test func jitteryArrivalsRaiseTheTargetToCoverThem() {
        let jb = buffer()
        let t0: UInt64 = 1_000_000_000
        for i in 0..<400 {
            let lateMs = UInt64((i * 37) % 61)  // 0…60 ms, evenly spread
            _ = insert(jb, i, at: t0 + UInt64(i) * frameNs + lateMs * 1_000_000)
            _ = jb.pull(now: t0 + UInt64(i) * frameNs + 5_000_000)
        }
        // The 95th percentile of 0…60 ms is 57–58 ms: three frames.
        #expect(jb.statistics.targetDelayMilliseconds == 60)
    }

    @Test func aRestartedStreamStartsANewEstimate() {
        let jb = buffer()
        let t0: UInt64 = 1_000_000_000
        let payload: [UInt8] = [1, 2, 3]
        func insert(sequence: Int, timestamp: Int, at arrival: UInt64) {
            _ = payload.withUnsafeBytes {
                jb.insert(
                    sequenceNumber: UInt16(truncatingIfNeeded: sequence), rtpTimestamp: UInt32(truncatingIfNeeded: timestamp),
                    payload: $0, arrivalNanoseconds: arrival)
            }
        }
        for i in 0..<100 {
            insert(sequence: 1000 + i, timestamp: 90_000 + i * 960, at: t0 + UInt64(i) * frameNs)
            _ = jb.pull(now: t0 + UInt64(i) * frameNs + 5_000_000)
        }
        // The sender restarts: sequence and timestamp jump (the buffer re-anchors on the new stream).
        for i in 100..<200 {
            insert(sequence: 30_000 + i, timestamp: 5_000_000 + i * 960, at: t0 + UInt64(i) * frameNs)
            _ = jb.pull(now: t0 + UInt64(i) * frameNs + 5_000_000)
        }
        #expect(jb.statistics.reanchors == 1)
        #expect(jb.statistics.targetDelayMilliseconds == 20)  // not the jump read as lateness
    }

    @Test func theTargetIsBounded() {
        var c = JitterBuffer.Configuration(targetDelayMilliseconds: 40)
        c.adaptiveTarget = true
        c.maximumDelayMilliseconds = 100
        let jb = JitterBuffer(configuration: c)
        let t0: UInt64 = 1_000_000_000
        for i in 0..<100 {
            let lateMs = UInt64(i % 2 == 0 ? 0 : 400)
            _ = insert(jb, i, at: t0 + UInt64(i) * frameNs + lateMs * 1_000_000)
            _ = jb.pull(now: t0 + UInt64(i) * frameNs)
        }
        #expect(jb.statistics.targetDelayMilliseconds == 100)
    }

    @Test func aFixedTargetIsUnchangedByArrivals() {
        let jb = JitterBuffer(configuration: .init(targetDelayMilliseconds: 40))
        let t0: UInt64 = 1_000_000_000
        for i in 0..<100 {
            _ = insert(jb, i, at: t0 + UInt64(i) * frameNs + UInt64((i * 37) % 61) * 1_000_000)
            _ = jb.pull(now: t0 + UInt64(i) * frameNs)
        }
        #expect(jb.statistics.targetDelayMilliseconds == 40)
    }
}
