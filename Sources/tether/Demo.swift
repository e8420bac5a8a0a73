import ArgumentParser
import Foundation
import Tether
import TetherAudio

/// `tether demo`: two sessions in one process over real ICE on 127.0.0.1, a test tone each way.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Two CallSessions over real libnice on 127.0.0.1 with a test tone each way.",
        discussion: """
            Prints a timeline of state changes while it runs, a statistics table at the end, and writes
            each side's received audio to WAV (with the measured tone frequency and level).
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

    func validate() throws {
        guard duration > 0 && duration <= 3600 else { throw ValidationError("--duration must be in (0, 3600]") }
    }

    func run() async throws {
        try FileManager.default.createDirectory(atPath: outputDirectory, withIntermediateDirectories: true)
        let aWAV = (outputDirectory as NSString).appendingPathComponent("a-received.wav")
        let bWAV = (outputDirectory as NSString).appendingPathComponent("b-received.wav")
        let opus = OpusSettings(frameDurationMilliseconds: ptime)
        let timeline = Timeline()
        let a = try CallSession(
            configuration: CallConfiguration(
                audioSource: TestSignalSource(frequencyHertz: aFrequency, levelDBFS: level), audioSink: WAVFileSink(path: aWAV),
                opus: opus, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, cname: "demo-a"))
        let b = try CallSession(
            configuration: CallConfiguration(
                audioSource: TestSignalSource(frequencyHertz: bFrequency, levelDBFS: level), audioSink: WAVFileSink(path: bWAV),
                opus: opus, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, cname: "demo-b"))
        print("tether demo: A sends \(Int(aFrequency)) Hz, B sends \(Int(bFrequency)) Hz at \(level) dBFS for \(duration) s over ICE on 127.0.0.1")
        let watchA = Task { await timeline.follow(a.events, side: "A") }
        let watchB = Task { await timeline.follow(b.events, side: "B") }

        try await a.start()
        try await b.start()
        let offer = try await a.makeOffer()
        timeline.note("A", "offer sent (\(offer.utf8.count) bytes of SDP)")
        let answer = try await b.acceptOffer(offer)
        timeline.note("B", "answer sent (\(answer.utf8.count) bytes of SDP)")
        try await a.applyAnswer(answer)

        try await Task.sleep(for: .seconds(duration))
        let statsA = a.statistics()
        let statsB = b.statistics()
        await a.hangUp()
        // B learns of the hang-up from A's RTCP BYE; give it a moment, then end it regardless.
        try? await Task.sleep(for: .milliseconds(300))
        await b.remoteHungUp()
        await watchA.value
        await watchB.value

        print("")
        print(StatisticsTable.render(a: statsA, b: statsB))
        print("")
        print("Received audio:")
        for (side, path, expected) in [("A", aWAV, bFrequency), ("B", bWAV, aFrequency)] {
            print("  \(side) \(path): " + AudioCheck.describe(path: path, expectedFrequencyHertz: expected, expectedLevelDBFS: level))
        }
    }
}

/// Prints events from both sides with the time since the demo started.
final class Timeline: Sendable {
    private let start = Date()

    func note(_ side: String, _ text: String) {
        let t = Date().timeIntervalSince(start)
        print(String(format: "[%7.3f s] %@  %@", t, side, text))
    }

    func follow(_ events: AsyncStream<CallEvent>, side: String) async {
        for await event in events {
            switch event {
            case .stateChanged(let from, let to, _):
                note(side, "\(from.name) → \(to)")
            case .candidatePairSelected(let local, let remote, let lt, let rt):
                note(side, "ICE pair \(local) (\(lt)) ⇄ \(remote) (\(rt))")
            case .error(let error):
                note(side, "error: \(error)")
            case .outboundMediaChanged(let disrupted):
                note(side, disrupted ? "the peer stopped receiving our media" : "the peer receives our media again")
            case .localDescription, .statistics:
                break
            }
        }
    }
}
