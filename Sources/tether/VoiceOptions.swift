import ArgumentParser
import Tether

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

    @Option(help: "Voice processing on the capture path: on, off, or auto (off for now: it is not yet tuned for double talk on devices).")
    var voiceProcessing: Mode = .auto

    @Option(help: "Voice-processing library: webrtc (WebRTC's AudioProcessing) or speex (speexdsp).")
    var voiceEngine: VoiceProcessingSettings.Engine = .webrtc

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

    /// The settings for a call (`auto` is off for now, as `CallConfiguration`'s automatic choice).
    var settings: VoiceProcessingSettings {
        let chosen = VoiceProcessingSettings(
            engine: voiceEngine, echoCancellation: aec, echoSuppression: echoSuppression.setting, noiseSuppression: ns,
            gainControl: agc, highPassFilter: hpf)
        switch voiceProcessing {
        case .on: return chosen
        case .off, .auto: return .off
        }
    }
}

extension VoiceProcessingSettings.Engine: ExpressibleByArgument {}
