import Foundation
import Testing

@testable import TetherCodec

/// Encodes `frames` frames of a voiced, speech-like test signal (harmonics of a gliding pitch,
/// gated at a syllable rate, so the encoder's voice activity detector treats it as speech) and
/// returns the packets.
private func encodedPackets(_ configuration: OpusConfiguration, frames: Int = 100) throws -> [[UInt8]] {
    let encoder = try OpusEncoder(configuration: configuration)
    let n = configuration.samplesPerFrame
    var packets: [[UInt8]] = []
    var buffer = [UInt8](repeating: 0, count: 1500)
    var phase = 0.0
    for f in 0..<frames {
        var pcm = [Int16](repeating: 0, count: n)
        for i in 0..<n {
            let t = Double(f * n + i) / 48_000
            let pitch = 140 + 40 * sin(2 * .pi * 0.7 * t)
            phase += 2 * .pi * pitch / 48_000
            let envelope = 0.55 + 0.45 * sin(2 * .pi * 4 * t)
            var v = 0.0
            for h in 1...8 { v += sin(Double(h) * phase) / Double(h) }
            pcm[i] = Int16(max(-32767, min(32767, 6000 * envelope * v)))
        }
        let length = try pcm.withUnsafeBufferPointer { p in
            try buffer.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) }
        }
        packets.append(Array(buffer[0..<length]))
    }
    return packets
}

private func hasLBRR(_ packet: [UInt8]) -> Bool {
    packet.withUnsafeBytes { OpusPacket.hasLBRR($0) }
}

@Suite("Opus packet framing and LBRR detection")
struct OpusPacketTests {
    @Test(arguments: [10, 20, 40, 60])
    func anEncoderWithFECSendsLBRRAndOneWithoutNever(frameMilliseconds: Int) throws {
        var withFEC = OpusConfiguration(frameDurationMilliseconds: frameMilliseconds)
        withFEC.inBandFEC = true
        withFEC.expectedLossPercent = 20
        var withoutFEC = withFEC
        withoutFEC.inBandFEC = false
        let frames = 2000 / frameMilliseconds
        let on = try encodedPackets(withFEC, frames: frames)
        let off = try encodedPackets(withoutFEC, frames: frames)
        // After the first frames (nothing before them to protect), a voiced signal gets LBRR in
        // most packets (not in the envelope's quietest dips); with FEC off, in none.
        let onCount = on.dropFirst(5).filter(hasLBRR).count
        #expect(Double(onCount) >= 0.6 * Double(on.count - 5), "\(onCount) of \(on.count - 5) packets with LBRR")
        #expect(off.filter(hasLBRR).isEmpty, "\(off.filter(hasLBRR).count) packets with LBRR although FEC was off")
        // The mode is SILK or hybrid at this bitrate (LBRR lives in the SILK layer).
        let mode = on[10].withUnsafeBytes { OpusPacket.mode(of: $0) }
        #expect(mode == .silk || mode == .hybrid)
    }

    /// The duration read from the TOC agrees with libopus's own count, for every frame size the
    /// encoder makes; an empty packet and a code-3 packet without its count byte have none.
    @Test(arguments: [10, 20, 40, 60])
    func theSampleCountIsTheEncodersFrame(frameMilliseconds: Int) throws {
        for bitrate in [12_000, 32_000, 96_000] {  // SILK, hybrid and CELT modes
            var configuration = OpusConfiguration(frameDurationMilliseconds: frameMilliseconds)
            configuration.bitrateBitsPerSecond = bitrate
            for packet in try encodedPackets(configuration, frames: 5) {
                #expect(packet.withUnsafeBytes { OpusPacket.sampleCount(of: $0) } == frameMilliseconds * 48)
            }
        }
        #expect([UInt8]().withUnsafeBytes { OpusPacket.sampleCount(of: $0) } == nil)
        #expect([UInt8]([0x03]).withUnsafeBytes { OpusPacket.sampleCount(of: $0) } == nil)
        #expect([UInt8]([0x03, 0x00]).withUnsafeBytes { OpusPacket.sampleCount(of: $0) } == nil)  // zero frames
        #expect([UInt8]([0xFB, 0x31]).withUnsafeBytes { OpusPacket.sampleCount(of: $0) } == nil)  // 49 × 20 ms
    }

