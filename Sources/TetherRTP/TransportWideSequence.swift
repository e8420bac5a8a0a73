/// The transport-wide sequence number RTP header extension
/// (`http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01`, §2): a 16-bit
/// number on every packet a sender sends on the transport, which the receiver's
/// transport-cc feedback reports arrival times for. Carried as an RFC 8285 one-byte extension.
///
/// No allocation.
public enum TransportWideSequence {
    /// The extension's URI in `a=extmap`.
    public static let uri = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    /// The one-byte header extension profile (RFC 8285 §4.2).
    static let oneByteProfile: UInt16 = 0xBEDE
    /// Bytes the extension adds after the fixed header: the 4-byte extension header, one
    /// element (ID/length byte and two bytes), one byte of padding.
    public static let headerBytes = 8

    /// Writes the extension block with element `id` (1…14) carrying `sequence` at `offset`
    /// (just after the fixed header, which must have its X bit set: see
    /// ``setExtensionBit(in:)``). Returns the bytes written (``headerBytes``).
    @discardableResult
    public static func write(_ sequence: UInt16, id: UInt8, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        precondition(id >= 1 && id <= 14, "one-byte extension IDs are 1…14")
        buffer.storeBigEndian(oneByteProfile, at: offset)
        buffer.storeBigEndian(UInt16(1), at: offset + 2)  // one 32-bit word of elements
        buffer[offset + 4] = id << 4 | 1  // two bytes of data: length − 1
        buffer.storeBigEndian(sequence, at: offset + 5)
        buffer[offset + 7] = 0  // padding
        return headerBytes
    }

    /// Sets the X (extension) bit of the RTP header at the start of `buffer`.
    public static func setExtensionBit(in buffer: UnsafeMutableRawBufferPointer) {
        buffer[0] |= 0x10
    }

    /// The transport-wide sequence number in element `id` of a parsed packet's one-byte
    /// header extension, or nil (no extension, another profile, no such element, or malformed).
    public static func read(from packet: UnsafeRawBufferPointer, header: RTPHeader, id: UInt8) -> UInt16? {
        guard header.hasExtension, header.extensionProfile == oneByteProfile, id >= 1, id <= 14 else { return nil }
        var position = header.extensionOffset
        let end = header.extensionOffset + header.extensionLength
        guard end <= packet.count else { return nil }
        while position < end {
            let byte = packet[position]
            if byte == 0 {  // padding between elements
                position += 1
                continue
            }
            let elementID = byte >> 4
            let length = Int(byte & 0x0F) + 1
            if elementID == 15 { return nil }  // RFC 8285: stop processing
            guard position + 1 + length <= end else { return nil }
            if elementID == id {
                guard length == 2 else { return nil }
                return packet.loadBigEndianUInt16(at: position + 1)
            }
            position += 1 + length
        }
        return nil
    }
}
