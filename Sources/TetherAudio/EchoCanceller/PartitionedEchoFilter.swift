import Glibc

/// The linear stage of `EchoCanceller`: a partitioned-block frequency-domain adaptive filter
/// (PBFDAF, the MDF family) of `partitions` blocks of `blockSamples`, run as two filters over the
/// same far-end spectra:
///
/// - the **background** filter adapts with a fixed normalized step, shared among the partitions
///   in proportion to their part of the response (IPNLMS: 30 % evenly, the rest by share, so
///   the few partitions that hold the echo adapt several times faster), and within the 8 that
///   hold the most, among their taps in proportion to each tap's size (`tapwisePartitions`): it
///   tracks an echo path that changed within a second or two, and is disturbed by double talk;
/// - the **foreground** filter, whose error is the output, adapts with a step scaled per bin by
///   how much of its error is echo it has not yet removed (the residual echo, from the filter's
///   own estimate times a leakage learned by regression, over the error's power), and holds
///   still where the near end talks (`nearEndPresence`).
///
/// The background is copied into the foreground when it has removed clearly more echo for a few
/// blocks and cancels a good part of the microphone (a path change, or the start); it is reset
/// from the foreground when double talk has made it clearly worse. A foreground whose error stays
/// louder than the microphone has diverged and is replaced (by the background, or by nothing).
/// One that stopped cancelling because the echo moved by less than a block, unseen by the
/// alignment (`EchoShiftSearch`), is moved with it when the moved response cuts the current
/// block 6 dB more.
/// Overlap-save, with the gradient constraint applied to `constraintsPerBlock` partitions per
/// block in turn (the unconstrained updates between leave a circular error that it removes),
/// passing by the background's partitions that the tap-by-tap update left constrained.
///
/// Sans-IO: one call per block from one thread; everything is allocated in `init`.
///
/// Slowly decaying powers are flushed to zero below 1e-30: in digital silence they would
/// otherwise settle on subnormal floats, each operation on which costs x86 a hundred cycles.
final class PartitionedEchoFilter {
    let blockSamples: Int
    let partitions: Int
    private let fftSize: Int
    private let bins: Int
    private let fft: RealFFT
    /// Floats between the spectra of consecutive partitions: 2 × `bins` rounded up to 16, so that
    /// every spectrum FFTW writes or reads is aligned as the plans were made for (64 bytes).
    private let stride: Int

    /// Far-end spectra of the last `partitions` blocks (a ring: lag p at `(head + p) % partitions`).
    private let far: UnsafeMutablePointer<Float>
    private var head = 0
    /// The proportionate step's share per partition, and the far-end power weighted by it.
    private let partitionGain: UnsafeMutablePointer<Float>
    private let weightedPower: UnsafeMutablePointer<Float>
    private let foreground: UnsafeMutablePointer<Float>
    private let background: UnsafeMutablePointer<Float>
    private let foregroundEstimate: UnsafeMutablePointer<Float>
    private let backgroundEstimate: UnsafeMutablePointer<Float>
    private let foregroundErrorSpectrum: UnsafeMutablePointer<Float>
    private let backgroundErrorSpectrum: UnsafeMutablePointer<Float>
    /// Per bin smoothed powers of the foreground's estimate and error (for its step).
    private let estimatePower: UnsafeMutablePointer<Float>
    private let errorPower: UnsafeMutablePointer<Float>
    private let time: UnsafeMutablePointer<Float>
    private let spectrum: UnsafeMutablePointer<Float>
    private let backgroundError: UnsafeMutablePointer<Float>
    /// A partition's gradient in the time domain (per-tap proportionate update).
    private let gradient: UnsafeMutablePointer<Float>
    private let gradientSpectrum: UnsafeMutablePointer<Float>
    /// Per partition, whether the background updated it tap by tap in its last update (the
    /// `tapwiseCount` with the largest share of its response).
    private let tapwise: UnsafeMutablePointer<Bool>
    private let tapwiseCount: Int
    /// Whether the partitions marked in `tapwise` have not changed since their update, which left
    /// them constrained (so the constraint in turn can pass them by).
    private var tapwiseConstrained = false
    /// The foreground's error and echo estimate of the last block (time domain, `blockSamples`).
    let error: UnsafeMutablePointer<Float>
    let estimate: UnsafeMutablePointer<Float>

