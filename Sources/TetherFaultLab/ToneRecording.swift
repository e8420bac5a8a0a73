import Foundation

/// What a listener recorded of the peer's test tone, cut into 20 ms blocks, each judged "good"
/// (the tone, at its level) or not (silence, concealment fading out, comfort noise, a stale or
/// garbled frame).
///
/// The recording is a `tether call --output wav:PATH` file: mono 16-bit PCM at 48 kHz behind the
/// canonical 44-byte header, written in real time by the playback thread, so a sample's index is
/// its time since playback started. The header's sizes are not trusted (a killed process never
/// patches them).
struct ToneRecording: Sendable {
    /// Block length in samples (20 ms at 48 kHz).
    static let blockSamples = 960
    static let sampleRateHertz = 48_000
    static var blockSeconds: Double { Double(blockSamples) / Double(sampleRateHertz) }

    /// For each block: the tone is there at its level.
    let good: [Bool]

    /// A stretch without good audio, in seconds from the start of the recording.
    struct Gap: Sendable, Equatable {
        var start: Double
        var end: Double
        var seconds: Double { end - start }
    }

    /// Reads `path` and judges every block against a tone of `frequencyHertz`.
    init?(path: String, frequencyHertz: Double) {
        guard let data = FileManager.default.contents(atPath: path), data.count > 44 else { return nil }
        let samples: [Int16] = data.withUnsafeBytes { raw in
            let body = UnsafeRawBufferPointer(rebasing: raw[44...])
            return (0..<(body.count / 2)).map { Int16(littleEndian: body.loadUnaligned(fromByteOffset: $0 * 2, as: Int16.self)) }
        }
        let blocks = samples.count / Self.blockSamples
        var levels = [Double](repeating: -200, count: blocks)
        var toneShares = [Double](repeating: 0, count: blocks)
        let step = 2 * Double.pi * frequencyHertz / Double(Self.sampleRateHertz)
        let (stepCos, stepSin) = (cos(step), sin(step))
        for b in 0..<blocks {
            var energy = 0.0
            var c = 0.0
            var s = 0.0
            // A phasor turned by one sample's angle per sample (the phase origin does not matter
            // to the fit), so no trigonometry per sample.
            var pc = 1.0
            var ps = 0.0
            for i in 0..<Self.blockSamples {
                let x = Double(samples[b * Self.blockSamples + i]) / 32_768
                energy += x * x
                c += x * pc
                s += x * ps
                (pc, ps) = (pc * stepCos - ps * stepSin, pc * stepSin + ps * stepCos)
            }
            let n = Double(Self.blockSamples)
            let meanSquare = energy / n
            guard meanSquare > 1e-9 else { continue }
            // The tone's share of the block's power (least-squares fit at the tone's frequency).
            let tonePower = 2 * (c * c + s * s) / (n * n)
            toneShares[b] = tonePower / meanSquare
            levels[b] = 10 * log10(meanSquare)
        }
        // The tone's level in this recording: the median of the blocks that are clearly the tone.
        let clear = zip(levels, toneShares).filter { $0.1 > 0.9 }.map(\.0).sorted()
        guard !clear.isEmpty else {
            good = [Bool](repeating: false, count: blocks)
            return
        }
        let reference = clear[clear.count / 2]
        good = (0..<blocks).map { toneShares[$0] > 0.8 && abs(levels[$0] - reference) < 4 }
    }

    /// Seconds of the recording.
    var durationSeconds: Double { Double(good.count) * Self.blockSeconds }

    /// The first good block's start, in seconds, or nil.
    var firstGoodSeconds: Double? { good.firstIndex(of: true).map { Double($0) * Self.blockSeconds } }

    /// Every run of at least `minimumSeconds` without good audio after the first good block (the
    /// stretch before media first arrives is not a gap). The run after the last good block, to
    /// the end of the recording, counts too: audio that never came back is the longest gap.
    func gaps(minimumSeconds: Double = 0.06) -> [Gap] {
        guard let first = good.firstIndex(of: true) else { return [] }
        let last = good.count - 1
        var out: [Gap] = []
        var index = first
        while index <= last {
            if good[index] {
                index += 1
                continue
            }
            let start = index
            while index <= last && !good[index] { index += 1 }
            let gap = Gap(start: Double(start) * Self.blockSeconds, end: Double(index) * Self.blockSeconds)
            if gap.seconds >= minimumSeconds { out.append(gap) }
        }
        return out
    }

    /// Seconds of good audio in [from, to) (recording time).
    func goodSeconds(from: Double, to: Double) -> Double {
        let a = max(0, Int(from / Self.blockSeconds))
        let b = min(good.count, Int(to / Self.blockSeconds))
        guard a < b else { return 0 }
        return Double(good[a..<b].filter { $0 }.count) * Self.blockSeconds
    }
}
