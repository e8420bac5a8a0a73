import Testing
import TetherRTP

struct ReceptionStatisticsTests {
    /// Feeds sequence numbers with a steady 160-unit clock and no jitter.
    @discardableResult
    private func feed(
        _ stats: inout ReceptionStatistics,
        _ sequenceNumbers: [Int]
    ) -> [ReceptionStatistics.PacketClassification] {
        sequenceNumbers.map { sequence in
            let timestamp = UInt32(truncatingIfNeeded: sequence &* 160)
            return stats.packetReceived(
                sequenceNumber: UInt16(truncatingIfNeeded: sequence),
                rtpTimestamp: timestamp,
                arrivalRTPUnits: timestamp &+ 5000
            )
        }
    }

    private func report(_ stats: inout ReceptionStatistics) -> RTCPReportBlock {
        stats.makeReportBlock(ssrc: 0xABCD, lastSenderReport: 0x1234_5678, delaySinceLastSenderReport: 0x0001_8000)
    }

    /// RFC 4733 event updates carry their event's start, not their sampling instant: counted as
    /// received (no loss), but left out of the jitter, which a frozen timestamp would inflate.
    @Test func packetsThatDoNotSampleTheClockAreCountedButAddNoJitter() {
        var plain = ReceptionStatistics()
        var events = ReceptionStatistics()
        for sequence in 0..<50 {
            let arrival = UInt32(sequence * 960)
            // Packets 10…16 are a digit's updates, all stamped with the timestamp of packet 10.
            let timestamp = (10...16).contains(sequence) ? UInt32(10 * 960) : arrival
            let isEvent = (10...16).contains(sequence)
            plain.packetReceived(sequenceNumber: UInt16(sequence), rtpTimestamp: timestamp, arrivalRTPUnits: arrival)
            events.packetReceived(sequenceNumber: UInt16(sequence), rtpTimestamp: timestamp, arrivalRTPUnits: arrival, updatesJitter: !isEvent)
        }
        #expect(events.packetsReceived == 50 && events.cumulativeLost == 0)
        #expect(events.interarrivalJitter == 0)
        #expect(plain.interarrivalJitter > 0)  // what the events would have done to it
    }

    @Test func inOrderStreamReportsNoLoss() {
        var stats = ReceptionStatistics()
        let classes = feed(&stats, Array(0..<100))
        #expect(classes.allSatisfy { $0 == .inOrder })
        let block = report(&stats)
        #expect(block.ssrc == 0xABCD)
        #expect(block.fractionLost == 0)
        #expect(block.cumulativeLost == 0)
        #expect(block.extendedHighestSequence == 99)
        #expect(block.interarrivalJitter == 0)
        #expect(block.lastSenderReport == 0x1234_5678)
        #expect(block.delaySinceLastSenderReport == 0x0001_8000)
        #expect(stats.packetsReceived == 100)
    }

    @Test func hasReceivedKnowsTheLast128PacketsAcrossWrap() {
        var stats = ReceptionStatistics()
        #expect(!stats.hasReceived(sequenceNumber: 0))
        // 65 500 … 65 535, 0 … 99 except 50 (lost), then 50 arrives late.
        feed(&stats, Array(65_500..<65_536) + Array(65_536..<65_586) + Array(65_587..<65_636))
        #expect(stats.hasReceived(sequenceNumber: 99))
        #expect(stats.hasReceived(sequenceNumber: 65_535))
        #expect(!stats.hasReceived(sequenceNumber: 50))  // lost: a copy of it is welcome
        #expect(!stats.hasReceived(sequenceNumber: 100))  // ahead
        #expect(!stats.hasReceived(sequenceNumber: 65_500))  // 136 behind: outside the window
        feed(&stats, [65_586])
        #expect(stats.hasReceived(sequenceNumber: 50))
    }