    /// Regression of the foreground's error power on its estimate's power: the leakage.
    private var covarianceErrorEstimate: Float = 0
    private var varianceEstimate: Float = 0
    private(set) var leakage: Float = 0.25
    /// Smoothed block energies of the microphone and both filters' errors.
    private var microphoneEnergy: Float = 0
    private var foregroundEnergy: Float = 0
    private var backgroundEnergy: Float = 0
    /// Blocks in a row the background has been clearly better (or worse) than the foreground.
    private var backgroundBetterBlocks = 0
    private var backgroundWorseBlocks = 0
    private var divergedBlocks = 0
    private var constraintCursor = 0
    /// Where a shifted echo path is looked for (`EchoShiftSearch`); room for a whole response in
    /// the time domain (`partitions × blockSamples` taps), to shift it, and for the shifted one.
    private let shiftSearch: EchoShiftSearch
    private let response: UnsafeMutablePointer<Float>
    private let shifted: UnsafeMutablePointer<Float>
    /// Blocks in a row the foreground has removed less than 3 dB of an audible microphone, and
    /// blocks left before the next look for a shift.
    private var poorBlocks = 0
    private var shiftSearchHoldoff = 0
    /// Counters for tests and statistics.
    private(set) var echoPathShifts = 0
    private(set) var foregroundCopies = 0
    private(set) var backgroundResets = 0
    private(set) var divergenceResets = 0

    /// Partitions of each filter constrained per block, in turn (every 40 ms with 32 partitions;
    /// the background's tap-by-tap partitions are constrained by their update and passed by).
    /// Fewer leave more of the unconstrained updates' circular error between constraints: on
    /// the simulated room the linear stage alone cut 22 dB after 8–10 s with 2 a block, 26 with
    /// 8, 28 with all 32 (at four times the cost).
    static let constraintsPerBlock = 8
    /// The background's normalized step, and the foreground's largest; the part of the
    /// background's step shared evenly among the partitions (the rest by their share of the
    /// response). Chosen on espeak-ng speech through a 90 ms pure-delay path (the test rig's
    /// kind), 2 s windows of far end alone and near-end PESQ-WB in double talk 5.7 dB over the
    /// echo: 0.6 and 0.5 cut 31–37 dB and scored 3.46; 0.3 and 0.2, 33–40 dB and 3.72; 0.2 was
    /// slower to start, 0.8 and 1.0 misadjust more.
    /// With the tap-by-tap update below the even share was raised from 0.2 to 0.3: the same
    /// figures on the simulated rooms of `tether-bench echo --no-devices`, and a delay that
    /// shortened (120 → 30 ms, synthetic voice) was cut 27 dB in 2–5 s against 25 with 0.2.
    static let backgroundStep: Float = 0.3
    static let evenShare: Float = 0.3
    static let foregroundMaximumStep: Float = 0.5
    /// The background's partitions updated tap by tap (the largest shares of its response), the
    /// share of each one's step spread evenly over its taps, and the most any tap takes (in
    /// units of what an even spread gives each tap). A block update cannot take the steps a
    /// sample-by-sample IPNLMS takes on a dominant tap: without the cap the filter diverged (a step of 240 times
    /// the partition's on a single direct-path tap). Chosen on espeak-ng speech through a 90 ms
    /// pure delay, the linear stage alone (cut in 1 s windows, 1–6 s): none 15/16/22/24/25 dB; 4
    /// partitions with cap 2 and even share 0.5, 22/23/29/30/30; cap 3 and share 0.1, 26/26/32/33/33;
    /// 8 partitions, 27/27/34/35/37; 16 and 32 no better; the foreground's partitions too, no
    /// better. Cap 8 misadjusted (26 dB at 6 s); cap 2 was 1–4 dB slower.
    static let tapwisePartitions = 8
    static let tapEvenShare: Float = 0.1
    static let tapCap: Float = 3
    /// Far-end blocks quieter than this (RMS, full scale 1) do not adapt the filters (−66 dBFS).
    static let farActiveRMS: Float = 5e-4
    /// The blocks in a row the foreground must have cut less than 3 dB of an audible microphone
    /// before a shifted echo path is looked for, and the blocks between two looks (a look costs
    /// about a millisecond, and double talk keeps the foreground that poor for seconds).
    static let poorBlocksBeforeShiftSearch = 8
    static let blocksBetweenShiftSearches = 25
    /// The least leakage the foreground's step assumes (−23 dB; what the regression read at 59 of 69 one-second marks of a rig call),
    /// so the step double talk gets past the hold. With 0.001 the unit tests' 20 and 60 ms rooms cut 37 dB steady, not 42.
    static let minimumLeakage: Float = 0.005

