import Glibc

/// Tether's own acoustic echo canceller for one mono capture stream, in 10 ms blocks: a linear
/// partitioned-block frequency-domain filter (`PartitionedEchoFilter`: foreground and background
/// filters, a step that falls in double talk, divergence recovery) followed by a residual echo
/// suppressor (`ResidualEchoSuppressor`: per-band gains from the echo estimate and the coherences,
/// comfort noise).
///
/// The caller aligns the far end: each block comes with the previous and the current block of
/// what was played, taken so that the echo of the current block's start arrives a little after
/// it (`VoiceProcessor` takes it 40 ms earlier than the echo delay that `EchoDelayEstimator`
/// measured). The filter spans `tailMilliseconds` from there. When the alignment moves,
/// `followEchoDelay(byBlocks:)` or `realign(byBlocks:)` says why, and the filter moves with it.
/// The output is 5 ms late (the suppressor's hop).
///
/// Everything is allocated in `init`; `process` neither allocates nor locks (FFTW's new-array
/// execute calls on plans made in `init`), and must be called from one thread.
public final class EchoCanceller: @unchecked Sendable {
    public let sampleRateHertz: Int
    /// Samples per block (10 ms).
    public let blockSamples: Int
    /// The echo the filter spans after the start of the far block it is given, in ms.
    public var tailMilliseconds: Int { linear.partitions * 10 }

    /// The figures of the canceller.
    public struct Statistics: Sendable, Equatable {
        /// Echo return loss enhancement over the recent far-end-alone speech (dB), nil until heard.
        public var echoReturnLossEnhancementDecibels: Double?
        /// Echo return loss: how much quieter the echo is at the microphone than what is played (dB).
        public var echoReturnLossDecibels: Double?
        /// Whether the far end plays and its echo reaches the microphone now.
        public var echoPresent = false
        /// The linear filter's events: background copied into the foreground (a better filter
        /// found), background reset from the foreground (disturbed by double talk), and a
        /// foreground that diverged (louder than the microphone) replaced.
        public var foregroundCopies = 0
        public var backgroundResets = 0
        public var divergenceResets = 0
        /// Times the echo was found shifted by less than a block, and the response moved with it.
        public var echoPathShifts = 0
        /// The near end's presence in the output (coherence of microphone and output, 0…1).
        public var nearEndCoherence = 0.0
        /// The share of the speech bands whose output is well over the residual echo expected
        /// (0…1): what eases the suppression in double talk.
        public var nearEndShare = 0.0
    }

    private let linear: PartitionedEchoFilter
    private let suppressor: ResidualEchoSuppressor
    private let microphone: UnsafeMutablePointer<Float>
    private let farWindow: UnsafeMutablePointer<Float>
    private let output: UnsafeMutablePointer<Float>
    private var microphoneEnergy: Float = 0
    private var outputEnergy: Float = 0
    private var farEnergy: Float = 0
    private var echoHeard = false
    private var echoPresent = false
    /// How long the echo's tail lasts after the echo was last present (a room's reverberation,
    /// the filter's span), and the blocks since then (counted up to one past it).
    static let echoHangoverBlocks = 30
    private var blocksSinceEcho = echoHangoverBlocks + 1

    /// Creates a canceller for `sampleRateHertz` (8, 16, 32 or 48 kHz) whose filter spans
    /// `tailMilliseconds` (rounded up to whole 10 ms blocks).
    public init(sampleRateHertz: Int = 48_000, tailMilliseconds: Int = 320) {
        precondition([8000, 16_000, 32_000, 48_000].contains(sampleRateHertz), "unsupported rate")
        self.sampleRateHertz = sampleRateHertz
        blockSamples = sampleRateHertz / 100
        linear = PartitionedEchoFilter(blockSamples: blockSamples, partitions: max(1, (tailMilliseconds + 9) / 10))
        suppressor = ResidualEchoSuppressor(blockSamples: blockSamples, sampleRateHertz: sampleRateHertz)
        microphone = RealFFT.allocateReal(blockSamples)
        farWindow = RealFFT.allocateReal(2 * blockSamples)
        output = RealFFT.allocateReal(blockSamples)
    }

