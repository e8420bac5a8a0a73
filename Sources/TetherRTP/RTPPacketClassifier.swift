/// Demultiplexes RTP and RTCP arriving on one transport (RFC 5761 §4).
///
/// When RTP and RTCP share a port, the second byte distinguishes them: RTCP packet
/// types 192...223 occupy the range that, for RTP, would be marker bit + payload
/// types 64...95 — which therefore must not be used with multiplexing.
public enum RTPPacketClassifier {
    /// Kind of a datagram received on an RTP/RTCP-multiplexed transport.
    public enum Kind: Sendable, Equatable, Hashable {
        /// An RTP packet (version 2, at least 12 bytes).
        case rtp
        /// An RTCP packet (version 2, at least 4 bytes, second byte in 192...223).
        case rtcp
        /// Too short or not version 2.
        case invalid
    }

    /// RTCP packet-type range reserved against RTP payload types (RFC 5761 §4).
    public static let rtcpPacketTypeRange: ClosedRange<UInt8> = 192...223

    /// Returns true if byte 0 of `packet` carries RTP/RTCP version 2.
    public static func hasVersion2(_ packet: UnsafeRawBufferPointer) -> Bool {
        guard packet.count > 0 else { return false }
        return packet[0] >> 6 == 2
    }

    /// Classifies a (decrypted or SRTP/SRTCP-protected) datagram as RTP or RTCP.
    /// The RTP and RTCP headers are not encrypted by SRTP, so this works on either.
    public static func classify(_ packet: UnsafeRawBufferPointer) -> Kind {
        guard packet.count >= 4, hasVersion2(packet) else { return .invalid }
        // Plain comparisons (not `ClosedRange.contains`, which allocated in debug builds): this
        // runs for every datagram.
        let secondByte = packet[1]
        if secondByte >= rtcpPacketTypeRange.lowerBound && secondByte <= rtcpPacketTypeRange.upperBound {
            return .rtcp
        }
        return packet.count >= RTPHeader.fixedHeaderLength ? .rtp : .invalid
    }
}