    init(blockSamples: Int, partitions: Int) {
        self.blockSamples = blockSamples
        self.partitions = partitions
        fftSize = 2 * blockSamples
        bins = blockSamples + 1
        fft = RealFFT(size: fftSize)
        stride = (2 * bins + 15) & ~15
        far = RealFFT.allocateReal(partitions * stride)
        foreground = RealFFT.allocateReal(partitions * stride)
        background = RealFFT.allocateReal(partitions * stride)
        partitionGain = RealFFT.allocateReal(partitions)
        weightedPower = RealFFT.allocateReal(bins)
        foregroundEstimate = RealFFT.allocateComplex(bins: bins)
        backgroundEstimate = RealFFT.allocateComplex(bins: bins)
        foregroundErrorSpectrum = RealFFT.allocateComplex(bins: bins)
        backgroundErrorSpectrum = RealFFT.allocateComplex(bins: bins)
        estimatePower = RealFFT.allocateReal(bins)
        errorPower = RealFFT.allocateReal(bins)
        time = RealFFT.allocateReal(fftSize)
        spectrum = RealFFT.allocateComplex(bins: bins)
        backgroundError = RealFFT.allocateReal(blockSamples)
        gradient = RealFFT.allocateReal(fftSize)
        gradientSpectrum = RealFFT.allocateComplex(bins: bins)
        tapwiseCount = min(Self.tapwisePartitions, partitions)
        tapwise = UnsafeMutablePointer<Bool>.allocate(capacity: partitions)
        tapwise.initialize(repeating: false, count: partitions)
        error = RealFFT.allocateReal(blockSamples)
        estimate = RealFFT.allocateReal(blockSamples)
        shiftSearch = EchoShiftSearch(blockSamples: blockSamples)
        response = RealFFT.allocateReal(partitions * blockSamples)
        shifted = RealFFT.allocateReal(partitions * stride)
    }

    deinit {
        for pointer in [
            far, foreground, background, partitionGain, weightedPower, foregroundEstimate, backgroundEstimate, foregroundErrorSpectrum,
            backgroundErrorSpectrum, estimatePower, errorPower, time, spectrum, backgroundError, error, estimate, response,
            shifted,
        ] {
            RealFFT.free(pointer)
        }
        RealFFT.free(gradient)
        RealFFT.free(gradientSpectrum)
        tapwise.deallocate()
    }

    /// Whether the far end of the last block was loud enough to adapt on.
    private(set) var farActive = false
    /// The last block's energies (sums of squares): the far end's current block, the microphone,
    /// the foreground's echo estimate.
    private(set) var blockEnergies: (far: Float, microphone: Float, estimate: Float) = (0, 0, 0)

