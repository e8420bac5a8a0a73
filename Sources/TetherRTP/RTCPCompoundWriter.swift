/// Writes compound RTCP packets (RFC 3550 §6.1) into caller-provided buffers without
/// allocating.
///
/// Each compound is: SR (when sender info is given) or RR carrying up to 31 report
/// blocks, further RR packets for any remaining blocks, an SDES packet with one chunk
/// holding this source's CNAME, and optionally a BYE. The output is the plain RTCP
/// compound; SRTCP protection is applied afterwards by the caller.
public struct RTCPCompoundWriter: Sendable {
    /// Whether and how to append a BYE packet.
    public enum Bye {
        /// No BYE packet.
        case omitted
        /// A BYE for the writer's SSRC, with an optional UTF-8 reason of at most 255 bytes.
        case included(reason: UnsafeRawBufferPointer?)
    }

    /// Report blocks carried by one SR or RR packet (5-bit count field).
    public static let maximumReportBlocksPerPacket = 31

    /// The CNAME bytes, stored once at initialisation.
    private let cname: [UInt8]

    /// Creates a writer for a source with the given canonical name.
    /// - Parameter cname: CNAME bytes (typically UTF-8), 1...255 bytes.
    /// - Returns: nil when the CNAME is empty or longer than 255 bytes.
    public init?(cname: some Sequence<UInt8>) {
        let bytes = Array(cname)
        guard !bytes.isEmpty, bytes.count <= 255 else { return nil }
        self.cname = bytes
    }

    /// Length of the stored CNAME, in bytes.
    public var cnameLength: Int { cname.count }

    /// Size in bytes of the compound `write` would produce.
    /// - Parameters:
    ///   - hasSenderInfo: true for SR, false for RR.
    ///   - reportBlockCount: number of report blocks.
    ///   - byeReasonLength: nil for no BYE, 0 for a BYE without reason, otherwise the
    ///     reason length in bytes.
    public func requiredLength(hasSenderInfo: Bool, reportBlockCount: Int, byeReasonLength: Int?) -> Int {
        var length = hasSenderInfo ? 28 : 8
        let firstBlocks = Swift.min(reportBlockCount, RTCPCompoundWriter.maximumReportBlocksPerPacket)
        length += firstBlocks * RTCPReportBlock.encodedLength
        var remaining = reportBlockCount - firstBlocks
        while remaining > 0 {
            let blocks = Swift.min(remaining, RTCPCompoundWriter.maximumReportBlocksPerPacket)
            length += 8 + blocks * RTCPReportBlock.encodedLength
            remaining -= blocks
        }
        length += sourceDescriptionLength
        if let byeReasonLength {
            length += 8
            if byeReasonLength > 0 {
                length += RTCPCompoundWriter.roundUpTo32Bits(1 + byeReasonLength)
            }
        }
        return length
    }

    /// Writes a compound RTCP packet at the start of `buffer`.
    /// - Parameters:
    ///   - buffer: output buffer.
    ///   - ssrc: this sender's SSRC.
    ///   - senderInfo: sender info for an SR, or nil to write an RR.
    ///   - reportBlocks: reception report blocks (any count; > 31 spill into extra RRs).
    ///   - bye: whether to append a BYE.
    /// - Returns: the compound length in bytes.
    public func write(
        into buffer: UnsafeMutableRawBufferPointer,
        ssrc: UInt32,
        senderInfo: RTCPSenderInfo?,
        reportBlocks: [RTCPReportBlock],
        bye: Bye
    ) throws(RTCPWriteError) -> Int {
        let result = reportBlocks.withUnsafeBufferPointer { blocks in
            Result { () throws(RTCPWriteError) -> Int in
                try write(into: buffer, ssrc: ssrc, senderInfo: senderInfo, reportBlocks: blocks, bye: bye)
            }
        }
        return try result.get()
    }

