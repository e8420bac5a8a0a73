/// Opus encoder settings for a voice call. Tether always codes 48 kHz mono.
public struct OpusConfiguration: Sendable, Equatable {
    /// Frame duration in milliseconds: 10, 20, 40 or 60.
    public var frameDurationMilliseconds: Int
    /// Target bitrate in bits per second (6 000 … 510 000).
    public var bitrateBitsPerSecond: Int
    /// Encoder complexity, 0 (cheapest) … 10 (best).
    public var complexity: Int
    /// Whether to embed in-band forward error correction (LBRR) for the previous frame.
    public var inBandFEC: Bool
    /// Expected packet loss in percent (0 … 100): how much in-band FEC the encoder spends. In a
    /// call this is only the start: the loss the peer reports over RTCP sets it from the first
    /// report on (`LossAdaptation`). The default 0 spends nothing on FEC until loss is seen (the
    /// first RTCP report comes 0.25–0.75 s into a call), which keeps a clean call's full quality
    /// (`tether-bench quality`: PESQ-WB 3.5 instead of 3.9 on a clean path when starting at 10 %).
    public var expectedLossPercent: Int
    /// Discontinuous transmission: near-silent frames are sent rarely (at least every 400 ms).
    public var discontinuousTransmission: Bool
    /// The libopus application the encoder is created with (fixed for its life).
    public var application: Application = .voip
    /// The widest audio band the encoder may code (`OPUS_SET_MAX_BANDWIDTH`); a peer's
    /// `maxplaybackrate` narrows it further. Wideband (up to 8 kHz, SILK alone) by default: at
    /// voice bitrates every bit then goes to the band speech lives in, and in-band FEC (which
    /// carries the SILK layer only) rebuilds a lost frame whole. In hybrid super-wideband or
    /// fullband, libopus spends part of the rate on the band above 8 kHz (a CELT layer), and a
    /// frame rebuilt from FEC comes back without it. Measured with `tether-bench codec-quality --bandwidth`: four
    /// clips at 32 kb/s, PESQ-WB 4.32 against 4.05 fullband on a clean path, 3.07 against 2.92 at
    /// 10 % loss with FEC, at 24 kb/s of payload against 26–28. PESQ-WB hears 50–7000 Hz only:
    /// choose `.fullband` where the air above 8 kHz matters more than that (music, a quiet room
    /// and headphones, 40 kb/s or more).
    public var maximumBandwidth: Bandwidth = .wideband

    /// Opus audio bandwidths (RFC 6716 §2): the band coded, and the sample rate that carries it.
    public enum Bandwidth: String, Sendable, Equatable, CaseIterable, Comparable {
        /// 4 kHz audio (8 kHz sampling).
        case narrowband
        /// 6 kHz audio (12 kHz sampling).
        case mediumband
        /// 8 kHz audio (16 kHz sampling).
        case wideband
        /// 12 kHz audio (24 kHz sampling).
        case superWideband = "super-wideband"
        /// 20 kHz audio (48 kHz sampling).
        case fullband

        /// The sample rate that carries this band, in hertz.
        public var sampleRateHertz: Int {
            switch self {
            case .narrowband: 8_000
            case .mediumband: 12_000
            case .wideband: 16_000
            case .superWideband: 24_000
            case .fullband: 48_000
            }
        }

        /// The widest band a receiver that renders at most `rate` hertz can use (RFC 7587
        /// `maxplaybackrate`, `sprop-maxcapturerate`); rates under 8 kHz give narrowband.
        public init(sampleRateHertz rate: Int) {
            self = Self.allCases.last { $0.sampleRateHertz <= rate } ?? .narrowband
        }

        public static func < (a: Self, b: Self) -> Bool { a.sampleRateHertz < b.sampleRateHertz }
    }

    /// libopus's encoder applications.
    public enum Application: String, Sendable, Equatable, CaseIterable {
        /// `OPUS_APPLICATION_VOIP`: speech intelligibility first (a high-pass filter, SILK early).
        case voip
        /// `OPUS_APPLICATION_AUDIO`: fidelity to the input.
        case audio
        /// `OPUS_APPLICATION_RESTRICTED_LOWDELAY`: CELT only, 2.5 ms look-ahead instead of 6.5.
        case restrictedLowDelay = "restricted-lowdelay"
    }

    /// The sample rate Tether codes at, in hertz.
    public static let sampleRateHertz = 48_000
    /// Frame durations Opus allows for Tether, in milliseconds.
    public static let allowedFrameDurationsMilliseconds = [10, 20, 40, 60]

    public init(
        frameDurationMilliseconds: Int = 20, bitrateBitsPerSecond: Int = 32_000, complexity: Int = 9,
        inBandFEC: Bool = true, expectedLossPercent: Int = 0, discontinuousTransmission: Bool = false
    ) {
        self.frameDurationMilliseconds = frameDurationMilliseconds
        self.bitrateBitsPerSecond = bitrateBitsPerSecond
        self.complexity = complexity
        self.inBandFEC = inBandFEC
        self.expectedLossPercent = expectedLossPercent
        self.discontinuousTransmission = discontinuousTransmission
    }

    /// Samples in one frame at 48 kHz mono.
    public var samplesPerFrame: Int { Self.sampleRateHertz / 1000 * frameDurationMilliseconds }

    /// A problem with these settings, or `nil` when they are valid.
    public var validationProblem: String? {
        if !Self.allowedFrameDurationsMilliseconds.contains(frameDurationMilliseconds) {
            return "frame duration \(frameDurationMilliseconds) ms is not one of 10, 20, 40, 60"
        }
        if !(6_000...510_000).contains(bitrateBitsPerSecond) {
            return "bitrate \(bitrateBitsPerSecond) b/s is outside 6000…510000"
        }
        if !(0...10).contains(complexity) { return "complexity \(complexity) is outside 0…10" }
        if !(0...100).contains(expectedLossPercent) {
            return "expected loss \(expectedLossPercent) % is outside 0…100"
        }
        return nil
    }
}
