import COpus

/// Owns one libopus decoder (48 kHz mono): decoding, packet-loss concealment and in-band FEC.
///
/// Never allocates after creation. Not thread-safe: the media loop owns it.
public final class OpusDecoder: @unchecked Sendable {
    private let decoder: OpaquePointer
    /// Samples in Opus's longest packet (120 ms at 48 kHz): a buffer this long takes any packet.
    public static let maximumPacketSamples = 5760

    /// Creates a decoder.
    public init() throws(OpusCodecError) {
        var error: Int32 = 0
        guard let d = opus_decoder_create(Int32(OpusConfiguration.sampleRateHertz), 1, &error), error == OPUS_OK else {
            throw OpusCodecError(code: error, operation: "opus_decoder_create")
        }
        decoder = d
    }

    deinit {
        opus_decoder_destroy(decoder)
    }

    /// Decodes `packet` into `pcm`.
    /// - Returns: samples decoded.
    /// - Note: Media loop only. Never allocates.
    @inline(__always)
    public func decode(_ packet: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) throws(OpusCodecError) -> Int {
        let n = opus_decode(
            decoder, packet.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(packet.count),
            pcm.baseAddress!, Int32(pcm.count), 0)
        if n < 0 { throw OpusCodecError(code: n, operation: "opus_decode") }
        return Int(n)
    }

    /// Decodes `packet` into whole frames of `frameSamples`: a packet of 40 or 60 ms fills two or
    /// three, and one that ends inside a frame (a peer sending 10 ms packets into a 20 ms stream)
    /// is followed by concealment to the frame's end, so no sample up to the returned count is
    /// left over from an earlier packet.
    /// - Returns: the samples written, a multiple of `frameSamples` (at most `pcm.count`).
    public func decodeFrame(
        _ packet: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>, frameSamples: Int
    ) throws(OpusCodecError) -> Int {
        let decoded = try decode(packet, into: pcm)
        let whole = min(pcm.count, max(frameSamples, (decoded + frameSamples - 1) / frameSamples * frameSamples))
        var filled = decoded
        while filled < whole {
            let rest = UnsafeMutableBufferPointer(rebasing: pcm[filled..<whole])
            guard let n = try? conceal(into: rest), n > 0 else {
                rest.update(repeating: 0)
                break
            }
            filled += n
        }
        return whole
    }

    /// Conceals a lost frame of `pcm.count` samples (packet-loss concealment; fades over long gaps).
    /// - Note: Media loop only. Never allocates.
    @inline(__always)
    public func conceal(into pcm: UnsafeMutableBufferPointer<Int16>) throws(OpusCodecError) -> Int {
        let n = opus_decode(decoder, nil, 0, pcm.baseAddress!, Int32(pcm.count), 0)
        if n < 0 { throw OpusCodecError(code: n, operation: "opus_decode (PLC)") }
        return Int(n)
    }

    /// Rebuilds the frame lost just before `nextPacket` from `nextPacket`'s in-band FEC data.
    /// `pcm.count` must be the lost frame's duration. When the packet has no FEC data libopus
    /// falls back to concealment.
    /// - Note: Media loop only. Never allocates.
    @inline(__always)
    public func decodeFEC(from nextPacket: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) throws(OpusCodecError) -> Int {
        let n = opus_decode(
            decoder, nextPacket.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(nextPacket.count),
            pcm.baseAddress!, Int32(pcm.count), 1)
        if n < 0 { throw OpusCodecError(code: n, operation: "opus_decode (FEC)") }
        return Int(n)
    }

    /// Samples in `packet` at 48 kHz, or `nil` when the packet is malformed.
    public static func sampleCount(of packet: UnsafeRawBufferPointer) -> Int? {
        guard let base = packet.baseAddress, packet.count > 0 else { return nil }
        let n = opus_packet_get_nb_samples(base.assumingMemoryBound(to: UInt8.self), Int32(packet.count), 48_000)
        return n > 0 ? Int(n) : nil
    }
}