    /// One block: `farWindow` holds the previous and the current far-end block (2 × `blockSamples`,
    /// aligned so that the echo of the current block's start comes a little after it),
    /// `microphone` the current captured block (full scale 1). Afterwards `error` holds the
    /// foreground's output and `estimate` the echo it removed.
    func process(farWindow: UnsafePointer<Float>, microphone: UnsafePointer<Float>, nearEndPresence: Float) {
        let n = blockSamples
        let floats = stride
        // The far end's newest spectrum enters the ring at lag 0.
        head = (head + partitions - 1) % partitions
        let newest = far + head * floats
        time.update(from: farWindow, count: fftSize)
        fft.forward(time, newest)
        var farEnergy: Float = 0
        for i in n..<fftSize { farEnergy += farWindow[i] * farWindow[i] }
        farActive = farEnergy > Float(n) * Self.farActiveRMS * Self.farActiveRMS

        filter(foreground, into: foregroundEstimate, microphone: microphone, error: error, errorSpectrum: foregroundErrorSpectrum)
        filter(background, into: backgroundEstimate, microphone: microphone, error: backgroundError, errorSpectrum: backgroundErrorSpectrum)
        for i in 0..<n { estimate[i] = microphone[i] - error[i] }

        var mic: Float = 0
        var fg: Float = 0
        var bg: Float = 0
        var echo: Float = 0
        for i in 0..<n {
            mic += microphone[i] * microphone[i]
            fg += error[i] * error[i]
            bg += backgroundError[i] * backgroundError[i]
            echo += estimate[i] * estimate[i]
        }
        blockEnergies = (far: farEnergy, microphone: mic, estimate: echo)
        shiftSearch.record(microphone: microphone, estimate: estimate)
        microphoneEnergy = flushed(microphoneEnergy + 0.2 * (mic - microphoneEnergy))
        foregroundEnergy = flushed(foregroundEnergy + 0.2 * (fg - foregroundEnergy))
        backgroundEnergy = flushed(backgroundEnergy + 0.2 * (bg - backgroundEnergy))

        if farActive {
            adaptBackground()
            adaptForeground(nearEndPresence: nearEndPresence)
            choose()
        }
        for _ in 0..<min(Self.constraintsPerBlock, partitions) {
            constrain(partition: constraintCursor)
            constraintCursor = (constraintCursor + 1) % partitions
        }
    }

    /// Y = Σ_p W_p X_p; the error e = d − last half of IFFT(Y) / M, and its spectrum E = FFT([0, e]).
    private func filter(
        _ weights: UnsafeMutablePointer<Float>, into estimateSpectrum: UnsafeMutablePointer<Float>,
        microphone: UnsafePointer<Float>, error out: UnsafeMutablePointer<Float>, errorSpectrum: UnsafeMutablePointer<Float>
    ) {
        let floats = stride
        estimateSpectrum.update(repeating: 0, count: 2 * bins)
        for p in 0..<partitions {
            let w = weights + p * floats
            let x = far + ((head + p) % partitions) * floats
            for k in 0..<bins {
                let wr = w[2 * k]
                let wi = w[2 * k + 1]
                let xr = x[2 * k]
                let xi = x[2 * k + 1]
                estimateSpectrum[2 * k] += wr * xr - wi * xi
                estimateSpectrum[2 * k + 1] += wr * xi + wi * xr
            }
        }
        spectrum.update(from: estimateSpectrum, count: 2 * bins)
        fft.inverse(spectrum, time)
        let n = blockSamples
        let scale = 1 / Float(fftSize)
        for i in 0..<n { out[i] = microphone[i] - time[n + i] * scale }
        time.update(repeating: 0, count: n)
        (time + n).update(from: out, count: n)
        fft.forward(time, errorSpectrum)
    }

    /// Regularization of the normalization: a far end at about −70 dBFS over the whole span.
    private var regularization: Float { Float(fftSize) * Float(partitions) * 1e-7 }

