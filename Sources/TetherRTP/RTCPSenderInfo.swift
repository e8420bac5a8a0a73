/// The sender information section of an RTCP sender report (RFC 3550 §6.4.1), 20 bytes.
public struct RTCPSenderInfo: Sendable, Equatable, Hashable {
    /// Size of the sender info on the wire, in bytes.
    public static let encodedLength = 20

    /// 64-bit NTP timestamp (32.32 fixed-point seconds since 1900) at which the report
    /// was sent; see `NTPTimestamp`.
    public var ntpTimestamp: UInt64
    /// RTP timestamp (RTP clock units) corresponding to `ntpTimestamp`.
    public var rtpTimestamp: UInt32
    /// Total RTP data packets sent by this sender since starting (wraps).
    public var senderPacketCount: UInt32
    /// Total RTP payload bytes sent by this sender since starting (wraps).
    public var senderOctetCount: UInt32

    /// Memberwise initializer; see the property docs for units.
    public init(ntpTimestamp: UInt64, rtpTimestamp: UInt32, senderPacketCount: UInt32, senderOctetCount: UInt32) {
        self.ntpTimestamp = ntpTimestamp
        self.rtpTimestamp = rtpTimestamp
        self.senderPacketCount = senderPacketCount
        self.senderOctetCount = senderOctetCount
    }

    /// The middle 32 bits of `ntpTimestamp` (16.16 fixed-point seconds), i.e. the value
    /// a receiver echoes back as LSR.
    public var ntpMiddle32: UInt32 {
        UInt32(truncatingIfNeeded: ntpTimestamp >> 16)
    }

    /// Decodes sender info at `offset` bytes. Caller guarantees 20 bytes are available.
    init(decodingFrom buffer: UnsafeRawBufferPointer, at offset: Int) {
        self.init(
            ntpTimestamp: buffer.loadBigEndianUInt64(at: offset),
            rtpTimestamp: buffer.loadBigEndianUInt32(at: offset + 8),
            senderPacketCount: buffer.loadBigEndianUInt32(at: offset + 12),
            senderOctetCount: buffer.loadBigEndianUInt32(at: offset + 16)
        )
    }

    /// Encodes sender info at `offset` bytes. Caller guarantees 20 bytes are available.
    func encode(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) {
        buffer.storeBigEndian(ntpTimestamp, at: offset)
        buffer.storeBigEndian(rtpTimestamp, at: offset + 8)
        buffer.storeBigEndian(senderPacketCount, at: offset + 12)
        buffer.storeBigEndian(senderOctetCount, at: offset + 16)
    }
}
