/// Errors thrown when parsing or validating RTP and RTCP packets.
///
/// Thrown with typed throws (`throws(RTPParseError)`) so that failure paths on the
/// hot path never box an existential or allocate.
public enum RTPParseError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The buffer is shorter than the smallest valid header.
    case tooShort
    /// The version field (top two bits of byte 0) is not 2. Carries the version found.
    case badVersion(UInt8)
    /// The CSRC count claims more contributing sources than the buffer holds.
    case csrcListTooLong
    /// The RTP header extension header or its length (in 32-bit words) exceeds the buffer.
    case badExtension
    /// The padding bit is set but the padding count (last byte) is 0 or larger than the
    /// available bytes.
    case badPadding
    /// The RTP payload type differs from the expected one. Carries the payload type found.
    case unexpectedPayloadType(UInt8)
    /// The RTP SSRC differs from the expected one. Carries the SSRC found.
    case unexpectedSSRC(UInt32)
    /// An RTCP length field (32-bit words minus one) does not fit the compound packet.
    case badLength
    /// An RTCP packet type outside the RTCP range 192...223 was found. Carries the type.
    case unknownPacketType(UInt8)
    /// The first RTCP packet of a compound packet is not SR (200) or RR (201).
    /// Carries the packet type found.
    case unexpectedFirstPacketType(UInt8)
    /// An RTCP packet other than the last one of a compound packet has the padding bit set.
    case paddingNotLast
    /// An SR or RR report count (blocks of 24 bytes) does not fit the packet length.
    case badReportCount
    /// An SDES packet's chunks or items do not fit the packet length.
    case badSourceDescription
    /// A BYE packet's source count or reason length does not fit the packet length.
    case badBye

    public var description: String {
        switch self {
        case .tooShort: return "packet too short"
        case .badVersion(let version): return "unsupported RTP/RTCP version \(version)"
        case .csrcListTooLong: return "CSRC count exceeds packet length"
        case .badExtension: return "RTP header extension exceeds packet length"
        case .badPadding: return "invalid padding length"
        case .unexpectedPayloadType(let payloadType): return "unexpected payload type \(payloadType)"
        case .unexpectedSSRC(let ssrc): return "unexpected SSRC \(ssrc)"
        case .badLength: return "RTCP length field does not match packet size"
        case .unknownPacketType(let packetType): return "unknown RTCP packet type \(packetType)"
        case .unexpectedFirstPacketType(let packetType):
            return "compound RTCP must start with SR or RR, found packet type \(packetType)"
        case .paddingNotLast: return "padding set on an RTCP packet that is not the last of the compound"
        case .badReportCount: return "RTCP report count exceeds packet length"
        case .badSourceDescription: return "malformed RTCP SDES packet"
        case .badBye: return "malformed RTCP BYE packet"
        }
    }
}