    private func adaptBackground() {
        proportion(background)
        let delta = regularization / Float(partitions)
        for k in 0..<bins { spectrum[k] = Self.backgroundStep / (weightedPower[k] + delta) }
        markTapwise()
        update(background, errorSpectrum: backgroundErrorSpectrum, stepPerBin: spectrum, byTap: true)
    }

    /// The proportionate weighting of the partitions (IPNLMS): `evenShare` of the step is shared
    /// evenly, the rest in proportion to each partition's share of the filter's response, so that the
    /// partitions that hold the echo (after the direct path, a few) adapt several times faster
    /// than a plain normalized step would let them; `weightedPower` is the far-end power under
    /// that weighting (the normalization).
    private func proportion(_ weights: UnsafeMutablePointer<Float>) {
        var total: Float = 0
        for p in 0..<partitions {
            let w = weights + p * stride
            var norm: Float = 0
            for k in 0..<bins { norm += w[2 * k] * w[2 * k] + w[2 * k + 1] * w[2 * k + 1] }
            partitionGain[p] = norm.squareRoot()
            total += partitionGain[p]
        }
        let even = Self.evenShare / Float(partitions)
        for p in 0..<partitions {
            partitionGain[p] = total > 0 ? even + (1 - Self.evenShare) * partitionGain[p] / total : 1 / Float(partitions)
        }
        weightedPower.update(repeating: 0, count: bins)
        for p in 0..<partitions {
            let x = far + ((head + p) % partitions) * stride
            let g = partitionGain[p]
            for k in 0..<bins {
                weightedPower[k] += g * (x[2 * k] * x[2 * k] + x[2 * k + 1] * x[2 * k + 1])
            }
        }
    }

    /// The step per bin: the residual echo's share of the error, min(μmax, η·|Y|² / |E|²), over
    /// the far-end power.
    private func adaptForeground(nearEndPresence: Float) {
        var covariance: Float = 0
        var variance: Float = 0
        for k in 0..<bins {
            let yr = foregroundEstimate[2 * k]
            let yi = foregroundEstimate[2 * k + 1]
            let er = foregroundErrorSpectrum[2 * k]
            let ei = foregroundErrorSpectrum[2 * k + 1]
            let y2 = yr * yr + yi * yi
            let e2 = er * er + ei * ei
            let dy = y2 - estimatePower[k]
            let de = e2 - errorPower[k]
            covariance += dy * de
            variance += dy * dy
            estimatePower[k] = flushed(estimatePower[k] + 0.5 * (y2 - estimatePower[k]))
            errorPower[k] = flushed(errorPower[k] + 0.5 * (e2 - errorPower[k]))
        }
        covarianceErrorEstimate += 0.05 * (covariance - covarianceErrorEstimate)
        varianceEstimate += 0.05 * (variance - varianceEstimate)
        if varianceEstimate > 0 {
            leakage = min(0.5, max(Self.minimumLeakage, covarianceErrorEstimate / varianceEstimate))
        }
        // Where the near end talks the foreground holds still: the background tracks, and is copied in when it proves better.
        let hold = max(0, 1 - 2 * nearEndPresence)
        guard hold > 0 else { return }
        proportion(foreground)
        let delta = regularization / Float(partitions)
        let tiny = regularization * 1e-3
        for k in 0..<bins {
            let share = hold * min(Self.foregroundMaximumStep, leakage * estimatePower[k] / (errorPower[k] + tiny))
            spectrum[k] = share / (weightedPower[k] + delta)
        }
        update(foreground, errorSpectrum: foregroundErrorSpectrum, stepPerBin: spectrum, byTap: false)
    }

