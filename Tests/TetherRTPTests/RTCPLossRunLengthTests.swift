import Testing
@testable import TetherRTP

/// RTCP XR Loss RLE blocks (RFC 3611 §4.1): written, read back, and read from hand-made bytes.
struct RTCPLossRunLengthTests {
    private func packets(begin: UInt16, _ pattern: String) -> ReceivedPackets {
        var p = ReceivedPackets(beginSequence: begin, count: pattern.count)
        for (i, c) in pattern.enumerated() where c == "1" { p.markReceived(i) }
        return p
    }

    private func write(_ p: ReceivedPackets, reporter: UInt32 = 0x1111_1111, source: UInt32 = 0x2222_2222) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: 200)
        let length = try #require(buffer.withUnsafeMutableBytes {
            RTCPExtendedReport.writeLossRunLength(into: $0, at: 0, reporterSSRC: reporter, sourceSSRC: source, packets: p)
        })
        return Array(buffer[0..<length])
    }

    private func read(_ xr: [UInt8], source: UInt32 = 0x2222_2222) -> LossRunStatistics? {
        // The parser hands XR bodies over without the 4-byte header.
        Array(xr.dropFirst(4)).withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: source) }
    }

    /// 20 packets: a bit vector for the first 15 and one for the last 5 (bits past the range 0),
    /// two chunks (no null chunk needed): 8 + 12 + 4 bytes.
    @Test func shortRangeIsTwoBitVectorsWithTheExactLayout() throws {
        let p = packets(begin: 0xFFF5, "11011101111111100111")
        let xr = try write(p)
        #expect(xr.count == 24)
        #expect(Array(xr[0..<4]) == [0x80, 207, 0, 5])  // V=2, XR, 6 words
        #expect(Array(xr[4..<8]) == [0x11, 0x11, 0x11, 0x11])
        #expect(Array(xr[8..<12]) == [1, 0, 0, 3])  // BT=1, T=0, 4 words
        #expect(Array(xr[12..<16]) == [0x22, 0x22, 0x22, 0x22])
        #expect(Array(xr[16..<20]) == [0xFF, 0xF5, 0x00, 0x09])  // begin, end = begin + 20 (wrapped)
        // 1 110111011111111 → 0xEEFF; 1 00111 0000000000 → 0x9C00.
        #expect(Array(xr[20..<24]) == [0xEE, 0xFF, 0x9C, 0x00])
        let s = try #require(read(xr))
        #expect(s.packets == 20 && s.lost == 4 && s.lossRuns == 3 && s.longestLossRun == 2)
        #expect(s.lostAfterALoss == 1 && s.lostAfterThreeLosses == 0)
    }

    /// Long runs become run-length chunks; an odd chunk count ends with a null chunk.
    @Test func longRunsAreRunLengthChunksAndAnOddCountIsPadded() throws {
        let pattern = String(repeating: "1", count: 40) + "0000" + "1" + String(repeating: "0", count: 20) + "11"
        let xr = try write(packets(begin: 100, pattern))
        // Chunks: a run of 40 received; a bit vector (4 lost, 1 received, 10 lost); the 10 lost
        // left and 2 received, a bit vector of 12 (a run of 10 is shorter than 15); a null chunk.
        #expect(Array(xr[20..<22]) == [0x40, 40])
        #expect(Array(xr[22..<24]) == [0x84, 0x00])  // 1 000010000000000
        #expect(Array(xr[24..<26]) == [0x80, 0x18])  // 1 000000000011 000
        #expect(Array(xr[26..<28]) == [0, 0])  // null chunk
        #expect(xr.count == 28)
        let s = try #require(read(xr))
        #expect(s.packets == 67 && s.lost == 24 && s.lossRuns == 2 && s.longestLossRun == 20)
        #expect(s.lostAfterALoss == 3 + 19 && s.lostAfterThreeLosses == 1 + 17)
    }

    /// The whole capacity in one run; all lost.
    @Test func aFullRangeOfOneValueIsOneChunk() throws {
        let all = ReceivedPackets(beginSequence: 7, count: ReceivedPackets.capacity)
        let xr = try write(all)
        #expect(xr.count == 24)
        #expect(Array(xr[20..<22]) == [0x00, 0x80])  // run of 128 lost
        #expect(xr.count <= RTCPExtendedReport.maximumLossRunLengthPacketBytes)
        let s = try #require(read(xr))
        #expect(s.lost == 128 && s.lossRuns == 1)
        // The worst case (alternating) fits the advertised maximum.
        let alternating = packets(begin: 0, String(repeating: "10", count: 64))
        #expect(try write(alternating).count == RTCPExtendedReport.maximumLossRunLengthPacketBytes)
    }

    /// A block written by hand as RFC 3611 lays it out, among a block of another type and a Loss
    /// RLE block about another source; thinned blocks are not read.
    @Test func readsOnlyUnthinnedLossBlocksAboutTheSource() throws {
        var body: [UInt8] = [0x33, 0x33, 0x33, 0x33]  // reporter
        body += [4, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]  // BT 4 (receiver reference time), skipped
        body += [1, 0, 0, 3, 0x99, 0x99, 0x99, 0x99, 0, 0, 0, 10, 0x80, 0x00, 0, 0]  // other source
        body += [1, 2, 0, 3, 0x22, 0x22, 0x22, 0x22, 0, 0, 0, 10, 0x80, 0x00, 0, 0]  // thinned (T=2)
        body += [1, 0, 0, 3, 0x22, 0x22, 0x22, 0x22, 0, 10, 0, 30, 0x40, 5, 0x00, 15]  // 5 received, 15 lost
        let s = try #require(body.withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x2222_2222) })
        #expect(s.packets == 20 && s.lost == 15 && s.lossRuns == 1 && s.lostAfterALoss == 14)
        #expect(body.withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x4444_4444) } == nil)
    }

    /// Malformed: a block length past the packet ends the reading (what came before stays);
    /// chunks that end before the range, or a null chunk early, describe fewer packets; a run
    /// longer than the range is cut to it.
    @Test func malformedBlocksEndTheReadingWithoutTrapping() throws {
        let good: [UInt8] = [1, 0, 0, 3, 0x22, 0x22, 0x22, 0x22, 0, 0, 0, 4, 0xD0, 0x00, 0, 0]  // 1010: 2 lost
        let past: [UInt8] = [1, 0, 0, 9, 0x22, 0x22, 0x22, 0x22, 0, 0, 0, 4]
        let body = [0x33, 0x33, 0x33, 0x33] + good + past
        let s = try #require(body.withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x2222_2222) })
        #expect(s.packets == 4 && s.lost == 2 && s.lossRuns == 2)
        let early: [UInt8] = [0x33, 0x33, 0x33, 0x33, 1, 0, 0, 3, 0x22, 0x22, 0x22, 0x22, 0, 0, 0, 40, 0, 0, 0x40, 3]
        #expect(early.withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x2222_2222) }?.packets == 0)
        let longRun: [UInt8] = [0x33, 0x33, 0x33, 0x33, 1, 0, 0, 3, 0x22, 0x22, 0x22, 0x22, 0, 0, 0, 6, 0x3F, 0xFF, 0, 0]
        #expect(longRun.withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x2222_2222) }?.lost == 6)
        for cut in 0..<body.count {
            _ = Array(body[0..<cut]).withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x2222_2222) }
        }
        // Too small a buffer: nothing written.
        var small = [UInt8](repeating: 0, count: 23)
        let written = small.withUnsafeMutableBytes {
            RTCPExtendedReport.writeLossRunLength(into: $0, at: 0, reporterSSRC: 1, sourceSSRC: 2, packets: packets(begin: 0, "1010"))
        }
        #expect(written == nil && small.allSatisfy { $0 == 0 })
    }

    /// A hand-made block of run-length chunks (each up to 16,383 packets) read in one step a
    /// chunk gives exactly what reading the packets one by one gives: runs that continue across
    /// chunks, the three-loss count starting inside a run, the longest run.
    @Test func runLengthChunksCountAsTheirPacketsOneByOne() throws {
        // Lost 2, lost 16383 (one run of 16385 with the first), received 20, lost 1, lost 3
        // (a run of 4), received 16383: 32,792 packets.
        let chunks: [UInt16] = [0x0002, 0x3FFF, 0x4014, 0x0001, 0x0003, 0x7FFF]
        let total = 2 + 16_383 + 20 + 1 + 3 + 16_383
        var body: [UInt8] = [0x33, 0x33, 0x33, 0x33, 1, 0, 0, UInt8(2 + chunks.count / 2), 0x22, 0x22, 0x22, 0x22, 0, 0]
        body += [UInt8(total >> 8), UInt8(total & 0xFF)]
        for chunk in chunks { body += [UInt8(chunk >> 8), UInt8(chunk & 0xFF)] }
        let s = try #require(body.withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x2222_2222) })
        var expected = LossRunStatistics()
        var run = 0
        for (received, count) in [(false, 16_385), (true, 20), (false, 4), (true, 16_383)] {
            for _ in 0..<count { expected.add(received: received, currentRun: &run) }
        }
        #expect(s == expected)
        #expect(s.packets == total && s.lost == 16_389 && s.lossRuns == 2 && s.longestLossRun == 16_385)
        #expect(s.lostAfterThreeLosses == 16_382 + 1 && s.lostAfterALoss == 16_387)
    }

    /// Random reception patterns over the whole window, written by our writer (bit vectors and
    /// run-length chunks mixed) and read back: the same statistics as the packets one by one.
    @Test func writtenPatternsReadBackAsTheirPacketsOneByOne() throws {
        var rng = SeededGenerator(seed: 33)
        for trial in 0..<300 {
            let count = 1 + Int(rng.next() % UInt64(ReceivedPackets.capacity))
            // Bursty: long runs of either kind, so run-length chunks appear.
            var pattern = ""
            var state = true
            while pattern.count < count {
                let length = 1 + Int(rng.next() % (trial % 2 == 0 ? 40 : 6))
                pattern += String(repeating: state ? "1" : "0", count: min(length, count - pattern.count))
                state.toggle()
            }
            let p = packets(begin: UInt16(truncatingIfNeeded: rng.next()), pattern)
            let s = try #require(read(try write(p)))
            var expected = LossRunStatistics()
            var run = 0
            for c in pattern { expected.add(received: c == "1", currentRun: &run) }
            #expect(s == expected, "pattern \(pattern)")
        }
    }

    /// A peer's crafted report: 70 blocks about us in one 1,404-byte body, each claiming 65,535
    /// packets in four run-length chunks (4.6 million packets, which took 10 ms of CPU read one
    /// by one). At most four blocks are read, each in its four chunks.
    @Test func aReportClaimingMillionsOfPacketsIsReadInBoundedWork() throws {
        var body: [UInt8] = [0x33, 0x33, 0x33, 0x33]
        for _ in 0..<70 {
            body += [1, 0, 0, 4, 0x22, 0x22, 0x22, 0x22, 0x00, 0x00, 0xFF, 0xFF]
            body += [0x3F, 0xFF, 0x3F, 0xFF, 0x3F, 0xFF, 0x3F, 0xFF]  // 4 × 16383 lost (65,532; the range's 65,535 unmet)
        }
        #expect(body.count == 1_404)
        let s = try #require(body.withUnsafeBytes { RTCPExtendedReport.lossRuns(inBody: $0, sourceSSRC: 0x2222_2222) })
        #expect(s.packets == RTCPExtendedReport.maximumLossRunLengthBlocksRead * 65_532)
        #expect(s.lost == s.packets)
    }

    /// A compound RR + SDES + XR, as Tether sends it, passes the compound parser and its XR
    /// body reads back.
    @Test func anXRAfterTheReportPassesTheCompoundParser() throws {
        let writer = try #require(RTCPCompoundWriter(cname: Array("a@b".utf8)))
        var buffer = [UInt8](repeating: 0, count: 200)
        let total = try buffer.withUnsafeMutableBytes { raw -> Int in
            let length = try writer.write(into: raw, ssrc: 0x1111_1111, senderInfo: nil, reportBlocks: UnsafeBufferPointer(start: nil, count: 0), bye: .omitted)
            let xr = try #require(RTCPExtendedReport.writeLossRunLength(
                into: raw, at: length, reporterSSRC: 0x1111_1111, sourceSSRC: 0x2222_2222, packets: packets(begin: 9, "1101")))
            return length + xr
        }
        var found: LossRunStatistics?
        try Array(buffer[0..<total]).withUnsafeBytes { raw in
            for packet in try RTCPCompoundParser(raw) {
                if case .other(RTCPExtendedReport.packetType, _, let body) = packet {
                    found = RTCPExtendedReport.lossRuns(inBody: body, sourceSSRC: 0x2222_2222)
                }
            }
        }
        #expect(found?.packets == 4 && found?.lost == 1)
    }

    /// What the receiver reports: the packets since the last report, at most the window's 128,
    /// across a sequence number wrap; late packets inside the window count; nothing new, nil.
    @Test func receptionGivesThePacketsSinceTheLastReport() throws {
        var r = ReceptionStatistics()
        var sequence: UInt16 = 65_530
        for i in 0..<20 {
            if i != 3 && i != 4 && i != 11 {
                _ = r.packetReceived(sequenceNumber: sequence, rtpTimestamp: UInt32(i) * 960, arrivalRTPUnits: UInt32(i) * 960)
            }
            sequence &+= 1
        }
        let first = try #require(r.packetsSinceLossReport())
        #expect(first.beginSequence == 65_530 && first.count == 20 && first.receivedCount == 17)
        #expect(!first.received(3) && !first.received(4) && !first.received(11) && first.received(19))
        r.lossReportSent()
        #expect(r.packetsSinceLossReport() == nil)
        // A late packet 4 arrives, then 200 more: only the newest 128 are reported.
        _ = r.packetReceived(sequenceNumber: 65_534, rtpTimestamp: 4 * 960, arrivalRTPUnits: 30 * 960)
        for i in 20..<220 {
            _ = r.packetReceived(sequenceNumber: sequence, rtpTimestamp: UInt32(i) * 960, arrivalRTPUnits: UInt32(i) * 960)
            sequence &+= 1
        }
        let next = try #require(r.packetsSinceLossReport())
        #expect(next.count == 128 && next.receivedCount == 128 && next.endSequence == sequence)
    }

    /// The peer's numbering starts over (a large jump confirmed by the next packet): the loss
    /// reports go on from the new numbering at once, not only once it passes the old one.
    @Test func lossReportsGoOnAfterTheNumberingStartsOver() throws {
        var r = ReceptionStatistics()
        var sequence: UInt16 = 40_000
        for i in 0..<3_000 {  // past a few report intervals, into the high thousands
            _ = r.packetReceived(sequenceNumber: sequence, rtpTimestamp: UInt32(i) * 960, arrivalRTPUnits: UInt32(i) * 960)
            sequence &+= 1
            if i % 250 == 249 {
                #expect(r.packetsSinceLossReport() != nil)
                r.lossReportSent()
            }
        }
        // A new numbering far below: the first packet is held as a possible jump, the second confirms it.
        sequence = 100
        for i in 0..<30 {
            let kind = r.packetReceived(sequenceNumber: sequence, rtpTimestamp: UInt32(i) * 960, arrivalRTPUnits: UInt32(3_000 + i) * 960)
            if i == 1 { #expect(kind == .resynchronized) }
            sequence &+= 1
        }
        let after = try #require(r.packetsSinceLossReport())
        #expect(after.endSequence == sequence && after.count == 29 && after.receivedCount == 29)
        r.lossReportSent()
        #expect(r.packetsSinceLossReport() == nil)
    }
}
