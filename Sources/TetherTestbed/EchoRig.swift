import Foundation
import Tether
import TetherAudio
import TetherRealtime

// The pieces of an acoustic echo path in the private PulseAudio daemon of
// scripts/with-test-audio.sh, shared by the echo-cancellation tests and `tether-bench echo`:
// what a call plays on `room_spk` comes back into the microphone feed `room_mic`
// (module-loopback), a talker speaks into `room_mic` (`SinkPlayer`), and any source can be
// recorded. The room has its own pair of sinks, so its echo reaches no other test's devices.

/// Runs `pactl` against the daemon in `PULSE_SERVER`.
@discardableResult
public func pactl(_ arguments: String...) -> (status: Int32, output: String) {
    let result = ChildProcess.run(["pactl"] + arguments)
    return (result.status, result.output)
}

/// An echo path: what is played on `room_spk` comes back into `room_mic`, `latencyMilliseconds` later
/// (module-loopback's buffering on top of the devices'), at `volumePercent` (PulseAudio's cubic
/// volume scale: 40 % is −24 dB). The loopback's rate adjustment is off (`adjust_time=0`): it
/// resamples to hold its latency, and a resampler wandering around 1.0 is an echo path no linear
/// canceller follows (measured: 14–23 dB cut with it, 40 without; a room does not resample).
public struct EchoPath: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    public let module: String
    /// The loopback's sink input (pactl's index): the echo entering `room_mic`.
    public let sinkInput: String

    public init(latencyMilliseconds: Int, volumePercent: Int) throws {
        let loaded = pactl(
            "load-module", "module-loopback", "source=room_spk.monitor", "sink=room_mic", "latency_msec=\(latencyMilliseconds)",
            "source_dont_move=true", "sink_dont_move=true", "adjust_time=0")
        guard loaded.status == 0 else { throw Failure(description: "module-loopback: \(loaded.output)") }
        module = loaded.output.trimmingCharacters(in: .whitespacesAndNewlines)
        // Its sink input (the echo into `mic`; it appears once the loopback runs) at the echo's level.
        for _ in 0..<100 {
            // `pactl list sink-inputs`: blocks "Sink Input #N" … "Owner Module: M".
            var input: Substring?
            for line in pactl("list", "sink-inputs").output.split(separator: "\n") {
                let text = line.trimmingCharacters(in: .whitespaces)
                if text.hasPrefix("Sink Input #") { input = line.split(separator: "#").last }
                if text == "Owner Module: \(module)", let input {
                    sinkInput = String(input)
                    pactl("set-sink-input-volume", sinkInput, "\(volumePercent)%")
                    return
                }
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        pactl("unload-module", module)
        throw Failure(description: "module-loopback \(module) has no sink input after 5 s")
    }

    /// The echo's volume changed on the same path (an echo path whose gain changes).
    public func setVolume(percent: Int) { pactl("set-sink-input-volume", sinkInput, "\(percent)%") }

    public func remove() { pactl("unload-module", module) }
}

/// Records a PulseAudio source (for example `spk.monitor` or `mic.monitor`) into a WAV file.
public final class MonitorRecorder: Sendable {
    let capture: PulseAudioCapture
    let file: WAVFileSink
    public let path: String

    public init(source name: String, path: String) throws {
        self.path = path
        capture = PulseAudioCapture(deviceName: name, periodMilliseconds: 20)
        file = WAVFileSink(path: path)
        let endpoint = AudioEndpoint(ringCapacityFrames: 16)
        try file.start(endpoint)
        try capture.start(endpoint)
    }

    /// Stops and returns the last `seconds` of what was recorded.
    public func finish(lastSeconds: Double) throws -> [Int16] {
        capture.stop()
        file.stop()
        let (samples, rate) = try WAVFile.read(path: path)
        return Array(samples.suffix(Int(Double(rate) * lastSeconds)))
    }
}

/// The samples a `WAVFileSink` has written so far (its header says 0 until it stops): whatever
/// follows the canonical 44-byte header.
public func samplesWrittenSoFar(_ path: String) throws -> [Int16] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    guard data.count > 44 else { return [] }
    return data.dropFirst(44).withUnsafeBytes { raw in
        (0..<(raw.count / 2)).map { Int16(littleEndian: raw.loadUnaligned(fromByteOffset: 2 * $0, as: Int16.self)) }
    }
}

/// `seconds` of `SyntheticVoice` written as a 48 kHz WAV file; returns the path.
@discardableResult
public func writeSyntheticVoice(to path: String, pitchHertz: Double, peak: Double, seconds: Int = 20) throws -> String {
    var voice = SyntheticVoice(pitchHertz: pitchHertz, peak: peak)
    var samples = [Int16](repeating: 0, count: seconds * 48_000)
    samples.withUnsafeMutableBufferPointer { voice.render(into: $0) }
    try WAVFile.write(samples: samples, sampleRateHertz: 48_000, to: path)
    return path
}
