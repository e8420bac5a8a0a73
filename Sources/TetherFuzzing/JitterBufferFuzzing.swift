import TetherCore
import TetherRTP

/// The jitter buffer and the reception statistics, fed what a peer controls: sequence numbers,
/// timestamps, payload sizes and arrival times, interleaved with the playout's pulls.
///
/// The first byte chooses the configuration (adaptive or fixed target, two, four or 64 slots, a 1 or
/// 10 s re-anchor threshold, small payload capacity); the rest is a program of operations, each a tag byte and its operands.
/// Time only moves forward, as the monotonic clock does; everything else is arbitrary. Payloads
/// are a pattern of their sequence number, so a pull can check that what it returns is exactly
/// what was inserted for that packet.
enum JitterBufferFuzzing {
    static func run(_ input: UnsafeRawBufferPointer) {
        var reader = ByteReader(input)
        let setup = reader.byte()
        var configuration = JitterBuffer.Configuration(
            targetDelayMilliseconds: Int(setup & 0x7) * 20, slotCount: setup & 0x40 != 0 ? 2 : setup & 0x8 != 0 ? 4 : 64,
            maximumPayloadBytes: 64, reanchorThresholdMilliseconds: setup & 0x80 != 0 ? 10_000 : 1000)
        configuration.adaptiveTarget = setup & 0x10 != 0
        let buffer = JitterBuffer(configuration: configuration)
        var reception = ReceptionStatistics(minimumSequentialPackets: setup & 0x20 != 0 ? 2 : 1)

        var now: UInt64 = 1_000_000_000
        var sequence: UInt16 = reader.uint16()
        var timestamp: UInt32 = reader.uint32()
        var inserts = 0
        var payload = [UInt8](repeating: 0, count: 80)

        while !reader.isAtEnd {
            let tag = reader.byte()
            switch tag & 0x3 {
            case 0, 1:
                // A packet: usually the next one; the tag's high bits and operands move it anywhere.
                if tag & 0x4 != 0 {
                    sequence = reader.uint16()
                    timestamp = reader.uint32()
                } else {
                    let step = Int8(bitPattern: reader.byte())
                    sequence = sequence &+ UInt16(bitPattern: Int16(step))
                    timestamp = timestamp &+ UInt32(bitPattern: Int32(step) &* 960)
                }
                now &+= UInt64(reader.byte()) * 1_000_000
                let length = Int(reader.byte() % 80)
                fill(&payload, sequence: sequence, length: length)
                let outcome = payload.withUnsafeBytes {
                    buffer.insert(
                        sequenceNumber: sequence, rtpTimestamp: timestamp, payload: UnsafeRawBufferPointer(rebasing: $0[0..<length]),
                        arrivalNanoseconds: now)
                }
                inserts += 1
                fuzzInvariant((outcome == .tooLarge) == (length > configuration.maximumPayloadBytes), "\(length) bytes gave \(outcome)")
                reception.packetReceived(sequenceNumber: sequence, rtpTimestamp: timestamp, arrivalRTPUnits: UInt32(truncatingIfNeeded: now / 20_833))
            case 2:
                // A pull, 0–255 ms after the last event (the sink's period, or a stall).
                now &+= UInt64(reader.byte()) * 1_000_000
                check(buffer.pull(now: now, atQuietMoment: tag & 0x4 != 0), configuration: configuration)
            default:
                if tag & 0x4 != 0 {
                    buffer.reset()
                } else if tag & 0x8 != 0 {
                    // A long stream from a seeded generator: (n + 1) × 1024 packets, each `ahead`
                    // frames after the last (1: a continuous stream; more: a peer racing the
                    // playout point through overflow drops), up to 15 % lost, a pull every
                    // `pullEvery` packets at the frame period. Far enough to carry timestamps
                    // and counters where single packets never take them.
                    let count = (Int(reader.byte()) + 1) * 1024
                    let mode = reader.byte()
                    let ahead = UInt32(max(1, mode & 0x3F))
                    let pullEvery = Int(mode >> 6) + 1
                    let lossPercent = UInt64(tag >> 4)
                    var seed = UInt64(reader.uint32()) | 1
                    for index in 0..<count {
                        seed ^= seed << 13
                        seed ^= seed >> 7
                        seed ^= seed << 17
                        sequence &+= 1
                        timestamp &+= 960 * ahead
                        now &+= 20_000_000 / UInt64(pullEvery)
                        if seed % 100 >= lossPercent {
                            let length = Int((seed >> 40) % 60)
                            fill(&payload, sequence: sequence, length: length)
                            _ = payload.withUnsafeBytes {
                                buffer.insert(
                                    sequenceNumber: sequence, rtpTimestamp: timestamp,
                                    payload: UnsafeRawBufferPointer(rebasing: $0[0..<length]), arrivalNanoseconds: now)
                            }
                            inserts += 1
                            reception.packetReceived(
                                sequenceNumber: sequence, rtpTimestamp: timestamp, arrivalRTPUnits: UInt32(truncatingIfNeeded: now / 20_833))
                        }
                        if index % pullEvery == 0 { check(buffer.pull(now: now, atQuietMoment: seed & 1 == 0), configuration: configuration) }
                    }
                } else {
                    // Twenty pulls at the frame period: the playout catching up on what is buffered.
                    for _ in 0..<20 {
                        now &+= 20_000_000
                        check(buffer.pull(now: now, atQuietMoment: true), configuration: configuration)
                    }
                }
            }
            let s = buffer.statistics
            fuzzInvariant(s.bufferedPackets >= 0 && s.bufferedPackets <= configuration.slotCount, "\(s.bufferedPackets) packets in \(configuration.slotCount) slots")
            fuzzInvariant(s.packetsInserted <= inserts, "more packets counted than inserted")
            fuzzInvariant(
                [s.duplicatePackets, s.latePackets, s.tooLargePackets, s.overflowDrops, s.driftDrops, s.insertedFrames, s.framesPlayed, s.fecRecoveries, s.concealedFrames, s.silenceGapFrames, s.reanchors, s.bufferedDelayMilliseconds].allSatisfy { $0 >= 0 },
                "a negative counter: \(s)")
            fuzzInvariant(s.meanWaitMilliseconds >= 0 && s.meanWaitMilliseconds.isFinite, "mean wait \(s.meanWaitMilliseconds)")
            if let delay = s.playoutDelayMilliseconds { fuzzInvariant(delay >= 0, "a negative playout delay") }
        }

        fuzzInvariant(reception.packetsReceived <= UInt64(inserts), "reception counted more packets than arrived")
        let block = reception.makeReportBlock(ssrc: 1, lastSenderReport: 0, delaySinceLastSenderReport: 0)
        fuzzInvariant(
            block.cumulativeLost >= RTCPReportBlock.minimumCumulativeLost && block.cumulativeLost <= RTCPReportBlock.maximumCumulativeLost,
            "cumulative loss \(block.cumulativeLost) beyond 24 bits")
    }

