import ArgumentParser
import Foundation
import Tether
import TetherAudio
import TetherTestbed

/// `tether-bench echo`: echo cancellation through real devices, by canceller: the far-end echo
/// cut early and converged, after the echo path's delay and then its gain change, and the near
/// end's PESQ-WB in double talk (at the rig's levels and at equal level) against the same speech
/// without echo.
struct EchoBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo",
        abstract: "Echo cancellation through real devices: ERLE, reconvergence and double-talk PESQ-WB, by canceller.",
        discussion: """
            Runs inside scripts/with-test-audio.sh (`make echo`). Session A captures from \
            room_mic.monitor and plays on room_spk; module-loopback brings what room_spk plays back \
            into room_mic (60 ms, then 160 ms: another device); B sends far-end speech (espeak-ng, \
            looped) and records what it hears. Per canceller, one call: the far end alone (the echo \
            at the microphone against what B hears, 1–2 s and 2–4 s after the call starts), then a \
            near-end talker (another voice) speaks into room_mic while the far end talks (double \
            talk), then the same speech with the far end muted (no echo); the same two again with \
            the talker as loud as the echo (equal level); then the echo path changes (delay) and the \
            cut is measured 2–4 s later, then its gain drops 6 dB and it is measured again. The \
            near end's recordings are scored against its clip with P.862.2 wideband PESQ; the \
            target is double talk within 0.5 of no echo. The first double talk starts 4.2 s into \
            the call (the simulated rooms': 8 s), while the linear stage is still converging. \
            --microphone-noise-dbfs plays a hiss into room_mic throughout: without it, the \
            talker's pauses are digital silence, in which PESQ-WB weighs whatever echo is left \
            heavily.
            """)

    @Option(
        help: "Cancellers to run: off (none), speex, webrtc-low, webrtc (moderate), webrtc-high, tether (Tether's own), tether-aec (Tether's own without NS, AGC, HPF), tether-ns (without AGC), tether-agc (without NS, HPF).")
    var cancellers: [String] = ["off", "speex", "webrtc", "tether"]

    @Flag(inversion: .prefixedNo, help: "Run the simulated rooms (seconds, no devices needed).")
    var simulated = true

    @Flag(
        help: "Run the simulated rooms with each canceller's noise suppression, gain control and high-pass filter too (by default they run echo cancellation alone: two of the three rooms are noiseless).")
    var simulatedPostProcessing = false

    @Flag(inversion: .prefixedNo, help: "Run the device rig (one call per canceller, about 50 s each).")
    var devices = true

    @Option(help: "The echo's volume on the loopback, percent (PulseAudio's cubic scale: 100 = as played).")
    var echoVolume: Int = 100

    @Option(
        help:
            "A noise floor on the rig's microphone: white noise at this RMS level (dBFS) played into room_mic for the whole call, as a quiet room's hiss (the rig has digital silence between words without it).")
    var microphoneNoiseDBFS: Double?

    @Option(help: "Folder for the clips and the recordings.")
    var workDirectory: String = ".build/echo"

    @Option(help: "Write every figure as JSON to this file.")
    var json: String?

    @Option(help: "Python with the pesq and numpy modules (make quality makes a venv for it).")
    var python: String = "python3"

    struct Row: Sendable {
        var canceller: String
        var echoAtMicrophoneDBFS = 0.0
        var talkerAtMicrophoneDBFS = 0.0
        var cutEarlyDB = 0.0
        var cutDB = 0.0
        var cutAfterChangeDB = 0.0
        var cutAfterGainDB = 0.0
        var measuredDelays: [Int] = []
        var doubleTalk = ""
        var nearAlone = ""
        var doubleTalkEqual = ""
        var nearAloneEqual = ""
        var pesqDoubleTalk: Double?
        var pesqNearAlone: Double?
        var pesqDoubleTalkEqual: Double?
        var pesqNearAloneEqual: Double?
        var problem: String?
    }

    static func settings(for canceller: String) throws -> VoiceProcessingSettings {
        switch canceller {
        case "off": VoiceProcessingSettings(echoCancellation: false)
        case "speex": VoiceProcessingSettings(engine: .speex)
        case "webrtc-low", "low": VoiceProcessingSettings(engine: .webrtc, echoSuppression: .low)
        case "webrtc", "moderate": VoiceProcessingSettings(engine: .webrtc, echoSuppression: .moderate)
        case "webrtc-high", "high": VoiceProcessingSettings(engine: .webrtc, echoSuppression: .high)
        case "tether": VoiceProcessingSettings(engine: .tether)
        case "tether-aec": VoiceProcessingSettings(engine: .tether, noiseSuppression: false, gainControl: false, highPassFilter: false)
        case "tether-ns": VoiceProcessingSettings(engine: .tether, gainControl: false)
        case "tether-agc": VoiceProcessingSettings(engine: .tether, noiseSuppression: false, highPassFilter: false)
        default: throw ValidationError("unknown canceller '\(canceller)': off, speex, webrtc-low, webrtc, webrtc-high, tether, tether-aec, tether-ns, tether-agc")
        }
    }

    func run() async throws {
        guard !devices || ProcessInfo.processInfo.environment["TETHER_TEST_AUDIO"] == "1" else {
            throw ValidationError("needs the private PulseAudio daemon: scripts/with-test-audio.sh tether-bench echo (make echo)")
        }
        try QualityBench.checkTools(python: python)
        try FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
        let far = "\(workDirectory)/far.wav"
        let near = "\(workDirectory)/near.wav"
        try QualityBench.synthesize(
            text: QualityBench.sentences[0] + " " + QualityBench.sentences[2], voice: QualityBench.voices[0], into: far,
            scratch: workDirectory, leadSeconds: 0.2)
        try QualityBench.synthesize(text: QualityBench.sentences[1], voice: QualityBench.voices[1], into: near, scratch: workDirectory, leadSeconds: 0.5)
        let settings = try cancellers.map { try Self.settings(for: $0) }
        var simulatedRows: [(room: String, canceller: String, result: EchoSimulation.Result)] = []
        if simulated {
            let farClip = try WAVFile.read(path: far).samples
            let nearClip = try WAVFile.read(path: near).samples
            for room in EchoSimulation.rooms {
                for (canceller, setting) in zip(cancellers, settings) {
                    var simulatedSetting = setting
                    if !simulatedPostProcessing {
                        simulatedSetting.noiseSuppression = false
                        simulatedSetting.gainControl = false
                        simulatedSetting.highPassFilter = false
                        if !simulatedSetting.isEnabled { simulatedSetting.highPassFilter = true }  // "off": nothing but the filter
                    }
                    simulatedRows.append(
                        (room.name, canceller,
                         try EchoSimulation.run(settings: simulatedSetting, room: room, far: farClip, near: nearClip, directory: workDirectory, label: canceller)))
                }
            }
        }
        if simulated && !devices {
            let scores = QualityBench.score(simulatedRows.flatMap { Self.pairs(near: near, $0.result) }, scorer: QualityBench.scorerPath(), python: python)
            Self.printSimulated(simulatedRows, scores: scores)
            return
        }
        say("echo: \(cancellers.count) canceller(s); echo path 60 ms then 160 ms of loopback at \(echoVolume) %, then 6 dB quieter; far end \(QualityBench.voices[0]), near end \(QualityBench.voices[1])"
                + (microphoneNoiseDBFS.map { "; microphone hiss \($0) dBFS" } ?? ""))
        var rows: [Row] = []
        for (canceller, setting) in zip(cancellers, settings) {
            say("  \(canceller)…")
            rows.append(
                try await Self.call(
                    label: canceller, settings: setting, far: far, near: near, volume: echoVolume, noiseDBFS: microphoneNoiseDBFS,
                    directory: workDirectory))
        }
        let pairs = rows.flatMap { [(near, $0.doubleTalk), (near, $0.nearAlone), (near, $0.doubleTalkEqual), (near, $0.nearAloneEqual)] }
        let scores = QualityBench.score(
            pairs + simulatedRows.flatMap { Self.pairs(near: near, $0.result) }, scorer: QualityBench.scorerPath(), python: python)
        if simulated { Self.printSimulated(simulatedRows, scores: scores) }
        for i in rows.indices {
            for (path, keyPath) in [
                (rows[i].doubleTalk, \Row.pesqDoubleTalk), (rows[i].nearAlone, \Row.pesqNearAlone),
                (rows[i].doubleTalkEqual, \Row.pesqDoubleTalkEqual), (rows[i].nearAloneEqual, \Row.pesqNearAloneEqual),
            ] {
                switch scores[path] {
                case .some(.success(let value)): rows[i][keyPath: keyPath] = value
                case .some(.failure(let message)): rows[i].problem = message
                case .none: rows[i].problem = "not scored"
                }
            }
        }
        Self.printTable(rows)
        if let json {
            let objects: [[String: Any]] = rows.map { r in
                var o: [String: Any] = [
                    "canceller": r.canceller, "echoAtMicrophoneDBFS": r.echoAtMicrophoneDBFS, "talkerAtMicrophoneDBFS": r.talkerAtMicrophoneDBFS,
                    "echoCutEarlyDB": r.cutEarlyDB, "echoCutDB": r.cutDB, "echoCutAfterChangeDB": r.cutAfterChangeDB,
                    "echoCutAfterGainDB": r.cutAfterGainDB, "measuredEchoDelaysMs": r.measuredDelays,
                ]
                if let p = r.pesqDoubleTalk { o["pesqWBDoubleTalk"] = p }
                if let p = r.pesqNearAlone { o["pesqWBNearAlone"] = p }
                if let p = r.pesqDoubleTalkEqual { o["pesqWBDoubleTalkEqualLevel"] = p }
                if let p = r.pesqNearAloneEqual { o["pesqWBNearAloneEqualLevel"] = p }
                if let p = r.problem { o["problem"] = p }
                return o
            }
            let simulatedObjects: [[String: Any]] = simulatedRows.map { room, canceller, r in
                var o: [String: Any] = [
                    "room": room, "canceller": canceller, "echoCutEarlyDB": r.cutEarlyDB, "echoCutSteadyDB": r.cutSteadyDB,
                    "echoCutAfterDelayChangeDB": r.cutAfterDelayDB, "echoCutAfterGainChangeDB": r.cutAfterGainDB,
                    "measuredEchoDelaysMs": r.measuredDelays,
                ]
                for (key, path) in [
                    ("pesqWBDoubleTalk", r.doubleTalk), ("pesqWBNearAlone", r.nearAlone), ("pesqWBDoubleTalkEqualLevel", r.doubleTalkEqual),
                    ("pesqWBNearAloneEqualLevel", r.nearAloneEqual),
                ] {
                    if case .success(let value) = scores[path] { o[key] = value }
                }
                return o
            }
            let data = try JSONSerialization.data(
                withJSONObject: ["echo": objects, "simulated": simulatedObjects], options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: json))
            say("figures written to \(json)")
        }
    }

    static func pairs(near: String, _ r: EchoSimulation.Result) -> [(String, String)] {
        [(near, r.doubleTalk), (near, r.nearAlone), (near, r.doubleTalkEqual), (near, r.nearAloneEqual)]
    }

    /// The simulated rooms' table (echo cancellation alone, no NS/AGC).
    static func printSimulated(_ rows: [(room: String, canceller: String, result: EchoSimulation.Result)], scores: [String: QualityBench.Score]) {
        func score(_ path: String) -> Double? { if case .success(let v) = scores[path] { v } else { nil } }
        func pesq(_ d: String, _ n: String) -> String {
            guard let a = score(d), let b = score(n) else { return "n/a" }
            return String(format: "%.2f / %.2f (%+.2f)", a, b, a - b)
        }
        say("")
        say("simulated rooms (echo cancellation alone; espeak-ng speech; the delay found by the estimator)")
        say("room               canceller  echo cut 1–2 s  2–8 s   delay +100 ms  gain −6 dB  delay found      PESQ-WB double talk / no echo (Δ)")
        say("                                                      (2–4 s after)                                talker +5 dB          equal level")
        say(String(repeating: "─", count: 150))
        for (room, canceller, r) in rows {
            let delays = r.measuredDelays.isEmpty ? "none" : r.measuredDelays.map { "\($0)" }.joined(separator: "→") + " ms"
            say(
                room.padding(toLength: 19, withPad: " ", startingAt: 0) + canceller.padding(toLength: 11, withPad: " ", startingAt: 0)
                    + String(format: "%5.1f dB  %5.1f dB  %5.1f dB       %5.1f dB    ", r.cutEarlyDB, r.cutSteadyDB, r.cutAfterDelayDB, r.cutAfterGainDB)
                    + delays.padding(toLength: 17, withPad: " ", startingAt: 0)
                    + pesq(r.doubleTalk, r.nearAlone).padding(toLength: 22, withPad: " ", startingAt: 0) + pesq(r.doubleTalkEqual, r.nearAloneEqual))
        }
    }

    static func printTable(_ rows: [Row]) {
        func pesq(_ d: Double?, _ n: Double?, _ problem: String?) -> String {
            if let d, let n { String(format: "%.2f / %.2f (%+.2f)", d, n, d - n) } else { problem ?? "n/a" }
        }
        say("")
        // The delays found: up to four readings (call start, double talk, path change, gain change).
        say("canceller  echo / talker at mic   echo cut 1–2 s  2–4 s   after 60→160 ms  after −6 dB  delay found           PESQ-WB double talk / no echo (Δ)")
        say("                                                                                                            rig's levels          equal level")
        say(String(repeating: "─", count: 155))
        for r in rows {
            let delays = r.measuredDelays.isEmpty ? "none" : r.measuredDelays.map { "\($0)" }.joined(separator: "→") + " ms"
            say(
                r.canceller.padding(toLength: 11, withPad: " ", startingAt: 0)
                    + String(
                        format: "%5.1f / %5.1f dBFS      %5.1f dB  %5.1f dB  %5.1f dB         %5.1f dB     ", r.echoAtMicrophoneDBFS,
                        r.talkerAtMicrophoneDBFS, r.cutEarlyDB, r.cutDB, r.cutAfterChangeDB, r.cutAfterGainDB)
                    + delays.padding(toLength: 22, withPad: " ", startingAt: 0)
                    + pesq(r.pesqDoubleTalk, r.pesqNearAlone, r.problem).padding(toLength: 22, withPad: " ", startingAt: 0)
                    + pesq(r.pesqDoubleTalkEqual, r.pesqNearAloneEqual, r.problem))
        }
    }

    /// One call with one canceller; see the command's discussion.
    static func call(
        label: String, settings: VoiceProcessingSettings, far: String, near: String, volume: Int, noiseDBFS: Double?, directory: String
    ) async throws -> Row {
        var row = Row(canceller: label)
        // The microphone's hiss, looped (10 s), from before the call to its end.
        let hiss = try noiseDBFS.map { level in
            let path = "\(directory)/noise.wav"
            try WAVFile.write(
                samples: EchoSimulation.noise(count: 10 * 48_000, dBFS: level).map { Int16(max(-32_767, min(32_767, $0.rounded()))) },
                sampleRateHertz: 48_000, to: path)
            return try SinkPlayer(source: WAVFileSource(path: path, loop: true), sink: "room_mic")
        }
        defer { hiss?.stop() }
        var path = try EchoPath(latencyMilliseconds: 60, volumePercent: volume)
        defer { path.remove() }
        var ca = CallConfiguration(
            audioSource: PulseAudioCapture(deviceName: "room_mic.monitor"), audioSink: PulseAudioPlayback(deviceName: "room_spk"),
            localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        ca.voiceProcessing = settings
        let heard = "\(directory)/\(label)-heard.wav"
        let a = try CallSession(configuration: ca)
        let b = try CallSession(
            configuration: CallConfiguration(
                audioSource: WAVFileSource(path: far, loop: true), audioSink: WAVFileSink(path: heard), localAddresses: ["127.0.0.1"],
                statisticsIntervalSeconds: 0))
        let signaling = InProcessSignaling(a: a, b: b)
        try await a.start()
        try await b.start()
        try await signaling.connect()

        /// After `settle` seconds from now, over `seconds`: the echo at the microphone, and how
        /// much less of it B heard.
        func cut(_ name: String, settle: Double = 2, seconds: Double = 2) async throws -> (atMicrophone: Double, cut: Double) {
            try await Task.sleep(for: .seconds(settle))
            let mic = try MonitorRecorder(source: "room_mic.monitor", path: "\(directory)/\(label)-mic-\(name).wav")
            try await Task.sleep(for: .seconds(seconds))
            let window = seconds - 0.2
            let atMic = ToneAnalysis.rmsDBFS(try mic.finish(lastSeconds: window))
            let heardLevel = ToneAnalysis.rmsDBFS(try samplesWrittenSoFar(heard).suffix(Int(window * 48_000)))
            if let d = a.statistics().voiceProcessingFigures.measuredEchoDelayMilliseconds { row.measuredDelays.append(d) }
            return (atMic, atMic - heardLevel)
        }
        /// A clip spoken once into the room; what B heard meanwhile, into `file`.
        func speak(_ clip: String, into file: String) async throws {
            let start = try samplesWrittenSoFar(heard).count
            let talker = try SinkPlayer(source: WAVFileSource(path: clip, loop: false), sink: "room_mic")
            let seconds = Double(try WAVFile.read(path: clip).samples.count) / 48_000
            try await Task.sleep(for: .seconds(seconds + 0.6))
            talker.stop()
            let samples = try samplesWrittenSoFar(heard)
            try WAVFile.write(samples: Array(samples[min(start, samples.count)...]), sampleRateHertz: 48_000, to: file)
        }
        /// Double talk with `clip`, then the same with the far end muted; returns the talker's
        /// level at the microphone.
        func doubleTalk(_ clip: String, into talk: String, alone: String) async throws -> Double {
            try await speak(clip, into: talk)
            await b.setMuted(true)
            try await Task.sleep(for: .seconds(1))
            let mic = try MonitorRecorder(source: "room_mic.monitor", path: "\(directory)/\(label)-mic-talker.wav")
            try await speak(clip, into: alone)
            let level = Self.speechLevel(try mic.finish(lastSeconds: 60))
            await b.setMuted(false)
            return level
        }

        row.cutEarlyDB = try await cut("early", settle: 1, seconds: 1.2).cut
        let before = try await cut("60ms", settle: 0)
        row.cutDB = before.cut
        row.doubleTalk = "\(directory)/\(label)-double-talk.wav"
        row.nearAlone = "\(directory)/\(label)-near-alone.wav"
        row.talkerAtMicrophoneDBFS = try await doubleTalk(near, into: row.doubleTalk, alone: row.nearAlone)
        // The talker at the echo's level (the echo at the microphone measured above).
        let quieter = "\(directory)/near-equal-\(label).wav"
        let clip = try WAVFile.read(path: near)
        let gain = pow(10, (before.atMicrophone - row.talkerAtMicrophoneDBFS) / 20)
        try WAVFile.write(
            samples: clip.samples.map { Int16(max(-32_767, min(32_767, (Double($0) * gain).rounded()))) }, sampleRateHertz: clip.sampleRateHertz,
            to: quieter)
        row.doubleTalkEqual = "\(directory)/\(label)-double-talk-equal.wav"
        row.nearAloneEqual = "\(directory)/\(label)-near-alone-equal.wav"
        _ = try await doubleTalk(quieter, into: row.doubleTalkEqual, alone: row.nearAloneEqual)
        path.remove()
        path = try EchoPath(latencyMilliseconds: 160, volumePercent: volume)
        let after = try await cut("160ms")
        row.cutAfterChangeDB = after.cut
        // 6 dB quieter: PulseAudio's volume is cubic.
        path.setVolume(percent: Int((Double(volume) * pow(10, -6.0 / 60)).rounded()))
        row.cutAfterGainDB = try await cut("gain").cut
        row.echoAtMicrophoneDBFS = (before.atMicrophone + after.atMicrophone) / 2
        await a.hangUp()
        await b.hangUp()
        await signaling.waitUntilFinished()
        return row
    }

    /// The level (`ToneAnalysis.rmsDBFS`) over the louder half of 20 ms blocks: speech, not its
    /// pauses.
    static func speechLevel(_ samples: [Int16]) -> Double {
        let blocks = stride(from: 0, to: samples.count - 960, by: 960).map { ToneAnalysis.rmsDBFS(samples[$0..<($0 + 960)]) }.sorted()
        let loud = blocks.suffix(max(1, blocks.count / 2))
        return 10 * log10(loud.reduce(0) { $0 + pow(10, $1 / 10) } / Double(loud.count))
    }
}
