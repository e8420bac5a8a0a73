import CAllocationCounter
import Testing

@testable import TetherRTP

/// A minimal RTP packet (12-byte header + payload) in a buffer with room for the trailer.
func rtpPacket(sequence: UInt16, payload: [UInt8], ssrc: UInt32 = 0x1234_5678) -> (buffer: [UInt8], length: Int) {
    var b = [UInt8](repeating: 0, count: 12 + payload.count + SRTPContext.maximumRTPTrailerBytes)
    b[0] = 0x80
    b[1] = 111
    b[2] = UInt8(sequence >> 8)
    b[3] = UInt8(sequence & 0xff)
    b[4...7] = [0, 0, 3, 0xC0]
    b[8] = UInt8(ssrc >> 24)
    b[9] = UInt8((ssrc >> 16) & 0xff)
    b[10] = UInt8((ssrc >> 8) & 0xff)
    b[11] = UInt8(ssrc & 0xff)
    b.replaceSubrange(12..<(12 + payload.count), with: payload)
    return (b, 12 + payload.count)
}

@Suite("SRTP protection")
struct SRTPContextTests {
    @Test(arguments: SRTPCryptoSuite.allCases)
    func protectThenUnprotectRestoresThePacket(suite: SRTPCryptoSuite) throws {
        let key = SRTPKeyMaterial.generate(for: suite)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        for seq in UInt16(100)..<UInt16(110) {
            let payload = (0..<80).map { UInt8(truncatingIfNeeded: Int($0) &* 7 &+ Int(seq)) }
            var (buffer, length) = rtpPacket(sequence: seq, payload: payload)
            let original = Array(buffer[0..<length])
            let protected = try buffer.withUnsafeMutableBytes { try tx.protectRTP($0, length: length) }
            #expect(protected == length + suite.rtpOverheadBytes)
            #expect(Array(buffer[12..<length]) != payload)  // encrypted
            let plain = try buffer.withUnsafeMutableBytes { try rx.unprotectRTP($0, length: protected) }
            #expect(plain == length)
            #expect(Array(buffer[0..<plain]) == original)
        }
    }

