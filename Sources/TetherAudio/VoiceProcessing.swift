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
        /// Tether's own echo canceller (`EchoCanceller`: a 320 ms partitioned frequency-domain
        /// filter after the measured echo delay, and a residual echo suppressor that keeps the
        /// near talker in double talk), with WebRTC's noise suppression, gain control and
        /// high-pass filter after it.
        case tether
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

    /// These settings for a call capturing from `source`: as they are for a sound device, nothing
    /// for a file or a signal (`CallConfiguration`'s automatic choice).
    public func forCapture(from source: any AudioSource) -> VoiceProcessingSettings {
        source.isSoundDevice ? self : .off
    }

    /// WebRTC's AudioProcessing configured with these stages (noise suppression at its
    /// moderate level, adaptive digital gain control).
    package var webrtcSettings: tether_apm_settings {
        tether_apm_settings(
            echo_cancellation: echoCancellation && engine == .webrtc ? 1 : 0, echo_suppression: Int32(echoSuppression.rawValue),
            noise_suppression: noiseSuppression ? 2 : 0, gain_control: gainControl ? 1 : 0, high_pass_filter: highPassFilter ? 1 : 0)
    }

    /// The stages that run, for statistics and logs: e.g. "webrtc: AEC NS AGC HPF", or "off".
    public var summary: String {
        guard isEnabled else { return "off" }
        var stages: [String] = []
        if echoCancellation { stages.append("AEC") }
        if noiseSuppression { stages.append("NS") }
        if gainControl { stages.append("AGC") }
        if highPassFilter && engine != .speex { stages.append("HPF") }
        return engine.rawValue + ": " + stages.joined(separator: " ")
    }
}

/// The figures of the voice processing, where the library gives them.
public struct VoiceProcessingStatistics: Sendable, Equatable, BitwiseCopyable {
    /// 10 ms chunks processed on the capture side, and played on the playback side (the silence a
    /// device played where its ring ran dry included).
    public var captureChunks = 0
    public var playbackChunks = 0
    /// Echo return loss enhancement: how much the canceller removed (dB, recent average); nil
    /// when not known (speex gives none, WebRTC and Tether's own none before the echo is heard).
    /// Tether's own measures it over the blocks where the far end's echo is heard and the near
    /// end is not.
    public var echoReturnLossEnhancementDecibels: Double? = nil
    /// Echo return loss: how much quieter the echo is than what is played (dB).
    public var echoReturnLossDecibels: Double? = nil
    /// The echo delay the canceller estimates (ms), and its spread.
    public var echoDelayMilliseconds: Int? = nil
    public var echoDelaySpreadMilliseconds: Int? = nil
    /// The delay the canceller is told, in ms. The far end is handed to it shifted by the echo
    /// delay measured (or, until it is, the one expected): WebRTC is told an echo delay up to 120
    /// ms as it is and 40 ms for a longer one (the far end late by the rest); speex, 0 (aligned);
    /// Tether's own canceller gets the far end 40 ms ahead of the echo (its filter spans that and
    /// 280 ms more), so this is the delay less 40 ms.
    public var reportedDelayMilliseconds = 0
    /// The echo delay measured by correlating what is played with what is captured
    /// (`EchoDelayEstimator`): from a far-end sample leaving the playback ring to its echo
    /// entering the capture ring (the devices' buffering and the room); nil until found, and how
    /// well it correlated.
    public var measuredEchoDelayMilliseconds: Int? = nil
    public var measuredEchoDelayCorrelation = 0.0
    /// Noise suppression's speech probability for the last chunk (0…1).
    public var speechProbability: Double? = nil
    /// Whether the canceller hears echo now.
    public var echoPresent = false
    /// How many times WebRTC's canceller was started afresh because the far end handed to it
    /// moved (the echo delay measured jumped past what its own delay tracking follows).
    public var echoCancellerRestarts = 0
    /// How many times Tether's own canceller found the echo shifted by less than a 10 ms block
    /// (unseen by the devices' timing and the delay measured) and moved its response with it.
    public var echoPathShifts = 0

