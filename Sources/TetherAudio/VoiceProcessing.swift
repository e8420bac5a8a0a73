import CSpeexDSP
import CTetherVoice

/// What runs on the capture path before the encoder: acoustic echo cancellation against what is
/// played, noise suppression, automatic gain control, a high-pass filter.
public struct VoiceProcessingSettings: Sendable, Equatable {
    /// The library doing it.
    public enum Engine: String, Sendable, Equatable, CaseIterable {
        /// WebRTC's AudioProcessing module (Debian's libwebrtc-audio-processing 0.3, what
        /// PulseAudio's echo-cancel module uses): the full-band echo canceller with its 128 ms
        /// extended filter and its own delay estimation, noise suppression, adaptive digital AGC,
        /// high-pass filter.
        case webrtc
        /// speexdsp 1.2: the MDF echo canceller (a 200 ms filter) and its preprocessor (noise
        /// suppression, residual echo suppression, AGC). The far end is aligned by the delay we
        /// give it, as it estimates none itself.
        case speex
    }

    /// How hard WebRTC's canceller suppresses what echo its filter leaves (its non-linear
    /// processor). Measured on the simulated room of VoiceProcessingTests (with the delay
    /// estimator): every level cuts far-end echo alone by 41–42 dB from 2 s on; in double talk
    /// (echo about 12 dB under the talker, AEC alone) the near-end talker loses 1.2 dB at `low`,
    /// 2.0 at `moderate`, 3.7 at `high`; in the first second after the echo delay jumps from 40
    /// to 140 ms the echo is cut by 12, 21 and 40 dB, in the second by 39, 42 and 43. `moderate`,
    /// the middle of both, is the default.
    public enum EchoSuppression: Int, Sendable, Equatable, CaseIterable {
        case low = 0, moderate = 1, high = 2
    }

    public var engine: Engine
    public var echoCancellation: Bool
    public var echoSuppression: EchoSuppression
    public var noiseSuppression: Bool
    public var gainControl: Bool
    public var highPassFilter: Bool

    public init(
        engine: Engine = .webrtc, echoCancellation: Bool = true, echoSuppression: EchoSuppression = .moderate,
        noiseSuppression: Bool = true, gainControl: Bool = true, highPassFilter: Bool = true
    ) {
        self.engine = engine
        self.echoCancellation = echoCancellation
        self.echoSuppression = echoSuppression
        self.noiseSuppression = noiseSuppression
        self.gainControl = gainControl
        self.highPassFilter = highPassFilter
    }

    /// Nothing runs.
    public static let off = VoiceProcessingSettings(echoCancellation: false, noiseSuppression: false, gainControl: false, highPassFilter: false)

    /// Whether any stage runs.
    public var isEnabled: Bool { echoCancellation || noiseSuppression || gainControl || highPassFilter }

    /// The stages that run, for statistics and logs: e.g. "webrtc: AEC NS AGC HPF", or "off".
    public var summary: String {
        guard isEnabled else { return "off" }
        var stages: [String] = []
        if echoCancellation { stages.append("AEC") }
        if noiseSuppression { stages.append("NS") }
        if gainControl { stages.append("AGC") }
        if highPassFilter && engine == .webrtc { stages.append("HPF") }
        return engine.rawValue + ": " + stages.joined(separator: " ")
    }
}

/// The figures of the voice processing, where the library gives them.
public struct VoiceProcessingStatistics: Sendable, Equatable, BitwiseCopyable {
    /// 10 ms chunks processed on the capture side and analysed on the playback side.
    public var captureChunks = 0
    public var playbackChunks = 0
    /// Echo return loss enhancement: how much the canceller removed (dB, recent average); nil
    /// when not known (speex gives none, WebRTC none before the echo is measured).
    public var echoReturnLossEnhancementDecibels: Double? = nil
    /// Echo return loss: how much quieter the echo is than what is played (dB).
    public var echoReturnLossDecibels: Double? = nil
    /// The echo delay the canceller estimates (ms), and its spread.
    public var echoDelayMilliseconds: Int? = nil
    public var echoDelaySpreadMilliseconds: Int? = nil
    /// The delay given to the canceller, in ms: the echo delay measured by correlating what is
    /// played with what is captured (`EchoDelayEstimator`), or until it is found what the
    /// devices' buffering suggests.
    public var reportedDelayMilliseconds = 0
    /// The echo delay measured by that correlation (nil until found), and how well it correlated.
    public var measuredEchoDelayMilliseconds: Int? = nil
    public var measuredEchoDelayCorrelation = 0.0
    /// Noise suppression's speech probability for the last chunk (0…1).
    public var speechProbability: Double? = nil
    /// Whether the canceller hears echo now.
    public var echoPresent = false

