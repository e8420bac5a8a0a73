import Glibc

/// A deterministic, speech-like test signal: eight harmonics of a pitch gliding around a base
/// frequency, gated at a syllable rate, with a quiet gap now and then (rhythm and gaps differ
/// with the pitch). Voice processing treats it
/// as speech (its noise suppressor does not remove it, its echo canceller sees a wideband
/// signal), unlike a steady sine. Used by the voice-processing tests and `tether-bench voice`.
public struct SyntheticVoice: Sendable {
    public let pitchHertz: Double
    public let sampleRateHertz: Double
    public let peak: Double
    private var phase = 0.0
    private var t = 0.0

    /// - Parameters:
    ///   - pitchHertz: the base pitch (e.g. 120 for a low voice, 220 for a high one).
    ///   - peak: the amplitude of the sum, in sample units.
    public init(pitchHertz: Double = 140, sampleRateHertz: Double = 48_000, peak: Double = 6000) {
        self.pitchHertz = pitchHertz
        self.sampleRateHertz = sampleRateHertz
        self.peak = peak
    }

    /// The next `count` samples into `buffer`.
    public mutating func render(into buffer: UnsafeMutableBufferPointer<Int16>) {
        for i in buffer.indices {
            buffer[i] = Int16(max(-32_767, min(32_767, next())))
        }
    }

    public mutating func next() -> Double {
        let glide = pitchHertz + 0.28 * pitchHertz * sin(2 * Double.pi * 0.7 * t)
        phase += 2 * Double.pi * glide / sampleRateHertz
        if phase > 2 * Double.pi * 1000 { phase -= 2 * Double.pi * 1000 }
        // Syllables at 3.5–4.5 Hz and a pause of 0.3 s every 2.3–2.9 s, both set by the pitch, so
        // two voices (a near and a far talker) do not share a rhythm, as real talkers do not.
        let syllables = 3.1 + pitchHertz / 250
        let breath = 2.2 + pitchHertz / 300
        var envelope = 0.55 + 0.45 * sin(2 * Double.pi * syllables * t + pitchHertz)
        if (t + pitchHertz / 97).truncatingRemainder(dividingBy: breath) > breath - 0.3 { envelope = 0 }
        var v = 0.0
        for h in 1...8 { v += sin(Double(h) * phase) / Double(h) }
        t += 1 / sampleRateHertz
        return peak * envelope * v / 2.7
    }
}