    /// A payload that names its packet: the sequence number, then bytes derived from it.
    static func fill(_ payload: inout [UInt8], sequence: UInt16, length: Int) {
        for i in 0..<length { payload[i] = pattern(sequence: sequence, index: i) }
    }

    static func pattern(sequence: UInt16, index: Int) -> UInt8 {
        switch index {
        case 0: UInt8(truncatingIfNeeded: sequence >> 8)
        case 1: UInt8(truncatingIfNeeded: sequence)
        default: UInt8(truncatingIfNeeded: Int(sequence) &* 7 &+ index &* 13)
        }
    }

    /// What a pull returns is whole and is what was inserted for its packet.
    static func check(_ result: JitterBuffer.PullResult, configuration: JitterBuffer.Configuration) {
        switch result {
        case .packet(let sequence, let payload):
            fuzzInvariant(payload.count <= configuration.maximumPayloadBytes, "a \(payload.count)-byte payload")
            for (i, byte) in payload.enumerated() {
                fuzzInvariant(byte == pattern(sequence: sequence, index: i), "packet \(sequence) returned another packet's bytes")
            }
        case .fecFromNext(let payload, _):
            fuzzInvariant(payload.count <= configuration.maximumPayloadBytes, "a \(payload.count)-byte FEC payload")
            if payload.count >= 2 {
                let sequence = UInt16(payload[0]) << 8 | UInt16(payload[1])
                for (i, byte) in payload.enumerated() {
                    fuzzInvariant(byte == pattern(sequence: sequence, index: i), "an FEC payload mixes two packets")
                }
            }
        case .notStarted, .insertedFrame, .conceal, .silenceGap:
            break
        }
    }
}

/// Reads operands from the fuzzer's bytes; past the end every read is 0.
struct ByteReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { offset >= bytes.count }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint16() -> UInt16 { UInt16(byte()) << 8 | UInt16(byte()) }

    mutating func uint32() -> UInt32 { UInt32(uint16()) << 16 | UInt32(uint16()) }
}
