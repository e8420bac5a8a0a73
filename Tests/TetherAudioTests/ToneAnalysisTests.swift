import Testing
import TetherAudio

@Suite("ToneAnalysis")
struct ToneAnalysisTests {
    @Test("finds the frequency of a 1 s tone", arguments: [
        (440.0, 48_000), (1_000.0, 48_000), (3_150.7, 48_000), (97.3, 16_000), (7_000.0, 16_000), (19_000.0, 44_100),
    ])
    func dominantFrequencyOfTone(frequencyHertz: Double, rateHertz: Int) throws {
        let tone = sine(frequencyHertz: frequencyHertz, amplitude: 10_000, sampleRateHertz: rateHertz, range: 0..<rateHertz)
        let measured = try #require(ToneAnalysis.dominantFrequencyHertz(tone, sampleRateHertz: rateHertz))
        #expect(abs(measured - frequencyHertz) <= 0.5)
    }

    @Test("picks the strongest tone in noise and honours the search range")
    func strongestToneAndSearchRange() throws {
        let weak = sine(frequencyHertz: 440, amplitude: 3_000, sampleRateHertz: 48_000, range: 0..<48_000)
        let strong = sine(frequencyHertz: 2_500, amplitude: 9_000, sampleRateHertz: 48_000, range: 0..<48_000)
        let hiss = noise(count: 48_000, amplitude: 2_000)
        let mix = (0..<48_000).map { weak[$0] &+ strong[$0] &+ hiss[$0] }
        let strongest = try #require(ToneAnalysis.dominantFrequencyHertz(mix, sampleRateHertz: 48_000))
        #expect(abs(strongest - 2_500) <= 2)
        let inRange = try #require(ToneAnalysis.dominantFrequencyHertz(mix, sampleRateHertz: 48_000, searchRange: 100...1_000))
        #expect(abs(inRange - 440) <= 2)
    }

    @Test("silence and tiny inputs have no dominant frequency")
    func silenceHasNoFrequency() {
        #expect(ToneAnalysis.dominantFrequencyHertz([Int16](repeating: 0, count: 4_800), sampleRateHertz: 48_000) == nil)
        #expect(ToneAnalysis.dominantFrequencyHertz([1, 2, 3], sampleRateHertz: 48_000) == nil)
    }

    @Test("RMS level reads a sine's peak level in dBFS")
    func rmsLevel() {
        let fullScale = sine(frequencyHertz: 1_000, amplitude: 32_767, sampleRateHertz: 48_000, range: 0..<48_000)
        #expect(abs(ToneAnalysis.rmsDBFS(fullScale)) <= 0.01)
        let minus20 = sine(frequencyHertz: 1_000, amplitude: 3_276.8, sampleRateHertz: 48_000, range: 0..<48_000)
        #expect(abs(ToneAnalysis.rmsDBFS(minus20) - -20) <= 0.01)
        // A square wave of half full scale: RMS 16 384, i.e. 20·log10(0.5·√2) ≈ −3.01 dBFS.
        let square = (0..<4_800).map { $0 % 48 < 24 ? Int16(16_384) : -16_384 }
        #expect(abs(ToneAnalysis.rmsDBFS(square) - -3.0103) <= 0.01)
        #expect(ToneAnalysis.rmsDBFS([Int16](repeating: 0, count: 10)) == -.infinity)
        #expect(ToneAnalysis.rmsDBFS([Int16]()) == -.infinity)
    }

    @Test("Goertzel power is the squared amplitude at the tone and near zero elsewhere")
    func goertzelPower() {
        let tone = sine(frequencyHertz: 1_000, amplitude: 16_384, sampleRateHertz: 48_000, range: 0..<4_800)
        let atTone = ToneAnalysis.goertzelPower(tone, frequencyHertz: 1_000, sampleRateHertz: 48_000)
        #expect(abs(atTone - 0.25) <= 0.005)
        let elsewhere = ToneAnalysis.goertzelPower(tone, frequencyHertz: 3_000, sampleRateHertz: 48_000)
        #expect(elsewhere <= 1e-4)
    }

    @Test("cross-correlation finds the lag of a delayed, scaled copy", arguments: [137, -50, 0])
    func crossCorrelationLag(delaySamples: Int) {
        let sent = noise(count: 4_800)
        let received: [Int16] = delaySamples >= 0
            ? Array(repeating: 0, count: delaySamples) + sent.map { $0 / 2 }
            : Array(sent.dropFirst(-delaySamples).map { $0 / 2 })
        let result = ToneAnalysis.normalizedCrossCorrelation(sent, received, maxLagSamples: 400)
        #expect(result.lag == delaySamples)
        #expect(result.correlation > 0.99)
    }

    @Test("unrelated signals correlate weakly")
    func unrelatedSignalsCorrelateWeakly() {
        let a = noise(count: 4_800, seed: 1)
        let b = noise(count: 4_800, seed: 99)
        let result = ToneAnalysis.normalizedCrossCorrelation(a, b, maxLagSamples: 100)
        #expect(result.correlation < 0.2)
    }
}
