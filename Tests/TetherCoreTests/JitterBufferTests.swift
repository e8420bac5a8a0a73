import Testing
import TetherCore

// MARK: - Test support

/// One millisecond in nanoseconds.
private let millisecond: UInt64 = 1_000_000
/// One 20 ms Opus frame in 48 kHz RTP clock samples.
private let frameSamples: UInt32 = 960

/// A pull result reduced to something comparable; payloads are decoded back to the sequence
/// number the test wrote into them.
private enum Played: Equatable, CustomStringConvertible {
    case notStarted
    case packet(UInt16)
    case fec(UInt16)
    case conceal
    case gap
    case inserted
    case corrupt

    var description: String {
        switch self {
        case .notStarted: "notStarted"
        case .packet(let sequence): "packet(\(sequence))"
        case .fec(let sequence): "fec(\(sequence))"
        case .conceal: "conceal"
        case .gap: "gap"
        case .inserted: "inserted"
        case .corrupt: "corrupt"
        }
    }
}

private struct TestPacket {
    var sequenceNumber: UInt16
    var rtpTimestamp: UInt32
    var arrivalNanoseconds: UInt64
}

/// Test payload: the sequence number (little endian) followed by a marker byte.
private func payloadBytes(for sequenceNumber: UInt16) -> [UInt8] {
    [UInt8(truncatingIfNeeded: sequenceNumber), UInt8(truncatingIfNeeded: sequenceNumber >> 8), 0x5A]
}

private func decodeSequence(_ payload: UnsafeRawBufferPointer) -> UInt16? {
    guard payload.count == 3, payload[2] == 0x5A else { return nil }
    return UInt16(payload[0]) | UInt16(payload[1]) << 8
}

extension JitterBuffer {
    fileprivate func insert(_ packet: TestPacket) -> InsertOutcome {
        payloadBytes(for: packet.sequenceNumber).withUnsafeBytes {
            insert(sequenceNumber: packet.sequenceNumber, rtpTimestamp: packet.rtpTimestamp,
                   payload: $0, arrivalNanoseconds: packet.arrivalNanoseconds)
        }
    }

    fileprivate func insert(_ sequenceNumber: UInt16, _ rtpTimestamp: UInt32, at arrivalNanoseconds: UInt64) -> InsertOutcome {
        insert(TestPacket(sequenceNumber: sequenceNumber, rtpTimestamp: rtpTimestamp, arrivalNanoseconds: arrivalNanoseconds))
    }

    fileprivate func pullPlayed(now: UInt64) -> Played {
        switch pull(now: now) {
        case .notStarted:
            return .notStarted
        case .packet(let sequenceNumber, let payload):
            return decodeSequence(payload) == sequenceNumber ? .packet(sequenceNumber) : .corrupt
        case .fecFromNext(let payload, _):
            return decodeSequence(payload).map(Played.fec) ?? .corrupt
        case .conceal:
            return .conceal
        case .silenceGap:
            return .gap
        case .insertedFrame:
            return .inserted
        }
    }
}

/// A stream sent at a fixed interval, one frame per packet, with a fixed network delay.
private func makeStream(
    count: Int,
    firstSequence: UInt16 = 0,
    firstTimestamp: UInt32 = 0,
    sendStartNanoseconds: UInt64 = 0,
    sendIntervalNanoseconds: UInt64 = 20 * millisecond,
    networkDelayNanoseconds: UInt64 = 5 * millisecond
) -> [TestPacket] {
    (0..<count).map { index in
        TestPacket(
            sequenceNumber: firstSequence &+ UInt16(truncatingIfNeeded: index),
            rtpTimestamp: firstTimestamp &+ UInt32(truncatingIfNeeded: index) &* frameSamples,
            arrivalNanoseconds: sendStartNanoseconds + UInt64(index) * sendIntervalNanoseconds + networkDelayNanoseconds
        )
    }
}

private struct Simulation {
    /// One entry per pull.
    var played: [Played] = []
    /// Insert outcome per packet, in the order the packets were given.
    var outcomes: [JitterBuffer.InsertOutcome?] = []
    /// Largest buffered delay seen right after a pull that played or concealed, in milliseconds.
    var maximumDelayAfterPullMilliseconds = 0
}

