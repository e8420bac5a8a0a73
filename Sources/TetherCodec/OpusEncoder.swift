import COpus

/// Owns one libopus encoder (48 kHz mono, the configuration's application: VoIP by default).
///
/// Encoding never allocates: libopus works in the state allocated at creation (and on the stack,
/// about 50 KiB). Not thread-safe: the media loop owns it.
public final class OpusEncoder: @unchecked Sendable {
    private let encoder: OpaquePointer
    /// The settings in force.
    public private(set) var configuration: OpusConfiguration
    /// Samples of algorithmic delay the encoder adds (312 at 48 kHz; 120 for restricted low delay).
    public let lookaheadSamples: Int

    /// Creates an encoder.
    /// - Throws: `OpusCodecError` when libopus refuses the settings.
    public init(configuration: OpusConfiguration) throws(OpusCodecError) {
        if configuration.validationProblem != nil { throw OpusCodecError(code: OPUS_BAD_ARG, operation: "opus configuration") }
        var error: Int32 = 0
        let application: Int32 =
            switch configuration.application {
            case .voip: OPUS_APPLICATION_VOIP
            case .audio: OPUS_APPLICATION_AUDIO
            case .restrictedLowDelay: OPUS_APPLICATION_RESTRICTED_LOWDELAY
            }
        guard let e = opus_encoder_create(Int32(OpusConfiguration.sampleRateHertz), 1, application, &error),
            error == OPUS_OK
        else { throw OpusCodecError(code: error, operation: "opus_encoder_create") }
        encoder = e
        self.configuration = configuration
        _ = COpus_encoder_set_signal_voice(e)
        var lookahead: Int32 = 0
        _ = COpus_encoder_get_lookahead(e, &lookahead)
        lookaheadSamples = Int(lookahead)
        do throws(OpusCodecError) {
            try apply(configuration)
        } catch {
            opus_encoder_destroy(e)
            throw error
        }
    }

    deinit {
        opus_encoder_destroy(encoder)
    }

    static func libopusBandwidth(_ b: OpusConfiguration.Bandwidth) -> Int32 {
        switch b {
        case .narrowband: OPUS_BANDWIDTH_NARROWBAND
        case .mediumband: OPUS_BANDWIDTH_MEDIUMBAND
        case .wideband: OPUS_BANDWIDTH_WIDEBAND
        case .superWideband: OPUS_BANDWIDTH_SUPERWIDEBAND
        case .fullband: OPUS_BANDWIDTH_FULLBAND
        }
    }

    /// Changes bitrate, complexity, FEC, expected loss, DTX and the maximum bandwidth. The frame duration is fixed per call.
    public func apply(_ new: OpusConfiguration) throws(OpusCodecError) {
        try check(COpus_encoder_set_bitrate(encoder, Int32(clamping: new.bitrateBitsPerSecond)), "OPUS_SET_BITRATE")
        try check(COpus_encoder_set_complexity(encoder, Int32(clamping: new.complexity)), "OPUS_SET_COMPLEXITY")
        try check(COpus_encoder_set_inband_fec(encoder, new.inBandFEC ? 1 : 0), "OPUS_SET_INBAND_FEC")
        try check(COpus_encoder_set_packet_loss_perc(encoder, Int32(clamping: new.expectedLossPercent)), "OPUS_SET_PACKET_LOSS_PERC")
        try check(COpus_encoder_set_dtx(encoder, new.discontinuousTransmission ? 1 : 0), "OPUS_SET_DTX")
        try check(COpus_encoder_set_max_bandwidth(encoder, Self.libopusBandwidth(new.maximumBandwidth)), "OPUS_SET_MAX_BANDWIDTH")
        configuration.bitrateBitsPerSecond = new.bitrateBitsPerSecond
        configuration.complexity = new.complexity
        configuration.inBandFEC = new.inBandFEC
        configuration.expectedLossPercent = new.expectedLossPercent
        configuration.discontinuousTransmission = new.discontinuousTransmission
        configuration.maximumBandwidth = new.maximumBandwidth
    }

    private func check(_ rc: Int32, _ operation: StaticString) throws(OpusCodecError) {
        if rc != OPUS_OK { throw OpusCodecError(code: rc, operation: operation) }
    }

    /// Encodes one frame of `configuration.samplesPerFrame` samples.
    /// - Returns: the packet length in bytes; 1 or 2 means a DTX frame the caller may skip sending.
    /// - Note: Media loop only. Never allocates.
    @inline(__always)
    public func encode(_ pcm: UnsafePointer<Int16>, into packet: UnsafeMutableRawBufferPointer) throws(OpusCodecError) -> Int {
        try encode(pcm, samples: configuration.samplesPerFrame, into: packet)
    }

    /// Encodes one packet of `samples` samples (48 kHz: 480, 960, 1920 or 2880 — 10 to 60 ms),
    /// whatever the configuration's frame duration: a sender may lengthen its packets on a narrow
    /// path (their headers cost less a second). Returns the packet's length in bytes.
    public func encode(_ pcm: UnsafePointer<Int16>, samples: Int, into packet: UnsafeMutableRawBufferPointer) throws(OpusCodecError) -> Int {
        let n = opus_encode(
            encoder, pcm, Int32(clamping: samples),
            packet.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(clamping: packet.count))
        if n < 0 { throw OpusCodecError(code: n, operation: "opus_encode") }
        return Int(n)
    }
}
