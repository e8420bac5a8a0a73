import Glibc

/// Finds the echo delay by itself: how many 10 ms chunks after a far-end chunk is played its
/// echo shows up in the capture. It correlates the two loudness envelopes (log energy per chunk)
/// over the last second at every lag up to half a second, ten times a second, and reports the
/// best lag once two comparisons in a row find it clearly correlated.
///
/// WebRTC's canceller (0.3) converges only when the delay it is given is within about 60–100 ms
/// of the real one; the real one is the devices' buffering plus the room, which Tether cannot
/// read from the devices. Sans-IO (chunk counts, no clock); all storage is allocated in `init`.
public struct EchoDelayEstimator: ~Copyable {
    /// Chunks of history compared (1 s) and the longest lag searched (500 ms), in chunks.
    public let windowChunks: Int
    public let maximumLagChunks: Int
    /// Correlation a lag needs before it is believed.
    public let confidenceThreshold: Double
    /// Chunks between two comparisons.
    public let evaluationIntervalChunks: Int
    /// To replace a delay already found, another lag must correlate this well (the far end
    /// talking alone: 0.97–0.99 measured on the test devices; in double talk the best lag reads
    /// 0.6–0.8 and wanders by ±50 ms) and this much better than the delay held.
    public let replacementThreshold = 0.9
    public let switchMargin = 0.1
    /// How close to the best correlation a shorter lag must come to be preferred.
    private static let tieMargin = 0.02
    private let far: UnsafeMutableBufferPointer<Double>
    private let lagCorrelation: UnsafeMutableBufferPointer<Double>
    private let near: UnsafeMutableBufferPointer<Double>
    private let capacity: Int
    private var farCount = 0
    private var nearCount = 0
    private var sinceEvaluation = 0
    private var candidate: Int?
    private var agreeing = 0
    /// The delay found, in chunks (10 ms each), and the correlation it had.
    public private(set) var delayChunks: Int?
    public private(set) var correlation = 0.0

    public init(windowChunks: Int = 100, maximumLagChunks: Int = 50, confidenceThreshold: Double = 0.7, evaluationIntervalChunks: Int = 10) {
        self.windowChunks = windowChunks
        self.maximumLagChunks = maximumLagChunks
        self.confidenceThreshold = confidenceThreshold
        self.evaluationIntervalChunks = evaluationIntervalChunks
        capacity = windowChunks + maximumLagChunks + 1
        far = .allocate(capacity: capacity)
        far.initialize(repeating: 0)
        near = .allocate(capacity: capacity)
        near.initialize(repeating: 0)
        lagCorrelation = .allocate(capacity: maximumLagChunks + 1)
        lagCorrelation.initialize(repeating: -1)
    }

    deinit {
        far.deallocate()
        near.deallocate()
        lagCorrelation.deallocate()
    }

    /// A far-end chunk was handed to the canceller.
    public mutating func farChunk(_ samples: UnsafePointer<Int16>, count: Int) {
        far[farCount % capacity] = Self.logEnergy(samples, count)
        farCount += 1
    }

    /// A capture chunk (before processing) arrived; every `evaluationIntervalChunks` of them the
    /// lags are compared again.
    public mutating func nearChunk(_ samples: UnsafePointer<Int16>, count: Int) {
        near[nearCount % capacity] = Self.logEnergy(samples, count)
        nearCount += 1
        sinceEvaluation += 1
        if sinceEvaluation >= evaluationIntervalChunks {
            sinceEvaluation = 0
            evaluate()
        }
    }

    private static func logEnergy(_ samples: UnsafePointer<Int16>, _ count: Int) -> Double {
        var e = 0.0
        for i in 0..<count { e += Double(samples[i]) * Double(samples[i]) }
        return log10(e / Double(max(1, count)) + 1)
    }

    /// Compares the last `windowChunks` capture chunks with the far end at every lag.
    private mutating func evaluate() {
        // A full window of capture; lags are compared as far back as the far end's history goes
        // (early on, not yet the longest: a delay found then is corrected by later comparisons).
        guard nearCount >= windowChunks, farCount >= windowChunks else { return }
        // Far chunk matching near chunk n at lag L is the one handed over L chunks earlier:
        // index (n − (nearCount − farCount)) − L on the far side.
        let offset = farCount - nearCount
        var best = -1.0
        var bestLag = 0
        let nMean = mean(near, from: nearCount - windowChunks)
        var nVariance = 0.0
        for i in 0..<windowChunks {
            let d = near[(nearCount - windowChunks + i) % capacity] - nMean
            nVariance += d * d
        }
        guard nVariance > 1e-9 else { return }
        for lag in 0...maximumLagChunks {
            let start = nearCount - windowChunks + offset - lag
            lagCorrelation[lag] = -1
            guard start >= 0, start + windowChunks <= farCount, farCount - start <= capacity else { continue }
            let fMean = mean(far, from: start)
            var covariance = 0.0
            var fVariance = 0.0
            for i in 0..<windowChunks {
                let f = far[(start + i) % capacity] - fMean
                let n = near[(nearCount - windowChunks + i) % capacity] - nMean
                covariance += f * n
                fVariance += f * f
            }
            guard fVariance > 1e-9 else { continue }
            let r = covariance / (fVariance * nVariance).squareRoot()
            if r > best {
                best = r
                bestLag = lag
            }
            lagCorrelation[lag] = r
        }
        // Of lags that correlate about as well as the best, the shortest: the direct path comes
        // first, and a rhythmic far end (syllables at a steady rate) correlates again one
        // rhythm later (measured through the test devices: 470 ms found for a 190 ms echo).
        for lag in 0..<bestLag where lagCorrelation[lag] >= best - Self.tieMargin {
            // A peak of its own, not the rising side of the best one.
            let before = lag > 0 ? lagCorrelation[lag - 1] : -1
            if lagCorrelation[lag] >= before && lagCorrelation[lag] >= lagCorrelation[lag + 1] {
                bestLag = lag
                break
            }
        }
        correlation = best
        // The delay found is kept unless another lag correlates clearly and clearly better:
        // while both ends talk, the near end's own envelope blurs the peak and can tip it away
        // from the echo (measured through the test devices: 70–80 ms found in double talk where
        // far-end speech alone gave 100). A changed echo path leaves the old lag uncorrelated,
        // and the new one takes over as soon as the far end is heard alone.
        let held = delayChunks.map { lagCorrelation[$0] }
        guard best >= (held == nil ? confidenceThreshold : replacementThreshold), best > (held ?? -1) + switchMargin else {
            candidate = nil
            agreeing = 0
            return
        }
        // Believed when evaluations in a row agree within a chunk: two for the first delay,
        // three to replace one (five made the 2 s reconvergence after a change of path marginal:
        // 23 dB once in a CI run; the 0.9 threshold is what keeps double talk out).
        if let c = candidate, abs(c - bestLag) <= 1 {
            agreeing += 1
        } else {
            agreeing = 1
        }
        candidate = bestLag
        if agreeing >= (delayChunks == nil ? 2 : 3) { delayChunks = bestLag }
    }

    private func mean(_ ring: UnsafeMutableBufferPointer<Double>, from start: Int) -> Double {
        var sum = 0.0
        for i in 0..<windowChunks { sum += ring[(start + i) % capacity] }
        return sum / Double(windowChunks)
    }
}
