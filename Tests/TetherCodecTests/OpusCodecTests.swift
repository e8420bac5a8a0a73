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

    /// The maximum bandwidth is the encoder's, and a call can change it: a voice-level tone with
    /// a 10 kHz partial is coded wideband (SILK, nothing above 8 kHz) by default, wider than that
    /// once fullband is allowed, and wideband again when it is taken back.
    @Test func theMaximumBandwidthBoundsEveryPacket() throws {
        let encoder = try OpusEncoder(configuration: OpusConfiguration())
        #expect(encoder.configuration.maximumBandwidth == .wideband)
        var packet = [UInt8](repeating: 0, count: 1500)
        var frame = 0
        func widestOf(_ frames: Int) throws -> OpusConfiguration.Bandwidth {
            var widest = OpusConfiguration.Bandwidth.narrowband
            for _ in 0..<frames {
                let low = sine(300, amplitude: 0.2, count: 960, start: frame * 960)
                let high = sine(10_000, amplitude: 0.1, count: 960, start: frame * 960)
                let pcm = zip(low, high).map { $0 &+ $1 }
                frame += 1
                let len = try pcm.withUnsafeBufferPointer { p in
                    try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) }
                }
                let band = try #require(packet.withUnsafeBytes { OpusPacket.bandwidth(of: UnsafeRawBufferPointer(rebasing: $0[0..<len])) })
                widest = max(widest, band)
            }
            return widest
        }
        #expect(try widestOf(50) == .wideband)
        var wider = encoder.configuration
        wider.maximumBandwidth = .fullband
        try encoder.apply(wider)
        #expect(try widestOf(50) > .wideband)
        wider.maximumBandwidth = .wideband
        try encoder.apply(wider)
        _ = try widestOf(5)  // libopus narrows over a few frames
        #expect(try widestOf(50) == .wideband)
    }

    /// RFC 7587's rates map to the widest band they carry; RFC 6716's TOC table reads back.
    @Test func bandwidthsFromRatesAndFromTOCBytes() {
        #expect(OpusConfiguration.Bandwidth(sampleRateHertz: 48_000) == .fullband)
        #expect(OpusConfiguration.Bandwidth(sampleRateHertz: 44_100) == .superWideband)
        #expect(OpusConfiguration.Bandwidth(sampleRateHertz: 16_000) == .wideband)
        #expect(OpusConfiguration.Bandwidth(sampleRateHertz: 15_999) == .mediumband)
        #expect(OpusConfiguration.Bandwidth(sampleRateHertz: 8_000) == .narrowband)
        #expect(OpusConfiguration.Bandwidth(sampleRateHertz: 0) == .narrowband)
        let expected: [(UInt8, OpusConfiguration.Bandwidth)] = [
            (0, .narrowband), (4, .mediumband), (11, .wideband), (12, .superWideband), (15, .fullband),
            (16, .narrowband), (20, .wideband), (27, .superWideband), (31, .fullband),
        ]
        for (configuration, band) in expected {
            let toc: [UInt8] = [configuration << 3, 0]
            #expect(toc.withUnsafeBytes { OpusPacket.bandwidth(of: $0) } == band)
        }
        #expect([UInt8]().withUnsafeBytes { OpusPacket.bandwidth(of: $0) } == nil)
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

    /// A peer that sends 10 ms packets into our 20 ms frames: each frame is the packet's 10 ms
    /// and 10 ms of concealment, never the rest of an earlier frame left in the buffer.
    @Test func aShortPacketFillsItsFrameWithConcealmentNotStaleAudio() throws {
        let encoder = try OpusEncoder(configuration: OpusConfiguration(frameDurationMilliseconds: 10))
        let decoder = try OpusDecoder()
        var packet = [UInt8](repeating: 0, count: 1500)
        var frame = [Int16](repeating: 0, count: 960)
        for f in 0..<20 {
            let pcm = sine(440, amplitude: 0.25, count: 480, start: f * 480)
            let length = try pcm.withUnsafeBufferPointer { p in
                try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) }
            }
            // What the frame held before: a marker no decoder produces in this signal.
            for i in frame.indices { frame[i] = 31_000 }
            let got = try packet.withUnsafeBytes { pk in
                try frame.withUnsafeMutableBufferPointer {
                    try decoder.decodeFrame(UnsafeRawBufferPointer(rebasing: pk[0..<length]), into: $0, frameSamples: 960)
                }
            }
            #expect(got == 960)
            #expect(!frame[480...].contains(31_000), "frame \(f) kept samples of the last one")
        }
    }

    @Test func concealmentProducesAFrameThatFadesRatherThanRepeatingForever() throws {
        let config = OpusConfiguration()
        let encoder = try OpusEncoder(configuration: config)
        let decoder = try OpusDecoder()
        var packet = [UInt8](repeating: 0, count: 1500)
        var out = [Int16](repeating: 0, count: 960)
        for f in 0..<25 {
            let pcm = sine(440, amplitude: 0.3, count: 960, start: f * 960)
            let len = try pcm.withUnsafeBufferPointer { p in
                try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) }
            }
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
            let len = try pcm.withUnsafeBufferPointer { p in
                try packet.withUnsafeMutableBytes { try encoder.encode(p.baseAddress!, into: $0) }
            }
            packets.append(Array(packet[0..<len]))
        }
        var out = [Int16](repeating: 0, count: 960)
        for f in 0..<20 {
            _ = try packets[f].withUnsafeBytes { pk in try out.withUnsafeMutableBufferPointer { try decoder.decode(pk, into: $0) } }
        }
        // Packet 20 is lost: rebuild it from packet 21's FEC.
        let got = try packets[21].withUnsafeBytes { pk in
            try out.withUnsafeMutableBufferPointer { try decoder.decodeFEC(from: pk, into: $0) }
        }
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