    public init() {}
}

/// Where a captured block sits in time against what is played, from the two rings' fill levels
/// at the moment it is processed (the media loop reads them; simulations pass zeros).
public struct CaptureTiming: Sendable, Equatable {
    /// Samples handed to `analyzePlayback` that the playback device has not taken yet.
    public var playbackQueuedSamples: Int
    /// Samples the capture device delivered after the block being processed.
    public var captureQueuedSamples: Int
    /// The echo delay to assume until it is measured (ms from a far-end sample leaving the
    /// playback ring to its echo entering the capture ring: the devices' buffering and the room).
    public var expectedEchoDelayMilliseconds: Int

    public init(playbackQueuedSamples: Int = 0, captureQueuedSamples: Int = 0, expectedEchoDelayMilliseconds: Int = 40) {
        self.playbackQueuedSamples = playbackQueuedSamples
        self.captureQueuedSamples = captureQueuedSamples
        self.expectedEchoDelayMilliseconds = expectedEchoDelayMilliseconds
    }
}

/// Voice processing of one call's capture stream (mono, 48 kHz): the playback side hands it what
/// is played (`analyzePlayback`), the capture side has each captured frame processed in place
/// (`processCapture`), both in whole 10 ms chunks. Everything is allocated in `init`; the
/// per-frame calls neither allocate nor wait (the libraries' own state only), and must come from
/// one thread (the media loop's).
///
/// The far end is not handed to the canceller as it is played but in lockstep with the capture,
/// one chunk before each capture chunk, picked from a history of what was played by sample
/// position: the playback position that was current when a capture sample was taken is the
/// number of samples the playback device has taken minus the number the capture device has
/// given (both counted from the rings), so the pairing does not depend on when the media loop
/// happens to run (under load it runs in bursts, and a canceller fed in bursts sees an echo
/// delay that wanders by tens of milliseconds). The echo delay from there (the devices' own
/// buffering and the room) is measured by `EchoDelayEstimator`; WebRTC's canceller is told an
/// echo delay up to `toldAsIsMilliseconds` as it is, and a longer one is shifted so that it
/// must find only `alignedDelayMilliseconds`.
public final class VoiceProcessor: @unchecked Sendable {
    public let settings: VoiceProcessingSettings
    public let sampleRateHertz: Int
    /// Samples per 10 ms chunk.
    public let chunkSamples: Int

