import Testing
import TetherRTP

/// The peer's RTCP as the media loop reads it: sender reports, blocks about us, loss runs, BYE.
struct PeerReportsTests {
    let us: UInt32 = 0x1111_1111
    let peer: UInt32 = 0x2222_2222

    /// A compound from the peer: a sender report (or receiver report) with one block about
    /// `about`, then optionally an XR Loss RLE block about `about` for `pattern`, then a BYE.
    func compound(
        sender: Bool, about: UInt32, fractionLost: UInt8, lsr: UInt32 = 0, dlsr: UInt32 = 0, pattern: String? = nil, bye: Bool = false
    ) throws -> [UInt8] {
        let writer = try #require(RTCPCompoundWriter(cname: Array("peer@x".utf8)))
        let block = RTCPReportBlock(
            ssrc: about, fractionLost: fractionLost, cumulativeLost: 3, extendedHighestSequence: 500, interarrivalJitter: 96,
            lastSenderReport: lsr, delaySinceLastSenderReport: dlsr)
        let info = RTCPSenderInfo(ntpTimestamp: 0x0000_1234_5678_0000, rtpTimestamp: 1, senderPacketCount: 2, senderOctetCount: 3)
        var buffer = [UInt8](repeating: 0, count: 600)
        let length = try buffer.withUnsafeMutableBytes { raw -> Int in
            var n = try writer.write(into: raw, ssrc: peer, senderInfo: sender ? info : nil, reportBlocks: [block], bye: bye ? .included(reason: nil) : .omitted)
            if let pattern {
                var packets = ReceivedPackets(beginSequence: 100, count: pattern.count)
                for (i, c) in pattern.enumerated() where c == "1" { packets.markReceived(i) }
                n += try #require(RTCPExtendedReport.writeLossRunLength(into: raw, at: n, reporterSSRC: peer, sourceSSRC: about, packets: packets))
            }
            return n
        }
        return Array(buffer[0..<length])
    }

    func read(_ reports: inout PeerReports, _ bytes: [UInt8], at nanoseconds: UInt64, ntp: UInt32 = 0) throws -> PeerReports.Reading {
        try bytes.withUnsafeBytes { raw in
            reports.read(try RTCPCompoundParser(raw), arrivalNanoseconds: nanoseconds, arrivalNTPMiddle32: ntp)
        }
    }

    @Test func aReportAboutUsWithLossRunsIsReadWhole() throws {
        var reports = PeerReports(localSSRC: us)
        // LSR 0x1000_0000, DLSR half a second: arriving 0.75 s after LSR, the round trip is 0.25 s.
        let bytes = try compound(
            sender: true, about: us, fractionLost: 64, lsr: 0x1000_0000, dlsr: 0x8000, pattern: "1100011110")
        let reading = try read(&reports, bytes, at: 5_000, ntp: 0x1000_C000)
        #expect(reading.fractionLost == 0.25)
        #expect(reading.block?.cumulativeLost == 3)
        #expect(reading.roundTripSeconds == 0.25)
        #expect(reading.lossRuns?.lost == 4 && reading.lossRuns?.lossRuns == 2)
        #expect(!reading.bye)
        #expect(reports.lastSenderReportMiddle32 == 0x1234_5678 && reports.lastSenderReportArrivalNanoseconds == 5_000)
        #expect(reports.lossRunReports == 1 && reports.meanLossRunPackets == 2)
        // A second report: the runs add up over the call.
        _ = try read(&reports, try compound(sender: false, about: us, fractionLost: 0, pattern: "0111111111"), at: 6_000)
        #expect(reports.lossRunReports == 2 && reports.lostInRuns == 5 && reports.lossRuns == 3)
        // The peer's stream started over: its sender report no longer applies.
        reports.peerSourceChanged()
        #expect(reports.lastSenderReportMiddle32 == 0 && reports.lastSenderReportArrivalNanoseconds == 0)
    }

    @Test func blocksAboutOthersAndAByeAreTold() throws {
        var reports = PeerReports(localSSRC: us)
        let reading = try read(&reports, try compound(sender: false, about: 0x3333_3333, fractionLost: 200, pattern: "0000", bye: true), at: 1)
        #expect(reading.block == nil && reading.fractionLost == nil && reading.lossRuns == nil)
        #expect(reading.bye)
        #expect(reports.lossRunReports == 0 && reports.meanLossRunPackets == nil)
    }
}
