import Testing
@testable import TetherRTP

struct RTCPReportBlockTests {
    private func encode(_ block: RTCPReportBlock) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 24)
        bytes.withUnsafeMutableBytes { block.encode(into: $0, at: 0) }
        return bytes
    }

    private func decode(_ bytes: [UInt8]) -> RTCPReportBlock {
        bytes.withUnsafeBytes { RTCPReportBlock(decodingFrom: $0, at: 0) }
    }

    @Test func encodesFieldsInWireOrder() {
        let block = RTCPReportBlock(
            ssrc: 0x0102_0304, fractionLost: 0x40, cumulativeLost: 0x0A0B0C,
            extendedHighestSequence: 0x0001_0002, interarrivalJitter: 0x10,
            lastSenderReport: 0xB705_2000, delaySinceLastSenderReport: 0x0005_4000
        )
        #expect(encode(block) == [
            1, 2, 3, 4, 0x40, 0x0A, 0x0B, 0x0C, 0, 1, 0, 2, 0, 0, 0, 0x10,
            0xB7, 0x05, 0x20, 0x00, 0x00, 0x05, 0x40, 0x00,
        ])
        #expect(decode(encode(block)) == block)
    }

    @Test func negativeCumulativeLostIsSignExtended() {
        var block = sampleBlock(1)
        block.cumulativeLost = -2
        let bytes = encode(block)
        #expect(Array(bytes[5..<8]) == [0xFF, 0xFF, 0xFE])
        #expect(decode(bytes).cumulativeLost == -2)
        #expect(decode(bytes).fractionLost == block.fractionLost)
    }

    @Test func cumulativeLostIsClampedTo24Bits() {
        var block = sampleBlock(2)
        block.cumulativeLost = 10_000_000
        #expect(Array(encode(block)[5..<8]) == [0x7F, 0xFF, 0xFF])
        #expect(decode(encode(block)).cumulativeLost == 8_388_607)
        block.cumulativeLost = -10_000_000
        #expect(Array(encode(block)[5..<8]) == [0x80, 0x00, 0x00])
        #expect(decode(encode(block)).cumulativeLost == -8_388_608)
        #expect(RTCPReportBlock.clampCumulativeLost(-1) == -1)
        #expect(RTCPReportBlock.clampCumulativeLost(Int64.max) == 0x7F_FFFF)
    }
}
