/// What the peer's RTCP compounds say, read as the media loop reads them (sans-IO: each
/// compound comes with its arrival instant): its sender reports (for our next report's LSR and
/// DLSR), its report blocks about our stream, its XR Loss RLE blocks about our packets (their
/// loss runs over the call), and its BYE.
///
/// A value type; no allocation.
public struct PeerReports: Sendable {
    /// Our SSRC: report blocks and loss blocks about other sources are skipped.
    public let localSSRC: UInt32
    /// The middle 32 bits of the peer's last sender report's NTP time (our LSR; 0: none yet).
    public private(set) var lastSenderReportMiddle32: UInt32 = 0
    /// When that sender report arrived (monotonic nanoseconds; 0: none yet).
    public private(set) var lastSenderReportArrivalNanoseconds: UInt64 = 0
    /// XR Loss RLE reports about our packets read so far.
    public private(set) var lossRunReports = 0
    /// Our packets those reports said lost, and in how many runs.
    public private(set) var lostInRuns = 0
    public private(set) var lossRuns = 0

    /// What one compound said (its feedback body points into the compound's bytes: not Sendable).
    public struct Reading {
        /// The last report block about our stream, if any.
        public var block: RTCPReportBlock?
        /// That block's fraction lost, 0…1.
        public var fractionLost: Double? { block.map { Double($0.fractionLost) / 256 } }
        /// The round-trip time that block gives (LSR/DLSR against the compound's arrival), seconds.
        public var roundTripSeconds: Double?
        /// The loss runs of its Loss RLE blocks about our packets (nil: none, or one of no packets).
        public var lossRuns: LossRunStatistics?
        /// A BYE was in it.
        public var bye = false
        /// The body of the transport-cc feedback in it (``TransportFeedback``), if any: valid
        /// only while the compound's bytes are.
        public var transportFeedback: UnsafeRawBufferPointer?
    }

    public init(localSSRC: UInt32) {
        self.localSSRC = localSSRC
    }

    /// The mean length of the loss runs reported over the call, in packets (nil: none lost).
    public var meanLossRunPackets: Double? {
        lossRuns > 0 ? Double(lostInRuns) / Double(lossRuns) : nil
    }

    /// Reads one compound that arrived at `arrivalNanoseconds` (monotonic) and at
    /// `arrivalNTPMiddle32` (the wall clock's NTP middle 32 bits, for the round trip).
    /// - Note: No allocation.
    public mutating func read(_ compound: RTCPCompoundParser, arrivalNanoseconds: UInt64, arrivalNTPMiddle32: UInt32) -> Reading {
        var reading = Reading()
        for item in compound {
            switch item {
            case .senderReport(_, let info, let blocks):
                lastSenderReportMiddle32 = info.ntpMiddle32
                lastSenderReportArrivalNanoseconds = arrivalNanoseconds
                take(blocks, arrivalNTPMiddle32: arrivalNTPMiddle32, into: &reading)
            case .receiverReport(_, let blocks):
                take(blocks, arrivalNTPMiddle32: arrivalNTPMiddle32, into: &reading)
            case .bye:
                reading.bye = true
            case .other(RTCPExtendedReport.packetType, _, let body):
                if let runs = RTCPExtendedReport.lossRuns(inBody: body, sourceSSRC: localSSRC) { reading.lossRuns = runs }
            case .other(TransportFeedback.packetType, TransportFeedback.formatType, let body):
                reading.transportFeedback = body
            default:
                break
            }
        }
        if let runs = reading.lossRuns {
            if runs.packets > 0 {
                lossRunReports += 1
                lostInRuns += runs.lost
                lossRuns += runs.lossRuns
            } else {
                reading.lossRuns = nil
            }
        }
        return reading
    }

    /// The peer's stream started over (another source): its sender reports no longer apply.
    public mutating func peerSourceChanged() {
        lastSenderReportMiddle32 = 0
        lastSenderReportArrivalNanoseconds = 0
    }

    private func take(_ blocks: RTCPReportBlocks, arrivalNTPMiddle32: UInt32, into reading: inout Reading) {
        for block in blocks where block.ssrc == localSSRC {
            reading.block = block
            reading.roundTripSeconds = NTPTimestamp.roundTripTime(
                arrivalNTPMiddle32: arrivalNTPMiddle32, lastSenderReport: block.lastSenderReport,
                delaySinceLastSenderReport: block.delaySinceLastSenderReport)
        }
    }
}
