import Foundation
import TetherAudio

/// The simulated rooms of `tether-bench echo`: the same espeak-ng speech as the device rig, run
/// through `VoiceProcessor` (echo cancellation alone, the delay estimator finding the delay) in
/// a room computed sample by sample, so every canceller hears exactly the same thing and the run
/// takes seconds, not minutes.
///
/// Timeline (48 kHz, simulated): the far end talks throughout (its clip looped). 0–8 s far end
/// alone (cut 1–2 s and 2–8 s); 8 s: the near talker speaks its clip, 5 dB over the echo at the
/// microphone (the rig's levels); 2 s later it speaks again at the echo's level; 2 s later the
/// echo's delay grows by 100 ms (cut 2–4 s after); 4 s later its gain drops 6 dB (cut 2–4 s
/// after). The near end without echo: the same talker through another processor with nothing
/// played.
enum EchoSimulation {
    struct Room: Sendable {
        var name: String
        var delayMilliseconds: Int
        /// The impulse response after the delay: (lag in samples, gain).
        var taps: [(lag: Int, gain: Double)]
        /// The microphone's noise floor (white, RMS in dBFS), in the microphone and in the near
        /// end without echo alike (the same samples); nil: digital silence between words.
        var noiseDBFS: Double? = nil
    }

    /// A pure delay (what module-loopback makes of the rig); a room: four reflections and a
    /// 250 ms diffuse tail 30 dB under the direct sound, decaying 60 dB over its length; and the
    /// same room with a microphone's noise floor, white at −65 dBFS (a quiet room).
    ///
    /// The first two, like the rig, have digital silence between the talker's words, and PESQ-WB
    /// weighs whatever echo is left there heavily. Measured on Tether's canceller (c866b03):
    /// white noise at −70 dBFS added afterwards to both recordings (double talk, no echo) of the
    /// pure delay moved double talk from −0.45 to −0.31 (talker 5 dB over the echo) and from −0.82
    /// to −0.59 (equal level) against no echo. In the noisy room the echo cut cannot exceed the
    /// echo's height over the noise.
    static let rooms: [Room] = [
        Room(name: "delay 90 ms", delayMilliseconds: 90, taps: [(0, 0.5)]),
        Room(
            name: "room 60 ms + tail", delayMilliseconds: 60,
            taps: [(0, 0.4), (96, 0.2), (240, 0.1), (500, 0.05)] + diffuseTail(direct: 0.4, milliseconds: 250)),
        Room(
            name: "room + noise −65", delayMilliseconds: 60,
            taps: [(0, 0.4), (96, 0.2), (240, 0.1), (500, 0.05)] + diffuseTail(direct: 0.4, milliseconds: 250), noiseDBFS: -65),
    ]

    /// Deterministic white noise, `count` samples at `dBFS` RMS (a sum of four uniform draws:
    /// near enough Gaussian for a microphone's hiss).
    static func noise(count: Int, dBFS: Double) -> [Double] {
        var state: UInt32 = 0x9E37_79B9
        let rms = 32_768 * pow(10, dBFS / 20)
        // Four uniforms on [−1, 1] sum to variance 4/3.
        let scale = rms / (4.0 / 3).squareRoot()
        return (0..<count).map { _ in
            var sum = 0.0
            for _ in 0..<4 { sum += uniform(&state) }
            return sum * scale
        }
    }

    /// The next xorshift32 draw from `state`, uniform on [−1, 1].
    static func uniform(_ state: inout UInt32) -> Double {
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        return Double(state) / Double(UInt32.max) * 2 - 1
    }

    /// Deterministic random taps every 1 ms from 10 ms to `milliseconds`, starting 30 dB under
    /// `direct` and falling 60 dB over the span.
    static func diffuseTail(direct: Double, milliseconds: Int) -> [(lag: Int, gain: Double)] {
        var state: UInt32 = 2_463_534_242
        var taps: [(lag: Int, gain: Double)] = []
        for ms in stride(from: 10, to: milliseconds, by: 1) {
            let sign = uniform(&state)
            let decay = pow(10, -3 * Double(ms) / Double(milliseconds))  // −60 dB over the span
            taps.append((ms * 48, direct * 0.0316 * decay * sign))
        }
        return taps
    }

    struct Result: Sendable {
        var cutEarlyDB = 0.0
        var cutSteadyDB = 0.0
        var cutAfterDelayDB = 0.0
        var cutAfterGainDB = 0.0
        var measuredDelays: [Int] = []
        /// Recordings to score: double talk and no echo, at the rig's levels and at equal level.
        var doubleTalk = "", nearAlone = "", doubleTalkEqual = "", nearAloneEqual = ""
    }

