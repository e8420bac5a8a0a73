import Glibc
import Testing
import TetherTestSupport

@testable import TetherTestbed

@Suite("Mouth-to-ear probe: onset detection", .keepsLogPerTest)
struct MouthToEarProbeTests {
    /// 1 kHz bursts of 100 ms every second, starting at known samples, with low noise between.
    func recording(burstStarts: [Int], amplitude: Double, startSeconds: Double) -> TimedRecorder.Recording {
        var samples = [Int16](repeating: 0, count: 48_000 * 4)
        for n in samples.indices { samples[n] = Int16(n % 7) - 3 }  // ±3 of noise
        for start in burstStarts {
            for k in 0..<4_800 {
                let phase: Double = 2 * Double.pi * 1000 * Double(k) / 48_000 + 0.3
                samples[start + k] = Int16((amplitude * sin(phase)).rounded())
            }
        }
        return TimedRecorder.Recording(samples: samples, sampleRateHertz: 48_000, startSeconds: startSeconds)
    }

    @Test func onsetsAreFoundAtTheirSampleTimesOnTheMonotonicAxis() {
        let starts = [1_000, 49_000, 97_123, 150_000]
        let found = MouthToEarProbe.onsets(recording(burstStarts: starts, amplitude: 8_000, startSeconds: 10))
        #expect(found.count == starts.count)
        for (onset, start) in zip(found, starts) {
            // The first sample above a third of the peak comes within half a cycle of the start.
            #expect(abs(onset - (10 + Double(start) / 48_000)) < 0.0006)
        }
    }

    @Test func silenceAndNoiseHaveNoOnsets() {
        #expect(MouthToEarProbe.onsets(recording(burstStarts: [], amplitude: 0, startSeconds: 0)).isEmpty)
    }

    @Test func aBurstIsOneOnsetNotOnePerCycle() {
        let found = MouthToEarProbe.onsets(recording(burstStarts: [10_000], amplitude: 3_000, startSeconds: 0))
        #expect(found.count == 1)
    }

    @Test func samplesDroppedByTheServerDoNotShiftOnsetsOnEitherSide() {
        // 10 ms frames; 20 ms of samples were lost before frame 100, so every later frame
        // arrives 20 ms "late" for its position.
        var r = recording(burstStarts: [20 * 480 + 7, 150 * 480 + 11], amplitude: 8_000, startSeconds: 0)
        r = TimedRecorder.Recording(
            samples: r.samples, sampleRateHertz: 48_000, samplesPerFrame: 480,
            frameOffsetsNanoseconds: (0..<400).map { $0 < 100 ? 5_000_000_000 : 5_020_000_000 })
        let found = MouthToEarProbe.onsets(r)
        #expect(found.count == 2)
        #expect(abs(found[0] - (5 + Double(20 * 480 + 7) / 48_000)) < 0.0006)
        #expect(abs(found[1] - (5.02 + Double(150 * 480 + 11) / 48_000)) < 0.0006)
    }
}
