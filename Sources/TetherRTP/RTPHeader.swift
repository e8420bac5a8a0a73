/// An RTP fixed header (RFC 3550 §5.1) plus the layout of the packet it was parsed from.
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
/// |V=2|P|X|  CC   |M|     PT      |       sequence number         |
/// |                           timestamp                           |
/// |           synchronization source (SSRC) identifier            |
/// |            contributing source (CSRC) identifiers             |
/// ```
///
/// Parsing and writing never allocate. All offsets and lengths are in bytes relative to
/// the start of the packet buffer.
public struct RTPHeader: Sendable, Equatable, Hashable {
    /// The only RTP version this type accepts and writes.
    public static let version: UInt8 = 2
    /// Size of the fixed header without CSRCs or extension, in bytes.
    public static let fixedHeaderLength = 12

    /// Padding bit: the packet ends with padding whose length (bytes) is its last byte.
    public var hasPadding: Bool
    /// Extension bit: a header extension follows the CSRC list.
    public var hasExtension: Bool
    /// Number of 32-bit CSRC identifiers following the fixed header (0...15).
    public var csrcCount: UInt8
    /// Marker bit (for Opus/audio: first packet of a talkspurt).
    public var marker: Bool
    /// Payload type (0...127).
    public var payloadType: UInt8
    /// 16-bit RTP sequence number (wraps).
    public var sequenceNumber: UInt16
    /// RTP timestamp in RTP clock units (e.g. 1/48000 s for Opus); wraps.
    public var timestamp: UInt32
    /// Synchronization source identifier.
    public var ssrc: UInt32

    /// "Defined by profile" field of the header extension (0x BEDE for RFC 8285 one-byte
    /// extensions); 0 when there is no extension.
    public private(set) var extensionProfile: UInt16
    /// Byte offset of the header extension data (after its 4-byte header); 0 when absent.
    public private(set) var extensionOffset: Int
    /// Length of the header extension data in bytes (a multiple of 4); 0 when absent.
    public private(set) var extensionLength: Int
    /// Number of padding bytes at the end of the packet (including the count byte); 0 when
    /// the padding bit is clear.
    public private(set) var paddingLength: Int
    /// Byte offset of the payload (total header length, including CSRCs and extension).
    public private(set) var payloadOffset: Int
    /// Payload length in bytes (excludes header and padding).
    public private(set) var payloadLength: Int

    /// Creates a header for sending. Layout fields describe a 12-byte header with no
    /// payload; `write(to:)` never emits padding, CSRCs or extensions.
    /// - Parameters:
    ///   - marker: marker bit.
    ///   - payloadType: payload type, 0...127.
    ///   - sequenceNumber: 16-bit sequence number.
    ///   - timestamp: RTP timestamp in RTP clock units.
    ///   - ssrc: synchronization source.
    public init(marker: Bool = false, payloadType: UInt8, sequenceNumber: UInt16, timestamp: UInt32, ssrc: UInt32) {
        precondition(payloadType < 128, "RTP payload type must be 0...127")
        self.hasPadding = false
        self.hasExtension = false
        self.csrcCount = 0
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.extensionProfile = 0
        self.extensionOffset = 0
        self.extensionLength = 0
        self.paddingLength = 0
        self.payloadOffset = RTPHeader.fixedHeaderLength
        self.payloadLength = 0
    }

