import Testing
import TetherCodec

@Suite("Concealment fades into comfort noise")
struct ConcealmentFadeTests {
    /// Runs `fade.concealed` on a frame of constant `value` and returns the result.
    func conceal(_ fade: inout ConcealmentFade, value: Int16 = 10_000, count: Int = 960) -> [Int16] {
        var frame = [Int16](repeating: value, count: count)
        frame.withUnsafeMutableBufferPointer { fade.concealed($0) }
        return frame
    }

    @Test func shortLossesPlayTheDecodersConcealmentUnchanged() {
        var fade = ConcealmentFade()
        for _ in 0..<3 { #expect(conceal(&fade).allSatisfy { $0 == 10_000 }) }
    }

    @Test func longLossesFadeSmoothlyAndEndInLowLevelNoise() {
        var fade = ConcealmentFade()
        for _ in 0..<3 { _ = conceal(&fade) }
        let first = conceal(&fade)  // the fade's first frame: 1 → 0.8
        #expect(abs(Int(first[0]) - 10_000) < 100)
        #expect(abs(Int(first[959]) - 8_000) < 100)
        var previousEnd = Int(first[959])
        for _ in 0..<4 {
            let frame = conceal(&fade)
            #expect(abs(Int(frame[0]) - previousEnd) < 100)  // continuous across frames
            previousEnd = Int(frame[959])
        }
        #expect(abs(previousEnd) <= 33)  // faded out
        let noise = conceal(&fade)
        let later = conceal(&fade)
        #expect(noise.allSatisfy { abs(Int($0)) <= 33 })
        #expect(noise.contains { $0 != 0 })  // comfort noise, not dead silence
        #expect(noise != later)  // not a repeating buffer
        let mean = Double(noise.reduce(0) { $0 + Int($1) }) / Double(noise.count)
        #expect(abs(mean) < 5)  // no DC
    }

    @Test func aDecodedFrameEndsTheRun() {
        var fade = ConcealmentFade()
        for _ in 0..<10 { _ = conceal(&fade) }
        fade.decoded()
        #expect(fade.run == 0)
        #expect(conceal(&fade).allSatisfy { $0 == 10_000 })
    }
}
