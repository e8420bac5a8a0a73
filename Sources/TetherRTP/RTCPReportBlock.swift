/// One RTCP reception report block (RFC 3550 §6.4.1), 24 bytes on the wire.
public struct RTCPReportBlock: Sendable, Equatable, Hashable {
    /// Size of a report block on the wire, in bytes.
    public static let encodedLength = 24
    /// Largest value of the signed 24-bit cumulative-lost field (packets).
    public static let maximumCumulativeLost: Int32 = 0x7F_FFFF
    /// Smallest value of the signed 24-bit cumulative-lost field (packets).
    public static let minimumCumulativeLost: Int32 = -0x80_0000

    /// SSRC of the source this block reports on.
    public var ssrc: UInt32
    /// Fraction of packets lost since the previous report, as 8-bit fixed point
    /// (lost / expected × 256).
    public var fractionLost: UInt8
    /// Cumulative packets lost (expected − received), a signed 24-bit value in packets.
    /// Values outside −8388608...8388607 are clamped when written.
    public var cumulativeLost: Int32
    /// Extended highest sequence number received: cycles (high 16 bits) and sequence
    /// number (low 16 bits).
    public var extendedHighestSequence: UInt32
    /// Interarrival jitter estimate in RTP timestamp units.
    public var interarrivalJitter: UInt32
    /// LSR: middle 32 bits of the NTP timestamp of the last SR received from the source
    /// (16.16 fixed-point seconds), 0 if none.
    public var lastSenderReport: UInt32
    /// DLSR: delay between receiving that SR and sending this block, in units of
    /// 1/65536 s; 0 if no SR was received.
    public var delaySinceLastSenderReport: UInt32

    /// Memberwise initializer; see the property docs for units.
    public init(
        ssrc: UInt32,
        fractionLost: UInt8,
        cumulativeLost: Int32,
        extendedHighestSequence: UInt32,
        interarrivalJitter: UInt32,
        lastSenderReport: UInt32,
        delaySinceLastSenderReport: UInt32
    ) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = cumulativeLost
        self.extendedHighestSequence = extendedHighestSequence
        self.interarrivalJitter = interarrivalJitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    /// Clamps a cumulative loss count (packets) into the signed 24-bit field range.
    public static func clampCumulativeLost(_ packets: Int64) -> Int32 {
        Int32(min(max(packets, Int64(minimumCumulativeLost)), Int64(maximumCumulativeLost)))
    }

    /// Decodes a block at `offset` bytes. Caller guarantees 24 bytes are available.
    init(decodingFrom buffer: UnsafeRawBufferPointer, at offset: Int) {
        let word1 = buffer.loadBigEndianUInt32(at: offset + 4)
        // Sign-extend the low 24 bits.
        let lost = Int32(bitPattern: word1 << 8) >> 8
        self.init(
            ssrc: buffer.loadBigEndianUInt32(at: offset),
            fractionLost: UInt8(truncatingIfNeeded: word1 >> 24),
            cumulativeLost: lost,
            extendedHighestSequence: buffer.loadBigEndianUInt32(at: offset + 8),
            interarrivalJitter: buffer.loadBigEndianUInt32(at: offset + 12),
            lastSenderReport: buffer.loadBigEndianUInt32(at: offset + 16),
            delaySinceLastSenderReport: buffer.loadBigEndianUInt32(at: offset + 20)
        )
    }

    /// Encodes the block at `offset` bytes. Caller guarantees 24 bytes are available.
    func encode(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) {
        let lost = RTCPReportBlock.clampCumulativeLost(Int64(cumulativeLost))
        let lost24 = UInt32(bitPattern: lost) & 0x00FF_FFFF
        buffer.storeBigEndian(ssrc, at: offset)
        buffer.storeBigEndian(UInt32(fractionLost) << 24 | lost24, at: offset + 4)
        buffer.storeBigEndian(extendedHighestSequence, at: offset + 8)
        buffer.storeBigEndian(interarrivalJitter, at: offset + 12)
        buffer.storeBigEndian(lastSenderReport, at: offset + 16)
        buffer.storeBigEndian(delaySinceLastSenderReport, at: offset + 20)
    }
}
