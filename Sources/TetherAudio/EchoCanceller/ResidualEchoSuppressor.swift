import Glibc

/// The second stage of `EchoCanceller`: per-band gains on what the linear filter left, in a
/// short-time spectrum (frames of one block, half-block hops, square-root Hann windows: half a
/// block of latency, 5 ms at 48 kHz).
///
/// Per bin it keeps smoothed powers and cross-spectra of the microphone d, the linear echo
/// estimate y and the linear output e, and from them:
/// - the **residual echo** R = max(S_yy / ERLE, γ_ey · S_ee): the echo estimate scaled by how
///   much the linear stage removes in that band (its ERLE, learned while the far end talks alone),
///   or the part of the output coherent with the echo estimate, whichever is larger;
/// - the **near-end coherence**: the coherence of microphone and output, γ_de, averaged over the
///   speech bands. The near talker is in both (the filter does not remove it), echo only in the
///   microphone; the ERLE is learned only while it is low. In double talk it reads about the
///   near talker's share of the microphone, so it stays low when the echo is as loud as the talker;
/// - the **near-end share**: the share of the speech bands whose output is well over what the
///   linear stage leaves of the echo (S_yy / ERLE) and the background: 6 × (S_yy / ERLE + 2 ×
///   floor). Over the simulated double talk it read 0.05–0.1 while the near talker was silent and
///   0.8–0.9 while it spoke at −40 to −20 dBFS (the coherence: 0.16–0.2 and 0.5–0.7).
///
/// The gain is 1 − o·R / S_ee, bounded below by a floor: where the output is mostly residual
/// echo it is cut, where it is mostly the near talker (double talk) it passes nearly untouched.
/// The overdrive o is 2 and the floor −40 dB while the near end is silent; both ease, to 1 and
/// −12 dB, as the near-end share rises from 0.1 to 0.3 (echo left under a talker is masked by
/// the talker; speech cut is heard). Gains
/// fall at once and rise over two hops. What a gain removes of the background is put back as
/// comfort noise: random-phase noise at the output's noise floor (a minimum tracker), so that
/// suppression never gates the room.
final class ResidualEchoSuppressor {
    let blockSamples: Int
    private let frame: Int
    private let hop: Int
    private let bins: Int
    private let fft: RealFFT
    private let window: UnsafeMutablePointer<Float>
    /// The last `frame` samples of each signal.
    private let microphoneFrame: UnsafeMutablePointer<Float>
    private let estimateFrame: UnsafeMutablePointer<Float>
    private let errorFrame: UnsafeMutablePointer<Float>
    private let time: UnsafeMutablePointer<Float>
    private let d: UnsafeMutablePointer<Float>
    private let y: UnsafeMutablePointer<Float>
    private let e: UnsafeMutablePointer<Float>
    private let powerDD: UnsafeMutablePointer<Float>
    private let powerYY: UnsafeMutablePointer<Float>
    private let powerEE: UnsafeMutablePointer<Float>
    /// Cross-spectra (interleaved complex): E·conj(Y) and D·conj(E).
    private let crossEY: UnsafeMutablePointer<Float>
    private let crossDE: UnsafeMutablePointer<Float>
    private let erle: UnsafeMutablePointer<Float>
    private let noiseFloor: UnsafeMutablePointer<Float>
    private let gain: UnsafeMutablePointer<Float>
    /// Overlap-add of the synthesized frames.
    private let overlap: UnsafeMutablePointer<Float>
    private var random: UInt32 = 0x2545_F491
    /// Unit phasors (cosine, sine) at `phases` evenly spaced angles, for the comfort noise's
    /// random phases: a table lookup instead of a cosine and a sine per bin and hop.
    private static let phases = 256
    private let phasors: UnsafeMutablePointer<Float>
    private var framesSeen = 0

    /// Near-end coherence of the last hop (γ_de over 300 Hz – 4 kHz).
    private(set) var nearEndCoherence: Float = 0
    /// Near-end share of the last hop (bins of 300 Hz – 4 kHz whose output is well over the
    /// residual echo expected and the background).
    private(set) var nearEndShare: Float = 0
    /// How far the suppression has eased for a near talker (0: not at all, 1: fully), from the
    /// near-end share.
    private(set) var nearEndPresence: Float = 0

