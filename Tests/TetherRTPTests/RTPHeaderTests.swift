import Testing
@testable import TetherRTP

struct RTPHeaderTests {
    @Test func writeThenParseRoundTripsRandomFields() throws {
        var rng = SeededGenerator(seed: 0x5EED)
        for _ in 0..<1000 {
            let marker = Bool.random(using: &rng)
            let payloadType = UInt8.random(in: 0...127, using: &rng)
            let sequenceNumber = UInt16.random(in: .min ... .max, using: &rng)
            let timestamp = UInt32.random(in: .min ... .max, using: &rng)
            let ssrc = UInt32.random(in: .min ... .max, using: &rng)
            let payloadLength = Int.random(in: 0...200, using: &rng)
            let header = RTPHeader(
                marker: marker, payloadType: payloadType, sequenceNumber: sequenceNumber,
                timestamp: timestamp, ssrc: ssrc
            )
            var packet = [UInt8](repeating: 0xAB, count: 12 + payloadLength)
            let written = packet.withUnsafeMutableBytes { header.write(to: $0) }
            #expect(written == 12)

            let parsed = try parseRTP(packet).get()
            #expect(parsed.marker == marker)
            #expect(parsed.payloadType == payloadType)
            #expect(parsed.sequenceNumber == sequenceNumber)
            #expect(parsed.timestamp == timestamp)
            #expect(parsed.ssrc == ssrc)
            #expect(!parsed.hasPadding && !parsed.hasExtension && parsed.csrcCount == 0)
            #expect(parsed.payloadOffset == 12)
            #expect(parsed.payloadLength == payloadLength)
        }
    }

    @Test func writeEmitsExactWireBytes() {
        let header = RTPHeader(marker: true, payloadType: 111, sequenceNumber: 0x1234, timestamp: 0xDEAD_BEEF, ssrc: 0x0102_0304)
        var packet = [UInt8](repeating: 0xFF, count: 12)
        packet.withUnsafeMutableBytes { _ = header.write(to: $0) }
        #expect(packet == [0x80, 0x80 | 111, 0x12, 0x34, 0xDE, 0xAD, 0xBE, 0xEF, 0x01, 0x02, 0x03, 0x04])
    }

    @Test func parseLocatesPayloadAfterCSRCsExtensionAndBeforePadding() throws {
        // V=2 P=1 X=1 CC=2, PT 96, seq 7, ts 9, ssrc 0x11223344
        var packet: [UInt8] = [0xB2, 96, 0, 7, 0, 0, 0, 9, 0x11, 0x22, 0x33, 0x44]
        packet += bytes32(0xAAAA_0001) + bytes32(0xAAAA_0002)
        packet += [0xBE, 0xDE, 0x00, 0x01, 0x10, 0xFF, 0x00, 0x00]  // one word of extension
        packet += [1, 2, 3]  // payload
        packet += [0, 0, 3]  // padding
        let header = try parseRTP(packet).get()
        #expect(header.csrcCount == 2)
        #expect(header.extensionProfile == 0xBEDE)
        #expect(header.extensionOffset == 24)
        #expect(header.extensionLength == 4)
        #expect(header.payloadOffset == 28)
        #expect(header.payloadLength == 3)
        #expect(header.paddingLength == 3)
        packet.withUnsafeBytes { raw in
            #expect(header.contributingSource(at: 0, in: raw) == 0xAAAA_0001)
            #expect(header.contributingSource(at: 1, in: raw) == 0xAAAA_0002)
            #expect(header.contributingSource(at: 2, in: raw) == nil)
        }
    }

    @Test func parseRejectsVersionsOtherThanTwo() {
        for version: UInt8 in [0, 1, 3] {
            var packet = [UInt8](repeating: 0, count: 20)
            packet[0] = version << 6
            #expect(failure(parseRTP(packet)) == .badVersion(version))
        }
    }

    @Test func parseRejectsCSRCCountExceedingLength() {
        var packet = [UInt8](repeating: 0, count: 12 + 4 * 14)
        packet[0] = 0x80 | 15
        #expect(failure(parseRTP(packet)) == .csrcListTooLong)
        packet += [0, 0, 0, 0]
        #expect(failure(parseRTP(packet)) == nil)
    }

    @Test func parseRejectsExtensionLengthExceedingBuffer() {
        var packet: [UInt8] = [0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]
        #expect(failure(parseRTP(packet)) == .badExtension)  // no room for extension header
        packet += [0xBE, 0xDE, 0x00, 0x03] + [UInt8](repeating: 0, count: 8)
        #expect(failure(parseRTP(packet)) == .badExtension)  // claims 12 bytes, has 8
        packet += [0, 0, 0, 0]
        #expect(failure(parseRTP(packet)) == nil)
    }

    @Test func parseRejectsZeroOrOversizedPadding() {
        let base: [UInt8] = [0xA0, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 9, 9, 9]
        #expect(failure(parseRTP(base + [0])) == .badPadding)
        #expect(failure(parseRTP(base + [5])) == .badPadding)  // only 4 bytes after header
        #expect(failure(parseRTP(Array(base[0..<12]))) == .badPadding)  // no room at all
        let header = try? parseRTP(base + [4]).get()
        #expect(header?.payloadLength == 0)
        #expect(header?.paddingLength == 4)
    }

    @Test func everyTruncationOfPaddedPacketThrows() {
        var packet: [UInt8] = [0xB2, 96, 0, 7, 0, 0, 0, 9, 0x11, 0x22, 0x33, 0x44]
        packet += bytes32(1) + bytes32(2)
        packet += [0xBE, 0xDE, 0x00, 0x02] + [UInt8](repeating: 0, count: 8)
        packet += [0, 0, 0, 0]  // payload
        packet += [0, 0, 0, 4]  // padding
        #expect(failure(parseRTP(packet)) == nil)
        for length in 0..<packet.count {
            let error = failure(parseRTP(Array(packet[0..<length])))
            let expected: RTPParseError = switch length {
            case ..<12: .tooShort
            case ..<20: .csrcListTooLong
            case ..<32: .badExtension
            default: .badPadding
            }
            #expect(error == expected, "prefix of \(length) bytes")
        }
    }

    @Test func randomGarbageNeverCrashesParse() {
        var rng = SeededGenerator(seed: 42)
        for _ in 0..<5000 {
            let count = Int.random(in: 0...64, using: &rng)
            var packet = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if count > 0, Bool.random(using: &rng) { packet[0] = 0x80 | (packet[0] & 0x3F) }
            if case .success(let header) = parseRTP(packet) {
                #expect(header.payloadOffset + header.payloadLength + header.paddingLength == count)
            }
        }
    }

    @Test func validateRejectsUnexpectedPayloadTypeAndSSRC() {
        let header = RTPHeader(payloadType: 111, sequenceNumber: 1, timestamp: 2, ssrc: 3)
        #expect(throws: RTPParseError.unexpectedPayloadType(111)) {
            try header.validate(expectedPayloadType: 96, expectedSSRC: nil)
        }
        #expect(throws: RTPParseError.unexpectedSSRC(3)) {
            try header.validate(expectedPayloadType: 111, expectedSSRC: 4)
        }
        #expect(throws: Never.self) {
            try header.validate(expectedPayloadType: 111, expectedSSRC: 3)
        }
    }
}
