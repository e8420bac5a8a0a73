/// A virtual capture device streaming a WAV file in real time.
///
/// At start the whole file is read and converted to mono 16-bit samples (see `WAVFile.read`);
/// its sample rate must equal the endpoint's. The thread then writes one frame per frame
/// duration into the capture ring (counting an overrun and dropping the frame when the ring lacks
/// room) and signals the wake-up. At the end of the file it starts again from the beginning when
/// `loop` is true, and otherwise sends silence and sets `hasReachedEnd`.
public final class WAVFileSource: AudioSource {
    /// The file streamed.
    public let path: String
    /// Whether playback restarts at the beginning after the last sample.
    public let loop: Bool
    public let name: String
    private let runner = ClockedDeviceRunner(threadName: "tether-wavsrc")

    public init(path: String, loop: Bool = true) {
        self.path = path
        self.loop = loop
        self.name = "WAV file \(path)"
    }

    /// Reads the file and starts streaming it.
    /// - Throws: `.cannotOpenFile`, `.invalidWAVFile`, `.unsupportedWAVFormat` (also when the
    ///   file's sample rate differs from the endpoint's), `.unsupportedFormat`, `.ringTooSmall`,
    ///   `.alreadyStarted`, `.deviceThreadFailed`.
    public func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) {
        let path = path
        let loop = loop
        try runner.start(deviceName: name, endpoint: endpoint) { endpoint throws(AudioDeviceError) in
            let file = try WAVFile.read(path: path)
            let rateHertz = endpoint.format.sampleRateHertz
            guard file.sampleRateHertz == rateHertz else {
                throw .unsupportedWAVFormat(
                    reason: "\(path): sample rate \(file.sampleRateHertz) Hz differs from the endpoint's \(rateHertz) Hz")
            }
            let content = UnsafeMutableBufferPointer<Int16>.allocate(capacity: max(1, file.samples.count))
            _ = content.initialize(from: file.samples)
            return StreamWork(
                content: UnsafeMutableBufferPointer(rebasing: content[0..<file.samples.count]),
                contentAllocation: content,
                frame: .allocate(capacity: endpoint.format.samplesPerFrame),
                loop: loop)
        }
    }

    public func stop() { runner.stop() }

    public var statistics: AudioDeviceStatistics { runner.statistics }

    /// True once a non-looping source has sent its last sample (it sends silence from then on).
    public var hasReachedEnd: Bool { runner.counters.reachedEnd.load(ordering: .relaxed) }

    deinit { runner.stop() }
}

/// Per-frame work of `WAVFileSource`.
private struct StreamWork: ClockedFrameWork, @unchecked Sendable {
    /// The converted file (possibly empty).
    let content: UnsafeMutableBufferPointer<Int16>
    /// The allocation behind `content` (never empty), freed by `finish`.
    let contentAllocation: UnsafeMutableBufferPointer<Int16>
    /// One frame of samples, allocated at start and freed by `finish`.
    let frame: UnsafeMutableBufferPointer<Int16>
    let loop: Bool
    /// Index in `content` of the next sample to send.
    var position = 0

    /// - Note: Called on the device thread; must not allocate.
    mutating func processFrame(_ io: DeviceThreadIO) {
        let frameBase = frame.baseAddress!
        var filled = 0
        while filled < frame.count {
            if position == content.count {
                guard loop, content.count > 0 else { break }
                position = 0
            }
            let count = min(frame.count - filled, content.count - position)
            (frameBase + filled).update(from: content.baseAddress! + position, count: count)
            filled += count
            position += count
        }
        if filled < frame.count {
            (frameBase + filled).update(repeating: 0, count: frame.count - filled)
        }
        io.pushFrame(UnsafeBufferPointer(frame))
        if !loop && position == content.count { io.markReachedEnd() }
        io.signal()
    }

    func finish(counters: DeviceCounters) {
        contentAllocation.deallocate()
        frame.deallocate()
    }
}