    /// The PSDs' smoothing per hop (a memory of about 6 hops, 30 ms at 48 kHz), and the
    /// coherence such smoothing reads between unrelated signals (taken off).
    static let smoothing: Float = 0.15
    static let coherenceBias: Float = 0.2
    static let minimumGain: Float = 0.01
    static let overdrive: Float = 2
    static let doubleTalkMinimumGain: Float = 0.25
    /// How far over the expected residual echo and background a bin's output must be to count
    /// for the near end, and the near-end share over which the suppression eases (from, width).
    /// Chosen on the simulated rooms of `tether-bench echo` (ratio 2, 4, 6, 8; from 0.05–0.1,
    /// width 0.15–0.2): 6 kept the steady echo cut within 1.5 dB of the coherence rule before it
    /// (35.7 and 36.8 dB against 37.1 and 37.3) and gained 0.2–0.5 PESQ-WB in double talk; 2 cost
    /// 3–7 dB of cut against 6; 8 scored 0.02–0.03 lower than 6 at equal level.
    static let nearEndRatio: Float = 6
    static let nearEndShareFrom: Float = 0.1
    static let nearEndShareWidth: Float = 0.2

    init(blockSamples: Int, sampleRateHertz: Int) {
        precondition(blockSamples % 4 == 0)
        self.blockSamples = blockSamples
        frame = blockSamples
        hop = blockSamples / 2
        bins = blockSamples / 2 + 1
        fft = RealFFT(size: blockSamples)
        window = RealFFT.allocateReal(frame)
        for i in 0..<frame { window[i] = Float(sin(Double.pi * Double(i) / Double(frame))) }
        microphoneFrame = RealFFT.allocateReal(frame)
        estimateFrame = RealFFT.allocateReal(frame)
        errorFrame = RealFFT.allocateReal(frame)
        time = RealFFT.allocateReal(frame)
        d = RealFFT.allocateComplex(bins: bins)
        y = RealFFT.allocateComplex(bins: bins)
        e = RealFFT.allocateComplex(bins: bins)
        powerDD = RealFFT.allocateReal(bins)
        powerYY = RealFFT.allocateReal(bins)
        powerEE = RealFFT.allocateReal(bins)
        crossEY = RealFFT.allocateComplex(bins: bins)
        crossDE = RealFFT.allocateComplex(bins: bins)
        erle = RealFFT.allocateReal(bins)
        erle.update(repeating: 1, count: bins)
        noiseFloor = RealFFT.allocateReal(bins)
        gain = RealFFT.allocateReal(bins)
        gain.update(repeating: 1, count: bins)
        overlap = RealFFT.allocateReal(frame)
        phasors = RealFFT.allocateReal(2 * Self.phases)
        for i in 0..<Self.phases {
            let angle = 2 * Double.pi * Double(i) / Double(Self.phases)
            phasors[2 * i] = Float(cos(angle))
            phasors[2 * i + 1] = Float(sin(angle))
        }
        let hertzPerBin = Double(sampleRateHertz) / Double(frame)
        speechBins = max(1, Int(300 / hertzPerBin))..<min(bins, Int(4000 / hertzPerBin) + 1)
    }

    private let speechBins: Range<Int>


    deinit {
        for pointer in [
            window, microphoneFrame, estimateFrame, errorFrame, time, d, y, e, powerDD, powerYY, powerEE, crossEY, crossDE, erle,
            noiseFloor, gain, overlap, phasors,
        ] {
            RealFFT.free(pointer)
        }
    }

    /// One block of the microphone, the linear echo estimate and the linear output (full scale 1);
    /// writes the block's output (half a block late) to `output`. `farActive`: whether the far
    /// end played in this block (the ERLE is learned only then).
    func process(
        microphone: UnsafePointer<Float>, estimate: UnsafePointer<Float>, error: UnsafePointer<Float>, farActive: Bool,
        output: UnsafeMutablePointer<Float>
    ) {
        for h in 0..<(blockSamples / hop) {
            let offset = h * hop
            slide(microphoneFrame, microphone + offset)
            slide(estimateFrame, estimate + offset)
            slide(errorFrame, error + offset)
            analyze(microphoneFrame, into: d)
            analyze(estimateFrame, into: y)
            analyze(errorFrame, into: e)
            computeGains(farActive: farActive)
            synthesize(into: output + offset)
        }
    }

    private func slide(_ buffer: UnsafeMutablePointer<Float>, _ samples: UnsafePointer<Float>) {
        memmove(buffer, buffer + hop, (frame - hop) * MemoryLayout<Float>.stride)
        (buffer + frame - hop).update(from: samples, count: hop)
    }

    private func analyze(_ buffer: UnsafeMutablePointer<Float>, into spectrum: UnsafeMutablePointer<Float>) {
        for i in 0..<frame { time[i] = buffer[i] * window[i] }
        fft.forward(time, spectrum)
    }

