import ArgumentParser
import Foundation
import Logging
import Tether
import TetherAudio
import TetherFaults
import TetherTestbed

/// `tether demo`: two sessions in one process over real ICE on 127.0.0.1, a test tone each way.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Two CallSessions over real libnice on 127.0.0.1 with a test tone each way.",
        discussion: """
            Prints a timeline of state changes while it runs, a statistics table at the end, and writes each side's received audio to WAV (with the measured tone frequency and level).
            """)

    @Option(help: "How long the call lasts, in seconds.")
    var duration: Double = 10

    @Option(help: "Folder for the received-audio WAV files.")
    var outputDirectory: String = "tether-demo-out"

    @Option(help: "Tone side A sends, in hertz.")
    var aFrequency: Double = 440

    @Option(help: "Tone side B sends, in hertz.")
    var bFrequency: Double = 660

    @Option(help: "Tone level, in dBFS.")
    var level: Double = -12

    @Option(help: "Opus frame duration in milliseconds (10, 20, 40, 60).")
    var ptime: Int = 20

    @Option(help: "Cut the path for this many seconds (through the impairment relay); 50 or more shows the give-up.")
    var outage: Double?

    @Option(help: "When the outage starts, in seconds after the call is established.")
    var outageAt: Double = 3

    @Option(help: "Random packet loss in percent on the path (seeded, through the impairment relay).")
    var loss: Double = 0

    @Option(help: "Seed of the relay's loss pattern.")
    var seed: UInt64 = 1

    @Option(help: "Side A's audio in instead of its tone: wav:PATH, pulse[:SOURCE], alsa[:PCM].")
    var inputA: String?

    @Option(help: "Side A's audio out instead of its WAV file: discard, wav:PATH, pulse[:SINK], alsa[:PCM].")
    var outputA: String?

    @Option(help: "Side B's audio in instead of its tone.")
    var inputB: String?

    @Option(help: "Side B's audio out instead of its WAV file.")
    var outputB: String?

    @Option(help: "Device period in milliseconds for pulse/alsa devices (10 or 20).")
    var period: Int = 20

    @Option(help: "How A's offer keys SRTP: sdes, dtls (DTLS-SRTP handshake) or both.")
    var keying: CallConfiguration.Keying = .sdes

    @Option(help: "A puts the call on hold this many seconds after set-up (RFC 3264 re-offer).")
    var holdAt: Double?

    @Option(help: "How long A holds the call before resuming, in seconds.")
    var holdFor: Double = 3

    @Option(help: "DTMF digits A sends (RFC 4733 events), e.g. 123#.")
    var dtmf: String?

    @Option(help: "When A sends the DTMF digits, in seconds after set-up.")
    var dtmfAt: Double = 1

    @OptionGroup var voice: VoiceOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard duration > 0 && duration <= 3600 else { throw ValidationError("--duration must be in (0, 3600]") }
        if let outage, !(outage > 0 && outage <= 600) { throw ValidationError("--outage must be in (0, 600]") }
        if let holdAt, !(holdAt >= 0 && holdFor > 0) { throw ValidationError("--hold-at must be ≥ 0 and --hold-for > 0") }
        if let dtmf, dtmf.isEmpty || !dtmf.allSatisfy({ "0123456789*#ABCDabcd".contains($0) }) {
            throw ValidationError("--dtmf takes the keys 0-9, *, #, A-D")
        }
        guard (0...100).contains(loss) else { throw ValidationError("--loss must be in 0…100") }
    }

    func run() async throws {
        try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)
        let aWAV = (outputDirectory as NSString).appendingPathComponent("a-received.wav")
        let bWAV = (outputDirectory as NSString).appendingPathComponent("b-received.wav")
        let opus = OpusSettings(frameDurationMilliseconds: ptime)
        let timeline = Timeline()
        let impaired = outage != nil || loss > 0
        let relay = impaired ? try UDPImpairmentRelay(seed: seed) : nil
        relay?.updateImpairments { $0.lossPercent = loss }
        var aConfiguration = CallConfiguration(
            audioSource: try inputA.map { try AudioEndpointSpec.source($0, periodMilliseconds: period) }
                ?? TestSignalSource(frequencyHertz: aFrequency, levelDBFS: level),
            audioSink: try outputA.map { try AudioEndpointSpec.sink($0, periodMilliseconds: period) } ?? WAVFileSink(path: aWAV),
            opus: opus, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, cname: "demo-a")
        aConfiguration.keying = keying
        let log = logging.bootstrap(defaultLevel: .warning)
        aConfiguration.logger = log
        aConfiguration.logger[metadataKey: "side"] = "A"
        aConfiguration.voiceProcessing = voice.settings(for: aConfiguration.audioSource)
        let a = try CallSession(configuration: aConfiguration)
        var bConfiguration = CallConfiguration(
            audioSource: try inputB.map { try AudioEndpointSpec.source($0, periodMilliseconds: period) }
                ?? TestSignalSource(frequencyHertz: bFrequency, levelDBFS: level),
            audioSink: try outputB.map { try AudioEndpointSpec.sink($0, periodMilliseconds: period) } ?? WAVFileSink(path: bWAV),
            opus: opus, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, cname: "demo-b")
        bConfiguration.voiceProcessing = voice.settings(for: bConfiguration.audioSource)
        bConfiguration.logger = log
        bConfiguration.logger[metadataKey: "side"] = "B"
        let b = try CallSession(configuration: bConfiguration)
        var plan = "A sends \(Int(aFrequency)) Hz, B sends \(Int(bFrequency)) Hz at \(level) dBFS over ICE on 127.0.0.1"
        if let relay { plan += " through the impairment relay (ports \(relay.portA)/\(relay.portB))" }
        if loss > 0 { plan += ", \(loss) % random loss (seed \(seed))" }
        if keying != .sdes { plan += ", keyed with \(keying == .dtls ? "DTLS-SRTP" : "SDES and DTLS-SRTP offered")" }
        if let outage { plan += ", a \(outage) s outage \(outageAt) s after set-up" }
        if let holdAt { plan += ", A holds the call at \(holdAt) s for \(holdFor) s" }
        if let dtmf { plan += ", A sends DTMF \(dtmf) at \(dtmfAt) s" }
        print("tether demo: " + plan)
        let signaling = InProcessSignaling(a: a, b: b, relay: relay) { side, event in timeline.show(side.rawValue, event) }

        try await a.start()
        try await b.start()
        try await signaling.connect()
        // Run for --duration, or long enough to show the outage and what follows it.
        var runSeconds = duration
        if let outage {
            runSeconds = max(duration, outageAt + outage + (outage >= 50 ? 2 : 6))
            let at = outageAt
            Task {
                try? await Task.sleep(for: .seconds(at))
                relay?.blackHole(true)
                timeline.note("relay", "path cut (black hole both ways)")
                try? await Task.sleep(for: .seconds(outage))
                relay?.blackHole(false)
                timeline.note("relay", "path restored")
            }
        }
        if let holdAt {
            runSeconds = max(runSeconds, holdAt + holdFor + 2)
            let holdFor = holdFor
            Task {
                try? await Task.sleep(for: .seconds(holdAt))
                do { try await a.hold() } catch { timeline.note("A", "hold refused: \(error)") }
                try? await Task.sleep(for: .seconds(holdFor))
                do { try await a.resume() } catch { timeline.note("A", "resume refused: \(error)") }
            }
        }
        if let dtmf {
            runSeconds = max(runSeconds, dtmfAt + Double(dtmf.count) * 0.17 + 1)
            let at = dtmfAt
            Task {
                try? await Task.sleep(for: .seconds(at))
                do {
                    try await a.sendDTMF(dtmf)
                    timeline.note("A", "sends DTMF \(dtmf)")
                } catch { timeline.note("A", "DTMF refused: \(error)") }
            }
        }
        let deadline = Date().addingTimeInterval(runSeconds)
        while Date() < deadline && !(a.state.isEnded && b.state.isEnded) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let statsA = a.statistics()
        let statsB = b.statistics()
        await a.hangUp()
        // B learns of the hang-up from A's RTCP BYE; give it a moment, then end it regardless.
        try? await Task.sleep(for: .milliseconds(300))
        await b.remoteHungUp()
        await signaling.waitUntilFinished()
        relay?.stop()

        print("")
        print(StatisticsTable.render(a: statsA, b: statsB))
        for (side, stats) in [("A", statsA), ("B", statsB)] where !stats.recovery.disruptions.isEmpty {
            print("Recovery timeline \(side) (\(stats.recovery.restartsOffered) restarts offered, \(stats.recovery.restartsAnswered) answered):")
            for d in stats.recovery.disruptions {
                let end = d.endSeconds.map { String(format: "%.3f s", $0) } ?? "—"
                print(String(format: "  %8.3f s → %@  %@, %d attempt(s), %@", d.startSeconds, end, d.cause, d.attempts, d.outcome ?? "ongoing"))
            }
        }
        for problem in signaling.errors { print("signaling: \(problem)") }
        print("")
        print("Received audio\(impaired ? " (the impairment is in it; level not judged)" : ""):")
        for (side, path, expected) in [("A", aWAV, bFrequency), ("B", bWAV, aFrequency)]
        where FileManager.default.fileExists(atPath: path) && (side == "A" ? outputA == nil : outputB == nil) {
            print(
                "  \(side) \(path): "
                    + AudioCheck.describe(path: path, expectedFrequencyHertz: expected, expectedLevelDBFS: impaired ? nil : level))
        }
    }
}

