/// The PCM format a source produces or a sink consumes: 16-bit signed samples at a fixed rate,
/// moved in frames of a fixed duration.
///
/// A "frame" here is one packetization interval (for example 20 ms, that is 960 samples at
/// 48 kHz mono), the unit in which devices hand audio to the media loop and Opus encodes it.
public struct AudioFormat: Sendable, Hashable, CustomStringConvertible {
    /// Frame durations Opus and the media loop accept, in milliseconds.
    public static let supportedFrameDurationsMilliseconds: [Int] = [10, 20, 40, 60]

    /// Samples per second per channel, in hertz.
    public let sampleRateHertz: Int
    /// Interleaved channels per sample instant (the engine uses 1: mono).
    public let channelCount: Int
    /// Duration of one frame, in milliseconds (10, 20, 40 or 60).
    public let frameDurationMilliseconds: Int

    /// - Parameters:
    ///   - sampleRateHertz: samples per second per channel, in hertz (default 48 000).
    ///   - channelCount: interleaved channels (default 1; the devices of this module accept only 1).
    ///   - frameDurationMilliseconds: frame duration in milliseconds: 10, 20, 40 or 60 (default 20).
    /// - Precondition: `sampleRateHertz` > 0, `channelCount` ≥ 1, `frameDurationMilliseconds` is
    ///   supported and a frame holds a whole number of samples.
    public init(sampleRateHertz: Int = 48_000, channelCount: Int = 1, frameDurationMilliseconds: Int = 20) {
        precondition(sampleRateHertz > 0, "AudioFormat sample rate must be positive")
        precondition(channelCount >= 1, "AudioFormat needs at least one channel")
        precondition(
            Self.supportedFrameDurationsMilliseconds.contains(frameDurationMilliseconds),
            "AudioFormat frame duration must be 10, 20, 40 or 60 ms")
        precondition(
            (sampleRateHertz * frameDurationMilliseconds) % 1000 == 0,
            "AudioFormat frame must hold a whole number of samples")
        self.sampleRateHertz = sampleRateHertz
        self.channelCount = channelCount
        self.frameDurationMilliseconds = frameDurationMilliseconds
    }

    /// Sample instants per frame (per channel): `sampleRateHertz × frameDurationMilliseconds / 1000`.
    public var samplesPerChannelPerFrame: Int { sampleRateHertz * frameDurationMilliseconds / 1000 }

    /// Int16 values per frame, all channels interleaved (equal to `samplesPerChannelPerFrame` for mono).
    public var samplesPerFrame: Int { samplesPerChannelPerFrame * channelCount }

    /// Duration of one frame, in nanoseconds (exact: frame durations are whole milliseconds).
    public var frameDurationNanoseconds: UInt64 { UInt64(frameDurationMilliseconds) * 1_000_000 }

    public var description: String {
        "\(sampleRateHertz) Hz, \(channelCount) channel\(channelCount == 1 ? "" : "s"), \(frameDurationMilliseconds) ms frames"
    }
}
