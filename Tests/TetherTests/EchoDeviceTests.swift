import Foundation
import Testing
import TetherAudio
import TetherRealtime
import TetherTestbed
import TetherTestSupport

@testable import Tether

/// Echo cancellation measured with real devices: the call plays the far end's speech on
/// `room_spk`, and an echo path in the private PulseAudio daemon brings it back into `room_mic`
/// (module-loopback, delayed), with a near-end talker mixed in. What the peer hears is recorded.
@Suite(
    "Echo cancellation through real audio devices", .keepsLogPerTest, .serialized,
    .enabled(if: testAudioAvailable, "needs scripts/with-test-audio.sh"),
    .timeLimit(.minutes(3)))
struct EchoDeviceTests {
    /// A: the near end, on the devices, with voice processing as devices get it by default.
    /// B: the far end, a speech-like WAV, recording what it hears.
    func call(dir: String, voiceProcessing: VoiceProcessingSettings? = nil) throws -> (a: CallSession, b: CallSession, heard: String) {
        var configuration = CallConfiguration(
            audioSource: PulseAudioCapture(deviceName: "room_mic.monitor"), audioSink: PulseAudioPlayback(deviceName: "room_spk"),
            localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        if let voiceProcessing { configuration.voiceProcessing = voiceProcessing }
        let a = try CallSession(configuration: configuration)
        let heard = dir + "/far-end-hears.wav"
        let b = try CallSession(
            configuration: CallConfiguration(
                audioSource: WAVFileSource(path: try writeSyntheticVoice(to: dir + "/far.wav", pitchHertz: 120, peak: 7000), loop: true),
                audioSink: WAVFileSink(path: heard), localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        return (a, b, heard)
    }

    /// Far-end speech alone: once the canceller has converged, the echo the peer hears is at least
    /// 25 dB under the echo reaching the microphone.
    @Test
    func farEndEchoIsCancelled() async throws {
        try await measureCancellation(changingTheEchoPath: false)
    }

    /// Tether's own canceller (without WebRTC's gain control, which raises what echo it leaves):
    /// the same cut, and the call report sees the echo through its figures (ERLE) and finds no
    /// echo problem.
    @Test
    func tethersOwnCancellerCancelsTheEchoAndTheReportSeesIt() async throws {
        try await measureCancellation(
            changingTheEchoPath: false,
            voiceProcessing: VoiceProcessingSettings(engine: .tether, noiseSuppression: false, gainControl: false, highPassFilter: false),
            summary: "tether: AEC")
    }

    /// The same, and again after the echo path changes (60 → 160 ms, as when the call moves to
    /// another device). Left out of the ASan phase (Makefile): how fast WebRTC's AEC2 reconverges
    /// is what it judges, and an ASan build does not show that faithfully.
    @Test
    func farEndEchoIsCancelledAgainAfterTheEchoPathChanges() async throws {
        try await measureCancellation(changingTheEchoPath: true)
    }

    /// Converging is awaited, window by window (2 s each, the first 2 s after the call starts or
    /// the path changes), up to 12 s: module-loopback takes its own time to settle on a new
    /// latency, and a slow machine (a loaded core) takes longer. On an idle machine the first
    /// window passes (42 readings in the CI and test logs of 25–26 Nov: 32.2–52.6 dB).
    func measureCancellation(
        changingTheEchoPath: Bool, voiceProcessing: VoiceProcessingSettings? = nil, summary: String = "webrtc: AEC NS AGC HPF"
    ) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var path = try EchoPath(latencyMilliseconds: 60, volumePercent: 100)
        defer { path.remove() }
        let (a, b, heard) = try call(dir: dir, voiceProcessing: voiceProcessing)
        let ra = EventRecorder(a)
        try await connect(a, b)
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        #expect(a.statistics().voiceProcessing == summary)

        /// Every window's reading, for the failure message (a CI run's output keeps only its tail).
        var readings: [String] = []
        /// The echo at the microphone against what the peer heard, over successive 2 s windows
        /// from 2 s after now, until it reaches 25 dB or 12 s have passed; the last window's figure.
        func reduction(_ label: String) async throws -> Double {
            let start = ContinuousClock.now
            try await Task.sleep(for: .seconds(2))
            var window = 0
            while true {
                window += 1
                let mic = try MonitorRecorder(source: "room_mic.monitor", path: dir + "/mic-\(label)-\(window).wav")
                try await Task.sleep(for: .seconds(2))
                let atMic = ToneAnalysis.rmsDBFS(try mic.finish(lastSeconds: 1.8))
                let heardLevel = ToneAnalysis.rmsDBFS(try samplesWrittenSoFar(heard).suffix(Int(1.8 * 48_000)))
                let f = a.statistics().voiceProcessingFigures
                let elapsed = (ContinuousClock.now - start) / .seconds(1)
                let reading = String(
                    format: "%@ window %d (to %.1f s): mic %.1f dBFS, heard %.1f dBFS, delay %@ ms (r %.3f), told %d ms, ERLE %@, restarts %d, shifts %d", label,
                    window, elapsed, atMic, heardLevel, f.measuredEchoDelayMilliseconds.map { "\($0)" } ?? "none", f.measuredEchoDelayCorrelation,
                    f.reportedDelayMilliseconds, f.echoReturnLossEnhancementDecibels.map { "\($0)" } ?? "none", f.echoCancellerRestarts, f.echoPathShifts)
                readings.append(reading)
                print("echo " + reading)
                #expect(atMic > -37, "the echo path brought \(atMic) dBFS back: no echo to cancel")
                if atMic - heardLevel >= 25 || elapsed >= 12 { return atMic - heardLevel }
            }
        }
        let first = try await reduction("60ms")
        #expect(first >= 25, "\(readings)")
        if changingTheEchoPath {
            path.remove()
            path = try EchoPath(latencyMilliseconds: 160, volumePercent: 100)
            let second = try await reduction("160ms")
            #expect(second >= 25, "\(readings)")
            // WebRTC's canceller was started afresh once the far end handed to it moved (the
            // delay measured went from about 100 ms, told as it is, to about 200, shifted).
            if voiceProcessing == nil { #expect(a.statistics().voiceProcessingFigures.echoCancellerRestarts >= 1, "\(readings)") }
        }
        let figures = a.statistics().voiceProcessingFigures
        #expect(figures.captureChunks > 200 && figures.playbackChunks > 200)
        #expect((figures.measuredEchoDelayMilliseconds ?? 0) >= (changingTheEchoPath ? 160 : 60))
        // The report saw the echo, and saw it removed: no echo finding.
        let report = a.report()
        #expect((report.quality.echoReturnLossEnhancementDecibels?.samples ?? 0) > 0)
        #expect(!report.findings.contains { $0.issue == .echo }, "\(report.findings)")
        await a.hangUp()
        await b.hangUp()
    }
}