    @Test func fractionAndCumulativeLostMatchHandComputedIntervals() {
        var stats = ReceptionStatistics()
        // Interval 1: 0...9 without 3 and 7 → expected 10, received 8, lost 2.
        feed(&stats, [0, 1, 2, 4, 5, 6, 8, 9])
        var block = report(&stats)
        #expect(block.fractionLost == 51)  // (2 << 8) / 10 = 51
        #expect(block.cumulativeLost == 2)
        #expect(block.extendedHighestSequence == 9)

        // Interval 2: 10...19 plus late 7 → expected 10, received 11: no fractional loss.
        let classes = feed(&stats, [10, 11, 7, 12, 13, 14, 15, 16, 17, 18, 19])
        #expect(classes[2] == .reordered)
        block = report(&stats)
        #expect(block.fractionLost == 0)
        #expect(block.cumulativeLost == 1)
        #expect(block.extendedHighestSequence == 19)

        // Interval 3: 20, then 24 → expected 5, received 2, lost 3 → 768 / 5 = 153.
        feed(&stats, [20, 24])
        block = report(&stats)
        #expect(block.fractionLost == 153)
        #expect(block.cumulativeLost == 4)

        // Interval 4: nothing new → nothing expected.
        block = report(&stats)
        #expect(block.fractionLost == 0)
        #expect(block.cumulativeLost == 4)
    }

    @Test func lossIsCountedAcrossSequenceWrap() {
        var stats = ReceptionStatistics()
        // 65530...65535, 0...5, missing 65534.
        feed(&stats, [65530, 65531, 65532, 65533, 65535, 0, 1, 2, 3, 4, 5])
        #expect(stats.extendedHighestSequence == 0x0001_0005)
        #expect(stats.expectedPackets == 12)
        #expect(stats.cumulativeLost == 1)
        let block = report(&stats)
        #expect(block.extendedHighestSequence == 65541)
        #expect(block.cumulativeLost == 1)
        #expect(block.fractionLost == 21)  // (1 << 8) / 12
    }

    @Test func reorderingAcrossWrapIsNotLossAndDoesNotAddACycle() {
        var stats = ReceptionStatistics()
        let classes = feed(&stats, [65534, 65535, 1, 0, 2])
        #expect(classes == [.inOrder, .inOrder, .inOrder, .reordered, .inOrder])
        #expect(stats.extendedHighestSequence == 65538)
        #expect(stats.cumulativeLost == 0)
        #expect(stats.reorderedPackets == 1)
    }

    @Test func duplicatesAreDetectedAndMakeCumulativeLossNegative() {
        var stats = ReceptionStatistics()
        let classes = feed(&stats, [1, 2, 2, 3, 1, 3])
        #expect(classes == [.inOrder, .inOrder, .duplicate, .inOrder, .duplicate, .duplicate])
        #expect(stats.duplicates == 3)
        #expect(stats.packetsReceived == 6)
        #expect(stats.cumulativeLost == -3)
        let block = report(&stats)
        #expect(block.cumulativeLost == -3)
        #expect(block.fractionLost == 0)
    }

    @Test func duplicateAcrossWrapIsDetected() {
        var stats = ReceptionStatistics()
        let classes = feed(&stats, [65535, 0, 1, 65535, 0])
        #expect(classes == [.inOrder, .inOrder, .inOrder, .duplicate, .duplicate])
        #expect(stats.extendedHighestSequence == 65537)
    }

    @Test func forwardJumpWithinMaxDropoutCountsAsLoss() {
        var stats = ReceptionStatistics()
        let classes = feed(&stats, [0, 2999])
        #expect(classes == [.inOrder, .inOrder])
        #expect(stats.cumulativeLost == 2998)
    }

    @Test func largeJumpIsDiscardedUntilConfirmedThenResynchronizes() {
        var stats = ReceptionStatistics()
        var classes = feed(&stats, [10, 11, 12, 5000])
        #expect(classes.last == .discardedJump)
        #expect(stats.extendedHighestSequence == 12)
        #expect(stats.packetsReceived == 3)

        classes = feed(&stats, [5001, 5002])
        #expect(classes == [.resynchronized, .inOrder])
        #expect(stats.extendedHighestSequence == 5002)
        #expect(stats.packetsReceived == 2)
        #expect(stats.expectedPackets == 2)
        #expect(stats.cumulativeLost == 0)
    }

    @Test func unconfirmedJumpLeavesStatisticsUntouched() {
        var stats = ReceptionStatistics()
        let classes = feed(&stats, [10, 30000, 11, 12])
        #expect(classes == [.inOrder, .discardedJump, .inOrder, .inOrder])
        #expect(stats.extendedHighestSequence == 12)
        #expect(stats.packetsReceived == 3)
        #expect(stats.cumulativeLost == 0)
    }

