/// Per-source RTP reception statistics for RTCP reception reports (RFC 3550 A.1, A.3,
/// A.8).
///
/// Sans-IO: arrival times are passed in by the caller, already converted to the
/// source's RTP clock units. Sequence validation follows A.1 (`MAX_DROPOUT` = 3000,
/// `MAX_MISORDER` = 100, optional probation of `minimumSequentialPackets`). As in the RFC,
/// late and duplicate packets count as received, so cumulative loss can go negative.
/// A 128-packet window additionally tells duplicates apart from reordered packets.
public struct ReceptionStatistics: Sendable, Equatable, Hashable {
    /// How a packet was treated by `packetReceived`.
    public enum PacketClassification: Sendable, Equatable, Hashable {
        /// New highest sequence number (possibly after a gap); also the first valid packet.
        case inOrder
        /// Older than the highest seen, within the misorder window, not seen before.
        case reordered
        /// Already received (still counted as received, per RFC 3550 A.3).
        case duplicate
        /// Source is still on probation; not counted.
        case probation
        /// A very large jump that is not yet confirmed by a following packet; not counted.
        case discardedJump
        /// The second packet of a confirmed large jump: the sequence state (and the loss
        /// counters) restarted from this packet, which is counted.
        case resynchronized
    }

    /// A.1 MAX_DROPOUT: largest forward jump (packets) accepted as in-order.
    public static let maxDropout: UInt16 = 3000
    /// A.1 MAX_MISORDER: largest backward distance (packets) accepted as reordering.
    public static let maxMisorder: UInt16 = 100
    private static let sequenceModulus: UInt32 = 1 << 16

    /// A.1 MIN_SEQUENTIAL: consecutive packets required before the source is valid
    /// (≤ 1 disables probation).
    public let minimumSequentialPackets: Int

    private var started = false
    private var probation = 0
    private var maxSequence: UInt16 = 0
    /// Number of sequence-number wraps × 65536 (A.1 `cycles`, widened to 64 bits).
    private var cycles: UInt64 = 0
    /// The extended sequence number after the last one a loss report covered (nil: none yet
    /// in this numbering).
    private var lossReportedUpTo: UInt64?
    private var baseSequence: UInt64 = 0
    /// A.1 `bad_seq`; 65537 means "none".
    private var badSequence: UInt32 = ReceptionStatistics.sequenceModulus + 1
    private var receivedPrior: UInt64 = 0
    private var expectedPrior: Int64 = 0
    private var window = ReceivedSequenceWindow()
    private var hasTransit = false
    /// A.8 `transit` of the previous packet, RTP units (mod 2^32).
    private var lastTransit: UInt32 = 0

    /// True once the source passed probation and at least one packet was counted.
    public private(set) var isValid = false
    /// Packets counted as received since the last (re)synchronisation, including late
    /// and duplicate packets (A.1 `received`).
    public private(set) var packetsReceived: UInt64 = 0
    /// Packets identified as duplicates since creation.
    public private(set) var duplicates: UInt64 = 0
    /// Packets identified as reordered (late but new) since creation.
    public private(set) var reorderedPackets: UInt64 = 0
    /// Interarrival jitter × 16 in RTP timestamp units (A.8 integer form).
    public private(set) var interarrivalJitterTimes16: Int64 = 0

    /// Creates empty statistics.
    /// - Parameter minimumSequentialPackets: A.1 MIN_SEQUENTIAL. The RFC suggests 2 for
    ///   unknown sources; the default 1 accepts the first packet immediately (suitable
    ///   when the SSRC is known from signalling).
    public init(minimumSequentialPackets: Int = 1) {
        self.minimumSequentialPackets = minimumSequentialPackets
    }

    /// Whether `sequenceNumber` was already received, within the last 128 packets (a copy or a
    /// network duplicate: the caller can drop it before spending SRTP on it).
    public func hasReceived(sequenceNumber: UInt16) -> Bool {
        guard isValid, probation == 0 else { return false }
        let behind = maxSequence &- sequenceNumber
        guard behind < UInt16(ReceivedSequenceWindow.size) else { return false }
        return window.contains(packetsBehind: Int(behind))
    }

