/// Validates a compound RTCP packet (RFC 3550 §6.1, A.2) and lets the caller visit its
/// packets without allocating.
///
/// Validation happens once, in `init`, and covers: version 2 in every packet; the first
/// packet is SR or RR (unless reduced-size RTCP, RFC 5506, is allowed); every packet
/// type is in the RTCP range 192...223; every length field fits and the lengths add up
/// exactly to the buffer size; only the last packet may be padded, with a count ≥ 1
/// that fits; SR/RR report counts, SDES chunks/items and BYE contents fit their packets.
/// Iteration afterwards cannot fail.
///
/// The parser borrows `compound`; it and every value it yields are valid only while
/// that buffer is alive and unchanged. Pass the plain compound (after SRTCP
/// unprotection, without the SRTCP index and authentication tag).
public struct RTCPCompoundParser: Sequence {
    public typealias Element = RTCPPacket

    private let buffer: UnsafeRawBufferPointer
    /// Number of RTCP packets in the compound.
    public let packetCount: Int

    /// Validates `compound`.
    /// - Parameters:
    ///   - compound: the whole compound RTCP packet.
    ///   - allowReducedSize: accept RFC 5506 reduced-size RTCP (first packet may be of
    ///     any RTCP type).
    public init(_ compound: UnsafeRawBufferPointer, allowReducedSize: Bool = false) throws(RTPParseError) {
        let total = compound.count
        guard total >= 4 else { throw .tooShort }
        var offset = 0
        var packets = 0
        while offset < total {
            guard total - offset >= 4 else { throw .badLength }
            let byte0 = compound[offset]
            let version = byte0 >> 6
            guard version == 2 else { throw .badVersion(version) }
            let packetType = compound[offset + 1]
            // Bounds compared directly: the generic `ClosedRange.contains` allocates in debug builds.
            let range = RTPPacketClassifier.rtcpPacketTypeRange
            guard packetType >= range.lowerBound && packetType <= range.upperBound else {
                throw .unknownPacketType(packetType)
            }
            if packets == 0, !allowReducedSize,
               packetType != RTCPPacketType.senderReport, packetType != RTCPPacketType.receiverReport {
                throw .unexpectedFirstPacketType(packetType)
            }
            let length = (Int(compound.loadBigEndianUInt16(at: offset + 2)) + 1) * 4
            guard length <= total - offset else { throw .badLength }
            let end = offset + length
            var contentLength = length
            if byte0 & 0x20 != 0 {
                guard end == total else { throw .paddingNotLast }
                let padding = Int(compound[end - 1])
                guard padding >= 1, padding <= length - 4 else { throw .badPadding }
                contentLength -= padding
            }
            try RTCPCompoundParser.validateContent(
                compound.slice(from: offset, to: offset + contentLength),
                packetType: packetType,
                count: Int(byte0 & 0x1F)
            )
            offset = end
            packets += 1
        }
        self.buffer = compound
        self.packetCount = packets
    }

    public func makeIterator() -> Iterator {
        Iterator(buffer: buffer)
    }

    /// Iterates the packets of a validated compound.
    public struct Iterator: IteratorProtocol {
        private let buffer: UnsafeRawBufferPointer
        private var offset = 0

        init(buffer: UnsafeRawBufferPointer) {
            self.buffer = buffer
        }

        public mutating func next() -> RTCPPacket? {
            let total = buffer.count
            guard total - offset >= 4 else { return nil }
            let byte0 = buffer[offset]
            let packetType = buffer[offset + 1]
            let count = byte0 & 0x1F
            let length = (Int(buffer.loadBigEndianUInt16(at: offset + 2)) + 1) * 4
            guard length <= total - offset else { return nil }
            var contentLength = length
            if byte0 & 0x20 != 0 {
                let padding = Int(buffer[offset + length - 1])
                guard padding <= length - 4 else { return nil }
                contentLength -= padding
            }
            let packet = buffer.slice(from: offset, to: offset + contentLength)
            offset += length
            return RTCPCompoundParser.decode(packet, packetType: packetType, count: count)
        }
    }

