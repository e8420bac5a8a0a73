import Testing
import TetherRTP

struct RTCPCompoundParserTests {
    private let cname = Array("bob@tether".utf8)
    private let info = RTCPSenderInfo(
        ntpTimestamp: 0xB705_2000_1234_5678, rtpTimestamp: 0xFFFF_FF00, senderPacketCount: 1234, senderOctetCount: 98765
    )

    private func sampleCompound() throws -> [UInt8] {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        return try writeCompound(
            writer, ssrc: 0x0BAD_F00D, senderInfo: info,
            blocks: [sampleBlock(1), sampleBlock(2), sampleBlock(3)], byeReason: .some(Array("shutting down".utf8))
        )
    }

    /// A 4-byte RTCP header.
    private func header(count: UInt8 = 0, padding: Bool = false, packetType: UInt8, words: UInt16) -> [UInt8] {
        [0x80 | (padding ? 0x20 : 0) | count, packetType, UInt8(words >> 8), UInt8(words & 0xFF)]
    }

    private var minimalRR: [UInt8] { header(packetType: 201, words: 1) + bytes32(0x1111_1111) }

    @Test func compoundRoundTripsThroughWriterAndParser() throws {
        let packets = try parseRTCP(try sampleCompound()).get()
        #expect(packets == [
            .senderReport(ssrc: 0x0BAD_F00D, info: info, blocks: [sampleBlock(1), sampleBlock(2), sampleBlock(3)]),
            .sourceDescription(sourceCount: 1, firstSSRC: 0x0BAD_F00D, firstCNAME: cname),
            .bye(sourceCount: 1, firstSSRC: 0x0BAD_F00D, reason: Array("shutting down".utf8)),
        ])
    }

    @Test func reportBlocksViewIsRandomAccess() throws {
        let bytes = try sampleCompound()
        try bytes.withUnsafeBytes { raw in
            let parser = try RTCPCompoundParser(raw)
            #expect(parser.packetCount == 3)
            var iterator = parser.makeIterator()
            guard case .senderReport(_, _, let blocks)? = iterator.next() else {
                Issue.record("first packet is not an SR")
                return
            }
            #expect(blocks.count == 3)
            #expect(blocks[2] == sampleBlock(3))
            #expect(blocks.last == sampleBlock(3))
            #expect(blocks.map(\.ssrc) == [0x1000_0001, 0x1000_0002, 0x1000_0003])
        }
    }

    @Test func everyTruncationThrowsUnlessItEndsOnAPacketBoundary() throws {
        let bytes = try sampleCompound()
        // SR is 28 + 3 × 24 = 100 bytes; SDES is 8 + roundUp4(2 + 10 + 1) = 24 bytes.
        let boundaries: [Int: Int] = [100: 1, 124: 2]
        #expect(try parseRTCP(bytes).get().count == 3)
        for length in 0..<bytes.count {
            let result = parseRTCP(Array(bytes[0..<length]))
            if let packetCount = boundaries[length] {
                #expect((try? result.get().count) == packetCount, "prefix of \(length) bytes")
            } else {
                #expect(failure(result) != nil, "prefix of \(length) bytes must throw")
            }
        }
    }

    @Test func randomMutationsNeverCrash() throws {
        let original = try sampleCompound()
        var rng = SeededGenerator(seed: 99)
        var accepted = 0
        for _ in 0..<5000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            if Bool.random(using: &rng) {
                bytes.removeLast(Int.random(in: 0..<bytes.count, using: &rng))
            }
            if case .success(let packets) = parseRTCP(bytes) {
                accepted += 1
                #expect(!packets.isEmpty)
            }
        }
        #expect(accepted > 0)
    }

    @Test func randomGarbageNeverCrashes() {
        var rng = SeededGenerator(seed: 1234)
        for _ in 0..<5000 {
            let count = Int.random(in: 0...80, using: &rng)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if count >= 2 {
                bytes[0] = 0x80 | (bytes[0] & 0x3F)
                bytes[1] = UInt8.random(in: 192...223, using: &rng)
            }
            _ = parseRTCP(bytes, allowReducedSize: Bool.random(using: &rng))
        }
    }

    @Test func emptyOrTinyBufferIsTooShort() {
        #expect(failure(parseRTCP([])) == .tooShort)
        #expect(failure(parseRTCP([0x80, 201, 0])) == .tooShort)
    }

    @Test func wrongVersionInAnyPacketThrows() {
        var bytes = minimalRR + minimalRR
        bytes[8] = 0x40 | 0x01
        #expect(failure(parseRTCP(bytes)) == .badVersion(1))
        bytes = minimalRR
        bytes[0] = 0xC0
        #expect(failure(parseRTCP(bytes)) == .badVersion(3))
    }

    @Test func firstPacketMustBeSenderOrReceiverReport() {
        let sdes = header(count: 0, packetType: 202, words: 0)
        #expect(failure(parseRTCP(sdes + minimalRR)) == .unexpectedFirstPacketType(202))
        #expect((try? parseRTCP(sdes + minimalRR, allowReducedSize: true).get().count) == 2)
    }

    @Test func packetTypeOutsideRTCPRangeIsUnknown() {
        let bogus = header(packetType: 100, words: 0)
        #expect(failure(parseRTCP(minimalRR + bogus)) == .unknownPacketType(100))
        #expect(failure(parseRTCP(header(packetType: 224, words: 1) + bytes32(0))) == .unknownPacketType(224))
    }

    @Test func lengthFieldLongerThanBufferThrows() {
        var bytes = minimalRR
        bytes[3] = 2  // claims 12 bytes
        #expect(failure(parseRTCP(bytes)) == .badLength)
        bytes[2] = 0xFF
        #expect(failure(parseRTCP(bytes)) == .badLength)
    }

    @Test func lengthFieldShorterThanBufferLeavesUnparseableRemainder() {
        #expect(failure(parseRTCP(minimalRR + [0x80, 201])) == .badLength)  // 2 stray bytes
        #expect(failure(parseRTCP(minimalRR + [0, 0, 0, 0])) == .badVersion(0))
    }

    @Test func reportCountExceedingLengthThrows() {
        var rr = minimalRR
        rr[0] = 0x81  // RC 1 but no block
        #expect(failure(parseRTCP(rr)) == .badReportCount)
        var sr = header(count: 0, packetType: 200, words: 6) + bytes32(1) + [UInt8](repeating: 0, count: 20)
        #expect((try? parseRTCP(sr).get().count) == 1)
        sr[0] = 0x81
        #expect(failure(parseRTCP(sr)) == .badReportCount)
        // SR too short for sender info.
        #expect(failure(parseRTCP(header(packetType: 200, words: 1) + bytes32(1))) == .badReportCount)
    }

    @Test func paddingIsOnlyAllowedOnLastPacket() {
        let paddedRR = header(padding: true, packetType: 201, words: 2) + bytes32(0x2222_2222) + [0, 0, 0, 4]
        let parsed = try? parseRTCP(paddedRR).get()
        #expect(parsed == [.receiverReport(ssrc: 0x2222_2222, blocks: [])])
        #expect(failure(parseRTCP(paddedRR + minimalRR)) == .paddingNotLast)
    }

    @Test func paddingCountMustBePositiveAndFit() {
        let body = bytes32(0x2222_2222)
        #expect(failure(parseRTCP(header(padding: true, packetType: 201, words: 2) + body + [0, 0, 0, 0])) == .badPadding)
        #expect(failure(parseRTCP(header(padding: true, packetType: 201, words: 2) + body + [0, 0, 0, 9])) == .badPadding)
        // Padding eating into the SSRC leaves an RR too short for its header.
        #expect(failure(parseRTCP(header(padding: true, packetType: 201, words: 2) + body + [0, 0, 0, 8])) == .badReportCount)
    }

    @Test func paddedOtherPacketExposesBodyWithoutPadding() {
        let pli = header(count: 1, padding: true, packetType: 206, words: 3) + bytes32(0xA) + bytes32(0xB) + [0, 0, 0, 4]
        let parsed = try? parseRTCP(minimalRR + pli).get()
        #expect(parsed?.last == .other(packetType: 206, count: 1, body: bytes32(0xA) + bytes32(0xB)))
    }

    @Test func malformedSourceDescriptionThrows() {
        // Item claims 20 bytes of text but the chunk has 2.
        let overlong = header(count: 1, packetType: 202, words: 2) + bytes32(5) + [1, 20, 0x61, 0x62]
        #expect(failure(parseRTCP(minimalRR + overlong)) == .badSourceDescription)
        // No null terminator before the end of the packet.
        let unterminated = header(count: 1, packetType: 202, words: 2) + bytes32(5) + [1, 2, 0x61, 0x62]
        #expect(failure(parseRTCP(minimalRR + unterminated)) == .badSourceDescription)
        // Source count larger than the chunks present.
        let missingChunk = header(count: 2, packetType: 202, words: 2) + bytes32(5) + [1, 1, 0x61, 0]
        #expect(failure(parseRTCP(minimalRR + missingChunk)) == .badSourceDescription)
        let valid = header(count: 1, packetType: 202, words: 2) + bytes32(5) + [1, 1, 0x61, 0]
        #expect((try? parseRTCP(minimalRR + valid).get().last) == .sourceDescription(sourceCount: 1, firstSSRC: 5, firstCNAME: [0x61]))
    }

    @Test func sourceDescriptionFindsCNAMEAfterOtherItems() {
        // NAME item (type 2) before CNAME.
        let sdes = header(count: 1, packetType: 202, words: 3) + bytes32(5) + [2, 1, 0x4E, 1, 2, 0x63, 0x64, 0]
        #expect((try? parseRTCP(minimalRR + sdes).get().last) == .sourceDescription(sourceCount: 1, firstSSRC: 5, firstCNAME: [0x63, 0x64]))
    }

    @Test func malformedByeThrows() {
        let tooManySources = header(count: 2, packetType: 203, words: 1) + bytes32(5)
        #expect(failure(parseRTCP(minimalRR + tooManySources)) == .badBye)
        let reasonTooLong = header(count: 1, packetType: 203, words: 2) + bytes32(5) + [9, 0x61, 0x62, 0x63]
        #expect(failure(parseRTCP(minimalRR + reasonTooLong)) == .badBye)
        let empty = header(count: 0, packetType: 203, words: 0)
        #expect((try? parseRTCP(minimalRR + empty).get().last) == .bye(sourceCount: 0, firstSSRC: nil, reason: nil))
    }
}