    @Test(arguments: SRTPCryptoSuite.allCases)
    func tamperedPacketIsRejected(suite: SRTPCryptoSuite) throws {
        let key = SRTPKeyMaterial.generate(for: suite)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        var (buffer, length) = rtpPacket(sequence: 7, payload: [UInt8](repeating: 0x55, count: 60))
        let protected = try buffer.withUnsafeMutableBytes { try tx.protectRTP($0, length: length) }
        buffer[20] ^= 0x01
        #expect(throws: SRTPError.authenticationFailed) {
            _ = try buffer.withUnsafeMutableBytes { try rx.unprotectRTP($0, length: protected) }
        }
    }

    @Test func replayedPacketIsRejected() throws {
        let key = SRTPKeyMaterial.generate(for: .aesCM128HMACSHA1_80)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        var (buffer, length) = rtpPacket(sequence: 42, payload: [UInt8](repeating: 1, count: 40))
        let protected = try buffer.withUnsafeMutableBytes { try tx.protectRTP($0, length: length) }
        let copy = buffer
        _ = try buffer.withUnsafeMutableBytes { try rx.unprotectRTP($0, length: protected) }
        var again = copy
        #expect(throws: SRTPError.replayed) {
            _ = try again.withUnsafeMutableBytes { try rx.unprotectRTP($0, length: protected) }
        }
    }

    @Test func wrongKeyFailsAuthentication() throws {
        let tx = try SRTPContext(direction: .outbound, key: .generate(for: .aesCM128HMACSHA1_80))
        let rx = try SRTPContext(direction: .inbound, key: .generate(for: .aesCM128HMACSHA1_80))
        var (buffer, length) = rtpPacket(sequence: 1, payload: [UInt8](repeating: 9, count: 40))
        let protected = try buffer.withUnsafeMutableBytes { try tx.protectRTP($0, length: length) }
        #expect(throws: SRTPError.authenticationFailed) {
            _ = try buffer.withUnsafeMutableBytes { try rx.unprotectRTP($0, length: protected) }
        }
    }

    @Test func srtcpRoundTripAndTamperDetection() throws {
        let key = SRTPKeyMaterial.generate(for: .aesCM128HMACSHA1_80)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        // An empty receiver report: V=2, RC=0, PT=201, length=1, SSRC.
        var buffer: [UInt8] = [0x80, 201, 0, 1, 0xde, 0xad, 0xbe, 0xef] + [UInt8](repeating: 0, count: SRTPContext.maximumRTCPTrailerBytes)
        let protected = try buffer.withUnsafeMutableBytes { try tx.protectRTCP($0, length: 8) }
        #expect(protected == 8 + 4 + 10)
        var tampered = buffer
        tampered[5] ^= 0x80
        let plain = try buffer.withUnsafeMutableBytes { try rx.unprotectRTCP($0, length: protected) }
        #expect(plain == 8 && Array(buffer[0..<8]) == [0x80, 201, 0, 1, 0xde, 0xad, 0xbe, 0xef])
        #expect(throws: SRTPError.authenticationFailed) {
            _ = try tampered.withUnsafeMutableBytes { try rx.unprotectRTCP($0, length: protected) }
        }
    }

    @Test func keyMaterialIsRandomRedactedAndLengthChecked() throws {
        let a = SRTPKeyMaterial.generate(for: .aesCM128HMACSHA1_80)
        let b = SRTPKeyMaterial.generate(for: .aesCM128HMACSHA1_80)
        #expect(a != b)
        #expect(a.description == "SRTPKeyMaterial(AES_CM_128_HMAC_SHA1_80, <redacted>)")
        #expect(throws: SRTPError.badKeyLength(expectedBytes: 28, actualBytes: 30)) {
            _ = try SRTPKeyMaterial(suite: .aeadAES128GCM, keyAndSalt: [UInt8](repeating: 0, count: 30))
        }
    }

    /// A peer (authenticated: it has the key) that sends every packet from a new SSRC, 2,000 of
    /// them, RTP and RTCP, while its real source keeps sending: the inbound context keeps at most
    /// `maximumInboundStreams` streams, so what libsrtp keeps stays bounded (before: a stream of
    /// a dozen blocks for each SSRC, never freed), and the real source is never disturbed.
    @Test(.enabled(if: CAllocationCounter_isAvailable() == 1, "the allocation counter does not run under a sanitizer"))
    func aPeerCyclingSSRCsCannotGrowTheInboundContext() throws {
        let key = SRTPKeyMaterial.generate(for: .aesCM128HMACSHA1_80)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        let real: UInt32 = 0x1234_5678
        var kept = 0
        var realSequence: UInt16 = 65_000  // the real source's numbering wraps on the way
        for index in 0..<2_000 {
            let ssrc = 0x4000_0000 + UInt32(index)
            for (source, sequence) in [(ssrc, UInt16(truncatingIfNeeded: index)), (real, realSequence)] {
                var (buffer, length) = rtpPacket(sequence: sequence, payload: [UInt8](repeating: 3, count: 40), ssrc: source)
                let protected = try buffer.withUnsafeMutableBytes { try tx.protectRTP($0, length: length) }
                CAllocationCounter_begin()
                let plain = try buffer.withUnsafeMutableBytes { try rx.unprotectRTP($0, length: protected) }
                let allocations = CAllocationCounter_end()
                kept += allocations - CAllocationCounter_frees()
                #expect(plain == length)
            }
            realSequence &+= 1
            // An RTCP packet from yet another SSRC.
            var rtcp = [UInt8](repeating: 0, count: 8 + SRTPContext.maximumRTCPTrailerBytes)
            rtcp[0] = 0x80
            rtcp[1] = 201
            rtcp[3] = 1
            let rtcpSSRC = 0x7000_0000 + UInt32(index)
            for byte in 0..<4 { rtcp[4 + byte] = UInt8(truncatingIfNeeded: rtcpSSRC >> (24 - 8 * UInt32(byte))) }
            let protected = try rtcp.withUnsafeMutableBytes { try tx.protectRTCP($0, length: 8) }
            CAllocationCounter_begin()
            let plain = try rtcp.withUnsafeMutableBytes { try rx.unprotectRTCP($0, length: protected) }
            let allocations = CAllocationCounter_end()
            kept += allocations - CAllocationCounter_frees()
            #expect(plain == 8)
            #expect(rx.inboundStreamCount <= SRTPContext.maximumInboundStreams)
        }
        // Each stream libsrtp makes is a dozen blocks or so: eight of them, not 4,000.
        #expect(kept < 30 * SRTPContext.maximumInboundStreams, "\(kept) blocks kept")
        #expect(rx.streamsEvicted >= 4_000 - SRTPContext.maximumInboundStreams)
    }

    /// A stream pushed out by others comes back as a new one (its replay window starts over);
    /// the one in use is never pushed out.
    @Test func anEvictedSourceIsTakenInAgain() throws {
        let key = SRTPKeyMaterial.generate(for: .aeadAES128GCM)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        func send(_ ssrc: UInt32, _ sequence: UInt16) throws -> Int {
            var (buffer, length) = rtpPacket(sequence: sequence, payload: [1, 2, 3], ssrc: ssrc)
            let protected = try buffer.withUnsafeMutableBytes { try tx.protectRTP($0, length: length) }
            return try buffer.withUnsafeMutableBytes { try rx.unprotectRTP($0, length: protected) }
        }
        _ = try send(1, 10)
        for other in UInt32(100)..<UInt32(100 + SRTPContext.maximumInboundStreams) { _ = try send(other, 1) }
        #expect(rx.streamsEvicted == 1 && rx.inboundStreamCount == SRTPContext.maximumInboundStreams)
        #expect(try send(1, 11) == 15)
    }
}
