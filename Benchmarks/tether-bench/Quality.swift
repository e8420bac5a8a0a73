import ArgumentParser
import Synchronization
import Foundation
import Tether
import TetherAudio
import TetherCodec
import TetherFaults
import TetherRealtime
import TetherTestbed

/// Speech through two sessions over the impairment relay, scored with wideband PESQ.
struct QualityBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quality",
        abstract: "Speech quality under packet loss: wideband PESQ of speech sent through two sessions over the impairment relay.",
        discussion: """
            Speech (espeak-ng, resampled to 48 kHz by sox) is A's microphone; B records what it plays, \
            with real timing (concealment and underruns included). The relay between them drops \
            datagrams with seeded random loss (0, 5, 10, 20 %) or Gilbert–Elliott bursts, both \
            ways. Each case runs three receivers side by side on the same loss seed: FEC + \
            concealment (Tether's default), concealment only (no FEC sent or used), and no \
            recovery (a lost frame plays as silence). "Tether (all)" is the default: concealment \
            and RED (each packet carries the two frames before it, four on long loss runs) from the \
            first packet until the first reports show the path is not lossy, then from a sustained 10 % (5 % in runs); \
            one frame back instead of FEC under lighter loss. \
            Recordings are scored against the source \
            with P.862.2 wideband PESQ (PyPI `pesq`, Benchmarks/quality/pesq_score.py). \
            The baresip column is Debian's baresip calling itself through the same relay with the \
            same loss and seed (SDES-SRTP, no ICE, Opus 32 kb/s, its in-band FEC on and told \
            the case's loss, which it cannot learn by itself; \
            Benchmarks/quality/baresip_call.py): B plays through a clocked ALSA device (the private \
            PulseAudio daemon's `spk`, scripts/with-test-audio.sh) and what the device played is \
            recorded and scored the same way. \
            Needs espeak-ng, sox and python3 with pesq: `make quality` installs them and runs this.
            """)

    @Option(help: "Speech clips per case (each another voice, other sentences and another loss seed; 1…8).")
    var clips: Int = 2

    @Option(help: "Loss seeds per clip: each clip runs this many times, each with its own loss pattern.")
    var seeds: Int = 1

    @Option(help: "Loss cases to run: 0, 5, 10, 20 (percent, uniform) and bursty.")
    var cases: [String] = ["0", "5", "10", "20", "bursty"]

    @Option(help: "Folder for the clips and the recordings.")
    var workDirectory: String = ".build/quality"

    @Option(help: "Write every figure as JSON to this file.")
    var json: String?

    @Option(help: "Python with the pesq and numpy modules (make quality makes a venv for it).")
    var python: String = "python3"

    @Flag(inversion: .prefixedNo, help: "Run the baresip → baresip column (Debian's baresip, SDES, Opus 32 kb/s with its FEC on).")
    var baresip = true

    @Option(help: "Receivers (columns) to run: fecPLC, plc, none, baresip; default all of them.")
    var receivers: [String] = []

    @Option(help: "When Tether's default column sends RED: heavy-loss (the default) or always (a measurement: what RED from the first packet gives).")
    var redundancy: CallConfiguration.Redundancy = .underHeavyLoss

    enum Mode: String, CaseIterable, Sendable {
        case fecAndConcealment = "Tether (all)"
        case concealmentOnly = "PLC only"
        case none = "none"
        /// Not Tether: two baresip processes through the same relay and loss.
        case baresip = "baresip (FEC)"

        var key: String {
            switch self {
            case .fecAndConcealment: "fecPLC"
            case .concealmentOnly: "plc"
            case .none: "none"
            case .baresip: "baresip"
            }
        }

        func configure(_ c: inout CallConfiguration, redundancy: CallConfiguration.Redundancy) {
            c.opus.inBandFEC = self == .fecAndConcealment
            c.redundancy = self == .fecAndConcealment ? redundancy : .off
            c.concealsLoss = self != .none
        }
    }

    struct LossCase: Sendable {
        var name: String
        var impairments: UDPImpairments

        init?(_ name: String) {
            self.name = name
            if name == "bursty" {
                // Gilbert–Elliott: bursts of 3 packets on average, about 9 % lost overall.
                impairments = UDPImpairments(burstLoss: BurstLoss(goodToBadProbability: 0.033, badToGoodProbability: 0.33))
            } else if let percent = Double(name), (0...100).contains(percent) {
                impairments = UDPImpairments(lossPercent: percent)
            } else {
                return nil
            }
        }

        var label: String { name == "bursty" ? "bursty (GE, mean burst 3)" : "\(name) % random" }

        /// The loss the case produces, in whole percent (the bursty model loses about 9 %): what a
        /// peer that cannot adapt its FEC (baresip) is told to expect, as well as it could be told.
        var nominalLossPercent: Int { name == "bursty" ? 9 : Int(Double(name)?.rounded() ?? 0) }
    }

    /// One call's outcome, as B heard it.
    struct Run: Sendable {
        var lossCase: String
        var clip: Int
        var seed: UInt64 = 0
        var mode: Mode
        var recording: String
        var reference: String
        var packetsReceived: Int
        var packetsLost: Int
        var framesRecoveredByFEC: Int
        var framesConcealed: Int
        var framesInsertedForDelay: Int
        var framesDroppedForDelay: Int
        var playbackUnderruns: Int
        var heardLossPercent: Double
        /// Frames B rebuilt from RED copies, and the share of the packets B received that were RED
        /// (how much of the call RED covered; the relay's loss does not look at the payload).
        /// Tether only.
        var framesRecoveredByRedundancy = 0
        /// RED copies B received after their frame was due (a longer hold would have used them).
        var redundantCopiesTooLate = 0
        var redundantPacketsPercent = 0.0
        /// nil when the listener's jitter buffer had no figure (nothing buffered for 0.5 s).
        var jitterBufferDelayMilliseconds: Double?
        var jitterBufferTargetMilliseconds: Double
        var meanOpinionScoreEstimate: Double?
        var pesq: Double? = nil
        var problem: String? = nil
        /// Seconds from A's offer to B's first decoded frame (B `established`): set-up under the
        /// case's loss (speech starts 2.5 s in). Tether only.
        var bHearsAfterSeconds: Double? = nil
        /// Each side's disruptions, as "cause at s (attempts)". Tether only.
        var disruptions: [String] = []
    }

    static let sentences = [
        "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background. It is easy to tell the depth of a well. These days a chicken leg is a rare dish.",
        "Rice is often served in round bowls. The juice of lemons makes fine punch. The box was thrown beside the parked truck. The hogs were fed chopped corn and garbage.",
        "Four hours of steady work faced us. A large size in stockings is hard to sell. The boy was there when the sun rose. A rod is used to catch pink salmon.",
        "The source of the huge river is the clear spring. Kick the ball straight and follow through. Help the woman get back to her feet. A pot of tea helps to pass the evening.",
    ]
    static let voices = ["en-us", "en-us+f3", "en-gb", "en-us+f2"]

    /// One speech clip: what espeak-ng says, in which voice, how high and how fast.
    struct Clip: Sendable {
        var text: String
        var voice: String
        /// espeak-ng's pitch, 0…99 (50 is the voice's own).
        var pitch = 50
        var wordsPerMinute = 150
        var label: String { pitch == 50 && wordsPerMinute == 150 ? voice : "\(voice), pitch \(pitch), \(wordsPerMinute) wpm" }
    }

    /// The clips, in order (`--clips N` takes the first N): the first four are the bench's
    /// original ones; then lower and higher voices, faster and slower speech, other accents and a
    /// passage twice as long, so that a setting tuned on the first four is checked on speech it
    /// was not tuned on. Harvard sentences (IEEE 1969), lists 1–5.
    static let clipSet: [Clip] =
        zip(sentences, voices).map { Clip(text: $0, voice: $1) } + [
            Clip(
                text: "Smoky fires lack flame and heat. The soft cushion broke the man's fall. The salt breeze came across from the sea. The girl at the booth sold fifty bonds.",
                voice: "en-us+m3", pitch: 25, wordsPerMinute: 175),
            Clip(
                text: "The small pup gnawed a hole in the sock. The fish twisted and turned on the bent hook. Press the pants and sew a button on the vest. The swan dive was far short of perfect.",
                voice: "en-gb-scotland+f4", pitch: 80, wordsPerMinute: 130),
            Clip(
                text: "Hoist the load to your left shoulder. Take the winding path to reach the lake. Note closely the size of the gas tank. Wipe the grease off his dirty face. Mend the coat before you go out.",
                voice: "en-029+m7", pitch: 40, wordsPerMinute: 200),
            Clip(
                text: "A king ruled the state in the early days. The ship was torn apart on the sharp reef. Sickness kept him home the third week. The wide road shimmered in the hot sun. The lazy cow lay in the cool grass. Lift the square stone over the fence. The rope will bind the seven books at once. Hop over the fence and plunge in. The friendly gang left the drug store. Mesh wire keeps chicks inside.",
                voice: "en-gb-x-rp", pitch: 60, wordsPerMinute: 160),
        ]

    func run() async throws {
        let lossCases = try cases.map { name in
            guard let c = LossCase(name) else { throw ValidationError("unknown case '\(name)': use 0…100 or bursty") }
            return c
        }
        guard clips >= 1 && clips <= Self.clipSet.count else { throw ValidationError("--clips must be 1…\(Self.clipSet.count)") }
        guard (1...10).contains(seeds) else { throw ValidationError("--seeds must be 1…10") }
        try Self.checkTools(python: python)
        try FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
        let scorer = Self.scorerPath()

        if baresip, receivers.isEmpty || receivers.contains(Mode.baresip.key) {
            if ChildProcess.run(["sh", "-c", "command -v baresip"]).status != 0 {
                throw ValidationError("baresip is not installed (apt install baresip-core), or pass --no-baresip")
            }
            if ProcessInfo.processInfo.environment["TETHER_TEST_AUDIO"] != "1" {
                throw ValidationError(
                    "the baresip column plays through the private PulseAudio daemon's devices: run under scripts/with-test-audio.sh (make quality does), or pass --no-baresip")
            }
        }
        let unknown = receivers.filter { name in !Mode.allCases.contains { $0.key == name } }
        guard unknown.isEmpty else { throw ValidationError("unknown receiver(s) \(unknown): use fecPLC, plc, none, baresip") }
        let modes = Mode.allCases.filter { (baresip || $0 != .baresip) && (receivers.isEmpty || receivers.contains($0.key)) }
        say("quality: \(clips) clip(s) × \(seeds) seed(s) × \(lossCases.count) case(s) × \(modes.count) receivers; Opus 20 ms 32 kb/s \(OpusConfiguration().maximumBandwidth.rawValue), adaptive jitter buffer, RED \(redundancy.rawValue), loopback ICE through the relay (loss both ways)")
        var references: [String] = []
        for clip in 0..<clips {
            let path = "\(workDirectory)/clip\(clip).wav"
            try Self.synthesize(Self.clipSet[clip], into: path, scratch: workDirectory)
            references.append(path)
        }

        var runs: [Run] = []
        let started = Date()
        for lossCase in lossCases {
            for (clip, seedIndex) in (0..<clips).flatMap({ c in (0..<seeds).map { (c, $0) } }) {
                let seed = UInt64(1000 + clip + 100 * seedIndex)
                say(String(format: "  [%5.1f s] %@, clip %d (%@), seed %d…", Date().timeIntervalSince(started), lossCase.label, clip, Self.clipSet[clip].label, seed))
                let reference = references[clip]
                let results = try await withThrowingTaskGroup(of: Run.self) { group in
                    for mode in modes {
                        let recording = "\(workDirectory)/\(lossCase.name)-clip\(clip)\(seedIndex > 0 ? "-seed\(seed)" : "")-\(mode.key).wav"
                        group.addTask {
                            mode == .baresip
                                ? try await Self.baresipCall(
                                    reference: reference, recording: recording, lossCase: lossCase, clip: clip, seed: seed)
                                : try await Self.call(
                                    reference: reference, recording: recording, mode: mode, redundancy: redundancy, lossCase: lossCase,
                                    clip: clip, seed: seed)
                        }
                    }
                    var out: [Run] = []
                    for try await r in group { out.append(r) }
                    return out
                }
                runs += results.sorted { $0.mode.key < $1.mode.key }.map { var r = $0; r.seed = seed; return r }
            }
        }

        say(String(format: "  [%5.1f s] scoring %d recordings with PESQ-WB…", Date().timeIntervalSince(started), runs.count))
        let scores = Self.score(runs.map { ($0.reference, $0.recording) }, scorer: scorer, python: python)
        for i in runs.indices where runs[i].problem == nil {
            switch scores[runs[i].recording] {
            case .some(.success(let value)): runs[i].pesq = value
            case .some(.failure(let message)): runs[i].problem = message
            case .none: runs[i].problem = "not scored"
            }
        }
        say(String(format: "  [%5.1f s] done", Date().timeIntervalSince(started)))
        say("")
        say(Self.table(runs, cases: lossCases, modes: modes))
        if let json {
            try Self.writeJSON(runs, to: json)
            say("figures written to \(json)")
        }
    }

    // MARK: One call

    static func call(
        reference: String, recording: String, mode: Mode, redundancy: CallConfiguration.Redundancy, lossCase: LossCase, clip clipIndex: Int,
        seed: UInt64
    ) async throws -> Run {
        let relay = try UDPImpairmentRelay(seed: seed)
        defer { relay.stop() }
        var ca = CallConfiguration(
            audioSource: WAVFileSource(path: reference, loop: false), localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        var cb = CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: 660, levelDBFS: -30), audioSink: WAVFileSink(path: recording),
            localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        mode.configure(&ca, redundancy: redundancy)
        mode.configure(&cb, redundancy: redundancy)
        let a = try CallSession(configuration: ca)
        let b = try CallSession(configuration: cb)
        // What happened, for a call that carries no media (shown with the problem).
        let log = Mutex<[String]>([])
        let offered = Mutex<UInt64>(0)
        let bHears = Mutex<Double?>(nil)
        let signaling = InProcessSignaling(a: a, b: b, relay: relay) { side, event in
            if side == .b, case .stateChanged(_, .established, _) = event {
                let t = Double(MonotonicClock.nanoseconds() - offered.withLock { $0 }) / 1e9
                bHears.withLock { if $0 == nil { $0 = t } }
            }
            switch event {
            case .stateChanged(_, let to, let at): log.withLock { $0.append(String(format: "%@ %@ at %.1f s", side.rawValue, "\(to)", at)) }
            case .error(let error): log.withLock { $0.append("\(side.rawValue) error \(error.code)") }
            case .localDescription(let message): log.withLock { $0.append("\(side.rawValue) sent \(message.kind)\(message.isRestart ? " (restart)" : "")") }
            default: break
            }
        }
        relay.updateImpairments { $0 = lossCase.impairments }
        try await a.start()
        try await b.start()
        offered.withLock { $0 = MonotonicClock.nanoseconds() }
        try await signaling.connect()
        let clip = try WAVFile.read(path: reference)
        let seconds = Double(clip.samples.count) / Double(clip.sampleRateHertz)
        // The clip starts with 2.5 s of silence (set-up, the first RTCP reports and the jitter
        // buffer's first adaptation happen then: this measures a call in progress) and is played once.
        let deadline = ContinuousClock.now + .seconds(seconds + 0.6)
        try await Task.sleep(until: deadline)
        let s = b.statistics()
        let recoveries = [("A", a.statistics().recovery), ("B", s.recovery)]
        // Both hang up (signaling would tell B; the BYE alone may be lost on a lossy path).
        await a.hangUp()
        await b.hangUp()
        await signaling.waitUntilFinished()
        var run = Run(
            lossCase: lossCase.name, clip: clipIndex, mode: mode, recording: recording, reference: reference,
            packetsReceived: s.packetsReceived, packetsLost: s.packetsLost, framesRecoveredByFEC: s.framesRecoveredByFEC,
            framesConcealed: s.framesConcealed, framesInsertedForDelay: s.framesInsertedForDelay,
            framesDroppedForDelay: s.framesDroppedForDelay, playbackUnderruns: s.playbackUnderruns, heardLossPercent: s.heardLossPercent,
            jitterBufferDelayMilliseconds: s.jitterBufferDelayMilliseconds,
            jitterBufferTargetMilliseconds: s.jitterBufferTargetMilliseconds, meanOpinionScoreEstimate: s.meanOpinionScore)
        run.framesRecoveredByRedundancy = s.framesRecoveredByRedundancy
        run.redundantCopiesTooLate = s.redundantCopiesTooLate
        run.bHearsAfterSeconds = bHears.withLock { $0 }
        run.disruptions = recoveries.flatMap { side, recovery in
            recovery.disruptions.map { String(format: "%@ %@ at %.1f s (%d attempts)", side, $0.cause, $0.startSeconds, $0.attempts) }
        }
        run.redundantPacketsPercent = s.packetsReceived > 0
            ? 100 * Double(s.redundantAudioPacketsReceived) / Double(s.packetsReceived) : 0
        if s.packetsReceived == 0 {
            // Not a score of what a listener heard, but a call that never carried media: shown
            // under "not scored" with what B's session said, not averaged in as silence.
            run.problem = "B received no media in the \(Int(seconds + 0.6)) s of the call: \(log.withLock { $0 }.joined(separator: "; "))"
        }
        return run
    }

    /// baresip calling baresip through a relay with the same loss and seed (Benchmarks/quality/baresip_call.py).
    static func baresipCall(reference: String, recording: String, lossCase: LossCase, clip clipIndex: Int, seed: UInt64) async throws -> Run {
        let relay = try UDPImpairmentRelay(seed: seed)
        defer { relay.stop() }
        relay.updateImpairments { $0 = lossCase.impairments }
        let script = URL(fileURLWithPath: scorerPath()).deletingLastPathComponent().appendingPathComponent("baresip_call.py").path
        let arguments = [
            "python3", script, "--clip", reference, "--relay-port-a", "\(relay.portA)", "--relay-port-b", "\(relay.portB)",
            "--out", recording, "--bitrate", "32000", "--fec", "yes", "--expected-loss", "\(lossCase.nominalLossPercent)",
            // B plays through a clocked device and its monitor is recorded, as Tether's B records
            // in real time (baresip's decoder output has no clock: unconcealed losses vanish from it).
            "--player-pcm", "tether_spk", "--record-source", "spk.monitor",
        ]
        // The script blocks for the clip's length: on a thread of its own, not the task pool's.
        let result = await withCheckedContinuation { (done: CheckedContinuation<ChildProcess.Result, Never>) in
            Thread { done.resume(returning: ChildProcess.run(arguments)) }.start()
        }
        // What the relay did toward B (A → B): baresip's own figures are not read.
        let toB = relay.statistics().aToB
        var run = Run(
            lossCase: lossCase.name, clip: clipIndex, mode: .baresip, recording: recording, reference: reference,
            packetsReceived: Int(toB.packetsForwarded), packetsLost: Int(toB.droppedByLoss), framesRecoveredByFEC: 0,
            framesConcealed: 0, framesInsertedForDelay: 0, framesDroppedForDelay: 0, playbackUnderruns: 0, heardLossPercent: 0,
            jitterBufferDelayMilliseconds: nil, jitterBufferTargetMilliseconds: 0, meanOpinionScoreEstimate: nil)
        let last = result.output.split(separator: "\n").last.map(String.init) ?? ""
        if let data = last.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            object["recording"] != nil
        {
            return run
        }
        run.problem = "baresip call failed (status \(result.status)): \(result.output.suffix(300))"
        return run
    }

    // MARK: Codec alone

    /// The same speech through Opus alone, frame by frame with no network or jitter buffer, one
    /// packet in `every` lost on a fixed pattern: the ceiling a receiver can reach.
    static func codecOnly(
        reference: String, into path: String, lossPercent: Double, seed: UInt64, fec: Bool, bitrate: Int = 32_000,
        expectedLossPercent: Int? = nil, application: OpusConfiguration.Application = .voip, complexity: Int = 9,
        bandwidth: OpusConfiguration.Bandwidth = .wideband
    ) throws -> Double {
        let clip = try WAVFile.read(path: reference)
        var configuration = OpusConfiguration()
        configuration.application = application
        configuration.complexity = complexity
        configuration.maximumBandwidth = bandwidth
        configuration.bitrateBitsPerSecond = bitrate
        configuration.inBandFEC = fec
        configuration.expectedLossPercent = fec ? expectedLossPercent ?? max(1, Int(lossPercent.rounded())) : 0
        let encoder = try OpusEncoder(configuration: configuration)
        let decoder = try OpusDecoder()
        let frame = configuration.samplesPerFrame
        let frames = clip.samples.count / frame
        var packets: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 1500)
        for f in 0..<frames {
            let length = try clip.samples.withUnsafeBufferPointer { samples in
                try buffer.withUnsafeMutableBytes { try encoder.encode(samples.baseAddress! + f * frame, into: $0) }
            }
            packets.append(Array(buffer[0..<length]))
        }
        var random = SplitMix(seed: seed)
        let lost = (0..<frames).map { _ in Double(random.next() % 10_000) / 100 < lossPercent }
        var output = [Int16](repeating: 0, count: frames * frame)
        try output.withUnsafeMutableBufferPointer { out in
            for f in 0..<frames {
                let pcm = UnsafeMutableBufferPointer(rebasing: out[(f * frame)..<((f + 1) * frame)])
                if !lost[f] {
                    _ = try packets[f].withUnsafeBytes { try decoder.decode($0, into: pcm) }
                } else if fec, f + 1 < frames, !lost[f + 1] {
                    _ = try packets[f + 1].withUnsafeBytes { try decoder.decodeFEC(from: $0, into: pcm) }
                } else {
                    _ = try decoder.conceal(into: pcm)
                }
            }
        }
        try WAVFile.write(samples: output, sampleRateHertz: 48_000, to: path)
        // The payload's mean rate, in kilobits per second.
        let bytes = packets.reduce(0) { $0 + $1.count }
        return Double(bytes * 8) / (Double(frames * frame) / Double(OpusConfiguration.sampleRateHertz)) / 1000
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    // MARK: Tools

    static func checkTools(python: String) throws {
        var missing: [String] = []
        for tool in ["espeak-ng", "sox", python] where ChildProcess.run(["sh", "-c", "command -v '\(tool)'"]).status != 0 {
            missing.append(tool)
        }
        if !missing.contains(python), ChildProcess.run([python, "-c", "import pesq, numpy"]).status != 0 {
            missing.append("\(python) module pesq (pip install pesq)")
        }
        if !missing.isEmpty {
            throw ValidationError("missing: \(missing.joined(separator: ", ")). `make quality` installs them (apt espeak-ng sox, pip pesq).")
        }
    }

    static func scorerPath() -> String {
        // Next to this source in the package: Benchmarks/quality/pesq_score.py.
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        return here.appendingPathComponent("quality/pesq_score.py").path
    }

    /// espeak-ng → 48 kHz mono 16-bit, with `leadSeconds` of silence before and half a second after.
    static func synthesize(_ clip: Clip, into path: String, scratch: String, leadSeconds: Double = 2.5) throws {
        try synthesize(
            text: clip.text, voice: clip.voice, pitch: clip.pitch, wordsPerMinute: clip.wordsPerMinute, into: path, scratch: scratch,
            leadSeconds: leadSeconds)
    }

    static func synthesize(
        text: String, voice: String, pitch: Int = 50, wordsPerMinute: Int = 150, into path: String, scratch: String, leadSeconds: Double = 2.5
    ) throws {
        let raw = "\(scratch)/speech-raw.wav"
        let spoken = ChildProcess.run(["espeak-ng", "-v", voice, "-p", "\(pitch)", "-s", "\(wordsPerMinute)", "-w", raw, text])
        guard spoken.status == 0 else { throw ValidationError("espeak-ng failed: \(spoken.output)") }
        // `-R`: sox dithers the resampled speech down to 16 bits, with a seed from the clock
        // unless told to repeat; the same text then makes the same clip on every run.
        let converted = ChildProcess.run(["sox", "-R", raw, "-r", "48000", "-c", "1", "-b", "16", path, "pad", "\(leadSeconds)", "0.5"])
        guard converted.status == 0 else { throw ValidationError("sox failed: \(converted.output)") }
    }

    enum Score { case success(Double), failure(String) }

    /// Scores every pair in one Python process; keyed by the recording's path.
    static func score(_ pairs: [(String, String)], scorer: String, python: String) -> [String: Score] {
        let result = ChildProcess.run([python, scorer] + pairs.flatMap { [$0.0, $0.1] })
        var scores: [String: Score] = [:]
        for line in result.output.split(separator: "\n") {
            guard let data = line.data(using: .utf8),
                  let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                  let degraded = object["degraded"] as? String
            else { continue }
            if let value = object["pesq_wb"] as? Double {
                scores[degraded] = .success(value)
            } else {
                scores[degraded] = .failure(object["error"] as? String ?? "no score")
            }
        }
        if scores.isEmpty {
            for (_, degraded) in pairs { scores[degraded] = .failure("scorer failed (status \(result.status)): \(result.output.suffix(300))") }
        }
        return scores
    }

    // MARK: Output

    static func table(_ runs: [Run], cases: [LossCase], modes: [Mode]) -> String {
        var lines: [String] = []
        lines.append(
            "PESQ-WB (MOS-LQO, 1.0–4.64), mean over clips and seeds [worst–best]; Tether's targets: ≥ 3.5 at 10 %, ≥ 3.2 at 20 %, ≥ 3.0 bursty")
        lines.append("")
        let header = "loss                          " + modes.map { $0.rawValue.padding(toLength: 20, withPad: " ", startingAt: 0) }.joined()
            + "lost / FEC-rebuilt / heard loss (Tether)      JB delay / target"
        lines.append(header)
        lines.append(String(repeating: "─", count: header.count))
        for c in cases {
            var line = c.label.padding(toLength: 30, withPad: " ", startingAt: 0)
            for mode in modes {
                let scores = runs.filter { $0.lossCase == c.name && $0.mode == mode }.compactMap(\.pesq)
                let cell: String
                if scores.isEmpty {
                    cell = "n/a"
                } else {
                    let mean = scores.reduce(0, +) / Double(scores.count)
                    cell = scores.count > 1
                        ? String(format: "%.2f [%.2f–%.2f]", mean, scores.min()!, scores.max()!) : String(format: "%.2f", mean)
                }
                line += cell.padding(toLength: 20, withPad: " ", startingAt: 0)
            }
            let fec = runs.filter { $0.lossCase == c.name && $0.mode == .fecAndConcealment }
            let expected = fec.reduce(0) { $0 + $1.packetsReceived + max(0, $1.packetsLost) }
            let lost = fec.reduce(0) { $0 + max(0, $1.packetsLost) }
            let rebuilt = fec.reduce(0) { $0 + $1.framesRecoveredByFEC }
            let heard = fec.isEmpty ? 0 : fec.reduce(0) { $0 + $1.heardLossPercent } / Double(fec.count)
            let delays = fec.compactMap(\.jitterBufferDelayMilliseconds)
            let delay = delays.isEmpty ? 0 : delays.reduce(0, +) / Double(delays.count)
            let target = fec.isEmpty ? 0 : fec.reduce(0) { $0 + $1.jitterBufferTargetMilliseconds } / Double(fec.count)
            line += String(
                format: "%@ / %@ / %@",
                String(format: "%.1f %%", expected == 0 ? 0 : 100 * Double(lost) / Double(expected)),
                "\(rebuilt)", String(format: "%.1f %%", heard)
            ).padding(toLength: 45, withPad: " ", startingAt: 0)
            line += String(format: "%.0f / %.0f ms", delay, target)
            lines.append(line)
        }
        let problems = runs.compactMap { r in r.problem.map { "  \(r.recording): \($0)" } }
        if !problems.isEmpty {
            lines.append("")
            lines.append("not scored:")
            lines += problems
        }
        return lines.joined(separator: "\n")
    }

    static func writeJSON(_ runs: [Run], to path: String) throws {
        let rows: [[String: Any]] = runs.map { r in
            var row: [String: Any] = [
                "case": r.lossCase, "clip": r.clip, "seed": r.seed, "receiver": r.mode.key, "recording": r.recording,
                "packetsReceived": r.packetsReceived, "packetsLost": r.packetsLost,
                "framesRecoveredByFEC": r.framesRecoveredByFEC, "framesConcealed": r.framesConcealed,
                "framesInsertedForDelay": r.framesInsertedForDelay, "framesDroppedForDelay": r.framesDroppedForDelay,
                "playbackUnderruns": r.playbackUnderruns,
                "heardLossPercent": r.heardLossPercent,
                "framesRecoveredByRedundancy": r.framesRecoveredByRedundancy, "redundantCopiesTooLate": r.redundantCopiesTooLate,
                "redundantPacketsPercent": r.redundantPacketsPercent, "jitterBufferTargetMs": r.jitterBufferTargetMilliseconds,
            ]
            if let delay = r.jitterBufferDelayMilliseconds { row["jitterBufferDelayMs"] = delay }
            if let p = r.pesq { row["pesqWB"] = p }
            if let m = r.meanOpinionScoreEstimate { row["eModelMOS"] = m }
            if let problem = r.problem { row["problem"] = problem }
            if let t = r.bHearsAfterSeconds { row["bHearsAfterSeconds"] = t }
            if !r.disruptions.isEmpty { row["disruptions"] = r.disruptions }
            return row
        }
        let data = try JSONSerialization.data(withJSONObject: ["quality": rows], options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: path))
    }
}