    /// Parses and validates an RTP packet header.
    ///
    /// Validates the version, that the CSRC list and header extension fit in the buffer,
    /// and (when the padding bit is set) that the padding count byte is ≥ 1 and fits
    /// after the header.
    /// - Parameter packet: the whole RTP packet (after SRTP unprotection).
    /// - Returns: the header with `payloadOffset`/`payloadLength` locating the payload.
    public static func parse(_ packet: UnsafeRawBufferPointer) throws(RTPParseError) -> RTPHeader {
        let packetLength = packet.count
        guard packetLength >= fixedHeaderLength else { throw .tooShort }
        let byte0 = packet[0]
        let version = byte0 >> 6
        guard version == RTPHeader.version else { throw .badVersion(version) }
        let hasPadding = byte0 & 0x20 != 0
        let hasExtension = byte0 & 0x10 != 0
        let csrcCount = byte0 & 0x0F
        let byte1 = packet[1]

        var headerLength = fixedHeaderLength + Int(csrcCount) * 4
        guard headerLength <= packetLength else { throw .csrcListTooLong }

        var extensionProfile: UInt16 = 0
        var extensionOffset = 0
        var extensionLength = 0
        if hasExtension {
            guard headerLength + 4 <= packetLength else { throw .badExtension }
            extensionProfile = packet.loadBigEndianUInt16(at: headerLength)
            extensionLength = Int(packet.loadBigEndianUInt16(at: headerLength + 2)) * 4
            extensionOffset = headerLength + 4
            guard extensionOffset + extensionLength <= packetLength else { throw .badExtension }
            headerLength = extensionOffset + extensionLength
        }

        var paddingLength = 0
        if hasPadding {
            paddingLength = Int(packet[packetLength - 1])
            guard paddingLength >= 1, headerLength + paddingLength <= packetLength else { throw .badPadding }
        }

        var header = RTPHeader(
            marker: byte1 & 0x80 != 0,
            payloadType: byte1 & 0x7F,
            sequenceNumber: packet.loadBigEndianUInt16(at: 2),
            timestamp: packet.loadBigEndianUInt32(at: 4),
            ssrc: packet.loadBigEndianUInt32(at: 8)
        )
        header.hasPadding = hasPadding
        header.hasExtension = hasExtension
        header.csrcCount = csrcCount
        header.extensionProfile = extensionProfile
        header.extensionOffset = extensionOffset
        header.extensionLength = extensionLength
        header.paddingLength = paddingLength
        header.payloadOffset = headerLength
        header.payloadLength = packetLength - headerLength - paddingLength
        return header
    }

    /// Returns the contributing source at `index` (0 ..< `csrcCount`) from the packet this
    /// header was parsed from, or nil if the index is out of range.
    public func contributingSource(at index: Int, in packet: UnsafeRawBufferPointer) -> UInt32? {
        guard index >= 0, index < Int(csrcCount) else { return nil }
        let offset = RTPHeader.fixedHeaderLength + index * 4
        guard offset + 4 <= packet.count else { return nil }
        return packet.loadBigEndianUInt32(at: offset)
    }

    /// Throws if the header does not carry the expected payload type and/or SSRC.
    /// - Parameters:
    ///   - expectedPayloadType: required payload type, or nil to accept any.
    ///   - expectedSSRC: required SSRC, or nil to accept any.
    public func validate(expectedPayloadType: UInt8?, expectedSSRC: UInt32?) throws(RTPParseError) {
        if let expectedPayloadType, expectedPayloadType != payloadType {
            throw .unexpectedPayloadType(payloadType)
        }
        if let expectedSSRC, expectedSSRC != ssrc {
            throw .unexpectedSSRC(ssrc)
        }
    }

    /// Writes a 12-byte RTP header (V=2, P=0, X=0, CC=0) at the start of `buffer`.
    ///
    /// Padding, CSRC and extension fields of `self` are ignored.
    /// - Precondition: `buffer.count >= 12` and `payloadType < 128`.
    /// - Returns: the number of bytes written (always 12).
    @discardableResult
    public func write(to buffer: UnsafeMutableRawBufferPointer) -> Int {
        precondition(buffer.count >= RTPHeader.fixedHeaderLength, "RTP header needs 12 bytes")
        precondition(payloadType < 128, "RTP payload type must be 0...127")
        buffer[0] = RTPHeader.version << 6
        buffer[1] = (marker ? 0x80 : 0) | payloadType
        buffer.storeBigEndian(sequenceNumber, at: 2)
        buffer.storeBigEndian(timestamp, at: 4)
        buffer.storeBigEndian(ssrc, at: 8)
        return RTPHeader.fixedHeaderLength
    }
}
