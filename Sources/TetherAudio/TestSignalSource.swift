import Glibc

/// A virtual capture device producing a continuous sine tone in real time.
///
/// Its thread ticks once per frame duration on absolute deadlines; each tick computes one frame
/// of the sine from the running sample counter (so the phase is continuous across frames and
/// never accumulates rounding error), writes it into the capture ring (or counts an overrun and
/// drops it when the ring lacks room for the whole frame) and signals the wake-up. Sample `n`
/// of a run is `round(32 767 × 10^(levelDBFS / 20) × sin(2π × frequencyHertz × n / sampleRateHertz))`.
public final class TestSignalSource: AudioSource {
    /// Frequency of the tone, in hertz.
    public let frequencyHertz: Double
    /// Peak level of the tone relative to full scale, in dBFS (a full-scale sine is 0 dBFS; by the
    /// same convention `ToneAnalysis.rmsDBFS` of the output reads this level).
    public let levelDBFS: Double
    public let name: String
    private let runner = ClockedDeviceRunner(threadName: "tether-tone")

    /// - Parameters:
    ///   - frequencyHertz: tone frequency in hertz; it must be below half the sample rate of the
    ///     endpoint the source is started with.
    ///   - levelDBFS: peak level in dBFS, at most 0.
    /// - Precondition: `frequencyHertz` is finite and ≥ 0; `levelDBFS` is ≤ 0 (−∞ gives silence).
    public init(frequencyHertz: Double = 440, levelDBFS: Double = -12) {
        precondition(frequencyHertz.isFinite && frequencyHertz >= 0, "TestSignalSource frequency must be finite and ≥ 0")
        precondition(!levelDBFS.isNaN && levelDBFS <= 0, "TestSignalSource level must be ≤ 0 dBFS")
        self.frequencyHertz = frequencyHertz
        self.levelDBFS = levelDBFS
        self.name = "test signal \(frequencyHertz) Hz at \(levelDBFS) dBFS"
    }

    /// Starts the tone thread.
    /// - Throws: `.unsupportedFormat` when the tone is not below half the sample rate or the format
    ///   is not mono, `.ringTooSmall`, `.alreadyStarted`, `.deviceThreadFailed`.
    public func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) {
        let frequencyHertz = frequencyHertz
        let amplitude = 32_767 * pow(10, levelDBFS / 20)
        try runner.start(deviceName: name, endpoint: endpoint) { endpoint throws(AudioDeviceError) in
            let nyquistHertz = Double(endpoint.format.sampleRateHertz) / 2
            guard frequencyHertz < nyquistHertz else {
                throw .unsupportedFormat(
                    reason: "a \(frequencyHertz) Hz tone needs a sample rate above \(2 * frequencyHertz) Hz, "
                        + "not \(endpoint.format.sampleRateHertz) Hz")
            }
            return ToneWork(
                frame: .allocate(capacity: endpoint.format.samplesPerFrame),
                amplitude: amplitude,
                cyclesPerSample: frequencyHertz / Double(endpoint.format.sampleRateHertz))
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
    /// Samples produced since start (the source's timestamp: it advances even for dropped frames).
    var sampleIndex: UInt64 = 0

    /// - Note: Called on the device thread; must not allocate.
    mutating func processFrame(_ io: DeviceThreadIO) {
        for i in 0..<frame.count {
            let cycles = Double(sampleIndex) * cyclesPerSample
            let phase = cycles - cycles.rounded(.down)
            frame[i] = Int16((amplitude * sin(2 * Double.pi * phase)).rounded())
            sampleIndex &+= 1
        }
        io.pushFrame(UnsafeBufferPointer(frame))
        io.signal()
    }

    func finish(counters: DeviceCounters) {
        frame.deallocate()
    }
}