    /// W_p += μ_k · conj(X_p) · E, for every partition: unconstrained and with the partition's
    /// share of the step in the frequency domain, except, `byTap`, for the partitions marked in
    /// `tapwise` (the background's only: the foreground takes the background's response when it
    /// proves better). Those are updated tap by tap in the time domain: the constrained
    /// gradient (the first half of its inverse transform) times a gain per tap, `tapEvenShare`
    /// of the partition's share evenly and the rest in proportion to each tap's magnitude (IPNLMS
    /// within the partition, as the partitions share the step between them, up to `tapCap`
    /// times the partition's share). A direct path or an early reflection then adapts several
    /// times faster than the taps around it, whose updates (mostly gradient noise) shrink: IPMDF,
    /// at the cost of three transforms per such partition and block.
    private func update(
        _ weights: UnsafeMutablePointer<Float>, errorSpectrum e: UnsafeMutablePointer<Float>, stepPerBin mu: UnsafeMutablePointer<Float>,
        byTap: Bool
    ) {
        let floats = stride
        for p in 0..<partitions {
            let w = weights + p * floats
            let x = far + ((head + p) % partitions) * floats
            let g = partitionGain[p]
            if byTap && tapwise[p] {
                updateTapwise(w, far: x, errorSpectrum: e, stepPerBin: mu, gain: g)
                continue
            }
            for k in 0..<bins {
                let xr = x[2 * k]
                let xi = x[2 * k + 1]
                let er = e[2 * k]
                let ei = e[2 * k + 1]
                let step = g * mu[k]
                w[2 * k] += step * (xr * er + xi * ei)
                w[2 * k + 1] += step * (xr * ei - xi * er)
            }
        }
    }

    /// Marks in `tapwise` the `tapwiseCount` partitions with the largest share of the background's
    /// response (`partitionGain`, from `proportion`), by selection: a handful of a few dozen.
    private func markTapwise() {
        tapwise.update(repeating: false, count: partitions)
        for _ in 0..<tapwiseCount {
            var best = -1
            for p in 0..<partitions where !tapwise[p] && (best < 0 || partitionGain[p] > partitionGain[best]) { best = p }
            tapwise[best] = true
        }
        tapwiseConstrained = true
    }

    private func updateTapwise(
        _ w: UnsafeMutablePointer<Float>, far x: UnsafeMutablePointer<Float>, errorSpectrum e: UnsafeMutablePointer<Float>,
        stepPerBin mu: UnsafeMutablePointer<Float>, gain g: Float
    ) {
        let n = blockSamples
        for k in 0..<bins {
            let xr = x[2 * k]
            let xi = x[2 * k + 1]
            let er = e[2 * k]
            let ei = e[2 * k + 1]
            gradientSpectrum[2 * k] = mu[k] * (xr * er + xi * ei)
            gradientSpectrum[2 * k + 1] = mu[k] * (xr * ei - xi * er)
        }
        fft.inverse(gradientSpectrum, gradient)
        gradientSpectrum.update(from: w, count: 2 * bins)
        fft.inverse(gradientSpectrum, time)
        var magnitude: Float = 0
        for i in 0..<n { magnitude += abs(time[i]) }
        let scale = 1 / Float(fftSize)
        let even = Self.tapEvenShare
        let proportional = magnitude > 0 ? (1 - even) * Float(n) / magnitude : 0
        let evenGain = magnitude > 0 ? even : 1
        for i in 0..<n {
            let tapGain = g * min(Self.tapCap, evenGain + proportional * abs(time[i]))
            time[i] = (time[i] + tapGain * gradient[i]) * scale
        }
        (time + n).update(repeating: 0, count: n)
        fft.forward(time, w)
    }

