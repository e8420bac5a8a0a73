import Glibc

/// Finds an echo path that shifted by less than a block against what the linear filter learned:
/// the microphone now matches the filter's echo estimate moved by a few milliseconds. The
/// devices' timing and the echo delay measured (in 10 ms steps) do not see such a shift; a sound
/// server's loopback or buffering that dropped or added a quantum makes one (the PipeWire test
/// rig's echo moved 256 samples once in a 10 s call, and the filter, which had to learn the
/// echo anew, cut nothing for 1.5 s).
///
/// Keeps the last `recentBlocks` blocks of microphone and estimate (oldest first); `find` is
/// called only when the filter stopped cancelling. Everything is allocated in `init`.
final class EchoShiftSearch {
    let blockSamples: Int
    /// The blocks compared, the normalized correlation the moved estimate must reach with the
    /// microphone, and how far it must beat the estimate unmoved.
    static let recentBlocks = 4
    static let correlation: Float = 0.8
    static let correlationGain: Float = 0.2
    private let microphone: UnsafeMutablePointer<Float>
    private let estimate: UnsafeMutablePointer<Float>

    init(blockSamples: Int) {
        self.blockSamples = blockSamples
        microphone = RealFFT.allocateReal(Self.recentBlocks * blockSamples)
        estimate = RealFFT.allocateReal(Self.recentBlocks * blockSamples)
    }

    deinit {
        RealFFT.free(microphone)
        RealFFT.free(estimate)
    }

    /// The newest block of the microphone.
    var lastMicrophone: UnsafePointer<Float> { UnsafePointer(microphone + (Self.recentBlocks - 1) * blockSamples) }

    /// One block of the microphone and of the filter's echo estimate.
    func record(microphone newMicrophone: UnsafePointer<Float>, estimate newEstimate: UnsafePointer<Float>) {
        let n = blockSamples
        let kept = (Self.recentBlocks - 1) * n
        memmove(microphone, microphone + n, kept * MemoryLayout<Float>.stride)
        memmove(estimate, estimate + n, kept * MemoryLayout<Float>.stride)
        (microphone + kept).update(from: newMicrophone, count: n)
        (estimate + kept).update(from: newEstimate, count: n)
    }

    /// How far (samples, up to a block either way; later when positive) the echo moved against the
    /// estimate over the recent blocks: the lag at which the microphone matches the estimate
    /// best, when that match is close (`correlation`) and clearly better than unmoved
    /// (`correlationGain`); nil otherwise (a near talker, a filter that had not learned the echo
    /// yet, a response that changed rather than moved). At 48 kHz, 961 lags of up to 1,920
    /// samples, three multiply-adds each: 1.3 ms (this loop compiled alone with `swiftc -O`).
    /// The three sums are independent, so the two energies cost little beside the cross sum
    /// (taking them from running sums instead read 1.31 against 1.33 ms).
    func find() -> Int? {
        let length = Self.recentBlocks * blockSamples
        var best = 0
        var bestCorrelation: Float = -1
        var unmoved: Float = 0
        for lag in -blockSamples...blockSamples {
            // The microphone at t against the estimate at t − lag.
            var cross: Float = 0
            var micEnergy: Float = 0
            var estimateEnergy: Float = 0
            for t in max(0, lag)..<min(length, length + lag) {
                let d = microphone[t]
                let y = estimate[t - lag]
                cross += d * y
                micEnergy += d * d
                estimateEnergy += y * y
            }
            let c = micEnergy > 0 && estimateEnergy > 0 ? cross / (micEnergy * estimateEnergy).squareRoot() : 0
            if lag == 0 { unmoved = c }
            if c > bestCorrelation {
                bestCorrelation = c
                best = lag
            }
        }
        guard bestCorrelation >= Self.correlation, bestCorrelation >= unmoved + Self.correlationGain else { return nil }
        return best
    }
}