extension OpusConfiguration.Application: ExpressibleByArgument {}
extension OpusConfiguration.Bandwidth: ExpressibleByArgument {}

/// `tether-bench codec-quality`: PESQ of Opus alone under loss (no network, no jitter buffer).
struct CodecQualityBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "codec-quality", abstract: "Wideband PESQ of Opus alone under random loss: the ceiling for `quality`.")

    @Option(help: "Folder for the clips and the recordings.")
    var workDirectory: String = ".build/quality"

    @Option(help: "Bitrates to try, bits per second.")
    var bitrate: [Int] = [32_000]

    @Option(help: "Expected loss the encoder is told (percent); default: the real loss.")
    var expectedLoss: [Int] = []

    @Option(help: "Loss cases, percent.")
    var loss: [Double] = [0, 5, 10, 20]

    @Option(help: "Python with the pesq and numpy modules.")
    var python: String = "python3"

    @Option(help: "Encoder applications to try (voip, audio, restricted-lowdelay).")
    var application: [OpusConfiguration.Application] = [.voip]

    @Option(help: "Encoder complexities to try (0…10).")
    var complexity: [Int] = [9]

    @Option(help: "Maximum bandwidths to try (narrowband, mediumband, wideband, super-wideband, fullband).")
    var bandwidth: [OpusConfiguration.Bandwidth] = [.wideband]

    @Option(help: "Speech clips (each another voice and other sentences; 1…8); each score is the mean over them.")
    var clips: Int = 1

    func run() throws {
        try QualityBench.checkTools(python: python)
        try FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
        guard (1...QualityBench.clipSet.count).contains(clips) else { throw ValidationError("--clips must be 1…\(QualityBench.clipSet.count)") }
        var references: [String] = []
        for clip in 0..<clips {
            let reference = "\(workDirectory)/clip\(clip).wav"
            try QualityBench.synthesize(QualityBench.clipSet[clip], into: reference, scratch: workDirectory)
            references.append(reference)
        }
        var pairs: [(String, String)] = []
        var labels: [(String, [String], Double)] = []
        let fecCases: [(Bool, Int?)] = [(true, nil)] + expectedLoss.map { (true, Optional($0)) } + [(false, nil)]
        for band in bandwidth {
            for app in application {
                for level in complexity {
                    for rate in bitrate {
                        for loss in loss {
                            for (fec, expected) in fecCases {
                                let fecName = fec ? "fec\(expected.map { "\($0)" } ?? "")" : "plc"
                                let name = "\(band.rawValue)-\(app.rawValue)-c\(level)-\(rate)-\(Int(loss))-\(fecName)"
                                var paths: [String] = []
                                var payloadRate = 0.0
                                for (clip, reference) in references.enumerated() {
                                    let path = "\(workDirectory)/codec-\(name)-clip\(clip).wav"
                                    payloadRate += try QualityBench.codecOnly(
                                        reference: reference, into: path, lossPercent: loss, seed: 1000 + UInt64(clip), fec: fec,
                                        bitrate: rate, expectedLossPercent: expected, application: app, complexity: level, bandwidth: band)
                                    pairs.append((reference, path))
                                    paths.append(path)
                                }
                                let fecLabel = fec ? "FEC (expects \(expected.map { "\($0)" } ?? "\(Int(loss))") %) + PLC" : "PLC only"
                                let label = "\(band.rawValue), \(app.rawValue), complexity \(level), \(rate / 1000) kb/s, \(Int(loss)) % loss, \(fecLabel)"
                                labels.append((label, paths, payloadRate / Double(paths.count)))
                            }
                        }
                    }
                }
            }
        }
        let scores = QualityBench.score(pairs, scorer: QualityBench.scorerPath(), python: python)
        for (label, paths, payloadRate) in labels {
            let values = paths.compactMap { if case .some(.success(let v)) = scores[$0] { v } else { nil } }
            guard !values.isEmpty else {
                say("\(label): not scored")
                continue
            }
            let mean = values.reduce(0, +) / Double(values.count)
            let figures = String(format: "PESQ-WB %.2f [%.2f–%.2f], payload %.1f kb/s", mean, values.min()!, values.max()!, payloadRate)
            say(label.padding(toLength: max(label.count, 86), withPad: " ", startingAt: 0) + figures)
        }
    }
}

/// Writes a line to standard output at once (unbuffered, so progress shows in a pipe or a file).
func say(_ line: String = "") {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

extension CallConfiguration.Redundancy: ExpressibleByArgument {}