/// Delivers packets in arrival order (ties keep input order) and pulls every
/// `pullIntervalNanoseconds`; packets arriving at or before a pull's instant are inserted first.
private func simulate(
    _ buffer: JitterBuffer,
    packets: [TestPacket],
    pullCount: Int,
    firstPullNanoseconds: UInt64 = 10 * millisecond,
    pullIntervalNanoseconds: UInt64 = 20 * millisecond,
    nonAudio: Set<Int> = []
) -> Simulation {
    var simulation = Simulation()
    simulation.outcomes = Array(repeating: nil, count: packets.count)
    let order = packets.indices.sorted {
        (packets[$0].arrivalNanoseconds, $0) < (packets[$1].arrivalNanoseconds, $1)
    }
    var nextPacket = 0
    for pullIndex in 0..<pullCount {
        let now = firstPullNanoseconds + UInt64(pullIndex) * pullIntervalNanoseconds
        while nextPacket < order.count, packets[order[nextPacket]].arrivalNanoseconds <= now {
            if nonAudio.contains(order[nextPacket]) {
                // An RFC 4733 event in place of this frame: noted, not inserted.
                buffer.noteNonAudioPacket(sequenceNumber: packets[order[nextPacket]].sequenceNumber)
            } else {
                simulation.outcomes[order[nextPacket]] = buffer.insert(packets[order[nextPacket]])
            }
            nextPacket += 1
        }
        let played = buffer.pullPlayed(now: now)
        simulation.played.append(played)
        if played != .notStarted {
            simulation.maximumDelayAfterPullMilliseconds = max(
                simulation.maximumDelayAfterPullMilliseconds, buffer.statistics.bufferedDelayMilliseconds)
        }
    }
    return simulation
}

private func packets(_ sequences: ClosedRange<UInt16>) -> [Played] {
    sequences.map(Played.packet)
}

private func repeated(_ played: Played, _ count: Int) -> [Played] {
    Array(repeating: played, count: count)
}

/// SplitMix64: a small deterministic generator so jitter scenarios are reproducible.
private struct SplitMix64 {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

// MARK: - Tests

@Suite("JitterBuffer")
struct JitterBufferTests {
    @Test func inOrderStreamPlaysEveryPacketAfterTheTargetDelay() {
        let buffer = JitterBuffer()
        // First packet arrives at 5 ms; pulls at 10, 30 ms are too early, 50 ms has waited 45 ms.
        let result = simulate(buffer, packets: makeStream(count: 50), pullCount: 52)
        #expect(result.played == repeated(.notStarted, 2) + packets(0...49))
        #expect(result.outcomes.allSatisfy { $0 == .stored })
        let statistics = buffer.statistics
        #expect(statistics.packetsInserted == 50)
        #expect(statistics.framesPlayed == 50)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.silenceGapFrames == 0)
        #expect(statistics.fecRecoveries == 0)
        #expect(statistics.bufferedPackets == 0)
        #expect(statistics.targetDelayMilliseconds == 40)
        #expect(result.maximumDelayAfterPullMilliseconds == 40)
    }

    @Test func playoutStartsExactlyWhenTheFirstPacketHasWaitedTheTargetDelay() {
        let buffer = JitterBuffer()
        #expect(buffer.pullPlayed(now: 0) == .notStarted)
        #expect(buffer.insert(7, 7 * frameSamples, at: 1_000) == .stored)
        #expect(buffer.pullPlayed(now: 1_000 + 40 * millisecond - 1) == .notStarted)
        #expect(buffer.pullPlayed(now: 1_000 + 40 * millisecond) == .packet(7))
    }

    @Test func targetDelayShorterThanOneFrameIsRaisedToOneFrame() {
        let buffer = JitterBuffer(configuration: .init(targetDelayMilliseconds: 5))
        #expect(buffer.statistics.targetDelayMilliseconds == 20)
        _ = buffer.insert(0, 0, at: 0)
        #expect(buffer.pullPlayed(now: 19 * millisecond) == .notStarted)
        #expect(buffer.pullPlayed(now: 20 * millisecond) == .packet(0))
    }