/// Prints events from both sides with the time since the demo started.
final class Timeline: Sendable {
    private let start = Date()

    func note(_ side: String, _ text: String) {
        let t = Date().timeIntervalSince(start)
        print(String(format: "[%7.3f s] %-5@  %@", t, side, text))
    }

    func show(_ side: String, _ event: CallEvent) {
        switch event {
        case .stateChanged(let from, let to, _):
            note(side, "\(from.name) → \(to)")
        case .candidatePairSelected(let local, let remote, let lt, let rt):
            note(side, "ICE pair \(local) (\(lt)) ⇄ \(remote) (\(rt))")
        case .error(let error):
            note(side, "error: \(error)")
        case .audioDevice(let direction, let deviceEvent):
            note(side, "\(direction.rawValue) device: \(deviceEvent)")
        case .outboundMediaChanged(let disrupted):
            note(side, disrupted ? "the peer stopped receiving our media" : "the peer receives our media again")
        case .localDescription(let d):
            if d.isRestart { note(side, "sent re-\(d.kind.rawValue) through signaling") }
        case .statistics:
            break
        case .dtmf(let digit, let milliseconds):
            note(side, "received DTMF \(digit) (\(milliseconds) ms)")
        case .holdChanged(let hold):
            note(side, "\(hold)")
        case .localCandidate(let c):
            note(side, c.isEndOfCandidates ? "end of candidates" : "trickled \(c.candidate)")
        }
    }
}