    /// libopus itself says which packets hold LBRR: rebuilding a lost frame from a packet without
    /// it is plain concealment (the same samples), from a packet with it is not.
    @Test func theFlagAgreesWithWhatTheDecoderDoesWithThePacket() throws {
        var configuration = OpusConfiguration()
        configuration.inBandFEC = true
        configuration.expectedLossPercent = 20
        let packets = try encodedPackets(configuration, frames: 60)
        var with = 0
        var without = 0
        for k in stride(from: 2, to: packets.count, by: 3) {
            // Two decoders in the same state: packets 0 ..< k − 1 decoded, packet k − 1 lost.
            let rebuilt = try OpusDecoder()
            let concealed = try OpusDecoder()
            var a = [Int16](repeating: 0, count: 960)
            var b = [Int16](repeating: 0, count: 960)
            for packet in packets[0..<(k - 1)] {
                _ = try packet.withUnsafeBytes { p in try a.withUnsafeMutableBufferPointer { try rebuilt.decode(p, into: $0) } }
                _ = try packet.withUnsafeBytes { p in try b.withUnsafeMutableBufferPointer { try concealed.decode(p, into: $0) } }
            }
            _ = try packets[k].withUnsafeBytes { p in try a.withUnsafeMutableBufferPointer { try rebuilt.decodeFEC(from: p, into: $0) } }
            _ = try b.withUnsafeMutableBufferPointer { try concealed.conceal(into: $0) }
            let lbrr = hasLBRR(packets[k])
            #expect(lbrr == (a != b), "packet \(k): flag \(lbrr), FEC decode \(a == b ? "equals" : "differs from") concealment")
            if lbrr { with += 1 } else { without += 1 }
        }
        #expect(with > 0)
    }

    @Test func celtOnlyPacketsNeverCarryLBRR() {
        // Configuration 31 (CELT fullband 20 ms), code 0, with every other bit set.
        let packet: [UInt8] = [31 << 3, 0xFF, 0xFF, 0xFF]
        #expect(!hasLBRR(packet))
        #expect(packet.withUnsafeBytes { OpusPacket.mode(of: $0) } == .celt)
    }

    @Test func leadingFlagBitsAreReadPerChannelAndFrameCount() {
        // SILK wideband 20 ms (config 9), mono, code 0: VAD then LBRR.
        #expect(hasLBRR([9 << 3, 0b0100_0000]))
        #expect(!hasLBRR([9 << 3, 0b1000_0000]))
        // SILK wideband 60 ms (config 11): three VAD flags, then LBRR.
        #expect(hasLBRR([11 << 3, 0b0001_0000]))
        #expect(!hasLBRR([11 << 3, 0b1110_0000]))
        // Stereo 20 ms: mid VAD, mid LBRR, side VAD, side LBRR.
        #expect(hasLBRR([9 << 3 | 0x04, 0b0001_0000]))
        #expect(!hasLBRR([9 << 3 | 0x04, 0b1010_0000]))
        // An empty frame (DTX) carries nothing.
        #expect(!hasLBRR([9 << 3]))
    }

    @Test func framingOfEveryCodeFindsTheFirstFrame() {
        func first(_ bytes: [UInt8]) -> Range<Int>? { bytes.withUnsafeBytes { OpusPacket.firstFrame(of: $0) } }
        #expect(first([0x48, 1, 2, 3]) == 1..<4)  // code 0
        #expect(first([0x49, 1, 2, 3, 4]) == 1..<3)  // code 1: two frames of 2
        #expect(first([0x49, 1, 2, 3]) == nil)  // code 1 with an odd length
        #expect(first([0x4A, 2, 7, 7, 9]) == 2..<4)  // code 2: first frame 2 bytes
        #expect(first([0x4A, 5, 7]) == nil)  // code 2: length past the end
        #expect(first([0x4A, 252]) == nil)  // code 2: two-byte length cut short
        #expect(first([0x4B, 0x03, 1, 2, 3, 4, 5, 6]) == 2..<4)  // code 3 CBR: 3 frames of 2
        #expect(first([0x4B, 0x03, 1, 2, 3, 4, 5]) == nil)  // code 3 CBR: not divisible
        #expect(first([0x4B, 0x82, 1, 9, 8, 7]) == 3..<4)  // code 3 VBR: 2 frames, first 1 byte
        #expect(first([0x4B, 0x42, 2, 1, 2, 3, 4, 0, 0]) == 3..<5)  // code 3 CBR with 2 padding bytes
        #expect(first([0x4B, 0x41, 255, 1]) == nil)  // padding longer than the packet
        #expect(first([0x4B, 0x00, 1]) == nil)  // code 3 with zero frames
        #expect(first([0x4B]) == nil)
        #expect(first([]) == nil)
    }

    @Test func arbitraryBytesNeverTrap() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15  // a fixed seed: the same inputs every run
        func nextByte() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 56)
        }
        for length in 0..<64 {
            for _ in 0..<200 {
                let bytes = (0..<length).map { _ in nextByte() }
                _ = bytes.withUnsafeBytes { (OpusPacket.hasLBRR($0), OpusPacket.firstFrame(of: $0)) }
            }
        }
    }
}
