import TetherRealtime

/// A playback device reached through ALSA (a loudspeaker, or any PCM: `default`, `plughw:1,0`, a
/// `pulse` PCM).
///
/// `start` opens the PCM as RW interleaved S16_LE mono at the endpoint's sample rate (through the
/// plug layer when the device needs conversion) with `periodCount` periods of
/// `periodMilliseconds`, prefills all but one period with silence and starts a `RealtimeThread`
/// (SCHED_FIFO when granted; see `statistics.scheduling`) that takes from `endpoint.ring` what
/// the device has room for, a period or more at a time, writes it, and signals `endpoint.wakeup`
/// after each take; it asks the media loop to keep one period queued (`endpoint.demand`). When the
/// ring is empty it waits for the media loop while the device still holds a period, and plays a
/// period of silence (an underrun) when it holds less. The stream starts when the buffer is
/// full, so the output latency is about one buffer (`statistics.latencyMilliseconds`).
///
/// Faults: an underrun reported by the device (-EPIPE) is counted in `underruns` and the stream
/// is prepared and prefilled again; a suspend (-ESTRPIPE) is resumed. Any other error loses the
/// device: the thread leaves its I/O loop, closes the PCM, reports
/// `.failed(.deviceUnavailable(…))`, retries opening it every 250 ms and reports
/// `.recovered(deviceName:)` when it works again.
public final class ALSAPlayback: AudioSink, AudioDeviceEventReporting {
    /// The ALSA PCM name.
    public let pcmName: String
    public let name: String
    private let runner: ALSADeviceRunner

    /// - Parameters:
    ///   - pcmName: the ALSA PCM to open (`default`, a `pcm.NAME` from the configuration, `hw:…`).
    ///   - periodMilliseconds: the device period (10 or 20 are typical; 20 is safer under load).
    ///   - periodCount: periods per device buffer (the pulse plugin needs at least 3).
    /// - Precondition: `periodMilliseconds` in 1…1000; `periodCount` ≥ 2.
    public init(pcmName: String = "default", periodMilliseconds: Int = 20, periodCount: Int = 3) {
        self.pcmName = pcmName
        name = "ALSA playback \(pcmName)"
        runner = ALSADeviceRunner(
            pcmName: pcmName, direction: .playback, periodMilliseconds: periodMilliseconds, periodCount: periodCount)
    }

    /// Opens the PCM and starts the playback thread.
    /// - Throws: `.deviceUnavailable` when the PCM cannot be opened or configured,
    ///   `.unsupportedFormat` for more than one channel, `.ringTooSmall`, `.alreadyStarted`,
    ///   `.deviceThreadFailed`.
    public func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) {
        try runner.start(deviceName: name, endpoint: endpoint)
    }

    /// Stops the thread, waits for it (at most about 50 ms after its current write), drops what
    /// the device still holds and closes the PCM.
    public func stop() { runner.stop() }

    /// Counters since the last start; `resynchronizations` stays 0 (the device paces itself).
    public var statistics: AudioDeviceStatistics { runner.statistics }

    /// The period and buffer the device granted for the current run, in frames of one sample
    /// ((0, 0) when stopped).
    public var grantedGeometry: (periodFrames: Int, bufferFrames: Int) { runner.grantedGeometry }

    public func setEventHandler(_ handler: @escaping @Sendable (AudioDeviceEvent) -> Void) {
        runner.setEventHandler(handler)
    }

    deinit { runner.stop() }
}