    /// One canceller in one room.
    static func run(settings: VoiceProcessingSettings, room: Room, far: [Int16], near: [Int16], directory: String, label: String) throws -> Result {
        guard let processor = VoiceProcessor(settings: settings), let reference = VoiceProcessor(settings: settings) else {
            throw EchoSimulationError.refused(label)
        }
        let chunk = 480
        let delayStep = 100 * 48
        let rigTalk = 8 * 48_000
        let equalTalk = rigTalk + near.count + 2 * 48_000
        let delayChange = equalTalk + near.count + 2 * 48_000
        let gainChange = delayChange + 4 * 48_000
        let total = (gainChange + 4 * 48_000 + chunk - 1) / chunk * chunk
        // The echo alone first, to set the talker's levels against it.
        var echo = [Double](repeating: 0, count: total)
        for t in 0..<total {
            let delay = room.delayMilliseconds * 48 + (t >= delayChange ? delayStep : 0)
            let gain = t >= gainChange ? 0.5 : 1.0
            var sum = 0.0
            for tap in room.taps where t - delay - tap.lag >= 0 {
                sum += tap.gain * Double(far[(t - delay - tap.lag) % far.count])
            }
            echo[t] = gain * sum
        }
        func rms(_ range: Range<Int>, _ signal: (Int) -> Double) -> Double {
            var sum = 0.0
            for t in range { sum += signal(t) * signal(t) }
            return (sum / Double(range.count)).squareRoot()
        }
        let echoLevel = rms(rigTalk..<(rigTalk + near.count)) { echo[$0] }
        let nearLevel = rms(0..<near.count) { Double(near[$0]) }
        let rigGain = echoLevel * pow(10, 5.0 / 20) / nearLevel
        let equalGain = echoLevel / nearLevel
        let hiss = room.noiseDBFS.map { noise(count: total, dBFS: $0) }
        func talker(_ t: Int) -> Double {
            if t >= rigTalk && t < rigTalk + near.count { return rigGain * Double(near[t - rigTalk]) }
            if t >= equalTalk && t < equalTalk + near.count { return equalGain * Double(near[t - equalTalk]) }
            return 0
        }
        var microphone = [Int16](repeating: 0, count: total)
        var output = [Int16](repeating: 0, count: total)
        var alone = [Int16](repeating: 0, count: total)
        var played = [Int16](repeating: 0, count: chunk)
        let silence = [Int16](repeating: 0, count: chunk)
        var mic = [Int16](repeating: 0, count: chunk)
        var talk = [Int16](repeating: 0, count: chunk)
        var result = Result()
        for start in stride(from: 0, to: total, by: chunk) {
            for i in 0..<chunk {
                let t = start + i
                played[i] = far[t % far.count]
                let floor = hiss?[t] ?? 0
                mic[i] = Int16(max(-32_767, min(32_767, (echo[t] + talker(t) + floor).rounded())))
                talk[i] = Int16(max(-32_767, min(32_767, (talker(t) + floor).rounded())))
                microphone[t] = mic[i]
            }
            played.withUnsafeBufferPointer { processor.analyzePlayback($0) }
            mic.withUnsafeMutableBufferPointer { processor.processCapture($0, timing: CaptureTiming(expectedEchoDelayMilliseconds: 40)) }
            silence.withUnsafeBufferPointer { reference.analyzePlayback($0) }
            talk.withUnsafeMutableBufferPointer { reference.processCapture($0, timing: CaptureTiming(expectedEchoDelayMilliseconds: 40)) }
            for i in 0..<chunk {
                output[start + i] = mic[i]
                alone[start + i] = talk[i]
            }
            if start + chunk == rigTalk || start + chunk == delayChange + 4 * 48_000 || start + chunk == total,
                let measured = processor.statistics().measuredEchoDelayMilliseconds
            {
                result.measuredDelays.append(measured)
            }
        }
        func cut(_ from: Int, _ to: Int) -> Double {
            var m = 0.0
            var o = 0.0
            for t in from..<to {
                m += Double(microphone[t]) * Double(microphone[t])
                o += Double(output[t]) * Double(output[t])
            }
            return 10 * log10(max(m, 1) / max(o, 1))
        }
        result.cutEarlyDB = cut(48_000, 2 * 48_000)
        result.cutSteadyDB = cut(2 * 48_000, 8 * 48_000)
        result.cutAfterDelayDB = cut(delayChange + 2 * 48_000, delayChange + 4 * 48_000)
        result.cutAfterGainDB = cut(gainChange + 2 * 48_000, gainChange + 4 * 48_000)
        let slug = "sim-\(label)-\(room.name.filter { $0.isLetter || $0.isNumber })"
        result.doubleTalk = "\(directory)/\(slug)-double-talk.wav"
        result.nearAlone = "\(directory)/\(slug)-near-alone.wav"
        result.doubleTalkEqual = "\(directory)/\(slug)-double-talk-equal.wav"
        result.nearAloneEqual = "\(directory)/\(slug)-near-alone-equal.wav"
        let rigRange = rigTalk..<(rigTalk + near.count + 24_000)
        let equalRange = equalTalk..<(equalTalk + near.count + 24_000)
        try WAVFile.write(samples: Array(output[rigRange]), sampleRateHertz: 48_000, to: result.doubleTalk)
        try WAVFile.write(samples: Array(alone[rigRange]), sampleRateHertz: 48_000, to: result.nearAlone)
        try WAVFile.write(samples: Array(output[equalRange]), sampleRateHertz: 48_000, to: result.doubleTalkEqual)
        try WAVFile.write(samples: Array(alone[equalRange]), sampleRateHertz: 48_000, to: result.nearAloneEqual)
        return result
    }
}

enum EchoSimulationError: Error, CustomStringConvertible {
    case refused(String)

    var description: String {
        switch self {
        case .refused(let label): "VoiceProcessor refused the settings of \(label)"
        }
    }
}
