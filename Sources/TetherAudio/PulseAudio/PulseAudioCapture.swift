/// A microphone (or any PulseAudio source) captured through a record stream of the libpulse
/// asynchronous API: 16-bit mono at the endpoint's sample rate, PulseAudio converting when the
/// source differs.
///
/// The stream's read callback runs on this device's own `pa_threaded_mainloop` thread (which asks
/// for SCHED_FIFO on its first callback, see `statistics.scheduling`); it gathers whole frames
/// into `endpoint.ring` (a frame that does not fit is dropped and counted as an overrun) and
/// signals the endpoint's wake-up after each frame.
///
/// With an explicit `deviceName` the stream is pinned to that source: when it goes away the device
/// reports `.failed(.deviceUnavailable)` and waits; when a source of that name appears again it
/// reopens and reports `.recovered`. Without one the stream follows the default source, and moves
/// are reported as `.moved`. When the daemon goes away the device reports
/// `.failed(.backendFailed)`, reconnects every 250 ms and reports `.recovered`.
///
/// `start` and `stop` may be called from any thread except the device's mainloop thread (so not
/// from the event handler).
public final class PulseAudioCapture: AudioSource, AudioDeviceEventReporting {
    public var isSoundDevice: Bool { true }
    public let name: String
    /// The PulseAudio source asked for, or `nil` to follow the system default.
    public let deviceName: String?
    /// The PulseAudio buffering period (fragment size), in milliseconds.
    public let periodMilliseconds: Int
    private let engine: PulseStreamEngine

    /// - Parameters:
    ///   - deviceName: the source's PulseAudio name (for example `spk.monitor`), or `nil` to
    ///     follow the system default source.
    ///   - periodMilliseconds: the stream's fragment size, 10 or 20 ms.
    ///   - applicationName: the client name PulseAudio shows.
    /// - Precondition: `periodMilliseconds` is 10 or 20.
    public init(deviceName: String? = nil, periodMilliseconds: Int = 20, applicationName: String = "Tether") {
        self.deviceName = deviceName
        self.periodMilliseconds = periodMilliseconds
        engine = PulseStreamEngine(
            direction: .capture, deviceName: deviceName, periodMilliseconds: periodMilliseconds,
            applicationName: applicationName)
        name = engine.displayName
    }

    /// Connects to the daemon and opens the record stream; returns once the stream runs.
    /// - Throws: `.backendFailed` when the daemon is unreachable, `.deviceUnavailable` when the
    ///   named source does not exist or the stream cannot open, `.unsupportedFormat` for a format
    ///   that is not mono, `.ringTooSmall`, `.alreadyStarted`.
    public func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) { try engine.start(endpoint) }

    /// Closes the stream and the connection and ends the mainloop thread. Idempotent.
    public func stop() { engine.stop() }

    public var statistics: AudioDeviceStatistics { engine.statistics }

    /// - Note: The handler is called on the device's mainloop thread with the mainloop lock held:
    ///   it must return quickly and must not call `start` or `stop` of this device.
    public func setEventHandler(_ handler: @escaping @Sendable (AudioDeviceEvent) -> Void) {
        engine.setEventHandler(handler)
    }

    deinit { engine.stop() }
}