    @Test func reorderingWithinTheTargetDelayIsPlayedInOrder() {
        var stream = makeStream(count: 20)
        for index in stride(from: 0, to: 20, by: 2) {
            stream[index].arrivalNanoseconds += 25 * millisecond  // each even packet arrives after its odd successor
        }
        let buffer = JitterBuffer()
        // First arrival is packet 1 at 25 ms, so playout starts at the 70 ms pull.
        let result = simulate(buffer, packets: stream, pullCount: 23)
        #expect(result.played == repeated(.notStarted, 3) + packets(0...19))
        #expect(result.outcomes.allSatisfy { $0 == .stored })
        #expect(buffer.statistics.latePackets == 0)
    }

    @Test func duplicatesOfBufferedAndPlayedPacketsAreDetected() {
        let buffer = JitterBuffer()
        #expect(buffer.insert(0, 0, at: 0) == .stored)
        #expect(buffer.insert(0, 0, at: 1 * millisecond) == .duplicate)
        #expect(buffer.insert(1, frameSamples, at: 20 * millisecond) == .stored)
        #expect(buffer.pullPlayed(now: 40 * millisecond) == .packet(0))
        #expect(buffer.insert(0, 0, at: 41 * millisecond) == .duplicate)
        #expect(buffer.insert(1, frameSamples, at: 42 * millisecond) == .duplicate)
        #expect(buffer.pullPlayed(now: 60 * millisecond) == .packet(1))
        let statistics = buffer.statistics
        #expect(statistics.duplicatePackets == 3)
        #expect(statistics.latePackets == 0)
        #expect(statistics.framesPlayed == 2)
    }

    @Test func packetArrivingAfterItsPlayoutIsLateAndRecoveredByFec() {
        var stream = makeStream(count: 20)
        stream[5].arrivalNanoseconds += 100 * millisecond  // arrives at 205 ms; its frame plays at 150 ms
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 22)
        #expect(result.played == repeated(.notStarted, 2) + packets(0...4) + [.fec(6)] + packets(6...19))
        #expect(result.outcomes[5] == .late)
        let statistics = buffer.statistics
        #expect(statistics.latePackets == 1)
        #expect(statistics.fecRecoveries == 1)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.framesPlayed == 19)
    }