    public init() {}
}

/// Voice processing of one call's capture stream (mono, 48 kHz): the playback side hands it what
/// is played (`analyzePlayback`), the capture side has each captured frame processed in place
/// (`processCapture`), both in whole 10 ms chunks. Everything is allocated in `init`; the
/// per-frame calls neither allocate nor wait (the libraries' own state only), and must come from
/// one thread (the media loop's).
public final class VoiceProcessor: @unchecked Sendable {
    public let settings: VoiceProcessingSettings
    public let sampleRateHertz: Int
    /// Samples per 10 ms chunk.
    public let chunkSamples: Int

    private var webrtc: OpaquePointer?
    private var speexEcho: OpaquePointer?
    private var speexPreprocess: OpaquePointer?
    /// speex: the far end's recent history (a ring of `historySamples`) to align with the
    /// capture by the reported delay, and the scratch chunks.
    private let history: UnsafeMutableBufferPointer<Int16>
    private var historyWritten = 0
    private let farChunk: UnsafeMutableBufferPointer<Int16>
    private let outChunk: UnsafeMutableBufferPointer<Int16>
    private var figures = VoiceProcessingStatistics()
    /// Measures the echo delay from the two envelopes (the canceller converges only near it).
    private var delayEstimator = EchoDelayEstimator()
    /// WebRTC: the far end is handed to the canceller this many samples late, so that the delay
    /// it must find stays near `alignedDelayMilliseconds` whatever the devices add (it adapts
    /// to a changed delay only within its own small range, and not to what it is told later).
    private var referenceDelaySamples = 0
    private static let alignedDelayMilliseconds = 40