    /// Which packets arrived since the last loss report (``lossReportSent()``; the first: since
    /// the stream began) through the highest received: at most the newest
    /// `ReceivedPackets.capacity` (the duplicate window's reach) — what an RTCP XR Loss RLE
    /// block reports. nil before the first packet, or when none is newer than the last report.
    /// A late packet that arrives after its range was reported is not reported again. A
    /// resynchronisation (a new numbering) starts the reports over.
    public func packetsSinceLossReport() -> ReceivedPackets? {
        guard isValid, probation == 0 else { return nil }
        let end = cycles + UInt64(maxSequence) + 1
        var begin = max(baseSequence, end - min(end, UInt64(ReceivedPackets.capacity)))
        if let lossReportedUpTo { begin = max(begin, lossReportedUpTo) }
        guard end > begin else { return nil }
        return ReceivedPackets(beginSequence: UInt16(truncatingIfNeeded: begin), count: Int(end - begin), window: window)
    }

    /// The packets ``packetsSinceLossReport()`` gave were reported: the next report begins
    /// after the highest received now.
    public mutating func lossReportSent() {
        guard isValid else { return }
        lossReportedUpTo = cycles + UInt64(maxSequence) + 1
    }

    /// Extended highest sequence number received (cycles in the high 16 bits), as sent
    /// in reception reports. 0 until valid.
    public var extendedHighestSequence: UInt32 {
        UInt32(truncatingIfNeeded: cycles + UInt64(maxSequence))
    }

    /// Packets expected since the (re)synchronisation: extended highest − base + 1.
    public var expectedPackets: Int64 {
        guard isValid else { return 0 }
        return Int64(cycles + UInt64(maxSequence)) - Int64(baseSequence) + 1
    }

    /// Cumulative packets lost (expected − received); negative when duplicates or
    /// packets older than the base were received. Not clamped.
    public var cumulativeLost: Int64 {
        expectedPackets - Int64(packetsReceived)
    }

    /// Interarrival jitter in RTP timestamp units, as reported in RTCP (A.8: jitter >> 4).
    public var interarrivalJitter: UInt32 {
        UInt32(clamping: interarrivalJitterTimes16 >> 4)
    }

    /// Records one received RTP packet.
    /// - Parameters:
    ///   - sequenceNumber: the packet's RTP sequence number.
    ///   - rtpTimestamp: the packet's RTP timestamp (RTP clock units).
    ///   - arrivalRTPUnits: the packet's arrival time converted to the same RTP clock
    ///     (any fixed origin; differences matter, mod 2^32).
    ///   - updatesJitter: false for a packet whose timestamp is not its sampling instant (an
    ///     RFC 4733 event update carries the event's start): counted, but not in the jitter.
    /// - Returns: how the packet was classified.
    @discardableResult
    public mutating func packetReceived(
        sequenceNumber: UInt16,
        rtpTimestamp: UInt32,
        arrivalRTPUnits: UInt32,
        updatesJitter: Bool = true
    ) -> PacketClassification {
        if !started {
            started = true
            if minimumSequentialPackets <= 1 {
                restart(at: sequenceNumber)
                countPacket(rtpTimestamp: rtpTimestamp, arrivalRTPUnits: arrivalRTPUnits, updatesJitter: updatesJitter)
                return .inOrder
            }
            restart(at: sequenceNumber)
            isValid = false
            maxSequence = sequenceNumber &- 1
            probation = minimumSequentialPackets
        }

        if probation > 0 {
            if sequenceNumber == maxSequence &+ 1 {
                probation -= 1
                maxSequence = sequenceNumber
                if probation == 0 {
                    restart(at: sequenceNumber)
                    countPacket(rtpTimestamp: rtpTimestamp, arrivalRTPUnits: arrivalRTPUnits, updatesJitter: updatesJitter)
                    return .inOrder
                }
            } else {
                probation = minimumSequentialPackets - 1
                maxSequence = sequenceNumber
            }
            return .probation
        }

        let forwardDelta = sequenceNumber &- maxSequence
        let classification: PacketClassification
        if forwardDelta < ReceptionStatistics.maxDropout {
            if forwardDelta == 0 {
                classification = .duplicate
            } else {
                if sequenceNumber < maxSequence {
                    cycles += UInt64(ReceptionStatistics.sequenceModulus)
                }
                maxSequence = sequenceNumber
                window.advance(by: Int(forwardDelta))
                classification = .inOrder
            }
        } else if UInt32(forwardDelta) <= ReceptionStatistics.sequenceModulus - UInt32(ReceptionStatistics.maxMisorder) {
            // Very large jump: accept only if the next packet continues from it.
            if UInt32(sequenceNumber) == badSequence {
                restart(at: sequenceNumber)
                // A new numbering probably means a new timestamp base too.
                hasTransit = false
                classification = .resynchronized
            } else {
                badSequence = (UInt32(sequenceNumber) + 1) & (ReceptionStatistics.sequenceModulus - 1)
                return .discardedJump
            }
        } else {
            let packetsBehind = Int(maxSequence &- sequenceNumber)
            classification = window.markReceived(packetsBehind: packetsBehind) ? .reordered : .duplicate
        }

        switch classification {
        case .duplicate: duplicates += 1
        case .reordered: reorderedPackets += 1
        default: break
        }
        countPacket(rtpTimestamp: rtpTimestamp, arrivalRTPUnits: arrivalRTPUnits, updatesJitter: updatesJitter)
        return classification
    }

