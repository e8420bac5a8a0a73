/// One RTCP packet visited by `RTCPCompoundParser`.
///
/// Buffer-backed payloads (`RTCPReportBlocks`, `UnsafeRawBufferPointer`) borrow the
/// caller's compound buffer and are only valid while it is alive and unchanged.
public enum RTCPPacket {
    /// Sender report (PT 200).
    /// - ssrc: the sender's SSRC; info: its sender info; blocks: its reception reports.
    case senderReport(ssrc: UInt32, info: RTCPSenderInfo, blocks: RTCPReportBlocks)
    /// Receiver report (PT 201).
    case receiverReport(ssrc: UInt32, blocks: RTCPReportBlocks)
    /// Source description (PT 202): number of chunks, the first chunk's SSRC and CNAME
    /// text (raw bytes, usually UTF-8) when present.
    case sourceDescription(sourceCount: Int, firstSSRC: UInt32?, firstCNAME: UnsafeRawBufferPointer?)
    /// Goodbye (PT 203): number of SSRCs leaving, the first of them, and the optional
    /// reason text (raw bytes).
    case bye(sourceCount: Int, firstSSRC: UInt32?, reason: UnsafeRawBufferPointer?)
    /// Any other RTCP packet (APP, RTPFB, PSFB, XR, ...): its type, its 5-bit count/format
    /// field, and the bytes after its 4-byte header (padding excluded).
    case other(packetType: UInt8, count: UInt8, body: UnsafeRawBufferPointer)
}
