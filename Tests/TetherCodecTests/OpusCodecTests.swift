import Foundation
import Testing

@testable import TetherCodec

/// A 48 kHz sine of `frequencyHertz` at `amplitude` (0…1), `count` samples from sample `start`.
func sine(_ frequencyHertz: Double, amplitude: Double, count: Int, start: Int = 0) -> [Int16] {
    (0..<count).map { i in Int16(amplitude * 32767 * sin(2 * .pi * frequencyHertz * Double(start + i) / 48_000)) }
}

func rms(_ s: ArraySlice<Int16>) -> Double {
    guard !s.isEmpty else { return 0 }
    return (s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(s.count)).squareRoot()
}

@Suite("Opus encoder and decoder")
struct OpusCodecTests {
    @Test(arguments: [10, 20, 40, 60])
    func encodeDecodeKeepsFrameSizeAndEnergy(frameMilliseconds: Int) throws {
        let config = OpusConfiguration(frameDurationMilliseconds: frameMilliseconds)
        let encoder = try OpusEncoder(configuration: config)
        let decoder = try OpusDecoder()
        let n = config.samplesPerFrame
        #expect(n == 48 * frameMilliseconds)
        var packet = [UInt8](repeating: 0, count: 1500)
        var out = [Int16](repeating: 0, count: 5760)
        var decoded: [Int16] = []
        for f in 0..<(1000 / frameMilliseconds) {
            let pcm = sine(440, amplitude: 0.25, count: n, start: f * n)
            let len = try pcm.withUnsafeBufferPointer { p in
                try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) }
            }
            #expect(len > 2 && len < 400)
            let got = try packet.withUnsafeBytes { pk in
                try out.withUnsafeMutableBufferPointer { try decoder.decode(UnsafeRawBufferPointer(rebasing: pk[0..<len]), into: $0) }
            }
            #expect(got == n)
            decoded += out[0..<got]
        }
        // After the first 100 ms, the decoded level is close to the input level (0.25 × 32767 / √2).
        let level = rms(decoded[4800...])
        let expected = 0.25 * 32767 / 2.0.squareRoot()
        #expect(abs(20 * log10(level / expected)) < 1.5)
    }

    /// The application is the encoder's: VoIP (the default) and audio look 6.5 ms ahead, restricted
    /// low delay (CELT only) 2.5 ms; each codes a tone that decodes at its level.
    @Test(arguments: OpusConfiguration.Application.allCases)
    func theApplicationChosenIsTheEncoders(application: OpusConfiguration.Application) throws {
        var config = OpusConfiguration()
        config.application = application
        let encoder = try OpusEncoder(configuration: config)
        #expect(encoder.lookaheadSamples == (application == .restrictedLowDelay ? 120 : 312))
        let decoder = try OpusDecoder()
        var packet = [UInt8](repeating: 0, count: 1500)
        var out = [Int16](repeating: 0, count: 960)
        var decoded: [Int16] = []
        for f in 0..<25 {
            let pcm = sine(440, amplitude: 0.25, count: 960, start: f * 960)
            let len = try pcm.withUnsafeBufferPointer { p in
                try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) }
            }
            _ = try packet.withUnsafeBytes { pk in
                try out.withUnsafeMutableBufferPointer { try decoder.decode(UnsafeRawBufferPointer(rebasing: pk[0..<len]), into: $0) }
            }
            decoded += out
        }
        #expect(abs(20 * log10(rms(decoded[4800...]) / (0.25 * 32767 / 2.0.squareRoot()))) < 1.5)
    }

    @Test func concealmentProducesAFrameThatFadesRatherThanRepeatingForever() throws {
        let config = OpusConfiguration()
        let encoder = try OpusEncoder(configuration: config)
        let decoder = try OpusDecoder()
        var packet = [UInt8](repeating: 0, count: 1500)
        var out = [Int16](repeating: 0, count: 960)
        for f in 0..<25 {
            let pcm = sine(440, amplitude: 0.3, count: 960, start: f * 960)
            let len = try pcm.withUnsafeBufferPointer { p in try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) } }
            _ = try packet.withUnsafeBytes { pk in
                try out.withUnsafeMutableBufferPointer { try decoder.decode(UnsafeRawBufferPointer(rebasing: pk[0..<len]), into: $0) }
            }
        }
        let before = rms(out[...])
        var levels: [Double] = []
        for _ in 0..<15 {
            let got = try out.withUnsafeMutableBufferPointer { try decoder.conceal(into: $0) }
            #expect(got == 960)
            levels.append(rms(out[...]))
        }
        #expect(levels[0] > before * 0.3)  // first concealed frame continues the sound
        #expect(levels[14] < levels[0] * 0.5)  // a long loss fades
    }

    @Test func fecDecodeRebuildsALostFrameFromTheNextPacket() throws {
        let config = OpusConfiguration(inBandFEC: true, expectedLossPercent: 20)
        let encoder = try OpusEncoder(configuration: config)
        let decoder = try OpusDecoder()
        var packets: [[UInt8]] = []
        for f in 0..<30 {
            var packet = [UInt8](repeating: 0, count: 1500)
            let pcm = sine(300, amplitude: 0.3, count: 960, start: f * 960)
            let len = try pcm.withUnsafeBufferPointer { p in try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) } }
            packets.append(Array(packet[0..<len]))
        }
        var out = [Int16](repeating: 0, count: 960)
        for f in 0..<20 {
            _ = try packets[f].withUnsafeBytes { pk in try out.withUnsafeMutableBufferPointer { try decoder.decode(pk, into: $0) } }
        }
        // Packet 20 is lost: rebuild it from packet 21's FEC.
        let got = try packets[21].withUnsafeBytes { pk in try out.withUnsafeMutableBufferPointer { try decoder.decodeFEC(from: pk, into: $0) } }
        #expect(got == 960)
        let level = rms(out[...])
        let expected = 0.3 * 32767 / 2.0.squareRoot()
        #expect(level > expected * 0.5 && level < expected * 1.5)
    }

    @Test func invalidConfigurationsAreRejected() {
        #expect(OpusConfiguration(frameDurationMilliseconds: 30).validationProblem != nil)
        #expect(OpusConfiguration(bitrateBitsPerSecond: 1000).validationProblem != nil)
        #expect(OpusConfiguration(complexity: 11).validationProblem != nil)
        #expect(OpusConfiguration(expectedLossPercent: 101).validationProblem != nil)
        #expect(OpusConfiguration().validationProblem == nil)
        #expect(throws: OpusCodecError.self) { _ = try OpusEncoder(configuration: OpusConfiguration(frameDurationMilliseconds: 30)) }
    }

    @Test func malformedPacketIsATypedError() throws {
        let decoder = try OpusDecoder()
        var out = [Int16](repeating: 0, count: 960)
        // TOC code 3 (arbitrary frame count) with a frame count byte of 0 is invalid.
        let bad: [UInt8] = [0x03, 0x00]
        #expect(throws: OpusCodecError.self) {
            _ = try bad.withUnsafeBytes { pk in try out.withUnsafeMutableBufferPointer { try decoder.decode(pk, into: $0) } }
        }
    }
}
