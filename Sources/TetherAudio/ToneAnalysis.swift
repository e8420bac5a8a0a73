import Glibc

/// Measurements on 16-bit PCM used by tests, tools and the demo summary: level, tone frequency
/// and alignment of a received signal with the sent one. Control paths only (these allocate).
///
/// Levels follow the AES17 convention: a full-scale sine (peak 32 768) reads 0 dBFS, so a sine
/// of peak level L dBFS reads L.
public enum ToneAnalysis {
    /// Full-scale amplitude of a 16-bit sample.
    private static let fullScale = 32_768.0

    /// RMS level relative to the RMS of a full-scale sine, in dBFS (−∞ for silence or no samples).
    public static func rmsDBFS(_ samples: some Collection<Int16>) -> Double {
        guard !samples.isEmpty else { return -.infinity }
        var sumOfSquares = 0.0
        for sample in samples {
            let value = Double(sample)
            sumOfSquares += value * value
        }
        let rms = (sumOfSquares / Double(samples.count)).squareRoot()
        guard rms > 0 else { return -.infinity }
        return 20 * log10(rms * 2.0.squareRoot() / fullScale)
    }

    /// Goertzel power of `samples` at `frequencyHertz` (any frequency, not only DFT bins),
    /// normalised so that a sine of peak amplitude A (as a fraction of full scale) exactly at that
    /// frequency gives ≈ A² (1 for a full-scale sine) when the block holds many periods.
    public static func goertzelPower(
        _ samples: some Collection<Int16>, frequencyHertz: Double, sampleRateHertz: Int
    ) -> Double {
        let values = samples.map { Double($0) / fullScale }
        return values.withUnsafeBufferPointer {
            normalizedPower($0, window: nil, cyclesPerSample: frequencyHertz / Double(sampleRateHertz))
        }
    }

    /// The frequency, in hertz, of the strongest sinusoid within `searchRange`, or `nil` when there
    /// are fewer than 64 samples or only silence.
    ///
    /// A Hann-windowed Goertzel scan over the first 4 096 samples finds the peak coarsely (steps of
    /// a quarter of its resolution), then a golden-section search on the whole block refines it to
    /// about 0.01 Hz; on a clean 1 s tone the result is within a fraction of a hertz.
    public static func dominantFrequencyHertz(
        _ samples: some Collection<Int16>, sampleRateHertz: Int, searchRange: ClosedRange<Double> = 20...20_000
    ) -> Double? {
        guard samples.count >= 64 else { return nil }
        let rateHertz = Double(sampleRateHertz)
        let upperHertz = min(searchRange.upperBound, rateHertz / 2)
        let lowerHertz = max(0, searchRange.lowerBound)
        guard lowerHertz <= upperHertz else { return nil }
        let values = samples.map { Double($0) / fullScale }
        guard values.contains(where: { $0 != 0 }) else { return nil }

        let coarseCount = min(values.count, 4_096)
        let coarseWindow = hannWindow(count: coarseCount)
        let fullWindow = hannWindow(count: values.count)
        return values.withUnsafeBufferPointer { all in
            let coarse = UnsafeBufferPointer(rebasing: all[0..<coarseCount])
            // Main lobe of the Hann window: ±2 bins; step a quarter bin so the peak cannot be missed.
            let coarseBinHertz = rateHertz / Double(coarseCount)
            let stepHertz = coarseBinHertz / 4
            var bestHertz = lowerHertz
            var bestPower = -1.0
            var frequency = lowerHertz
            while frequency <= upperHertz {
                let power = coarseWindow.withUnsafeBufferPointer {
                    normalizedPower(coarse, window: $0, cyclesPerSample: frequency / rateHertz)
                }
                if power > bestPower {
                    bestPower = power
                    bestHertz = frequency
                }
                frequency += stepHertz
            }
            // Refine on the whole block around the coarse peak (the power is unimodal in there).
            var low = max(lowerHertz, bestHertz - stepHertz)
            var high = min(upperHertz, bestHertz + stepHertz)
            let invPhi = (5.0.squareRoot() - 1) / 2
            func power(_ hertz: Double) -> Double {
                fullWindow.withUnsafeBufferPointer { normalizedPower(all, window: $0, cyclesPerSample: hertz / rateHertz) }
            }
            var left = high - invPhi * (high - low)
            var right = low + invPhi * (high - low)
            var leftPower = power(left)
            var rightPower = power(right)
            while high - low > 0.01 {
                if leftPower < rightPower {
                    low = left
                    left = right
                    leftPower = rightPower
                    right = low + invPhi * (high - low)
                    rightPower = power(right)
                } else {
                    high = right
                    right = left
                    rightPower = leftPower
                    left = high - invPhi * (high - low)
                    leftPower = power(left)
                }
            }
            return (low + high) / 2
        }
    }

