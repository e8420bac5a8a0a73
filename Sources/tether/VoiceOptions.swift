import ArgumentParser
import Tether
import TetherAudio

/// The voice-processing options of `tether call` and `tether demo`.
struct VoiceOptions: ParsableArguments {
    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case auto, on, off
    }

    enum Suppression: String, ExpressibleByArgument, CaseIterable {
        case low, moderate, high
        var setting: VoiceProcessingSettings.EchoSuppression {
            switch self {
            case .low: .low
            case .moderate: .moderate
            case .high: .high
            }
        }
    }

    @Option(help: "Voice processing on the capture path: on, off, or auto (on for a sound device, off for files and test signals).")
    var voiceProcessing: Mode = .auto

    @Option(
        help: "Echo canceller and voice-processing library: tether (Tether's own canceller with WebRTC's NS, AGC and HPF), webrtc (WebRTC's AudioProcessing) or speex (speexdsp).")
    var voiceEngine: VoiceProcessingSettings.Engine = VoiceProcessingSettings().engine

    @Flag(inversion: .prefixedNo, help: "Acoustic echo cancellation against what is played.")
    var aec = true

    @Option(help: "How hard the echo canceller suppresses residual echo: low, moderate, high.")
    var echoSuppression: Suppression = .moderate

    @Flag(inversion: .prefixedNo, help: "Noise suppression.")
    var ns = true

    @Flag(inversion: .prefixedNo, help: "Automatic gain control.")
    var agc = true

    @Flag(inversion: .prefixedNo, help: "High-pass filter.")
    var hpf = true

    /// The settings for a call capturing from `source` (`auto`: the stages chosen for a sound
    /// device, nothing for a file or a test signal, as `CallConfiguration`'s automatic choice).
    func settings(for source: any AudioSource) -> VoiceProcessingSettings {
        let chosen = VoiceProcessingSettings(
            engine: voiceEngine, echoCancellation: aec, echoSuppression: echoSuppression.setting, noiseSuppression: ns,
            gainControl: agc, highPassFilter: hpf)
        switch voiceProcessing {
        case .on: return chosen
        case .off: return .off
        case .auto: return chosen.forCapture(from: source)
        }
    }
}

extension VoiceProcessingSettings.Engine: ExpressibleByArgument {}