    private var webrtc: OpaquePointer?
    private var speexEcho: OpaquePointer?
    private var speexPreprocess: OpaquePointer?
    private var canceller: EchoCanceller?
    /// The far end handed to `canceller`: the block before the aligned one, then that one.
    private let farWindow: UnsafeMutableBufferPointer<Int16>
    /// The echo delay and the playback offset (samples) the canceller's far end is aligned to.
    private var cancellerAlignment: (echoDelay: Int, offset: Int)?
    /// The scale last applied after WebRTC's gain control where Tether's canceller heard only
    /// echo (1 elsewhere).
    private var echoGainCap: Float = 1
    /// The far end's recent history (two seconds) by sample position, and the scratch chunks.
    private let history: UnsafeMutableBufferPointer<Int16>
    private var historyWritten = 0
    /// The playback device's count of the silence it played, as the last `analyzePlayback` took it.
    private var silenceTaken: Int?
    /// Capture samples processed so far (the position of the next capture sample).
    private var captureWritten = 0
    private let farChunk: UnsafeMutableBufferPointer<Int16>
    private let outChunk: UnsafeMutableBufferPointer<Int16>
    private var figures = VoiceProcessingStatistics()
    /// Measures the echo delay from the two envelopes (the canceller converges only near it).
    private var delayEstimator = EchoDelayEstimator()
    /// Playback position minus capture position (samples): a far sample at capture position
    /// `c + playbackOffset` was leaving the playback ring when capture sample `c` entered the
    /// capture ring. `playbackOffset` is held; `offsetAverage` follows the readings (which jump
    /// by device periods as either side moves) and moves it when it strays.
    private var playbackOffset: Int?
    private var offsetAverage = 0.0
    /// The delay WebRTC's canceller is told for a longer echo, the far end shifted to match
    /// (0.3 converges only within about 60–100 ms of the delay it is given, and follows a later
    /// change only within its own small range). speex is handed the far end aligned with its
    /// echo (measured: 7.8 dB cut aligned, 2.1 dB with the far end 20 ms early).
    private static let alignedDelayMilliseconds = 40
    /// Up to this the canceller is told the measured delay as it is: shifting the far end is a
    /// jump it must converge again after, once the estimator has found the delay (simulated
    /// room, the delay found after 1 s: told as it is, 85–130 ms echoes were cut 34 dB in the
    /// second second, shifted 4–13 dB; told as it is, 140 ms read 22–30 dB and 150 ms and longer
    /// under 16). The test devices' echo path measures 90–110 ms, on both sides of the old limit
    /// (80 ms): three of the four runs that measured 110 ms cut 14–16 dB over 2–4 s (the fourth
    /// 54), the runs at 90–100 ms 29–60.
    private static let toldAsIsMilliseconds = 120
    private static let earlyMarginMilliseconds = 20
    /// Once shifted, the far end stays shifted until the delay is this far under
    /// `toldAsIsMilliseconds`.
    private static let shiftHysteresisMilliseconds = 20
    /// How far (samples) the far end handed to WebRTC's canceller is moved against its echo:
    /// 0 while the delay is told as it is, the rest of the delay once it is shifted.
    private var webrtcFarShift: Int?
    /// A move of the far end handed to WebRTC's canceller larger than this starts the canceller
    /// afresh (`tether_apm_reset_echo_canceller`): what it learned sits at the wrong lag, and its
    /// own delay tracking (delay-agnostic mode) followed such a jump slowly or not at all —
    /// a device test saw 7–14 dB for 12 s after a 60 → 160 ms path change, where a fresh
    /// canceller cuts over 30 dB within 2 s. The estimator's 10 ms steps stay under it, and so
    /// does a reading wobbling across `toldAsIsMilliseconds` (`shiftHysteresisMilliseconds`).
    private static let restartOnShiftMilliseconds = 30
    /// Tether's canceller is handed the far end this much ahead of the echo delay measured: its
    /// filter then covers an echo that comes somewhat earlier than measured, and 280 ms after.
    private static let alignmentMarginMilliseconds = 40
    /// How far (blocks) the playback offset must move back from the one Tether's canceller is
    /// aligned to before it realigns (a move the other way realigns from one block): the echo
    /// then sits up to 30 ms later in the filter, whose span reaches 280 ms past it. Through the
    /// devices (`tether-bench echo`, the cut 2–4 s after the echo path changes / its gain drops
    /// 6 dB), realigning at every whole block read
    /// 1.0–40.6 / 18.6–34.3 dB, under 25 in 5 / 6 runs of 11; without the small realignments
    /// 33.8–43.5 / 29.1–35.0 dB in 11 runs (2 of them with this rule, 2 with the slack both ways,
    /// 4 realigning only across gaps, 3 never realigning).
    private static let realignSlackBlocks = 3