    @Test func singleLossWithSuccessorPresentIsRecoveredByFecThenSuccessorPlays() {
        var stream = makeStream(count: 20)
        stream.remove(at: 10)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 22)
        #expect(result.played == repeated(.notStarted, 2) + packets(0...9) + [.fec(11)] + packets(11...19))
        let statistics = buffer.statistics
        #expect(statistics.fecRecoveries == 1)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.framesPlayed == 19)
    }

    @Test func burstLossConcealsAllButTheLastMissingPacketWhichUsesFec() {
        var stream = makeStream(count: 20)
        stream.removeSubrange(10...12)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 22)
        // Frame 10 (250 ms) finds the buffer empty: conceal, playout held. Packet 13 arrives at
        // 265 ms and shows the held frame was lost packet 10; frame 11 is concealed (12 absent)
        // and frame 12 is recovered from packet 13's FEC.
        #expect(result.played == repeated(.notStarted, 2) + packets(0...9)
            + [.conceal, .conceal, .fec(13)] + packets(13...19))
        let statistics = buffer.statistics
        #expect(statistics.concealedFrames == 2)
        #expect(statistics.fecRecoveries == 1)
        #expect(statistics.framesPlayed == 17)
    }

    /// The same hole made by packets that carried no audio (a DTMF event's three packets in place
    /// of three frames): a gap, neither concealed as loss nor rebuilt from FEC.
    @Test func framesReplacedByNonAudioPacketsPlayAsAGapNotAsLoss() {
        let stream = makeStream(count: 20)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 22, nonAudio: [10, 11, 12])
        #expect(result.played == repeated(.notStarted, 2) + packets(0...9) + [.conceal, .gap, .gap] + packets(13...19))
        let statistics = buffer.statistics
        #expect(statistics.fecRecoveries == 0)
        #expect(statistics.silenceGapFrames == 3)  // the held frame counted as a gap once packet 13 showed it
        #expect(statistics.framesPlayed == 17)
    }

    @Test func lossWhoseSuccessorIsStillInFlightIsConcealed() {
        var stream = makeStream(count: 20)
        stream[11].arrivalNanoseconds += 60 * millisecond  // arrives at 285 ms, after its 270 ms pull
        stream.remove(at: 10)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 22)
        // Frame 10: packet 10 lost, 11 not here yet (12 is) → conceal. Frame 11: 11 missing, 12 next → FEC.
        #expect(result.played == repeated(.notStarted, 2) + packets(0...9) + [.conceal, .fec(12)] + packets(12...19))
        #expect(result.outcomes[10] == .late)  // index 10 is packet 11 after the removal
        let statistics = buffer.statistics
        #expect(statistics.concealedFrames == 1)
        #expect(statistics.fecRecoveries == 1)
        #expect(statistics.latePackets == 1)
    }

    /// Packets 0…9 at timestamps 0…9 frames, then (DTX) packets 10…19 at timestamps 19…28 frames,
    /// each sent in real time (timestamp / 48 kHz) and arriving 5 ms later.
    private func dtxStream() -> [TestPacket] {
        (0..<20).map { index in
            let timestampFrames = index < 10 ? index : index + 9
            return TestPacket(
                sequenceNumber: UInt16(index),
                rtpTimestamp: UInt32(timestampFrames) * frameSamples,
                arrivalNanoseconds: UInt64(timestampFrames) * 20 * millisecond + 5 * millisecond)
        }
    }

    @Test func dtxPauseVisibleInTheBufferPlaysSilenceGapsWithoutConcealment() {
        let buffer = JitterBuffer(configuration: .init(targetDelayMilliseconds: 240))
        let result = simulate(buffer, packets: dtxStream(), pullCount: 41)
        #expect(result.played == repeated(.notStarted, 12) + packets(0...9) + repeated(.gap, 9) + packets(10...19))
        let statistics = buffer.statistics
        #expect(statistics.silenceGapFrames == 9)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.framesPlayed == 20)
    }

    @Test func dtxPauseLongerThanTheTargetDelayKeepsTimingAndCountsNoConcealment() {
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: dtxStream(), pullCount: 31)
        // Frames 10…16: buffer empty (unknown: underflow or pause) → conceal, playout held.
        // Packet 10 (timestamp 19 frames) arrives at 385 ms: the 7 held frames are credited,
        // frames 17, 18 are known gaps, and packet 10 plays at 430 ms exactly as without a pause.
        #expect(result.played == repeated(.notStarted, 2) + packets(0...9)
            + repeated(.conceal, 7) + repeated(.gap, 2) + packets(10...19))
        #expect(result.played.firstIndex(of: .packet(10)) == (430 - 10) / 20)
        let statistics = buffer.statistics
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.silenceGapFrames == 9)
        #expect(statistics.framesPlayed == 20)
    }

    @Test func sequenceAndTimestampWrapAreHandled() {
        var stream = makeStream(count: 16, firstSequence: 65530, firstTimestamp: 0 &- 3 * frameSamples)
        stream.remove(at: 6)  // sequence 0, timestamp 960 after the 2^32 wrap
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 18)
        #expect(result.played == repeated(.notStarted, 2) + packets(65530...65535) + [.fec(1)] + packets(1...9))
        #expect(result.outcomes.allSatisfy { $0 == .stored })
        #expect(buffer.statistics.duplicatePackets == 0)
        #expect(buffer.statistics.latePackets == 0)
    }

    @Test(arguments: [
        (UInt16(40000), UInt32(0xABCD_0000)),  // random new sequence and timestamp
        (UInt16(120), UInt32(480_000)),  // sequence continues, timestamp 10 s backwards
        (UInt16(7), UInt32(960_000 + 20 * 960 + 5 * 48_000)),  // sequence backwards, timestamp 5 s ahead
    ])
    func senderRestartReanchorsPlayout(newSequence: UInt16, newTimestamp: UInt32) {
        let old = makeStream(count: 20, firstSequence: 100, firstTimestamp: 960_000)
        let new = makeStream(count: 20, firstSequence: newSequence, firstTimestamp: newTimestamp,
                             sendStartNanoseconds: 400 * millisecond)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: old + new, pullCount: 42)
        // Old stream plays 100…118; the new stream's first packet (405 ms) is held, the second
        // (425 ms) confirms it: old packet 119 is discarded and the new stream waits 40 ms again.
        let expected = repeated(.notStarted, 2) + packets(100...118) + [.notStarted]
            + (0..<20).map { Played.packet(newSequence &+ UInt16($0)) }
        #expect(result.played == expected)
        #expect(result.outcomes.allSatisfy { $0 == .stored })
        let statistics = buffer.statistics
        #expect(statistics.reanchors == 1)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.latePackets == 0)
        #expect(statistics.framesPlayed == 39)
    }

    @Test func strayFarPacketDoesNotDisturbPlayout() {
        var stream = makeStream(count: 20)
        stream.insert(TestPacket(sequenceNumber: 30000, rtpTimestamp: 0x1234_5678, arrivalNanoseconds: 106 * millisecond), at: 6)
        stream.insert(TestPacket(sequenceNumber: 30001, rtpTimestamp: 0x1234_5678 + 960, arrivalNanoseconds: 146 * millisecond), at: 9)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 22)
        #expect(result.played == repeated(.notStarted, 2) + packets(0...19))
        #expect(result.outcomes.allSatisfy { $0 == .stored })
        #expect(buffer.statistics.reanchors == 0)
        #expect(buffer.statistics.framesPlayed == 20)
    }

    @Test func underflowHoldsPlayoutSoTheDelayedPacketStillPlays() {
        var stream = makeStream(count: 20)
        for index in 10..<20 {
            stream[index].arrivalNanoseconds += 50 * millisecond  // network delay step from 5 to 55 ms
        }
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 23)
        // Frame 10 is due at 250 ms, packet 10 arrives at 255 ms: one concealed (held) frame, then
        // everything plays one frame later than before.
        #expect(result.played == repeated(.notStarted, 2) + packets(0...9) + [.conceal] + packets(10...19))
        #expect(result.outcomes.allSatisfy { $0 == .stored })
        let statistics = buffer.statistics
        #expect(statistics.concealedFrames == 1)
        #expect(statistics.latePackets == 0)
        #expect(statistics.framesPlayed == 20)
    }

    @Test func fasterSenderIsBoundedByDriftDrops() {
        // Sender clock 1 % fast: one packet every 19.8 ms for 60 s; the sink pulls every 20 ms.
        let stream = makeStream(count: 3031, sendIntervalNanoseconds: 19_800_000)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 3000)
        let statistics = buffer.statistics
        #expect(result.maximumDelayAfterPullMilliseconds <= 40 + 3 * 20)
        #expect(statistics.driftDrops == 28)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.fecRecoveries == 0)
        #expect(statistics.silenceGapFrames == 0)
        #expect(statistics.latePackets == 0)
        // Every pull after the start played a packet, and each drift drop skipped exactly one.
        let played = result.played.compactMap { if case .packet(let sequence) = $0 { sequence } else { nil } }
        #expect(played.count == 2998)
        let skipped = zip(played, played.dropFirst()).reduce(0) { $0 + Int($1.1 - $1.0 - 1) }
        #expect(skipped == statistics.driftDrops)
        #expect(statistics.framesPlayed + statistics.driftDrops + statistics.bufferedPackets == statistics.packetsInserted)
    }

    @Test func slowerSenderUnderflowsOccasionallyWithConcealment() {
        // Sender clock 1 % slow: one packet every 20.2 ms; pulls every 20 ms for 59 s.
        let stream = makeStream(count: 2971, sendIntervalNanoseconds: 20_200_000)
        let buffer = JitterBuffer()
        let result = simulate(buffer, packets: stream, pullCount: 2950)
        let statistics = buffer.statistics
        #expect(statistics.concealedFrames == 27)
        #expect(result.played.filter { $0 == .conceal }.count == 27)
        #expect(statistics.latePackets == 0)
        #expect(statistics.driftDrops == 0)
        #expect(statistics.framesPlayed == 2950 - 2 - 27)
        let played = result.played.compactMap { if case .packet(let sequence) = $0 { sequence } else { nil } }
        #expect(played == Array(0..<UInt16(statistics.framesPlayed)))
        #expect(result.maximumDelayAfterPullMilliseconds <= 40 + 20)
    }

    @Test func overflowDropsTheOldestPacketAndFollowsASenderThatRanAhead() {
        let buffer = JitterBuffer(configuration: .init(slotCount: 8))
        for sequence in UInt16(1)...8 {
            #expect(buffer.insert(sequence, UInt32(sequence) * frameSamples, at: 0) == .stored)
        }
        // Full: the new packet is older than everything buffered, so it is the one dropped.
        #expect(buffer.insert(0, 0, at: 1) == .overflow)
        // Full: packet 1 (oldest) is dropped to make room for 9.
        #expect(buffer.insert(9, 9 * frameSamples, at: 2) == .overflow)
        #expect(buffer.pullPlayed(now: 40 * millisecond) == .packet(2))
        #expect(buffer.insert(10, 10 * frameSamples, at: 41 * millisecond) == .stored)
        // Full again after the start: dropping packet 3 moves the playout point past it.
        #expect(buffer.insert(11, 11 * frameSamples, at: 42 * millisecond) == .overflow)
        var played: [Played] = []
        for pull in 0..<9 {
            played.append(buffer.pullPlayed(now: (60 + 20 * UInt64(pull)) * millisecond))
        }
        #expect(played == packets(4...11) + [.conceal])
        #expect(buffer.statistics.overflowDrops == 3)
    }

    @Test func randomJitterUpToHalfTheTargetDelayPlaysEveryPacketWithoutConcealment() {
        var generator = SplitMix64(state: 0x7E7E_5EED)
        var stream = makeStream(count: 1500, networkDelayNanoseconds: 0)
        for index in stream.indices {
            stream[index].arrivalNanoseconds += generator.next() % (30 * millisecond + 1)
        }
        let buffer = JitterBuffer(configuration: .init(targetDelayMilliseconds: 60))
        let result = simulate(buffer, packets: stream, pullCount: 1505, firstPullNanoseconds: 3 * millisecond)
        let waiting = result.played.prefix { $0 == .notStarted }.count
        #expect(waiting == 5)
        #expect(Array(result.played[waiting..<(waiting + 1500)]) == packets(0...1499))
        #expect(result.outcomes.allSatisfy { $0 == .stored })
        // Some packets really were reordered.
        #expect(zip(stream, stream.dropFirst()).contains { $0.arrivalNanoseconds > $1.arrivalNanoseconds })
        let statistics = buffer.statistics
        #expect(statistics.framesPlayed == 1500)
        #expect(statistics.latePackets == 0)
        #expect(statistics.fecRecoveries == 0)
        #expect(statistics.driftDrops == 0)
        #expect(statistics.concealedFrames == 1505 - waiting - 1500)  // only after the stream ended
    }

    @Test func payloadLargerThanASlotIsRejected() {
        let buffer = JitterBuffer()
        let large = [UInt8](repeating: 1, count: 1501)
        let outcome = large.withUnsafeBytes {
            buffer.insert(sequenceNumber: 0, rtpTimestamp: 0, payload: $0, arrivalNanoseconds: 0)
        }
        #expect(outcome == .tooLarge)
        let full = [UInt8](repeating: 2, count: 1500)
        let stored = full.withUnsafeBytes {
            buffer.insert(sequenceNumber: 0, rtpTimestamp: 0, payload: $0, arrivalNanoseconds: 0)
        }
        #expect(stored == .stored)
        if case .packet(0, let payload) = buffer.pull(now: 40 * millisecond) {
            #expect(payload.count == 1500)
            #expect(payload.allSatisfy { $0 == 2 })
        } else {
            Issue.record("expected packet 0")
        }
        #expect(buffer.statistics.tooLargePackets == 1)
    }

    @Test func resetForgetsStreamAndStatistics() {
        let buffer = JitterBuffer()
        _ = simulate(buffer, packets: makeStream(count: 10), pullCount: 8)
        buffer.reset()
        #expect(buffer.pullPlayed(now: 1_000 * millisecond) == .notStarted)
        var expected = JitterBufferStatistics()
        expected.targetDelayMilliseconds = 40
        #expect(buffer.statistics == expected)
        // A new stream may reuse earlier sequence numbers without being called duplicate.
        #expect(buffer.insert(3, 123_456, at: 1_001 * millisecond) == .stored)
        #expect(buffer.pullPlayed(now: 1_041 * millisecond) == .packet(3))
    }
}

