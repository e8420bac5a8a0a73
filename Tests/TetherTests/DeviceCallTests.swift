import Foundation
import Testing
import TetherAudio
import TetherRealtime
import TetherTestbed

@testable import Tether

/// Whether the private sound server of scripts/with-test-audio.sh (PulseAudio or PipeWire) is running.
let testAudioAvailable = ProcessInfo.processInfo.environment["TETHER_TEST_AUDIO"] == "1"

/// Whether that server is PipeWire (with pipewire-pulse) rather than PulseAudio.
let testAudioOnPipeWire = ProcessInfo.processInfo.environment["TETHER_TEST_AUDIO_SERVER"] == "pipewire"

/// Keeps a (new) null sink rendering in small blocks, as scripts/with-test-audio.sh does for its
/// own sinks: a low-latency recorder on its monitor and, on PulseAudio, one suspend/resume (which
/// PipeWire does not need, and where it silenced streams). Terminate it after.
func keepRendering(sink: String) -> ChildProcess? {
    let keeper = ChildProcess.spawn([
        "parecord", "--device=\(sink).monitor", "--rate=48000", "--channels=1", "--format=s16le", "--latency-msec=10",
        "--raw", "/dev/null",
    ])
    Thread.sleep(forTimeInterval: 0.2)
    if !testAudioOnPipeWire {
        pactl("suspend-sink", sink, "1")
        pactl("suspend-sink", sink, "0")
    }
    return keeper
}

func checkTone(_ samples: [Int16], frequencyHertz: Double, levelDBFS: Double, levelToleranceDB: Double = 3) -> String? {
    guard samples.count > 4800 else { return "only \(samples.count) samples" }
    guard let f = ToneAnalysis.dominantFrequencyHertz(samples, sampleRateHertz: 48_000, searchRange: 100...3000) else { return "no tone" }
    let level = ToneAnalysis.rmsDBFS(samples)
    if abs(f - frequencyHertz) > 2 || abs(level - levelDBFS) > levelToleranceDB {
        return "tone \(f) Hz at \(level) dBFS, expected \(frequencyHertz) Hz at \(levelDBFS) dBFS"
    }
    return nil
}

/// Calls through real PulseAudio/ALSA devices of the private sound server (PulseAudio or PipeWire).
@Suite(
    "Calls through real audio devices", .serialized, .enabled(if: testAudioAvailable, "needs scripts/with-test-audio.sh"),
    .timeLimit(.minutes(2)))
struct DeviceCallTests {
    enum Backend: String, CaseIterable, Sendable { case pulse, alsa }

    func pair(capture: any AudioSource, playback: any AudioSink) throws -> (CallSession, CallSession) {
        // These check the device plumbing: a tone arrives at its frequency and level. Voice
        // processing (on by default for a device) changes levels by design: EchoDeviceTests.
        var aConfiguration = CallConfiguration(
            audioSource: capture, audioSink: DiscardSink(), localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        aConfiguration.voiceProcessing = .off
        let a = try CallSession(configuration: aConfiguration)
        let b = try CallSession(
            configuration: CallConfiguration(
                audioSource: TestSignalSource(frequencyHertz: 660), audioSink: playback, localAddresses: ["127.0.0.1"],
                statisticsIntervalSeconds: 0))
        return (a, b)
    }

    @Test(arguments: Backend.allCases)
    func toneSpokenIntoACaptureDeviceIsPlayedOnThePeersSpeaker(backend: Backend) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mouth = try SinkPlayer(sink: "mic", frequencyHertz: 500)
        defer { mouth.stop() }
        let capture: any AudioSource = backend == .pulse ? PulseAudioCapture(deviceName: "mic.monitor") : ALSACapture(pcmName: "tether_mic")
        let playback: any AudioSink = backend == .pulse ? PulseAudioPlayback(deviceName: "spk") : ALSAPlayback(pcmName: "tether_spk")
        let (a, b) = try pair(capture: capture, playback: playback)
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        let ear = try MonitorRecorder(source: "spk.monitor", path: dir + "/ear.wav")
        try await Task.sleep(for: .seconds(3))
        let heard = try ear.finish(lastSeconds: 1.5)
        #expect(checkTone(heard, frequencyHertz: 500, levelDBFS: -12) == nil, "\(checkTone(heard, frequencyHertz: 500, levelDBFS: -12) ?? "")")
        let sa = a.statistics()
        #expect(sa.captureOverruns <= 2)
        // The listener decodes as late as its device allows: less than a frame waits in the
        // playback queue (two frames did before the device said what it takes), and every part of
        // the delay estimate is known.
        let sb = b.statistics()
        let queue = try #require(sb.playbackQueueMilliseconds)
        #expect(queue < 20, "playback queue \(queue) ms")
        #expect(sb.playbackDeviceLatencyMilliseconds != nil && sa.captureDeviceLatencyMilliseconds != nil)
        #expect(sb.encoderLookaheadMilliseconds > 0)
        #expect(sb.estimatedMouthToEarMilliseconds != nil)
        await a.hangUp()
        await b.hangUp()
    }