    /// Copies the background into the foreground when it has been better by 2 dB for 3 blocks;
    /// resets the background from the foreground when it has been worse by 6 dB for 10; replaces
    /// a foreground louder than the microphone.
    private func choose() {
        let floats = partitions * stride
        // Diverged: its error louder than the microphone by 3 dB over ten blocks in a row of a
        // microphone well above silence (an echo tail or a pause alone proves nothing).
        let audible = microphoneEnergy > Float(blockSamples) * 1e-6
        poorBlocks = audible && foregroundEnergy > 0.5 * microphoneEnergy ? poorBlocks + 1 : 0
        shiftSearchHoldoff = max(0, shiftSearchHoldoff - 1)
        if poorBlocks >= Self.poorBlocksBeforeShiftSearch && shiftSearchHoldoff == 0 {
            shiftSearchHoldoff = Self.blocksBetweenShiftSearches
            if let samples = shiftSearch.find(), samples != 0, shiftedCancelsMore(bySamples: samples) {
                foreground.update(from: shifted, count: floats)
                background.update(from: shifted, count: floats)
                tapwiseConstrained = false
                estimatePower.update(repeating: 0, count: bins)
                errorPower.update(repeating: 0, count: bins)
                foregroundEnergy = 0.1 * microphoneEnergy
                backgroundEnergy = foregroundEnergy
                poorBlocks = 0
                divergedBlocks = 0
                backgroundBetterBlocks = 0
                backgroundWorseBlocks = 0
                echoPathShifts += 1
                return
            }
        }
        divergedBlocks = audible && foregroundEnergy > 2 * microphoneEnergy ? divergedBlocks + 1 : 0
        if divergedBlocks >= 10 {
            divergedBlocks = 0
            divergenceResets += 1
            if backgroundEnergy < microphoneEnergy {
                foreground.update(from: background, count: floats)
                foregroundEnergy = backgroundEnergy
            } else {
                foreground.update(repeating: 0, count: floats)
                background.update(repeating: 0, count: floats)
                tapwiseConstrained = false
                foregroundEnergy = microphoneEnergy
                backgroundEnergy = microphoneEnergy
            }
            backgroundBetterBlocks = 0
            backgroundWorseBlocks = 0
            return
        }
        // Better by 2 dB, and cancelling at least 6 dB of the microphone: a background that only
        // nibbles at a double talker's speech is not taken.
        let backgroundBetter = backgroundEnergy < 0.63 * foregroundEnergy && backgroundEnergy < 0.25 * microphoneEnergy
        backgroundBetterBlocks = backgroundBetter ? backgroundBetterBlocks + 1 : 0
        backgroundWorseBlocks = backgroundEnergy > 4 * foregroundEnergy ? backgroundWorseBlocks + 1 : 0
        if backgroundBetterBlocks >= 3 {
            foreground.update(from: background, count: floats)
            foregroundEnergy = backgroundEnergy
            backgroundBetterBlocks = 0
            foregroundCopies += 1
        } else if backgroundWorseBlocks >= 10 {
            background.update(from: foreground, count: floats)
            tapwiseConstrained = false
            backgroundEnergy = foregroundEnergy
            backgroundWorseBlocks = 0
            backgroundResets += 1
        }
    }

    /// Whether the foreground's response moved by `samples` (into `shifted`) would have cut the
    /// current block by 6 dB more than the foreground did: a shift that only matched by chance
    /// (the periodicity of voiced speech) is not taken. The background's buffers serve as scratch:
    /// the next block computes them anew.
    private func shiftedCancelsMore(bySamples samples: Int) -> Bool {
        shifted.update(from: foreground, count: partitions * stride)
        shiftResponse(shifted, bySamples: samples)
        let n = blockSamples
        let microphone = shiftSearch.lastMicrophone
        filter(shifted, into: backgroundEstimate, microphone: microphone, error: backgroundError, errorSpectrum: backgroundErrorSpectrum)
        var now: Float = 0
        var moved: Float = 0
        for i in 0..<n {
            now += error[i] * error[i]
            moved += backgroundError[i] * backgroundError[i]
        }
        return moved < 0.25 * now
    }