    /// Creates the processor (allocates the libraries' state); nil when `settings` runs nothing
    /// or the library refuses the format.
    public init?(settings: VoiceProcessingSettings, sampleRateHertz: Int = 48_000) {
        guard settings.isEnabled, [8000, 16_000, 32_000, 48_000].contains(sampleRateHertz) else { return nil }
        self.settings = settings
        self.sampleRateHertz = sampleRateHertz
        chunkSamples = sampleRateHertz / 100
        history = .allocate(capacity: 2 * sampleRateHertz)
        history.initialize(repeating: 0)
        farChunk = .allocate(capacity: chunkSamples)
        farChunk.initialize(repeating: 0)
        outChunk = .allocate(capacity: chunkSamples)
        outChunk.initialize(repeating: 0)
        farWindow = .allocate(capacity: 2 * chunkSamples)
        farWindow.initialize(repeating: 0)
        switch settings.engine {
        case .tether:
            if settings.echoCancellation { canceller = EchoCanceller(sampleRateHertz: sampleRateHertz) }
            if settings.noiseSuppression || settings.gainControl || settings.highPassFilter {
                guard let apm = tether_apm_create(Int32(sampleRateHertz), settings.webrtcSettings) else { return nil }
                webrtc = apm
            }
        case .webrtc:
            // A failure after every property is set releases the object: `deinit` frees the buffers.
            guard let apm = tether_apm_create(Int32(sampleRateHertz), settings.webrtcSettings) else { return nil }
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
        farWindow.deallocate()
    }

    /// What is played (any number of samples, in the order the playback device takes them): the
    /// echo canceller's reference.
    ///
    /// `silencePlayedSamples` is the device's count of the silence it played so far where the
    /// ring ran dry (`PlaybackDemand.silenceSamples`, read before these samples were queued): the
    /// silence since the last call is put in the reference before them, so that the reference
    /// stays what the device played. Left out, every underrun moves the echo later against the
    /// reference by what was missing — an echo path change for the canceller (the test devices,
    /// at a call's start: 125 ms in 5 s; the article gives what that cost).
    public func analyzePlayback(_ samples: UnsafeBufferPointer<Int16>, silencePlayedSamples: Int? = nil) {
        if let silencePlayedSamples {
            // The count from before this processor is not the reference's; one that went back
            // (another device's count) starts again from where it is. More than the history
            // (2 s) only clears it: the playback offset takes the rest as the jump it is.
            let gap = silencePlayedSamples &- (silenceTaken ?? silencePlayedSamples)
            silenceTaken = silencePlayedSamples
            if gap > 0 {
                let kept = min(gap, history.count)
                for i in 0..<kept { history[(historyWritten + i) % history.count] = 0 }
                historyWritten += kept
            }
        }
        for i in 0..<samples.count {
            history[(historyWritten + i) % history.count] = samples[i]
        }
        historyWritten += samples.count
        figures.playbackChunks = historyWritten / chunkSamples
    }

    /// Processes captured audio in place (any whole number of chunks), `timing` saying where it
    /// sits against what is played.
    public func processCapture(_ samples: UnsafeMutableBufferPointer<Int16>, timing: CaptureTiming) {
        let chunks = samples.count / chunkSamples
        guard chunks > 0 else { return }
        followPlaybackOffset(timing, blockSamples: chunks * chunkSamples)
        let offset = playbackOffset ?? 0
        for k in 0..<chunks {
            let chunk = samples.baseAddress! + k * chunkSamples
            // The far end that was leaving the playback ring as this chunk was captured.
            let alongside = captureWritten + offset
            var echoDelaySamples = timing.expectedEchoDelayMilliseconds * sampleRateHertz / 1000
            if settings.echoCancellation {
                copyHistory(from: alongside, into: farChunk)
                delayEstimator.farChunk(farChunk.baseAddress!, count: chunkSamples)
                delayEstimator.nearChunk(chunk, count: chunkSamples)
                if let measured = delayEstimator.delayChunks { echoDelaySamples = measured * chunkSamples }
            }
            if let canceller {
                processOwn(chunk, canceller: canceller, alongside: alongside, echoDelaySamples: echoDelaySamples, offset: offset)
            } else if let webrtc {
                // The canceller is told the echo delay as it is up to `toldAsIsMilliseconds`,
                // and the aligned delay for a longer one, the far end handed to it late by the
                // rest; never a far chunk not yet played.
                let aligned = Self.alignedDelayMilliseconds * sampleRateHertz / 1000
                // A reading wobbling across the limit would otherwise move the far end by about
                // 100 ms, and restart the canceller, at every wobble.
                let limit = Self.toldAsIsMilliseconds - ((webrtcFarShift ?? 0) > 0 ? Self.shiftHysteresisMilliseconds : 0)
                let shifted = echoDelaySamples > limit * sampleRateHertz / 1000
                let toTell = shifted ? aligned : echoDelaySamples
                // A shifted far end goes over 20 ms early: the envelopes' peak is broad, and on
                // the test devices under load the delay read 10 ms long now and then; an echo
                // later than the canceller expects stays within its filter, an earlier one not.
                let earlySamples = shifted ? Self.earlyMarginMilliseconds * sampleRateHertz / 1000 : 0
                let farShift = echoDelaySamples - toTell + earlySamples
                if let held = webrtcFarShift, abs(farShift - held) > Self.restartOnShiftMilliseconds * sampleRateHertz / 1000 {
                    // A failure leaves it as it was; the next move tries again.
                    if tether_apm_reset_echo_canceller(webrtc) == 1 { figures.echoCancellerRestarts += 1 }
                }
                webrtcFarShift = farShift
                let wanted = alongside - farShift
                let start = min(wanted, historyWritten - chunkSamples)
                copyHistory(from: start, into: farChunk)
                _ = tether_apm_analyze_reverse(webrtc, farChunk.baseAddress!)
                let told = (toTell - (wanted - start)) * 1000 / sampleRateHertz
                figures.reportedDelayMilliseconds = told
                _ = tether_apm_process_capture(webrtc, chunk, Int32(max(0, told)))
            } else {
                copyHistory(from: min(alongside - echoDelaySamples, historyWritten - chunkSamples), into: farChunk)
                figures.reportedDelayMilliseconds = 0
                processSpeex(chunk)
            }
            captureWritten += chunkSamples
            figures.captureChunks += 1
        }
    }

    /// Tether's canceller on one chunk (then WebRTC's other stages, when they run).
    ///
    /// Its far end moves only by whole blocks, and only when it must, for each move costs the
    /// filter part of what it learned: it goes over `alignmentMarginMilliseconds` ahead of an
    /// alignment delay that follows the measured echo delay only when that leaves the band from
    /// 30 ms under to 60 ms over it (the estimator's 10 ms steps and its wobble between two lags
    /// stay inside the filter's span, which covers 280 ms after the margin; a new device's path
    /// does), and a playback offset read anew moves it by the whole blocks of the change: at
    /// once for one that brings the echo earlier, and from `realignSlackBlocks` for one that takes
    /// it later (the smaller moves that came with an echo path's change through the devices,
    /// 360–720 samples as module-loopback was loaded again, do not: realigning to them had cost
    /// the cut after the change; the devices' clocks drifting that way move it every 30 ms of
    /// drift). The held offset takes a reading more than 100 ms off at once (a gap in either
    /// stream), smaller changes as its average strays by 15 ms.
    /// The canceller is told which kind of move it is (`followEchoDelay`, `realign`): its
    /// response stays against the echo either way, and for a followed delay it also tries the
    /// response moved, in case it had learned the echo at its new place first.
    private func processOwn(
        _ chunk: UnsafeMutablePointer<Int16>, canceller: EchoCanceller, alongside: Int, echoDelaySamples: Int, offset: Int
    ) {
        let rate = sampleRateHertz / 1000
        var (delay, heldOffset) = cancellerAlignment ?? (echoDelaySamples, offset)
        // The echo sits in the filter at margin + (heldOffset − offset) + (echo delay − delay).
        // An offset that moved back (heldOffset − offset > 0: the echo later in the filter) is
        // left up to `realignSlackBlocks`; one that moved on (the echo earlier, towards the
        // filter's start, 40 ms away) is followed from one block, as the delay is.
        let unaligned = heldOffset - offset
        if unaligned >= Self.realignSlackBlocks * chunkSamples || unaligned <= -chunkSamples {
            let realigned = unaligned / chunkSamples
            canceller.realign(byBlocks: realigned)
            heldOffset -= realigned * chunkSamples
        }
        // The delay is followed when the echo's place in the filter, the offset left unaligned
        // included, leaves the band: a stray the canceller ignored, which the estimator measures
        // as a shorter delay, does not make it move after all.
        let drift = echoDelaySamples - delay + (heldOffset - offset)
        if drift < -30 * rate || drift > 60 * rate {
            let blocks = drift / chunkSamples
            canceller.followEchoDelay(byBlocks: blocks)
            delay += blocks * chunkSamples
        }
        cancellerAlignment = (delay, heldOffset)
        let margin = Self.alignmentMarginMilliseconds * rate
        let wanted = alongside - offset + heldOffset - delay + margin - chunkSamples
        let start = min(wanted, historyWritten - 2 * chunkSamples)
        copyHistory(from: start, into: farWindow)
        canceller.process(chunk, far: UnsafePointer(farWindow.baseAddress!))
        figures.reportedDelayMilliseconds = (delay - margin - (wanted - start)) / rate
        guard let webrtc else { return }
        let capped = settings.gainControl && canceller.hearsOnlyEcho
        var before: Float = 0
        if capped { before = Self.energy(chunk, count: chunkSamples) }
        _ = tether_apm_process_capture(webrtc, chunk, 0)
        // WebRTC's gain control is not told that what it hears is echo (it would be, were its
        // own canceller running), and raises what the canceller left as it would a quiet talker:
        // in the simulated rooms it took 7–11 dB off the echo cut. Where the canceller hears only
        // echo, the gain over the chunk is held to at most 1; the scale moves to its new value
        // over the chunk, so it does not click.
        var target: Float = 1
        if capped {
            let after = Self.energy(chunk, count: chunkSamples)
            if after > before { target = (before / after).squareRoot() }
        }
        guard target != 1 || echoGainCap != 1 else { return }
        let step = (target - echoGainCap) / Float(chunkSamples)
        for i in 0..<chunkSamples {
            let scale = echoGainCap + step * Float(i + 1)
            chunk[i] = Int16(max(-32_768, min(32_767, (Float(chunk[i]) * scale).rounded())))
        }
        echoGainCap = target
    }

    private static func energy(_ chunk: UnsafeMutablePointer<Int16>, count: Int) -> Float {
        var sum: Float = 0
        for i in 0..<count { sum += Float(chunk[i]) * Float(chunk[i]) }
        return sum
    }

    /// Takes this block's reading of the playback offset: the playback device's position (what
    /// was handed over minus what waits in its ring) minus the capture device's (this block's
    /// end plus what waits behind it). A reading far from the one held (a gap in either stream:
    /// capture was closed, playback ran dry) is taken at once; otherwise the held offset moves
    /// only when the readings' average strays from it by more than 15 ms.
    private func followPlaybackOffset(_ timing: CaptureTiming, blockSamples: Int) {
        let reading =
            (historyWritten - timing.playbackQueuedSamples) - (captureWritten + blockSamples + timing.captureQueuedSamples)
        guard let held = playbackOffset, abs(reading - held) <= sampleRateHertz / 10 else {
            playbackOffset = reading
            offsetAverage = Double(reading)
            return
        }
        offsetAverage += (Double(reading) - offsetAverage) / 32
        if abs(offsetAverage - Double(held)) > Double(sampleRateHertz) * 0.015 {
            playbackOffset = Int(offsetAverage.rounded())
        }
    }

    /// The far-end chunk that starts at position `start` (silence where nothing was played or
    /// the history no longer reaches).
    private func copyHistory(from start: Int, into out: UnsafeMutableBufferPointer<Int16>) {
        for i in 0..<out.count {
            let index = start + i
            out[i] = index < 0 || index >= historyWritten || index < historyWritten - history.count ? 0 : history[index % history.count]
        }
    }

    /// speex on one chunk, `farChunk` holding the far end aligned with it.
    private func processSpeex(_ chunk: UnsafeMutablePointer<Int16>) {
        if let echo = speexEcho {
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
        if let canceller {
            let own = canceller.statistics
            out.echoReturnLossEnhancementDecibels = own.echoReturnLossEnhancementDecibels
            out.echoReturnLossDecibels = own.echoReturnLossDecibels
            out.echoPresent = own.echoPresent
            out.echoPathShifts = own.echoPathShifts
            if let webrtc, settings.noiseSuppression {
                var s = tether_apm_statistics()
                tether_apm_get_statistics(webrtc, &s)
                out.speechProbability = Double(s.speech_probability)
            }
        } else if let webrtc {
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
