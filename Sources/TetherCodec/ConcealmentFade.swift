/// Turns a long run of concealed frames into comfort noise instead of a repeating buzz.
///
/// Opus's concealment extrapolates the last pitch period; over a long loss or a DTX pause that
/// becomes a tone-like buzz. The first `fullFrames` concealed frames of a run are played as the
/// decoder made them (short losses sound best that way); over the next `fadeFrames` the signal
/// cross-fades, sample by sample, into low-level comfort noise, which then continues until a
/// frame is decoded again.
///
/// The noise is white, uniform in ±`comfortNoisePeak` (−60 dBFS by default), from a 32-bit
/// linear congruential generator: no allocation, no state beyond a few integers.
public struct ConcealmentFade: Sendable, Equatable {
    /// Concealed frames of a run played unchanged.
    public var fullFrames: Int
    /// Frames over which the concealment fades into comfort noise.
    public var fadeFrames: Int
    /// Peak of the comfort noise in sample units (33 ≈ −60 dBFS).
    public var comfortNoisePeak: Int

    /// Concealed frames in the current run.
    public private(set) var run = 0
    private var noiseState: UInt32 = 0x2545_F491

    public init(fullFrames: Int = 3, fadeFrames: Int = 5, comfortNoisePeak: Int = 33) {
        self.fullFrames = max(0, fullFrames)
        self.fadeFrames = max(1, fadeFrames)
        self.comfortNoisePeak = max(0, min(32_767, comfortNoisePeak))
    }

    /// A frame was decoded from a packet (or rebuilt from FEC): the run is over.
    public mutating func decoded() { run = 0 }

    /// Processes one concealed frame in place.
    /// - Note: Never allocates.
    public mutating func concealed(_ frame: UnsafeMutableBufferPointer<Int16>) {
        run += 1
        guard run > fullFrames, !frame.isEmpty else { return }
        let step = run - fullFrames  // 1, 2, …
        let count = Double(frame.count)
        let startGain = max(0, 1 - Double(step - 1) / Double(fadeFrames))
        let endGain = max(0, 1 - Double(step) / Double(fadeFrames))
        for i in 0..<frame.count {
            let gain = startGain + (endGain - startGain) * Double(i + 1) / count
            let mixed = Double(frame[i]) * gain + Double(nextNoise()) * (1 - gain)
            frame[i] = Int16(max(-32_768, min(32_767, mixed.rounded())))
        }
    }

    private mutating func nextNoise() -> Int {
        noiseState = noiseState &* 1_664_525 &+ 1_013_904_223
        guard comfortNoisePeak > 0 else { return 0 }
        // The top 16 bits, mapped onto −peak…peak.
        let unit = Int(noiseState >> 16)  // 0…65535
        return (unit * (2 * comfortNoisePeak + 1)) / 65_536 - comfortNoisePeak
    }
}