    /// The desktop form of routing to "speaker" or "headset": the playback device changes mid-call,
    /// even to the other backend, and the call neither drops nor reports a disruption.
    @Test func playbackDeviceSwitchedMidCallCarriesTheAudioWithoutDisruption() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (a, b) = try pair(capture: TestSignalSource(frequencyHertz: 600), playback: PulseAudioPlayback(deviceName: "spk"))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        let speaker = try MonitorRecorder(source: "spk.monitor", path: dir + "/speaker.wav")
        try await Task.sleep(for: .seconds(2))
        let onSpeaker = try speaker.finish(lastSeconds: 1)
        #expect(checkTone(onSpeaker, frequencyHertz: 600, levelDBFS: -12) == nil, "\(checkTone(onSpeaker, frequencyHertz: 600, levelDBFS: -12) ?? "")")

        await b.setAudioSink(ALSAPlayback(pcmName: "tether_spk2"))
        let headset = try MonitorRecorder(source: "spk2.monitor", path: dir + "/headset.wav")
        let speakerAfter = try MonitorRecorder(source: "spk.monitor", path: dir + "/speaker-after.wav")
        try await Task.sleep(for: .seconds(2.5))
        let onHeadset = try headset.finish(lastSeconds: 1.5)
        let leftOnSpeaker = try speakerAfter.finish(lastSeconds: 1.5)
        #expect(checkTone(onHeadset, frequencyHertz: 600, levelDBFS: -12) == nil, "\(checkTone(onHeadset, frequencyHertz: 600, levelDBFS: -12) ?? "")")
        #expect(ToneAnalysis.rmsDBFS(leftOnSpeaker) < -60)  // the old device no longer plays it
        #expect(b.statistics().playbackDevice.contains("tether_spk2"))
        #expect(!ra.stateNames.contains("mediaDisrupted") && !rb.stateNames.contains("mediaDisrupted"))
        #expect(a.state == .established && b.state == .established)
        await a.hangUp()
        await b.hangUp()
    }

    @Test func captureDeviceUnpluggedMidCallGoesListenOnlyAndResumesWhenItReturns() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let load = { pactl("load-module", "module-null-sink", "sink_name=tmpmic", "rate=48000", "channels=1", "format=s16le") }
        let first = load()
        try #require(first.status == 0)
        var module = first.output.trimmingCharacters(in: .whitespacesAndNewlines)
        var keeper = keepRendering(sink: "tmpmic")
        var mouth = try SinkPlayer(sink: "tmpmic", frequencyHertz: 700)
        let (a, b) = try pair(capture: PulseAudioCapture(deviceName: "tmpmic.monitor"), playback: PulseAudioPlayback(deviceName: "spk"))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .seconds(1))

        // Unplug.
        mouth.stop()
        keeper?.terminate()
        pactl("unload-module", module)
        #expect(await ra.waitForDeviceEvent(timeoutSeconds: 5) { d, e in if d == .capture, case .failed = e { true } else { false } })
        // The error event follows the device event: wait for it too (checked at once, it had not
        // always been recorded yet — an address-sanitizer run in CI).
        #expect(await waitUntil(timeoutSeconds: 5) { ra.recordedErrors.contains { $0.code == .captureDeviceFailed && !$0.isTerminal } })
        let before = b.statistics().packetsReceived
        try await Task.sleep(for: .seconds(2))
        // Listen-only still sends (silence), so the peer sees no disruption.
        #expect(b.statistics().packetsReceived - before > 60)
        #expect(!rb.stateNames.contains("mediaDisrupted"))
        #expect(a.state == .established)

        // Plug it back: the device is used again and the tone arrives.
        let again = load()
        try #require(again.status == 0)
        module = again.output.trimmingCharacters(in: .whitespacesAndNewlines)
        keeper = keepRendering(sink: "tmpmic")
        defer {
            keeper?.terminate()
            pactl("unload-module", module)
        }
        mouth = try SinkPlayer(sink: "tmpmic", frequencyHertz: 700)
        defer { mouth.stop() }
        #expect(await ra.waitForDeviceEvent(timeoutSeconds: 10) { d, e in if d == .capture, case .recovered = e { true } else { false } })
        let ear = try MonitorRecorder(source: "spk.monitor", path: dir + "/ear.wav")
        try await Task.sleep(for: .seconds(2.5))
        let heard = try ear.finish(lastSeconds: 1.5)
        #expect(checkTone(heard, frequencyHertz: 700, levelDBFS: -12) == nil, "\(checkTone(heard, frequencyHertz: 700, levelDBFS: -12) ?? "")")
        await a.hangUp()
        await b.hangUp()
    }

    @Test func muteClosesTheCaptureStreamAndThePeerSeesNoDisruption() async throws {
        func ourSourceOutputs() -> Int {
            pactl("list", "source-outputs").output.components(separatedBy: "\n").filter {
                $0.contains("application.name = \"Tether\"")
            }.count
        }
        let (a, b) = try pair(capture: PulseAudioCapture(deviceName: "mic.monitor"), playback: DiscardSink())
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        #expect(ourSourceOutputs() == 1)
        await a.setMuted(true)
        #expect(await waitUntil(timeoutSeconds: 5) { ourSourceOutputs() == 0 })  // the microphone is really released
        try await Task.sleep(for: .seconds(2))
        #expect(!rb.stateNames.contains("mediaDisrupted"))
        await a.setMuted(false)
        #expect(await waitUntil(timeoutSeconds: 5) { ourSourceOutputs() == 1 })
        await a.hangUp()
        await b.hangUp()
    }

    /// The sound server (PulseAudio, or PipeWire with its session manager and pipewire-pulse)
    /// killed mid-call and started again by `scripts/with-test-audio.sh`'s control script: the
    /// devices fail, the call stays up, and both devices recover on their own.
    @Test
    func soundServerKilledAndRestartedMidCallTheCallSurvivesAndAudioFlowsAgain() async throws {
        let control = try #require(ProcessInfo.processInfo.environment["TETHER_TEST_AUDIO_CONTROL"])
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        var mouth = try SinkPlayer(sink: "mic", frequencyHertz: 800)
        let (a, b) = try pair(capture: PulseAudioCapture(deviceName: "mic.monitor"), playback: PulseAudioPlayback(deviceName: "spk"))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .seconds(1))

        // Kill the server's processes, as a crash would.
        mouth.stop()
        #expect(ChildProcess.run([control, "kill"]).status == 0)
        #expect(await ra.waitForDeviceEvent(timeoutSeconds: 5) { d, e in if d == .capture, case .failed = e { true } else { false } })

        // Start it again with the same devices (and, as the script does, a low-latency recorder
        // on each monitor: a room sink left without one renders in large blocks, and the echo
        // test that follows in the same server read 13–23 dB instead of 30+).
        let started = ChildProcess.run([control, "start"])
        try #require(started.status == 0, "\(started.output)")
        mouth = try SinkPlayer(sink: "mic", frequencyHertz: 800)
        defer { mouth.stop() }
        #expect(await ra.waitForDeviceEvent(timeoutSeconds: 10) { d, e in if d == .capture, case .recovered = e { true } else { false } })
        #expect(await rb.waitForDeviceEvent(timeoutSeconds: 10) { d, e in if d == .playback, case .recovered = e { true } else { false } })
        let ear = try MonitorRecorder(source: "spk.monitor", path: work + "/ear.wav")
        try await Task.sleep(for: .seconds(3))
        let heard = try ear.finish(lastSeconds: 1.5)
        #expect(checkTone(heard, frequencyHertz: 800, levelDBFS: -12) == nil, "\(checkTone(heard, frequencyHertz: 800, levelDBFS: -12) ?? "")")
        #expect(a.state == .established && b.state == .established)
        await a.hangUp()
        await b.hangUp()
    }
}