    /// Writes a compound RTCP packet at the start of `buffer`.
    ///
    /// Same as the array overload, for callers keeping blocks in their own storage.
    /// - Returns: the compound length in bytes.
    public func write(
        into buffer: UnsafeMutableRawBufferPointer,
        ssrc: UInt32,
        senderInfo: RTCPSenderInfo?,
        reportBlocks: UnsafeBufferPointer<RTCPReportBlock>,
        bye: Bye
    ) throws(RTCPWriteError) -> Int {
        var byeReasonLength: Int?
        var byeReason: UnsafeRawBufferPointer?
        if case .included(let reason) = bye {
            byeReason = reason
            byeReasonLength = reason?.count ?? 0
            if let reason, reason.count > 255 { throw .byeReasonTooLong(lengthBytes: reason.count) }
        }
        let total = requiredLength(
            hasSenderInfo: senderInfo != nil,
            reportBlockCount: reportBlocks.count,
            byeReasonLength: byeReasonLength
        )
        guard buffer.count >= total else { throw .bufferTooSmall(requiredBytes: total) }

        var offset = 0
        var blockIndex = 0
        var blocksLeft = reportBlocks.count
        var isFirstReport = true
        repeat {
            let blocks = Swift.min(blocksLeft, RTCPCompoundWriter.maximumReportBlocksPerPacket)
            let start = offset
            let info = isFirstReport ? senderInfo : nil
            let headerLength = info == nil ? 8 : 28
            let packetLength = headerLength + blocks * RTCPReportBlock.encodedLength
            RTCPCompoundWriter.writeHeader(
                into: buffer, at: start, count: blocks,
                packetType: info == nil ? RTCPPacketType.receiverReport : RTCPPacketType.senderReport,
                lengthBytes: packetLength
            )
            buffer.storeBigEndian(ssrc, at: start + 4)
            info?.encode(into: buffer, at: start + 8)
            offset = start + headerLength
            for _ in 0..<blocks {
                reportBlocks[blockIndex].encode(into: buffer, at: offset)
                blockIndex += 1
                offset += RTCPReportBlock.encodedLength
            }
            blocksLeft -= blocks
            isFirstReport = false
        } while blocksLeft > 0

        offset = writeSourceDescription(into: buffer, at: offset, ssrc: ssrc)

        if byeReasonLength != nil {
            let reasonLength = byeReason?.count ?? 0
            let packetLength = 8 + (reasonLength > 0 ? RTCPCompoundWriter.roundUpTo32Bits(1 + reasonLength) : 0)
            RTCPCompoundWriter.writeHeader(
                into: buffer, at: offset, count: 1, packetType: RTCPPacketType.bye, lengthBytes: packetLength
            )
            buffer.storeBigEndian(ssrc, at: offset + 4)
            if let byeReason, reasonLength > 0 {
                buffer[offset + 8] = UInt8(reasonLength)
                UnsafeMutableRawBufferPointer(rebasing: buffer[(offset + 9)..<(offset + 9 + reasonLength)])
                    .copyMemory(from: byeReason)
                let written = 9 + reasonLength
                buffer.zero(from: offset + written, count: packetLength - written)
            }
            offset += packetLength
        }
        return offset
    }

    /// SDES packet length in bytes: header, SSRC, CNAME item, terminating null(s).
    private var sourceDescriptionLength: Int {
        8 + RTCPCompoundWriter.roundUpTo32Bits(2 + cname.count + 1)
    }

    /// Writes the SDES packet with one CNAME chunk; returns the offset after it.
    private func writeSourceDescription(into buffer: UnsafeMutableRawBufferPointer, at start: Int, ssrc: UInt32) -> Int {
        let packetLength = sourceDescriptionLength
        RTCPCompoundWriter.writeHeader(
            into: buffer, at: start, count: 1, packetType: RTCPPacketType.sourceDescription, lengthBytes: packetLength
        )
        buffer.storeBigEndian(ssrc, at: start + 4)
        buffer[start + 8] = RTCPPacketType.sdesItemCNAME
        buffer[start + 9] = UInt8(cname.count)
        let textStart = start + 10
        cname.withUnsafeBytes { bytes in
            UnsafeMutableRawBufferPointer(rebasing: buffer[textStart..<(textStart + bytes.count)]).copyMemory(from: bytes)
        }
        let itemsEnd = textStart + cname.count
        buffer.zero(from: itemsEnd, count: start + packetLength - itemsEnd)
        return start + packetLength
    }

    /// Writes a 4-byte RTCP common header (V=2, P=0).
    private static func writeHeader(
        into buffer: UnsafeMutableRawBufferPointer,
        at offset: Int,
        count: Int,
        packetType: UInt8,
        lengthBytes: Int
    ) {
        buffer[offset] = 0x80 | UInt8(count & 0x1F)
        buffer[offset + 1] = packetType
        buffer.storeBigEndian(UInt16(lengthBytes / 4 - 1), at: offset + 2)
    }

    /// Rounds a byte count up to a multiple of 4.
    private static func roundUpTo32Bits(_ bytes: Int) -> Int {
        (bytes + 3) & ~3
    }
}
