import ArgumentParser
import Foundation
import Tether
import TetherAudio
import TetherTestbed

/// `tether-bench echo`: echo cancellation through real devices, by suppression level: far-end
/// echo cut, reconvergence after the echo path changes, and the near end's PESQ-WB in double talk
/// against the same speech without echo.
struct EchoBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo",
        abstract: "Echo cancellation through real devices: ERLE, reconvergence and double-talk PESQ-WB, by suppression level.",
        discussion: """
            Runs inside scripts/with-test-audio.sh (`make echo`). Session A captures from \
            room_mic.monitor and plays on room_spk; module-loopback brings what room_spk plays back \
            into room_mic (60 ms, then 160 ms: another device); B sends far-end speech (espeak-ng, \
            looped) and records what it hears. Per level, one call: far end alone (the echo at the \
            microphone against what B hears, 2–4 s after the call starts), then a near-end talker \
            (another voice) speaks into room_mic while the far end talks (double talk), then the same \
            speech with the far end muted (no echo), then the echo path changes and the cut is \
            measured again 2–4 s later. The near end's two recordings are scored against its clip \
            with P.862.2 wideband PESQ; the target is double talk within 0.5 of no echo.
            """)

    @Option(help: "Echo suppression levels to run: off (no AEC), low, moderate, high.")
    var levels: [String] = ["off", "low", "moderate", "high"]

    @Option(help: "The echo's volume on the loopback, percent (PulseAudio's cubic scale: 100 = as played).")
    var echoVolume: Int = 100

    @Option(help: "Folder for the clips and the recordings.")
    var workDirectory: String = ".build/echo"

    @Option(help: "Write every figure as JSON to this file.")
    var json: String?

    @Option(help: "Python with the pesq and numpy modules (make quality makes a venv for it).")
    var python: String = "python3"

    struct Row: Sendable {
        var level: String
        var echoAtMicrophoneDBFS = 0.0
        var talkerAtMicrophoneDBFS = 0.0
        var cutDB = 0.0
        var cutAfterChangeDB = 0.0
        var measuredDelays: [Int] = []
        var doubleTalk = ""
        var nearAlone = ""
        var pesqDoubleTalk: Double?
        var pesqNearAlone: Double?
        var problem: String?
    }

    func run() async throws {
        guard ProcessInfo.processInfo.environment["TETHER_TEST_AUDIO"] == "1" else {
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
        say("echo: \(levels.count) level(s); echo path 60 ms then 160 ms of loopback at \(echoVolume) %; far end \(QualityBench.voices[0]), near end \(QualityBench.voices[1])")
        var rows: [Row] = []
        for level in levels {
            let settings: VoiceProcessingSettings
            switch level {
            case "off": settings = VoiceProcessingSettings(echoCancellation: false)
            case "low": settings = VoiceProcessingSettings(echoSuppression: .low)
            case "moderate": settings = VoiceProcessingSettings(echoSuppression: .moderate)
            case "high": settings = VoiceProcessingSettings(echoSuppression: .high)
            default: throw ValidationError("unknown level '\(level)': off, low, moderate, high")
            }
            say("  \(level)…")
            rows.append(try await Self.call(level: level, settings: settings, far: far, near: near, volume: echoVolume, directory: workDirectory))
        }
        let pairs = rows.flatMap { [(near, $0.doubleTalk), (near, $0.nearAlone)] }
        let scores = QualityBench.score(pairs, scorer: QualityBench.scorerPath(), python: python)
        for i in rows.indices {
            for (path, keyPath) in [(rows[i].doubleTalk, \Row.pesqDoubleTalk), (rows[i].nearAlone, \Row.pesqNearAlone)] {
                switch scores[path] {
                case .some(.success(let value)): rows[i][keyPath: keyPath] = value
                case .some(.failure(let message)): rows[i].problem = message
                case .none: rows[i].problem = "not scored"
                }
            }
        }
        say("")
        say("level      echo / talker at mic   echo cut 2–4 s   after 60→160 ms   delay found      PESQ-WB double talk / no echo (Δ)")
        say(String(repeating: "─", count: 118))
        for r in rows {
            let pesq =
                if let d = r.pesqDoubleTalk, let n = r.pesqNearAlone {
                    String(format: "%.2f / %.2f (%+.2f)", d, n, d - n)
                } else {
                    r.problem ?? "n/a"
                }
            let delays = r.measuredDelays.isEmpty ? "none" : r.measuredDelays.map { "\($0)" }.joined(separator: "→") + " ms"
            say(
                r.level.padding(toLength: 11, withPad: " ", startingAt: 0)
                    + String(format: "%5.1f / %5.1f dBFS      %5.1f dB          %5.1f dB           ", r.echoAtMicrophoneDBFS, r.talkerAtMicrophoneDBFS, r.cutDB, r.cutAfterChangeDB)
                    + delays.padding(toLength: 17, withPad: " ", startingAt: 0) + pesq)
        }
        if let json {
            let objects: [[String: Any]] = rows.map { r in
                var o: [String: Any] = [
                    "level": r.level, "echoAtMicrophoneDBFS": r.echoAtMicrophoneDBFS, "talkerAtMicrophoneDBFS": r.talkerAtMicrophoneDBFS,
                    "echoCutDB": r.cutDB, "echoCutAfterChangeDB": r.cutAfterChangeDB, "measuredEchoDelaysMs": r.measuredDelays,
                ]
                if let p = r.pesqDoubleTalk { o["pesqWBDoubleTalk"] = p }
                if let p = r.pesqNearAlone { o["pesqWBNearAlone"] = p }
                if let p = r.problem { o["problem"] = p }
                return o
            }
            let data = try JSONSerialization.data(withJSONObject: ["echo": objects], options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: json))
            say("figures written to \(json)")
        }
    }

    /// One call at one level; see the command's discussion.
    static func call(level: String, settings: VoiceProcessingSettings, far: String, near: String, volume: Int, directory: String) async throws -> Row {
        var row = Row(level: level)
        var path = try EchoPath(latencyMilliseconds: 60, volumePercent: volume)
        defer { path.remove() }
        var ca = CallConfiguration(
            audioSource: PulseAudioCapture(deviceName: "room_mic.monitor"), audioSink: PulseAudioPlayback(deviceName: "room_spk"),
            localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        ca.voiceProcessing = settings
        let heard = "\(directory)/\(level)-heard.wav"
        let a = try CallSession(configuration: ca)
        let b = try CallSession(
            configuration: CallConfiguration(
                audioSource: WAVFileSource(path: far, loop: true), audioSink: WAVFileSink(path: heard), localAddresses: ["127.0.0.1"],
                statisticsIntervalSeconds: 0))
        let signaling = InProcessSignaling(a: a, b: b)
        try await a.start()
        try await b.start()
        try await signaling.connect()

        /// Over 2–4 s from now: the echo at the microphone, and how much less of it B heard.
        func cut(_ label: String) async throws -> (atMicrophone: Double, cut: Double) {
            try await Task.sleep(for: .seconds(2))
            let mic = try MonitorRecorder(source: "room_mic.monitor", path: "\(directory)/\(level)-mic-\(label).wav")
            try await Task.sleep(for: .seconds(2))
            let atMic = ToneAnalysis.rmsDBFS(try mic.finish(lastSeconds: 1.8))
            let heardLevel = ToneAnalysis.rmsDBFS(try samplesWrittenSoFar(heard).suffix(Int(1.8 * 48_000)))
            if let d = a.statistics().voiceProcessingFigures.measuredEchoDelayMilliseconds { row.measuredDelays.append(d) }
            return (atMic, atMic - heardLevel)
        }
        /// The near-end clip spoken once into the room; what B heard meanwhile, into `file`.
        func speak(into file: String) async throws {
            let start = try samplesWrittenSoFar(heard).count
            let talker = try SinkPlayer(source: WAVFileSource(path: near, loop: false), sink: "room_mic")
            let seconds = Double(try WAVFile.read(path: near).samples.count) / 48_000
            try await Task.sleep(for: .seconds(seconds + 0.6))
            talker.stop()
            let samples = try samplesWrittenSoFar(heard)
            try WAVFile.write(samples: Array(samples[min(start, samples.count)...]), sampleRateHertz: 48_000, to: file)
        }

        let before = try await cut("60ms")
        row.cutDB = before.cut
        row.doubleTalk = "\(directory)/\(level)-double-talk.wav"
        try await speak(into: row.doubleTalk)
        await b.setMuted(true)
        try await Task.sleep(for: .seconds(1))
        // The talker's level at the microphone, alone.
        let mic = try MonitorRecorder(source: "room_mic.monitor", path: "\(directory)/\(level)-mic-talker.wav")
        row.nearAlone = "\(directory)/\(level)-near-alone.wav"
        try await speak(into: row.nearAlone)
        row.talkerAtMicrophoneDBFS = Self.speechLevel(try mic.finish(lastSeconds: 60))
        await b.setMuted(false)
        path.remove()
        path = try EchoPath(latencyMilliseconds: 160, volumePercent: volume)
        let after = try await cut("160ms")
        row.cutAfterChangeDB = after.cut
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