    /// Creates the processor (allocates the libraries' state); nil when `settings` runs nothing
    /// or the library refuses the format.
    public init?(settings: VoiceProcessingSettings, sampleRateHertz: Int = 48_000) {
        guard settings.isEnabled, [8000, 16_000, 32_000, 48_000].contains(sampleRateHertz) else { return nil }
        self.settings = settings
        self.sampleRateHertz = sampleRateHertz
        chunkSamples = sampleRateHertz / 100
        history = .allocate(capacity: sampleRateHertz)  // one second of far end
        history.initialize(repeating: 0)
        farChunk = .allocate(capacity: chunkSamples)
        farChunk.initialize(repeating: 0)
        outChunk = .allocate(capacity: chunkSamples)
        outChunk.initialize(repeating: 0)
        switch settings.engine {
        case .webrtc:
            let s = tether_apm_settings(
                echo_cancellation: settings.echoCancellation ? 1 : 0,
                echo_suppression: Int32(settings.echoSuppression.rawValue),
                noise_suppression: settings.noiseSuppression ? 2 : 0,
                gain_control: settings.gainControl ? 1 : 0, high_pass_filter: settings.highPassFilter ? 1 : 0)
            // A failure after every property is set releases the object: `deinit` frees the buffers.
            guard let apm = tether_apm_create(Int32(sampleRateHertz), s) else { return nil }
            webrtc = apm
        case .speex:
            if settings.echoCancellation {
                speexEcho = speex_echo_state_init(Int32(chunkSamples), Int32(sampleRateHertz / 5))  // 200 ms tail
                var rate = Int32(sampleRateHertz)
                _ = speex_echo_ctl(speexEcho, SPEEX_ECHO_SET_SAMPLING_RATE, &rate)
            }
            if settings.noiseSuppression || settings.gainControl || settings.echoCancellation {
                let pre = speex_preprocess_state_init(Int32(chunkSamples), Int32(sampleRateHertz))
                var on: Int32 = settings.noiseSuppression ? 1 : 0
                _ = speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_DENOISE, &on)
                var agc: Int32 = settings.gainControl ? 1 : 0
                _ = speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_AGC, &agc)
                if let echo = speexEcho {
                    _ = speex_preprocess_ctl(pre, SPEEX_PREPROCESS_SET_ECHO_STATE, UnsafeMutableRawPointer(echo))
                }
                speexPreprocess = pre
            }
        }
    }

    deinit {
        if let webrtc { tether_apm_destroy(webrtc) }
        if let speexEcho { speex_echo_state_destroy(speexEcho) }
        if let speexPreprocess { speex_preprocess_state_destroy(speexPreprocess) }
        history.deallocate()
        farChunk.deallocate()
        outChunk.deallocate()
    }

    /// What is played now (any whole number of chunks): the echo canceller's reference.
    public func analyzePlayback(_ samples: UnsafeBufferPointer<Int16>) {
        var offset = 0
        while offset + chunkSamples <= samples.count {
            let chunk = samples.baseAddress! + offset
            if settings.echoCancellation { delayEstimator.farChunk(chunk, count: chunkSamples) }
            for i in 0..<chunkSamples {
                history[(historyWritten + i) % history.count] = chunk[i]
            }
            historyWritten += chunkSamples
            if let webrtc {
                if referenceDelaySamples == 0 {
                    _ = tether_apm_analyze_reverse(webrtc, chunk)
                } else {
                    copyHistory(endingSamplesAgo: referenceDelaySamples, into: farChunk)
                    _ = tether_apm_analyze_reverse(webrtc, farChunk.baseAddress!)
                }
            }
            figures.playbackChunks += 1
            offset += chunkSamples
        }
    }

    /// Processes captured audio in place (any whole number of chunks). `delayMilliseconds`: how
    /// long after its `analyzePlayback` a far-end sound reaches this capture (playback buffering,
    /// the acoustic path, capture buffering).
    public func processCapture(_ samples: UnsafeMutableBufferPointer<Int16>, delayMilliseconds: Int) {
        var offset = 0
        while offset + chunkSamples <= samples.count {
            let chunk = samples.baseAddress! + offset
            var delay = delayMilliseconds
            if settings.echoCancellation {
                delayEstimator.nearChunk(chunk, count: chunkSamples)
                if let measured = delayEstimator.delayChunks {
                    delay = measured * 10
                    if webrtc != nil {
                        // Hand the far end over late by all but the aligned delay (not for a
                        // delay the canceller handles as it is).
                        let extra = delay > 2 * Self.alignedDelayMilliseconds ? delay - Self.alignedDelayMilliseconds : 0
                        referenceDelaySamples = min(history.count - 2 * chunkSamples, extra * sampleRateHertz / 1000)
                        delay -= referenceDelaySamples * 1000 / sampleRateHertz
                    }
                }
            }
            figures.reportedDelayMilliseconds = delay
            if let webrtc {
                _ = tether_apm_process_capture(webrtc, chunk, Int32(delay))
            } else {
                processSpeex(chunk, delayMilliseconds: delay)
            }
            figures.captureChunks += 1
            offset += chunkSamples
        }
    }

    /// The far-end chunk that ended `ago` samples before the latest one handed over.
    private func copyHistory(endingSamplesAgo ago: Int, into out: UnsafeMutableBufferPointer<Int16>) {
        let start = historyWritten - ago - chunkSamples
        for i in 0..<chunkSamples {
            let index = start + i
            out[i] = index < 0 ? 0 : history[index % history.count]
        }
    }

    private func processSpeex(_ chunk: UnsafeMutablePointer<Int16>, delayMilliseconds: Int) {
        if let echo = speexEcho {
            // The far-end chunk whose echo this capture chunk holds: `delay` before now.
            copyHistory(endingSamplesAgo: min(history.count - 2 * chunkSamples, max(0, delayMilliseconds * sampleRateHertz / 1000)), into: farChunk)
            speex_echo_cancellation(echo, chunk, farChunk.baseAddress, outChunk.baseAddress)
            chunk.update(from: outChunk.baseAddress!, count: chunkSamples)
        }
        if let pre = speexPreprocess {
            _ = speex_preprocess_run(pre, chunk)
            var probability: Int32 = 0
            _ = speex_preprocess_ctl(pre, SPEEX_PREPROCESS_GET_PROB, &probability)
            figures.speechProbability = Double(probability) / 100
        }
    }

    /// The latest figures (reads the library's metrics: call it a few times a second, not per chunk).
    public func statistics() -> VoiceProcessingStatistics {
        var out = figures
        out.measuredEchoDelayMilliseconds = delayEstimator.delayChunks.map { $0 * 10 }
        out.measuredEchoDelayCorrelation = delayEstimator.correlation
        if let webrtc {
            var s = tether_apm_statistics()
            tether_apm_get_statistics(webrtc, &s)
            // −100 dB is the library's "not measured yet".
            if s.erle_valid != 0 && s.erle_db > -100 {
                out.echoReturnLossEnhancementDecibels = Double(s.erle_db)
                out.echoReturnLossDecibels = Double(s.erl_db)
            }
            if s.delay_valid != 0 && s.delay_median_ms >= 0 {
                out.echoDelayMilliseconds = Int(s.delay_median_ms)
                out.echoDelaySpreadMilliseconds = Int(s.delay_std_ms)
            }
            if settings.noiseSuppression { out.speechProbability = Double(s.speech_probability) }
            out.echoPresent = s.stream_has_echo != 0
        }
        return out
    }
}
