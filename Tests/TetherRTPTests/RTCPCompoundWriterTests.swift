import Testing
import TetherRTP

struct RTCPCompoundWriterTests {
    private let cname = Array("alice@example".utf8)  // 13 bytes
    private let info = RTCPSenderInfo(
        ntpTimestamp: 0xE8F0_1234_8000_0000, rtpTimestamp: 48_000, senderPacketCount: 50, senderOctetCount: 4000
    )

    @Test func initRejectsEmptyAndOversizedCNAME() {
        #expect(RTCPCompoundWriter(cname: []) == nil)
        #expect(RTCPCompoundWriter(cname: [UInt8](repeating: 0x61, count: 256)) == nil)
        #expect(RTCPCompoundWriter(cname: [UInt8](repeating: 0x61, count: 255))?.cnameLength == 255)
    }

    @Test func senderReportCompoundHasExactLayout() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        let bytes = try writeCompound(writer, ssrc: 0xCAFE_BABE, senderInfo: info, blocks: [sampleBlock(0), sampleBlock(1)], byeReason: .some(Array("bye".utf8)))
        // SR 28 + 2 × 24 = 76, SDES 8 + roundUp4(2 + 13 + 1) = 24, BYE 8 + roundUp4(1 + 3) = 12.
        #expect(bytes.count == 112)
        #expect(writer.requiredLength(hasSenderInfo: true, reportBlockCount: 2, byeReasonLength: 3) == 112)
        #expect(Array(bytes[0..<4]) == [0x82, 200, 0, 18])
        #expect(Array(bytes[4..<8]) == bytes32(0xCAFE_BABE))
        #expect(Array(bytes[8..<16]) == [0xE8, 0xF0, 0x12, 0x34, 0x80, 0, 0, 0])
        #expect(Array(bytes[76..<80]) == [0x81, 202, 0, 5])
        #expect(Array(bytes[84..<86]) == [1, 13])
        #expect(Array(bytes[86..<99]) == cname)
        #expect(Array(bytes[99..<100]) == [0])  // item list terminator, chunk ends at 100
        #expect(Array(bytes[100..<104]) == [0x81, 203, 0, 2])
        #expect(Array(bytes[108..<112]) == [3, 0x62, 0x79, 0x65])
    }

    @Test func receiverReportWithoutBlocksIsEightBytesPlusSDES() throws {
        let writer = try #require(RTCPCompoundWriter(cname: [0x61, 0x62]))
        let bytes = try writeCompound(writer, ssrc: 7, senderInfo: nil, blocks: [])
        // RR 8, SDES 8 + roundUp4(2 + 2 + 1) = 16: nulls pad the chunk to 32 bits.
        #expect(bytes == [0x80, 201, 0, 1, 0, 0, 0, 7, 0x81, 202, 0, 3, 0, 0, 0, 7, 1, 2, 0x61, 0x62, 0, 0, 0, 0])
    }

    @Test func cnameOfExactWordMultipleStillGetsTerminatorWord() throws {
        // 2 + 1 + 1 = 4 bytes of items would leave no room for the terminating null.
        let writer = try #require(RTCPCompoundWriter(cname: [0x61, 0x62]))
        let oneByte = try #require(RTCPCompoundWriter(cname: [0x61]))
        let bytes = try writeCompound(oneByte, ssrc: 7, senderInfo: nil, blocks: [])
        #expect(Array(bytes[16..<20]) == [1, 1, 0x61, 0])
        #expect(bytes.count == 20)
        #expect(writer.requiredLength(hasSenderInfo: false, reportBlockCount: 0, byeReasonLength: nil) == 24)
    }

    @Test func byeWithoutReasonIsEightBytes() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        let bytes = try writeCompound(writer, ssrc: 9, senderInfo: nil, blocks: [], byeReason: .some(nil))
        #expect(Array(bytes.suffix(8)) == [0x81, 203, 0, 1, 0, 0, 0, 9])
    }

    @Test func moreThan31BlocksSpillIntoAdditionalReceiverReports() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        let blocks = (0..<40).map { sampleBlock(UInt32($0)) }
        let bytes = try writeCompound(writer, ssrc: 1, senderInfo: info, blocks: blocks)
        #expect(bytes.count == 28 + 31 * 24 + 8 + 9 * 24 + 24)
        let packets = try parseRTCP(bytes).get()
        #expect(packets.count == 3)
        #expect(packets[0] == .senderReport(ssrc: 1, info: info, blocks: Array(blocks[0..<31])))
        #expect(packets[1] == .receiverReport(ssrc: 1, blocks: Array(blocks[31..<40])))
    }

    @Test func exactly31BlocksFitOnePacket() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        let blocks = (0..<31).map { sampleBlock(UInt32($0)) }
        let packets = try parseRTCP(try writeCompound(writer, ssrc: 1, senderInfo: nil, blocks: blocks)).get()
        #expect(packets.count == 2)
        #expect(packets[0] == .receiverReport(ssrc: 1, blocks: blocks))
    }

    @Test func tooSmallBufferThrowsWithRequiredSize() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        var buffer = [UInt8](repeating: 0, count: 50)
        let blocks = [sampleBlock(0)]
        #expect(throws: RTCPWriteError.bufferTooSmall(requiredBytes: 28 + 24 + 24)) {
            try buffer.withUnsafeMutableBytes { raw in
                _ = try writer.write(into: raw, ssrc: 1, senderInfo: info, reportBlocks: blocks, bye: .omitted)
            }
        }
    }

    @Test func oversizedByeReasonThrows() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        #expect(throws: RTCPWriteError.byeReasonTooLong(lengthBytes: 256)) {
            _ = try writeCompound(writer, ssrc: 1, senderInfo: nil, blocks: [], byeReason: .some([UInt8](repeating: 0x20, count: 256)))
        }
    }

    @Test func writesIntoOffsetSliceWithoutTouchingNeighbours() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        var buffer = [UInt8](repeating: 0xEE, count: 200)
        let length = try buffer.withUnsafeMutableBytes { raw in
            try writer.write(
                into: UnsafeMutableRawBufferPointer(rebasing: raw[10..<150]),
                ssrc: 5, senderInfo: nil, reportBlocks: [sampleBlock(3)], bye: .omitted
            )
        }
        #expect(length == 8 + 24 + 24)
        #expect(buffer[0..<10].allSatisfy { $0 == 0xEE })
        #expect(buffer[(10 + length)...].allSatisfy { $0 == 0xEE })
        let packets = try parseRTCP(Array(buffer[10..<(10 + length)])).get()
        #expect(packets[0] == .receiverReport(ssrc: 5, blocks: [sampleBlock(3)]))
    }

    @Test func bufferPointerOverloadMatchesArrayOverload() throws {
        let writer = try #require(RTCPCompoundWriter(cname: cname))
        let blocks = (0..<5).map { sampleBlock(UInt32($0)) }
        let expected = try writeCompound(writer, ssrc: 3, senderInfo: info, blocks: blocks)
        var output = [UInt8](repeating: 0, count: 512)
        let length = try output.withUnsafeMutableBytes { raw in
            try blocks.withUnsafeBufferPointer { pointer in
                try writer.write(into: raw, ssrc: 3, senderInfo: info, reportBlocks: pointer, bye: .omitted)
            }
        }
        #expect(Array(output[0..<length]) == expected)
    }
}
