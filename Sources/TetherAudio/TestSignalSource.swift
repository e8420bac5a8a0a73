import Glibc

/// A virtual capture device producing a continuous sine tone in real time.
///
/// It ticks once per frame duration on absolute deadlines (on the process's shared device
/// clock); each tick computes one frame of the sine, anchored at the running sample counter (so
/// the phase is continuous across frames and never accumulates rounding error), writes it into
/// the capture ring (or counts an overrun and drops it when the ring lacks room for the whole
/// frame) and signals the wake-up. Sample `n` of a run is, to within one unit of rounding,
/// `round(32 767 × 10^(levelDBFS / 20) × sin(2π × frequencyHertz × n / sampleRateHertz))`.
///
/// With `bursts`, the tone sounds only for the first `onMilliseconds` of every `everyMilliseconds`
/// (sample-exact, counted from the first sample) and is silent in between: a signal whose onsets
/// can be found again after a path, for latency measurements.
public final class TestSignalSource: AudioSource {
    /// A tone that sounds for `onMilliseconds` at the start of every `everyMilliseconds`.
    public struct Bursts: Sendable, Equatable {
        public var onMilliseconds: Int
        public var everyMilliseconds: Int
        /// - Precondition: 0 < onMilliseconds ≤ everyMilliseconds.
        public init(onMilliseconds: Int, everyMilliseconds: Int) {
            precondition(onMilliseconds > 0 && onMilliseconds <= everyMilliseconds, "burst on-time must be in 1…period")
            self.onMilliseconds = onMilliseconds
            self.everyMilliseconds = everyMilliseconds
        }
    }

    /// Frequency of the tone, in hertz.
    public let frequencyHertz: Double
    /// Peak level of the tone relative to full scale, in dBFS (a full-scale sine is 0 dBFS; by the
    /// same convention `ToneAnalysis.rmsDBFS` of the output reads this level).
    public let levelDBFS: Double
    /// When set, the tone sounds in bursts instead of continuously.
    public let bursts: Bursts?
    public let name: String
    private let runner = ClockedDeviceRunner(threadName: "tether-tone")

    /// - Parameters:
    ///   - frequencyHertz: tone frequency in hertz; it must be below half the sample rate of the
    ///     endpoint the source is started with.
    ///   - levelDBFS: peak level in dBFS, at most 0.
    /// - Precondition: `frequencyHertz` is finite and ≥ 0; `levelDBFS` is ≤ 0 (−∞ gives silence).
    ///   - bursts: when set, the tone sounds in bursts (see `Bursts`).
    public init(frequencyHertz: Double = 440, levelDBFS: Double = -12, bursts: Bursts? = nil) {
        precondition(frequencyHertz.isFinite && frequencyHertz >= 0, "TestSignalSource frequency must be finite and ≥ 0")
        precondition(!levelDBFS.isNaN && levelDBFS <= 0, "TestSignalSource level must be ≤ 0 dBFS")
        self.frequencyHertz = frequencyHertz
        self.levelDBFS = levelDBFS
        self.bursts = bursts
        self.name =
            "test signal \(frequencyHertz) Hz at \(levelDBFS) dBFS"
            + (bursts.map { " in \($0.onMilliseconds) ms bursts every \($0.everyMilliseconds) ms" } ?? "")
    }

    /// Starts the tone thread.
    /// - Throws: `.unsupportedFormat` when the tone is not below half the sample rate or the format
    ///   is not mono, `.ringTooSmall`, `.alreadyStarted`, `.deviceThreadFailed`.
    public func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) {
        let frequencyHertz = frequencyHertz
        let amplitude = 32_767 * pow(10, levelDBFS / 20)
        let bursts = bursts
        try runner.start(deviceName: name, endpoint: endpoint) { endpoint throws(AudioDeviceError) in
            let nyquistHertz = Double(endpoint.format.sampleRateHertz) / 2
            guard frequencyHertz < nyquistHertz else {
                throw .unsupportedFormat(
                    reason: "a \(frequencyHertz) Hz tone needs a sample rate above \(2 * frequencyHertz) Hz, "
                        + "not \(endpoint.format.sampleRateHertz) Hz")
            }
            let samplesPerMillisecond = UInt64(endpoint.format.sampleRateHertz / 1000)
            return ToneWork(
                frame: .allocate(capacity: endpoint.format.samplesPerFrame),
                amplitude: amplitude,
                cyclesPerSample: frequencyHertz / Double(endpoint.format.sampleRateHertz),
                burstOnSamples: bursts.map { UInt64($0.onMilliseconds) * samplesPerMillisecond } ?? 1,
                burstPeriodSamples: bursts.map { UInt64($0.everyMilliseconds) * samplesPerMillisecond } ?? 1)
        }
    }

    public func stop() { runner.stop() }

    public var statistics: AudioDeviceStatistics { runner.statistics }

    deinit { runner.stop() }
}

/// Per-frame work of `TestSignalSource`.
private struct ToneWork: ClockedFrameWork, @unchecked Sendable {
    /// One frame of samples, allocated at start and freed by `finish`.
    let frame: UnsafeMutableBufferPointer<Int16>
    /// Peak amplitude, in Int16 units.
    let amplitude: Double
    /// Tone frequency divided by the sample rate, in cycles per sample.
    let cyclesPerSample: Double
    /// Samples at the start of every `burstPeriodSamples` that carry the tone (both 1: continuous).
    let burstOnSamples: UInt64
    let burstPeriodSamples: UInt64
    /// Samples produced since start (the source's timestamp: it advances even for dropped frames).
    var sampleIndex: UInt64 = 0
    /// The rotation by one sample's angle.
    let stepCosine: Double
    let stepSine: Double

    init(frame: UnsafeMutableBufferPointer<Int16>, amplitude: Double, cyclesPerSample: Double, burstOnSamples: UInt64, burstPeriodSamples: UInt64) {
        self.frame = frame
        self.amplitude = amplitude
        self.cyclesPerSample = cyclesPerSample
        self.burstOnSamples = burstOnSamples
        self.burstPeriodSamples = burstPeriodSamples
        stepCosine = cos(2 * Double.pi * cyclesPerSample)
        stepSine = sin(2 * Double.pi * cyclesPerSample)
    }

    /// - Note: Called on the device thread; must not allocate.
    mutating func processFrame(_ io: DeviceThreadIO) {
        // The frame's first sample from the sample counter (exact phase, so no error carries
        // across frames), the rest by rotating a phasor one sample's angle at a time: two libm
        // calls a frame instead of one per sample. Over a frame the rotation drifts by ~1e-13,
        // far below the Int16 rounding.
        let cycles = Double(sampleIndex) * cyclesPerSample
        let angle = 2 * Double.pi * (cycles - cycles.rounded(.down))
        var re = cos(angle)
        var im = sin(angle)
        for i in 0..<frame.count {
            let sounding = sampleIndex % burstPeriodSamples < burstOnSamples
            frame[i] = sounding ? Int16((amplitude * im).rounded()) : 0
            (re, im) = (re * stepCosine - im * stepSine, re * stepSine + im * stepCosine)
            sampleIndex &+= 1
        }
        io.pushFrame(UnsafeBufferPointer(frame))
        io.signal()
    }

    func finish(counters: DeviceCounters) {
        frame.deallocate()
    }
}
