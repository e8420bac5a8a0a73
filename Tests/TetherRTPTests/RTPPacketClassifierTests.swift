import Testing
import TetherRTP

struct RTPPacketClassifierTests {
    private func classify(_ bytes: [UInt8]) -> RTPPacketClassifier.Kind {
        bytes.withUnsafeBytes { RTPPacketClassifier.classify($0) }
    }

    private func packet(secondByte: UInt8, count: Int = 12, firstByte: UInt8 = 0x80) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes[0] = firstByte
        bytes[1] = secondByte
        return bytes
    }

    @Test func secondByteInRTCPRangeIsRTCP() {
        for secondByte: UInt8 in [192, 200, 201, 202, 203, 206, 223] {
            #expect(classify(packet(secondByte: secondByte, count: 8)) == .rtcp)
        }
    }

    @Test func secondByteOutsideRTCPRangeIsRTP() {
        // 191 = marker + PT 63, 224 = marker + PT 96, 111 = Opus without marker.
        for secondByte: UInt8 in [0, 96, 111, 127, 128, 191, 224, 255] {
            #expect(classify(packet(secondByte: secondByte)) == .rtp)
        }
    }

    @Test func wrongVersionOrTooShortIsInvalid() {
        #expect(classify(packet(secondByte: 111, firstByte: 0x40)) == .invalid)
        #expect(classify(packet(secondByte: 200, firstByte: 0xC0)) == .invalid)
        #expect(classify([0x80, 200]) == .invalid)
        #expect(classify([]) == .invalid)
        #expect(classify(packet(secondByte: 111, count: 11)) == .invalid)
        #expect(classify(packet(secondByte: 200, count: 4)) == .rtcp)
    }

    @Test func hasVersion2ChecksTopBitsOfFirstByte() {
        #expect([UInt8(0x80)].withUnsafeBytes { RTPPacketClassifier.hasVersion2($0) })
        #expect([UInt8(0xBF)].withUnsafeBytes { RTPPacketClassifier.hasVersion2($0) })
        #expect(![UInt8(0x7F)].withUnsafeBytes { RTPPacketClassifier.hasVersion2($0) })
        #expect(![UInt8]().withUnsafeBytes { RTPPacketClassifier.hasVersion2($0) })
    }
}
