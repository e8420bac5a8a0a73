/// A virtual playback device that drops what it plays, in real time.
///
/// Its thread takes one frame per frame duration from the playback ring and discards it (when
/// less than a frame is there it counts an underrun), then signals the wake-up. Useful to run
/// the media loop with no loudspeaker, at the pace a real device would impose.
public final class DiscardSink: AudioSink {
    public let name = "discard"
    private let runner = ClockedDeviceRunner(threadName: "tether-discard")

    public init() {}

    /// Starts dropping frames.
    /// - Throws: `.unsupportedFormat`, `.ringTooSmall`, `.alreadyStarted`, `.deviceThreadFailed`.
    public func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) {
        try runner.start(deviceName: name, endpoint: endpoint) { _ throws(AudioDeviceError) in DiscardWork() }
    }

    public func stop() { runner.stop() }

    public var statistics: AudioDeviceStatistics { runner.statistics }

    deinit { runner.stop() }
}

/// Per-frame work of `DiscardSink`.
private struct DiscardWork: ClockedFrameWork {
    /// - Note: Called on the device thread; must not allocate.
    mutating func processFrame(_ io: DeviceThreadIO) {
        io.discardFrame()
        io.signal()
    }

    func finish(counters: DeviceCounters) {}
}
