/// A loudspeaker (or any PulseAudio sink) fed through a playback stream of the libpulse
/// asynchronous API: 16-bit mono at the endpoint's sample rate, PulseAudio converting when the
/// sink differs.
///
/// The stream's write callback runs on this device's own `pa_threaded_mainloop` thread (which asks
/// for SCHED_FIFO on its first callback, see `statistics.scheduling`); it writes what the server
/// asks for from `endpoint.ring`, asks the media loop to keep two requests queued
/// (`endpoint.demand`), and signals the endpoint's wake-up after each request it took samples
/// for. A request the ring cannot cover is left short once (the server still holds about two
/// requests); a second one in a row is padded with silence and counted as an underrun. The
/// stream's latency is in `statistics.latencyMilliseconds`.
///
/// With an explicit `deviceName` the stream is pinned to that sink: when it goes away the device
/// reports `.failed(.deviceUnavailable)`, falls back to the default sink at once (`.moved`), and
/// returns to the named sink when it appears again (`.recovered`). Without one the stream follows
/// the default sink, and moves are reported as `.moved`. When the daemon goes away the device
/// reports `.failed(.backendFailed)`, reconnects every 250 ms and reports `.recovered`.
///
/// `start` and `stop` may be called from any thread except the device's mainloop thread (so not
/// from the event handler).
public final class PulseAudioPlayback: AudioSink, AudioDeviceEventReporting {
    public let name: String
    /// The PulseAudio sink asked for, or `nil` to follow the system default.
    public let deviceName: String?
    /// The PulseAudio buffering period (target buffer length), in milliseconds.
    public let periodMilliseconds: Int
    private let engine: PulseStreamEngine

    /// - Parameters:
    ///   - deviceName: the sink's PulseAudio name (for example `spk`), or `nil` to follow the
    ///     system default sink.
    ///   - periodMilliseconds: the stream's target buffer length, 10 or 20 ms.
    ///   - applicationName: the client name PulseAudio shows.
    /// - Precondition: `periodMilliseconds` is 10 or 20.
    public init(deviceName: String? = nil, periodMilliseconds: Int = 20, applicationName: String = "Tether") {
        self.deviceName = deviceName
        self.periodMilliseconds = periodMilliseconds
        engine = PulseStreamEngine(
            direction: .playback, deviceName: deviceName, periodMilliseconds: periodMilliseconds,
            applicationName: applicationName)
        name = engine.displayName
    }

    /// Connects to the daemon and opens the playback stream; returns once the stream runs.
    /// - Throws: `.backendFailed` when the daemon is unreachable, `.deviceUnavailable` when the
    ///   named sink does not exist or the stream cannot open, `.unsupportedFormat` for a format
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