@Suite("JitterBuffer: frames recovered from redundant copies (RFC 2198 RED)")
struct JitterBufferRedundancyTests {
    /// Every other packet lost; each packet that arrives carries the frame before it: every lost
    /// frame is filled in from its successor and played as itself, nothing concealed.
    @Test func aLostFrameIsPlayedFromTheNextPacketsCopy() {
        let buffer = JitterBuffer()  // fixed 40 ms target
        let stream = makeStream(count: 40)
        var played: [Played] = []
        var next = 0
        for pull in 0..<41 {  // two before playout starts, then frames 0…38 (39 is lost with no successor)
            let now = 10 * millisecond + UInt64(pull) * 20 * millisecond
            while next < stream.count, stream[next].arrivalNanoseconds <= now {
                let p = stream[next]
                if next % 2 == 0 {  // odd packets are lost on the way
                    _ = buffer.insert(p)
                    if next > 0 {
                        let previous = p.sequenceNumber &- 1
                        let stored = payloadBytes(for: previous).withUnsafeBytes {
                            buffer.insertRedundant(
                                sequenceNumber: previous, rtpTimestamp: p.rtpTimestamp &- frameSamples, payload: $0,
                                arrivalNanoseconds: p.arrivalNanoseconds)
                        }
                        #expect(stored)
                    }
                }
                next += 1
            }
            played.append(buffer.pullPlayed(now: now))
        }
        let audio = played.filter { $0 != .notStarted }
        #expect(audio == packets(0...38))
        let statistics = buffer.statistics
        #expect(statistics.redundantRecoveries == 19)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.duplicatePackets == 0 && statistics.latePackets == 0)
        #expect(statistics.packetsInserted == 20)  // the copies are not packets
    }