    deinit {
        RealFFT.free(microphone)
        RealFFT.free(farWindow)
        RealFFT.free(output)
    }

    /// Cancels the echo in one captured block, in place. `far` holds `2 × blockSamples` of what
    /// was played: the block before the one aligned with this capture, then that one.
    public func process(_ near: UnsafeMutablePointer<Int16>, far: UnsafePointer<Int16>) {
        let n = blockSamples
        let scale: Float = 1 / 32_768
        for i in 0..<n { microphone[i] = Float(near[i]) * scale }
        for i in 0..<(2 * n) { farWindow[i] = Float(far[i]) * scale }
        // The foreground holds where the near end talks: by the coherence of microphone and
        // output, or by the share of bands the near end holds, whichever says more (the
        // coherence reads about half in double talk with an echo as loud as the talker).
        linear.process(
            farWindow: farWindow, microphone: microphone,
            nearEndPresence: max(suppressor.nearEndCoherence, suppressor.nearEndPresence))
        suppressor.process(
            microphone: microphone, estimate: linear.estimate, error: linear.error, farActive: linear.farActive, output: output)
        for i in 0..<n {
            let sample = (output[i] * 32_768).rounded()
            near[i] = Int16(max(-32_768, min(32_767, sample)))
        }
        measure()
    }

    /// The far end is now taken `blocks` blocks further back (nearer when negative) because the
    /// echo delay measured changed by that much: the far-end history moves; the foreground's
    /// response stays where it is against the echo, the background's moves with the far end (in
    /// case it had already learned the echo at its new place), and the better one is kept.
    public func followEchoDelay(byBlocks blocks: Int) {
        linear.shift(byBlocks: blocks, movingBackground: true)
    }

    /// The far end is now taken `blocks` blocks further back (nearer when negative) because the
    /// devices' timing was read anew: the far-end history moves, and the echo's place against
    /// the far end, hence the filter's response, stays.
    public func realign(byBlocks blocks: Int) {
        linear.shift(byBlocks: blocks, movingBackground: false)
    }

    private func measure() {
        let n = blockSamples
        let (far, mic, estimate) = linear.blockEnergies
        var out: Float = 0
        for i in 0..<n { out += output[i] * output[i] }
        // The echo is present when the filter's estimate of it is over −70 dBFS.
        echoPresent = linear.farActive && estimate > Float(n) * 1e-7
        blocksSinceEcho = echoPresent ? 0 : min(blocksSinceEcho + 1, Self.echoHangoverBlocks + 1)
        guard echoPresent, suppressor.nearEndCoherence < 0.5 else { return }
        echoHeard = true
        microphoneEnergy += 0.05 * (mic - microphoneEnergy)
        outputEnergy += 0.05 * (out - outputEnergy)
        farEnergy += 0.05 * (far - farEnergy)
    }

    /// Whether the last block held the far end's echo (or its tail) and no clear near talker: the
    /// filter heard echo in the last `echoHangoverBlocks`, and the suppression had not fully eased
    /// for a near talker. Gain control after the canceller must not raise such a block: all it
    /// holds is what echo is left and the background.
    public var hearsOnlyEcho: Bool {
        blocksSinceEcho <= Self.echoHangoverBlocks && suppressor.nearEndPresence < 1
    }

    /// The latest figures.
    public var statistics: Statistics {
        var s = Statistics()
        if echoHeard && microphoneEnergy > 0 {
            s.echoReturnLossEnhancementDecibels = Double(10 * log10(microphoneEnergy / max(outputEnergy, 1e-12)))
            s.echoReturnLossDecibels = Double(10 * log10(max(farEnergy, 1e-12) / microphoneEnergy))
        }
        s.echoPresent = echoPresent
        s.foregroundCopies = linear.foregroundCopies
        s.backgroundResets = linear.backgroundResets
        s.divergenceResets = linear.divergenceResets
        s.echoPathShifts = linear.echoPathShifts
        s.nearEndCoherence = Double(suppressor.nearEndCoherence)
        s.nearEndShare = Double(suppressor.nearEndShare)
        return s
    }
}