    @Test func packetFurtherBehindThanMaxMisorderIsTreatedAsJump() {
        var stats = ReceptionStatistics()
        feed(&stats, Array(0...200))
        let classes = feed(&stats, [50])
        #expect(classes == [.discardedJump])
        #expect(stats.packetsReceived == 201)
    }

    @Test func probationRequiresSequentialPackets() {
        var stats = ReceptionStatistics(minimumSequentialPackets: 2)
        var classes = feed(&stats, [100, 200, 201, 202])
        #expect(classes == [.probation, .probation, .inOrder, .inOrder])
        #expect(stats.packetsReceived == 2)
        #expect(stats.expectedPackets == 2)

        stats = ReceptionStatistics(minimumSequentialPackets: 2)
        classes = feed(&stats, [65535, 0])
        #expect(classes == [.probation, .inOrder])
        #expect(stats.extendedHighestSequence == 0)
        #expect(stats.isValid)
    }

    @Test func reportBeforeAnyPacketIsEmpty() {
        var stats = ReceptionStatistics()
        #expect(!stats.isValid)
        let block = report(&stats)
        #expect(block.fractionLost == 0)
        #expect(block.cumulativeLost == 0)
        #expect(block.extendedHighestSequence == 0)
        #expect(block.interarrivalJitter == 0)
    }

    @Test func jitterMatchesHandComputedA8Sequence() {
        var stats = ReceptionStatistics()
        // Transit times 1000, 1010, 990, 1020 → |D| = 10, 20, 30.
        // J16: 0 → 0+10-((0+8)>>4)=10 → 10+20-((10+8)>>4)=29 → 29+30-((29+8)>>4)=57.
        let packets: [(UInt16, UInt32, UInt32)] = [(1, 0, 1000), (2, 160, 1170), (3, 320, 1310), (4, 480, 1500)]
        var observed: [Int64] = []
        for (sequence, timestamp, arrival) in packets {
            stats.packetReceived(sequenceNumber: sequence, rtpTimestamp: timestamp, arrivalRTPUnits: arrival)
            observed.append(stats.interarrivalJitterTimes16)
        }
        #expect(observed == [0, 10, 29, 57])
        #expect(stats.interarrivalJitter == 3)
        #expect(report(&stats).interarrivalJitter == 3)
    }

    @Test func jitterConvergesToConstantDeviation() {
        var stats = ReceptionStatistics()
        // Arrivals alternate ±40 units around the nominal time → |D| = 80 each time
        // after the first; J converges to 80.
        for index in 0..<400 {
            let timestamp = UInt32(index * 960)
            let offset: UInt32 = index.isMultiple(of: 2) ? 0 : 80
            stats.packetReceived(
                sequenceNumber: UInt16(index), rtpTimestamp: timestamp, arrivalRTPUnits: timestamp + 10_000 + offset
            )
        }
        #expect(stats.interarrivalJitter >= 78 && stats.interarrivalJitter <= 80)
    }

    @Test func jitterHandlesTimestampAndArrivalWrap() {
        var stats = ReceptionStatistics()
        let startTimestamp = UInt32.max - 100
        stats.packetReceived(sequenceNumber: 1, rtpTimestamp: startTimestamp, arrivalRTPUnits: 50)
        stats.packetReceived(sequenceNumber: 2, rtpTimestamp: startTimestamp &+ 160, arrivalRTPUnits: 50 + 170)
        #expect(stats.interarrivalJitterTimes16 == 10)
        stats.packetReceived(sequenceNumber: 3, rtpTimestamp: startTimestamp &+ 320, arrivalRTPUnits: 50 + 310)
        #expect(stats.interarrivalJitterTimes16 == 29)
    }

    @Test func cumulativeLostIsClampedTo24BitsInReport() {
        var stats = ReceptionStatistics()
        // Advance by 2999 repeatedly, receiving one packet each time: ~2998 lost per step.
        var sequence = 0
        var steps = 0
        feed(&stats, [0])
        while stats.cumulativeLost <= Int64(RTCPReportBlock.maximumCumulativeLost) {
            sequence += 2999
            feed(&stats, [sequence])
            steps += 1
        }
        #expect(stats.cumulativeLost == Int64(steps) * 2998)
        #expect(report(&stats).cumulativeLost == RTCPReportBlock.maximumCumulativeLost)
        #expect(stats.extendedHighestSequence == UInt32(sequence))
    }
}
