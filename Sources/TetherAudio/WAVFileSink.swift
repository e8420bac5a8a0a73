import Glibc

/// A virtual playback device recording what it plays into a WAV file, in real time.
///
/// At start the file is created (mono 16-bit PCM at the endpoint's rate) with a header whose
/// sizes are placeholders (zero). The thread takes one frame per frame duration from the
/// playback ring (when less than a frame is there it records a frame of silence and counts an
/// underrun, so the file keeps real timing), appends it to the file with `write(2)` from a
/// preallocated buffer and signals the wake-up. `stop` patches the header with the real sizes.
/// The file therefore holds `framesTransferred + underruns` frames.
public final class WAVFileSink: AudioSink {
    /// The file written.
    public let path: String
    public let name: String
    private let runner = ClockedDeviceRunner(threadName: "tether-wavsink", sharesClock: false)

    public init(path: String) {
        self.path = path
        self.name = "WAV file \(path)"
    }

    /// Creates the file and starts recording into it.
    /// - Throws: `.cannotOpenFile`, `.cannotWriteFile`, `.unsupportedFormat`, `.ringTooSmall`,
    ///   `.alreadyStarted`, `.deviceThreadFailed`.
    public func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) {
        let path = path
        try runner.start(deviceName: name, endpoint: endpoint) { endpoint throws(AudioDeviceError) in
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw .cannotOpenFile(path: path, reason: SystemError.message(errno)) }
            let header = WAVFile.header(dataByteCount: 0, sampleRateHertz: endpoint.format.sampleRateHertz)
            guard header.withUnsafeBytes({ POSIXFile.writeFully(fd, $0.baseAddress, $0.count) }) else {
                let reason = SystemError.message(errno)
                close(fd)
                throw .cannotWriteFile(path: path, reason: reason)
            }
            return RecordWork(fd: fd, frame: .allocate(capacity: endpoint.format.samplesPerFrame))
        }
    }

    /// Stops recording, patches the header with the real sizes and closes the file.
    public func stop() { runner.stop() }

    public var statistics: AudioDeviceStatistics { runner.statistics }

    /// The first error met writing the file since start (the recording stops growing after it).
    public var writeError: AudioDeviceError? {
        let code = runner.counters.errorNumber.load(ordering: .relaxed)
        return code == 0 ? nil : .cannotWriteFile(path: path, reason: SystemError.message(code))
    }

    deinit { runner.stop() }
}

/// Per-frame work of `WAVFileSink`.
private struct RecordWork: ClockedFrameWork, @unchecked Sendable {
    /// The open file, positioned after the last frame written; closed by `finish`.
    let fd: Int32
    /// One frame of samples, allocated at start and freed by `finish`.
    let frame: UnsafeMutableBufferPointer<Int16>
    /// Set after a failed write; the thread keeps pulling frames but stops writing.
    var failed = false

    /// - Note: Called on the device thread; must not allocate.
    mutating func processFrame(_ io: DeviceThreadIO) {
        io.pullFrame(into: frame)
        if !failed {
            #if _endian(big)
            for i in 0..<frame.count { frame[i] = frame[i].littleEndian }
            #endif
            if !POSIXFile.writeFully(fd, frame.baseAddress, frame.count * MemoryLayout<Int16>.size) {
                failed = true
                io.recordError(errno)
            }
        }
        io.signal()
    }

    func finish(counters: DeviceCounters) {
        defer {
            close(fd)
            frame.deallocate()
        }
        let endOffset = lseek(fd, 0, SEEK_CUR)
        guard endOffset >= WAVFile.canonicalHeaderByteCount else {
            _ = counters.errorNumber.compareExchange(expected: 0, desired: errno, ordering: .relaxed)
            return
        }
        let dataBytes = UInt32(clamping: Int(endOffset) - WAVFile.canonicalHeaderByteCount)
        let riffBytes = dataBytes > UInt32.max - 36 ? UInt32.max : dataBytes + 36
        for (value, offset) in [(riffBytes, WAVFile.riffSizeOffset), (dataBytes, WAVFile.dataSizeOffset)] {
            var little = value.littleEndian
            if pwrite(fd, &little, 4, off_t(offset)) != 4 {
                _ = counters.errorNumber.compareExchange(expected: 0, desired: errno == 0 ? EIO : errno, ordering: .relaxed)
                return
            }
        }
    }
}