    /// Decodes one packet whose content (padding removed) is `packet`. Bounds are
    /// re-checked so that decoding can never read out of range.
    private static func decode(_ packet: UnsafeRawBufferPointer, packetType: UInt8, count: UInt8) -> RTCPPacket {
        let size = packet.count
        switch packetType {
        case RTCPPacketType.senderReport where size >= 28:
            let blocks = RTCPReportBlocks(bytes: packet.slice(from: 28, to: size), count: Int(count))
            return .senderReport(
                ssrc: packet.loadBigEndianUInt32(at: 4),
                info: RTCPSenderInfo(decodingFrom: packet, at: 8),
                blocks: blocks
            )
        case RTCPPacketType.receiverReport where size >= 8:
            let blocks = RTCPReportBlocks(bytes: packet.slice(from: 8, to: size), count: Int(count))
            return .receiverReport(ssrc: packet.loadBigEndianUInt32(at: 4), blocks: blocks)
        case RTCPPacketType.sourceDescription:
            var firstSSRC: UInt32?
            var firstCNAME: UnsafeRawBufferPointer?
            if count > 0, size >= 8 {
                firstSSRC = packet.loadBigEndianUInt32(at: 4)
                var position = 8
                while position + 2 <= size {
                    let itemType = packet[position]
                    if itemType == 0 { break }
                    let itemLength = Int(packet[position + 1])
                    let itemEnd = position + 2 + itemLength
                    guard itemEnd <= size else { break }
                    if itemType == RTCPPacketType.sdesItemCNAME {
                        firstCNAME = packet.slice(from: position + 2, to: itemEnd)
                        break
                    }
                    position = itemEnd
                }
            }
            return .sourceDescription(sourceCount: Int(count), firstSSRC: firstSSRC, firstCNAME: firstCNAME)
        case RTCPPacketType.bye:
            let firstSSRC: UInt32? = (count > 0 && size >= 8) ? packet.loadBigEndianUInt32(at: 4) : nil
            var reason: UnsafeRawBufferPointer?
            let reasonOffset = 4 + Int(count) * 4
            if reasonOffset < size {
                let reasonEnd = reasonOffset + 1 + Int(packet[reasonOffset])
                if reasonEnd <= size {
                    reason = packet.slice(from: reasonOffset + 1, to: reasonEnd)
                }
            }
            return .bye(sourceCount: Int(count), firstSSRC: firstSSRC, reason: reason)
        default:
            return .other(packetType: packetType, count: count, body: packet.slice(from: 4, to: size))
        }
    }

    /// Checks the type-specific structure of one packet (padding already removed).
    private static func validateContent(
        _ packet: UnsafeRawBufferPointer,
        packetType: UInt8,
        count: Int
    ) throws(RTPParseError) {
        let size = packet.count
        switch packetType {
        case RTCPPacketType.senderReport:
            guard size >= 28 + count * RTCPReportBlock.encodedLength else { throw .badReportCount }
        case RTCPPacketType.receiverReport:
            guard size >= 8 + count * RTCPReportBlock.encodedLength else { throw .badReportCount }
        case RTCPPacketType.sourceDescription:
            var position = 4
            for _ in 0..<count {
                guard position + 4 <= size else { throw .badSourceDescription }
                position += 4
                while true {
                    guard position < size else { throw .badSourceDescription }
                    if packet[position] == 0 {
                        // End of item list: skip nulls up to the next 32-bit boundary.
                        position = (position + 1 + 3) & ~3
                        guard position <= size else { throw .badSourceDescription }
                        break
                    }
                    guard position + 2 <= size else { throw .badSourceDescription }
                    position += 2 + Int(packet[position + 1])
                    guard position <= size else { throw .badSourceDescription }
                }
            }
        case RTCPPacketType.bye:
            let reasonOffset = 4 + count * 4
            guard reasonOffset <= size else { throw .badBye }
            if reasonOffset < size {
                guard reasonOffset + 1 + Int(packet[reasonOffset]) <= size else { throw .badBye }
            }
        default:
            break
        }
    }
}