    /// A copy of a frame that arrived itself, of one already due, or before any packet began
    /// the stream is not stored, and counts nothing.
    @Test func aCopyOnlyFillsAHole() {
        let buffer = JitterBuffer()
        let bytes = payloadBytes(for: 4)
        let early = bytes.withUnsafeBytes { buffer.insertRedundant(sequenceNumber: 4, rtpTimestamp: 4 * frameSamples, payload: $0, arrivalNanoseconds: 0) }
        #expect(!early)  // no stream yet
        _ = buffer.insert(4, 4 * frameSamples, at: 0)
        _ = buffer.insert(5, 5 * frameSamples, at: 20 * millisecond)
        let again = bytes.withUnsafeBytes { buffer.insertRedundant(sequenceNumber: 4, rtpTimestamp: 4 * frameSamples, payload: $0, arrivalNanoseconds: 20 * millisecond) }
        #expect(!again)  // received itself
        #expect(buffer.pullPlayed(now: 40 * millisecond) == .packet(4))
        #expect(buffer.pullPlayed(now: 60 * millisecond) == .packet(5))
        #expect(buffer.pullPlayed(now: 80 * millisecond) == .conceal)  // 6 lost, nothing yet
        _ = buffer.insert(8, 8 * frameSamples, at: 85 * millisecond)
        let due = payloadBytes(for: 6).withUnsafeBytes { buffer.insertRedundant(sequenceNumber: 6, rtpTimestamp: 6 * frameSamples, payload: $0, arrivalNanoseconds: 85 * millisecond) }
        #expect(!due)  // its time has passed
        let hole = payloadBytes(for: 7).withUnsafeBytes { buffer.insertRedundant(sequenceNumber: 7, rtpTimestamp: 7 * frameSamples, payload: $0, arrivalNanoseconds: 85 * millisecond) }
        #expect(hole)
        #expect(buffer.pullPlayed(now: 100 * millisecond) == .packet(7))
        #expect(buffer.statistics.redundantRecoveries == 1)
        #expect(buffer.statistics.duplicatePackets == 0 && buffer.statistics.latePackets == 0)
    }
}