    private func computeGains(farActive: Bool) {
        let a = Self.smoothing
        let tiny: Float = 1e-12
        framesSeen += 1
        var coherenceSum: Float = 0
        for k in 0..<bins {
            let dr = d[2 * k], di = d[2 * k + 1]
            let yr = y[2 * k], yi = y[2 * k + 1]
            let er = e[2 * k], ei = e[2 * k + 1]
            powerDD[k] = flushed(powerDD[k] + a * (dr * dr + di * di - powerDD[k]))
            powerYY[k] = flushed(powerYY[k] + a * (yr * yr + yi * yi - powerYY[k]))
            powerEE[k] = flushed(powerEE[k] + a * (er * er + ei * ei - powerEE[k]))
            // E·conj(Y) and D·conj(E).
            crossEY[2 * k] = flushed(crossEY[2 * k] + a * (er * yr + ei * yi - crossEY[2 * k]))
            crossEY[2 * k + 1] = flushed(crossEY[2 * k + 1] + a * (ei * yr - er * yi - crossEY[2 * k + 1]))
            crossDE[2 * k] = flushed(crossDE[2 * k] + a * (dr * er + di * ei - crossDE[2 * k]))
            crossDE[2 * k + 1] = flushed(crossDE[2 * k + 1] + a * (di * er - dr * ei - crossDE[2 * k + 1]))
            if speechBins.contains(k) {
                let cr = crossDE[2 * k], ci = crossDE[2 * k + 1]
                coherenceSum += (cr * cr + ci * ci) / (powerDD[k] * powerEE[k] + tiny)
            }
            // The floor falls at once and rises about 2 dB a second.
            noiseFloor[k] = framesSeen == 1 ? powerEE[k] : min(powerEE[k], noiseFloor[k] * 1.0023 + tiny)
        }
        nearEndCoherence = coherenceSum / Float(speechBins.count)
        var nearBins = 0
        for k in speechBins where powerEE[k] > Self.nearEndRatio * (powerYY[k] / erle[k] + 2 * noiseFloor[k]) {
            nearBins += 1
        }
        nearEndShare = Float(nearBins) / Float(speechBins.count)
        let learn = farActive && nearEndCoherence < 0.5
        // Gentler where the near end talks: the overdrive falls from 2 to 1 and the floor rises
        // to −12 dB.
        nearEndPresence = min(1, max(0, (nearEndShare - Self.nearEndShareFrom) / Self.nearEndShareWidth))
        let overdrive = Self.overdrive - (Self.overdrive - 1) * nearEndPresence
        let floor = Self.minimumGain + (Self.doubleTalkMinimumGain - Self.minimumGain) * nearEndPresence
        for k in 0..<bins {
            if learn && powerYY[k] > 4 * noiseFloor[k] {
                let measured = min(10_000, max(1, powerDD[k] / (powerEE[k] + tiny)))
                erle[k] += 0.05 * (measured - erle[k])
            }
            let cr = crossEY[2 * k], ci = crossEY[2 * k + 1]
            // Coherence measured over few frames reads high even for unrelated signals: the
            // bias (about the smoothing constant) is taken off.
            let rawEY = min(1, (cr * cr + ci * ci) / (powerEE[k] * powerYY[k] + tiny))
            let coherenceEY = max(0, (rawEY - Self.coherenceBias) / (1 - Self.coherenceBias))
            let residual = max(powerYY[k] / erle[k], coherenceEY * powerEE[k])
            let target = max(floor, min(1, 1 - overdrive * residual / (powerEE[k] + tiny)))
            gain[k] = target < gain[k] ? target : gain[k] + 0.5 * (target - gain[k])
        }
    }

    /// Applies the gains, adds the comfort noise, and overlap-adds one hop into `out`.
    private func synthesize(into out: UnsafeMutablePointer<Float>) {
        for k in 0..<bins {
            let g = gain[k]
            var re = g * e[2 * k]
            var im = g * e[2 * k + 1]
            let missing = noiseFloor[k] * (1 - g * g)
            if missing > 0 {
                let amplitude = missing.squareRoot()
                let (c, s) = randomPhase()
                re += amplitude * c
                im += amplitude * s
            }
            e[2 * k] = re
            e[2 * k + 1] = im
        }
        e[1] = 0
        e[2 * (bins - 1) + 1] = 0
        fft.inverse(e, time)
        let scale = 1 / Float(frame)
        for i in 0..<frame { overlap[i] += time[i] * scale * window[i] }
        out.update(from: overlap, count: hop)
        memmove(overlap, overlap + hop, (frame - hop) * MemoryLayout<Float>.stride)
        (overlap + frame - hop).update(repeating: 0, count: hop)
    }

    /// A unit phasor (cosine, sine) at a uniformly random one of `phases` angles (xorshift32;
    /// its top bits pick the angle).
    private func randomPhase() -> (Float, Float) {
        random ^= random << 13
        random ^= random >> 17
        random ^= random << 5
        let i = Int(random >> 24)
        return (phasors[2 * i], phasors[2 * i + 1])
    }
}
