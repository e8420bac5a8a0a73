import TetherRealtime

/// Something that captures audio: a microphone, a test signal, a WAV file.
///
/// `start` launches the device's own thread, which writes each captured frame into the
/// endpoint's ring and then signals the endpoint's wake-up. A frame that does not fit the ring is
/// dropped and counted as an overrun. `stop` ends the thread and waits for it; it is idempotent,
/// and a stopped source may be started again (its statistics restart from zero).
public protocol AudioSource: AnyObject, Sendable {
    /// A human-readable name for logs and summaries.
    var name: String { get }
    /// Starts capturing into `endpoint.ring`.
    func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError)
    /// Stops capturing and waits for the device thread to end.
    func stop()
    /// Counters since the last start.
    var statistics: AudioDeviceStatistics { get }
    /// Whether this captures sound from a device (a microphone, with a room around it), rather
    /// than reading a file or making a signal: voice processing runs for it by default.
    var isSoundDevice: Bool { get }
}

extension AudioSource {
    public var isSoundDevice: Bool { false }
}

/// Something that plays audio: a loudspeaker, a WAV file, nothing.
///
/// `start` launches the device's own thread, which takes one frame per frame duration from the
/// endpoint's ring and then signals the endpoint's wake-up so the media loop refills the ring.
/// When less than a frame is available the device plays a frame of silence and counts an
/// underrun. `stop` ends the thread and waits for it; it is idempotent, and a stopped sink may be
/// started again (its statistics restart from zero).
public protocol AudioSink: AnyObject, Sendable {
    /// A human-readable name for logs and summaries.
    var name: String { get }
    /// Starts playing from `endpoint.ring`.
    func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError)
    /// Stops playing and waits for the device thread to end.
    func stop()
    /// Counters since the last start.
    var statistics: AudioDeviceStatistics { get }
}

/// Counters of a source or sink since its last start.
public struct AudioDeviceStatistics: Sendable, Equatable, CustomStringConvertible {
    /// Frames moved through the ring: written into it by a source, taken from it by a sink.
    public var framesTransferred: Int
    /// Source only: frames dropped because the capture ring lacked room for a whole frame, plus
    /// the times the sound server dropped capture data not read in time (PulseAudio overflow,
    /// ALSA overrun).
    public var overruns: Int
    /// Sink only: frames of silence played because the playback ring held less than a frame, plus
    /// the times the sound server or device ran out of our data (PulseAudio underflow, ALSA
    /// underrun).
    public var underruns: Int
    /// Times the device thread fell more than a few frames behind its schedule and restarted its
    /// clock from the current instant instead of catching up.
    public var resynchronizations: Int
    /// The scheduling the device thread was granted.
    public var scheduling: ThreadScheduling
    /// The device's own latency as it last reported it, in milliseconds (`nil` for devices that
    /// report none: virtual and file devices). Playback: from a sample handed to the device
    /// until it sounds (PulseAudio's stream latency, ALSA's delay). Capture: from a sample
    /// recorded until Tether reads it.
    public var latencyMilliseconds: Double?

    public init(
        framesTransferred: Int = 0, overruns: Int = 0, underruns: Int = 0, resynchronizations: Int = 0,
        scheduling: ThreadScheduling = .notStarted, latencyMilliseconds: Double? = nil
    ) {
        self.framesTransferred = framesTransferred
        self.overruns = overruns
        self.underruns = underruns
        self.resynchronizations = resynchronizations
        self.scheduling = scheduling
        self.latencyMilliseconds = latencyMilliseconds
    }

    public var description: String {
        "\(framesTransferred) frames, \(overruns) overruns, \(underruns) underruns, "
            + "\(resynchronizations) resynchronizations, \(scheduling.rawValue)"
    }
}