    /// The lag, in samples, at which `b` best matches `a` (`b[n + lag] ≈ a[n]`: a positive lag
    /// means `b` is `a` delayed), searched over `-maxLagSamples...maxLagSamples`, with the Pearson-
    /// style normalised correlation at that lag (1 for an exact copy, computed over the overlap
    /// without removing the mean). Lags whose overlap is shorter than half of the shorter input
    /// are ignored. Cost: O(overlap × lags).
    /// - Returns: lag 0 and correlation 0 when no lag qualifies or the signals are silent.
    public static func normalizedCrossCorrelation(
        _ a: some Collection<Int16>, _ b: some Collection<Int16>, maxLagSamples: Int
    ) -> (lag: Int, correlation: Double) {
        let x = a.map(Double.init)
        let y = b.map(Double.init)
        let minimumOverlap = max(1, min(x.count, y.count) / 2)
        // Prefix sums of squares give each lag's overlap energy in O(1).
        var xEnergy = [0.0]
        xEnergy.reserveCapacity(x.count + 1)
        for value in x { xEnergy.append(xEnergy.last! + value * value) }
        var yEnergy = [0.0]
        yEnergy.reserveCapacity(y.count + 1)
        for value in y { yEnergy.append(yEnergy.last! + value * value) }

        var best: (lag: Int, correlation: Double) = (0, 0)
        var found = false
        x.withUnsafeBufferPointer { xs in
            y.withUnsafeBufferPointer { ys in
                for lag in -max(0, maxLagSamples)...max(0, maxLagSamples) {
                    // Overlap: n in [start, end) with 0 ≤ n < x.count and 0 ≤ n + lag < y.count.
                    let start = max(0, -lag)
                    let end = min(xs.count, ys.count - lag)
                    guard end - start >= minimumOverlap else { continue }
                    var dot = 0.0
                    for n in start..<end { dot += xs[n] * ys[n + lag] }
                    let energy = (xEnergy[end] - xEnergy[start]) * (yEnergy[end + lag] - yEnergy[start + lag])
                    guard energy > 0 else { continue }
                    let correlation = dot / energy.squareRoot()
                    if !found || correlation > best.correlation {
                        best = (lag, correlation)
                        found = true
                    }
                }
            }
        }
        return best
    }

    // MARK: Internals

    private static func hannWindow(count: Int) -> [Double] {
        guard count > 1 else { return [1] }
        return (0..<count).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(count - 1)) }
    }

    /// Goertzel power at `cyclesPerSample`, optionally windowed, normalised by the window's
    /// coherent gain so a sine of amplitude A at that frequency gives ≈ A².
    private static func normalizedPower(
        _ values: UnsafeBufferPointer<Double>, window: UnsafeBufferPointer<Double>?, cyclesPerSample: Double
    ) -> Double {
        let coefficient = 2 * cos(2 * Double.pi * cyclesPerSample)
        var previous = 0.0
        var beforePrevious = 0.0
        var gain = 0.0
        if let window {
            for n in 0..<values.count {
                let current = values[n] * window[n] + coefficient * previous - beforePrevious
                beforePrevious = previous
                previous = current
                gain += window[n]
            }
        } else {
            for n in 0..<values.count {
                let current = values[n] + coefficient * previous - beforePrevious
                beforePrevious = previous
                previous = current
            }
            gain = Double(values.count)
        }
        let magnitudeSquared = previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious
        guard gain > 0 else { return 0 }
        return max(0, magnitudeSquared) * 4 / (gain * gain)
    }
}