    /// Moves a filter's response `samples` taps later (earlier when negative) across its
    /// partitions: each partition's taps in the time domain, the whole response shifted, and
    /// split back into partitions (constrained).
    private func shiftResponse(_ weights: UnsafeMutablePointer<Float>, bySamples samples: Int) {
        let n = blockSamples
        let total = partitions * n
        let scale = 1 / Float(fftSize)
        for p in 0..<partitions {
            spectrum.update(from: weights + p * stride, count: 2 * bins)
            fft.inverse(spectrum, time)
            for i in 0..<n { response[p * n + i] = time[i] * scale }
        }
        if samples > 0 {
            memmove(response + samples, response, (total - samples) * MemoryLayout<Float>.stride)
            response.update(repeating: 0, count: samples)
        } else {
            memmove(response, response - samples, (total + samples) * MemoryLayout<Float>.stride)
            (response + total + samples).update(repeating: 0, count: -samples)
        }
        for p in 0..<partitions {
            time.update(from: response + p * n, count: n)
            (time + n).update(repeating: 0, count: n)
            fft.forward(time, weights + p * stride)
        }
    }

    /// The gradient constraint on one partition of both filters: its impulse response is kept to
    /// the first `blockSamples` taps (overlap-save), the circular part the unconstrained updates
    /// left is removed.
    private func constrain(partition p: Int) {
        constrain(foreground + p * stride)
        if !(tapwiseConstrained && tapwise[p]) { constrain(background + p * stride) }
    }

    private func constrain(_ w: UnsafeMutablePointer<Float>) {
        let scale = 1 / Float(fftSize)
        spectrum.update(from: w, count: 2 * bins)
        fft.inverse(spectrum, time)
        for i in 0..<blockSamples { time[i] *= scale }
        (time + blockSamples).update(repeating: 0, count: blockSamples)
        fft.forward(time, w)
    }

    /// The far end is now taken `blocks` blocks further back (or nearer, when negative): the
    /// far-end spectra move with it. The echo's place against the far end is then unchanged
    /// when the far end moved to follow the truth (a new reading of the devices' timing, or an
    /// echo delay that changed before the filters learned it anew): both responses stay. But the
    /// filters may already have learned the echo at its new place, before the delay was measured.
    /// So, with `movingBackground`, the background's response moves the other way while the
    /// foreground's stays, and the comparison of the two (`choose`) keeps whichever cancels more.
    func shift(byBlocks blocks: Int, movingBackground: Bool) {
        guard blocks != 0 else { return }
        let floats = stride
        let count = min(abs(blocks), partitions)
        if movingBackground {
            shift(background, byBlocks: blocks, count: count)
            tapwiseConstrained = false
        }
        backgroundBetterBlocks = 0
        backgroundWorseBlocks = 0
        if blocks > 0 {
            // Lag p is now what lag p + blocks was; the newest `count` spectra become lags past
            // the span, cleared.
            for p in 0..<count { (far + ((head + p) % partitions) * floats).update(repeating: 0, count: floats) }
            head = (head + count) % partitions
        } else {
            // The oldest `count` become the newest, not known yet: cleared.
            head = (head + partitions - count) % partitions
            for p in 0..<count { (far + ((head + p) % partitions) * floats).update(repeating: 0, count: floats) }
        }
        estimatePower.update(repeating: 0, count: bins)
        errorPower.update(repeating: 0, count: bins)
    }

    private func shift(_ weights: UnsafeMutablePointer<Float>, byBlocks blocks: Int, count: Int) {
        let floats = stride
        let kept = (partitions - count) * floats * MemoryLayout<Float>.stride
        if blocks > 0 {
            // Lag p is now what lag p + blocks was.
            memmove(weights, weights + count * floats, kept)
            (weights + (partitions - count) * floats).update(repeating: 0, count: count * floats)
        } else {
            memmove(weights + count * floats, weights, kept)
            weights.update(repeating: 0, count: count * floats)
        }
    }
}

/// `value`, or zero when it is so small that it would soon be subnormal (see `PartitionedEchoFilter`).
@inline(__always)
func flushed(_ value: Float) -> Float {
    abs(value) < 1e-30 ? 0 : value
}