    /// Builds a reception report block and starts a new reporting interval (A.3).
    ///
    /// Fraction lost covers the interval since the previous call (8-bit fixed point,
    /// 0 when no loss or when more packets arrived than were expected). Cumulative lost
    /// is clamped to the signed 24-bit field.
    /// - Parameters:
    ///   - ssrc: SSRC of the source being reported on.
    ///   - lastSenderReport: middle 32 bits of the NTP timestamp of the last SR from that
    ///     source (0 if none).
    ///   - delaySinceLastSenderReport: time since that SR arrived, in 1/65536 s (0 if none);
    ///     see `NTPTimestamp.delaySinceLastSenderReport(nanoseconds:)`.
    public mutating func makeReportBlock(
        ssrc: UInt32,
        lastSenderReport: UInt32,
        delaySinceLastSenderReport: UInt32
    ) -> RTCPReportBlock {
        let expected = expectedPackets
        let expectedInterval = expected - expectedPrior
        expectedPrior = expected
        let receivedInterval = Int64(packetsReceived) - Int64(receivedPrior)
        receivedPrior = packetsReceived
        let lostInterval = expectedInterval - receivedInterval
        let fractionLost: UInt8
        if expectedInterval <= 0 || lostInterval <= 0 {
            fractionLost = 0
        } else {
            fractionLost = UInt8(min((lostInterval << 8) / expectedInterval, 255))
        }
        return RTCPReportBlock(
            ssrc: ssrc,
            fractionLost: fractionLost,
            cumulativeLost: RTCPReportBlock.clampCumulativeLost(cumulativeLost),
            extendedHighestSequence: extendedHighestSequence,
            interarrivalJitter: interarrivalJitter,
            lastSenderReport: lastSenderReport,
            delaySinceLastSenderReport: delaySinceLastSenderReport
        )
    }

    /// A.1 `init_seq`: restarts the sequence state at `sequenceNumber`.
    private mutating func restart(at sequenceNumber: UInt16) {
        isValid = true
        lossReportedUpTo = nil
        baseSequence = UInt64(sequenceNumber)
        maxSequence = sequenceNumber
        badSequence = ReceptionStatistics.sequenceModulus + 1
        cycles = 0
        packetsReceived = 0
        receivedPrior = 0
        expectedPrior = 0
        window.reset()
    }

    /// Counts a packet as received and updates jitter (A.8, integer form).
    private mutating func countPacket(rtpTimestamp: UInt32, arrivalRTPUnits: UInt32, updatesJitter: Bool) {
        packetsReceived += 1
        guard updatesJitter else { return }
        let transit = arrivalRTPUnits &- rtpTimestamp
        if hasTransit {
            let difference = Int64(Int32(bitPattern: transit &- lastTransit)).magnitude
            interarrivalJitterTimes16 += Int64(difference) - ((interarrivalJitterTimes16 + 8) >> 4)
        }
        hasTransit = true
        lastTransit = transit
    }
}
