/// Reads what a received Opus packet carries without decoding it (RFC 6716 §3.1–3.2 framing and
/// the SILK layer's header flags, §4.2.3): sans-IO, no allocation, safe on any bytes.
///
/// libopus 1.3.1 (Debian 12) has no `opus_packet_has_lbrr`; the media loop needs to know whether
/// the packet after a loss really holds in-band FEC (LBRR) for it, so that a frame is counted as
/// rebuilt only when it was, and is concealed outright (the same sound libopus would make) when not.
public enum OpusPacket {
    /// How the packet's frames are coded (from the TOC byte's configuration, RFC 6716 §3.1).
    public enum Mode: Sendable, Equatable {
        /// SILK only (configurations 0–11): narrow- to wideband speech.
        case silk
        /// SILK low band plus CELT high band (configurations 12–15).
        case hybrid
        /// CELT only (configurations 16–31): no SILK layer, so never LBRR.
        case celt
    }

    /// The coding mode of `packet`, or nil for an empty packet.
    public static func mode(of packet: UnsafeRawBufferPointer) -> Mode? {
        guard let toc = firstByte(packet) else { return nil }
        return mode(toc: toc)
    }

    /// The audio band `packet` codes (RFC 6716 §3.1, Table 2: the TOC's configuration), or nil
    /// for an empty packet.
    public static func bandwidth(of packet: UnsafeRawBufferPointer) -> OpusConfiguration.Bandwidth? {
        guard let toc = firstByte(packet) else { return nil }
        let configuration = Int(toc >> 3)
        switch configuration {
        case 0...3: return .narrowband
        case 4...7: return .mediumband
        case 8...11: return .wideband
        case 12...13: return .superWideband
        case 14...15: return .fullband
        case 16...19: return .narrowband
        case 20...23: return .wideband
        case 24...27: return .superWideband
        default: return .fullband
        }
    }

    /// The TOC byte. (Not `packet.first`: unspecialised in a debug build, the generic
    /// `Collection.first` allocates, and the media thread calls this per lost frame.)
    @inline(__always)
    private static func firstByte(_ packet: UnsafeRawBufferPointer) -> UInt8? {
        packet.count > 0 ? packet[0] : nil
    }

    /// The audio a packet holds, in 48 kHz samples (RFC 6716 §3.1: the TOC's frame duration
    /// times the frame count), or nil for an empty or malformed packet (no count byte, a count of
    /// zero, or over 120 ms).
    public static func sampleCount(of packet: UnsafeRawBufferPointer) -> Int? {
        guard let toc = firstByte(packet) else { return nil }
        let config = Int(toc >> 3)
        // Frame duration in units of 2.5 ms (120 samples).
        let units: Int
        switch mode(toc: toc) {
        case .silk: units = config & 3 == 3 ? 24 : 4 << (config & 3)  // 10, 20, 40, 60 ms (no array: per packet)
        case .hybrid: units = config & 1 == 0 ? 4 : 8  // 10, 20 ms
        case .celt: units = 1 << (config & 3)  // 2.5, 5, 10, 20 ms
        }
        let frames: Int
        switch toc & 0x03 {
        case 0: frames = 1
        case 1, 2: frames = 2
        default:
            guard packet.count > 1 else { return nil }
            frames = Int(packet[1] & 0x3F)
        }
        let samples = frames * units * 120
        guard frames > 0, samples <= 5760 else { return nil }
        return samples
    }

    /// Whether the packet's first frame carries LBRR data (in-band FEC for the frame before it):
    /// the SILK header's LBRR flag of the mid channel, or of the side channel for stereo.
    /// False for CELT-only packets, for malformed packets and for empty (DTX) frames.
    public static func hasLBRR(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard let toc = firstByte(packet), let first = firstFrame(of: packet), !first.isEmpty else { return false }
        let config = Int(toc >> 3)
        // SILK frames in one Opus frame: one for 10 and 20 ms, two for 40, three for 60.
        let silkFrames: Int
        switch mode(toc: toc) {
        case .celt: return false
        case .silk: silkFrames = max(1, config & 3)  // 10, 20, 40, 60 ms
        case .hybrid: silkFrames = 1  // 10 or 20 ms
        }
        let stereo = (toc & 0x04) != 0
        // The header flags are coded with probability ½ each at the very start of the range-coded
        // frame, so they are the frame's leading bits: per channel, one VAD flag per SILK frame,
        // then the LBRR flag (mid channel first, then side).
        let leading = packet[first.lowerBound]
        let midLBRR = (leading >> UInt8(7 - silkFrames)) & 1
        if midLBRR == 1 { return true }
        guard stereo else { return false }
        return (leading >> UInt8(6 - 2 * silkFrames)) & 1 == 1
    }

    /// The byte range of the first frame in `packet` (after the TOC byte and any frame-count,
    /// padding and length bytes), or nil when the framing is invalid (RFC 6716 §3.4's rules).
    public static func firstFrame(of packet: UnsafeRawBufferPointer) -> Range<Int>? {
        guard let toc = firstByte(packet) else { return nil }
        let end = packet.count
        var at = 1
        switch toc & 0x03 {
        case 0:  // one frame
            return at..<end
        case 1:  // two frames of equal size
            let bytes = end - at
            guard bytes % 2 == 0 else { return nil }
            return at..<(at + bytes / 2)
        case 2:  // two frames, the first one's length coded
            guard let (length, used) = frameLength(packet, at: at) else { return nil }
            at += used
            guard length <= end - at else { return nil }
            return at..<(at + length)
        default:  // code 3: a frame count, optional padding, CBR or VBR
            guard at < end else { return nil }
            let countByte = packet[at]
            at += 1
            let count = Int(countByte & 0x3F)
            let vbr = (countByte & 0x80) != 0
            guard count >= 1 else { return nil }
            var padding = 0
            if (countByte & 0x40) != 0 {
                while true {
                    guard at < end else { return nil }
                    let p = Int(packet[at])
                    at += 1
                    padding += p == 255 ? 254 : p
                    if p != 255 { break }
                }
            }
            guard padding <= end - at else { return nil }
            let dataEnd = end - padding
            if vbr {
                // Lengths of the first count − 1 frames, then the frames.
                var lengths = 0
                var firstLength = 0
                for i in 0..<(count - 1) {
                    guard let (length, used) = frameLength(packet, at: at), at + used <= dataEnd else { return nil }
                    at += used
                    if i == 0 { firstLength = length }
                    lengths += length
                }
                guard lengths <= dataEnd - at else { return nil }
                return count == 1 ? at..<dataEnd : at..<(at + firstLength)
            }
            let bytes = dataEnd - at
            guard bytes >= 0, bytes % count == 0 else { return nil }
            return at..<(at + bytes / count)
        }
    }

    /// A frame length coded in one or two bytes (RFC 6716 §3.2.1); nil when the bytes run out.
    private static func frameLength(_ packet: UnsafeRawBufferPointer, at: Int) -> (length: Int, bytesUsed: Int)? {
        guard at < packet.count else { return nil }
        let first = Int(packet[at])
        if first < 252 { return (first, 1) }
        guard at + 1 < packet.count else { return nil }
        return (first + 4 * Int(packet[at + 1]), 2)
    }

    private static func mode(toc: UInt8) -> Mode {
        let configuration = toc >> 3
        if configuration < 12 { return .silk }
        return configuration < 16 ? .hybrid : .celt
    }
}
