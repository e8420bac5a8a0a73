import ArgumentParser
import Foundation
import Tether
import TetherTestbed

/// Mouth-to-ear latency through real audio devices (run under scripts/with-test-audio.sh, or
/// against any PulseAudio server that has the sinks named by the options).
struct LatencyBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency",
        abstract: "Mouth-to-ear latency through loopback audio devices (PulseAudio and ALSA, 10 and 20 ms periods).",
        discussion: """
            Needs a PulseAudio server with null sinks `mic` (its monitor is the microphone) and `spk` \
            (its monitor is the ear), and ALSA PCMs tether_mic/tether_spk through the pulse plugin: \
            `make latency` runs it under scripts/with-test-audio.sh, which provides them.
            """)

    @Option(help: "Backends to measure (pulse, alsa).")
    var backend: [MouthToEarProbe.Backend] = [.pulse, .alsa]

    @Option(help: "Device periods in milliseconds.")
    var period: [Int] = [10, 20]

    @Option(help: "Seconds of call per measurement (one burst per second).")
    var seconds: Double = 10

    @Option(help: "Write every figure as JSON to this file.")
    var json: String?

    func run() async throws {
        print("mouth-to-ear latency: 100 ms 1 kHz bursts spoken into `mic`, heard on `spk.monitor`; Opus 20 ms, adaptive jitter buffer, loopback ICE")
        var rows: [[String: Any]] = []
        var table: [String] = []
        for b in backend {
            for p in period {
                let probe = MouthToEarProbe(backend: b, periodMilliseconds: p, seconds: seconds)
                let r = try await probe.run { line in print("  [\(b.rawValue) \(p) ms] \(line)") }
                let line = String(
                    format: "%-6@ %4d ms   %7.1f   %7.1f   %7.1f   %5d/%-5d   %6d / %-6d   %@ / %@",
                    b.rawValue as NSString, p, r.medianMilliseconds, r.minimumMilliseconds, r.maximumMilliseconds,
                    r.latenciesMilliseconds.count, r.burstsSpoken, r.speaker.captureOverruns, r.listener.playbackUnderruns,
                    r.speaker.captureThreadScheduling as NSString, r.listener.playbackThreadScheduling as NSString)
                print("  per burst (ms): " + r.latenciesMilliseconds.map { String(format: "%.1f", $0) }.joined(separator: " "))
                print("  where the time goes (each part as the sessions measured it, mean of one reading a second):")
                for part in r.parts {
                    print("    " + part.name.padding(toLength: 16, withPad: " ", startingAt: 0)
                        + String(format: "%6.1f ms   ", part.milliseconds) + part.source)
                }
                print("    " + "sum".padding(toLength: 16, withPad: " ", startingAt: 0)
                    + String(format: "%6.1f ms   measured median %.1f ms, %+.1f ms not in the parts (scheduling, the recorders, what no device reports)",
                        r.partsMilliseconds, r.medianMilliseconds, r.medianMilliseconds - r.partsMilliseconds))
                table.append(line)
                print("  " + line)
                rows.append([
                    "backend": b.rawValue, "periodMs": p, "medianMs": r.medianMilliseconds, "minMs": r.minimumMilliseconds,
                    "maxMs": r.maximumMilliseconds, "burstsHeard": r.latenciesMilliseconds.count, "burstsSpoken": r.burstsSpoken,
                    "calibrationMs": r.calibrationMilliseconds, "captureOverruns": r.speaker.captureOverruns,
                    "playbackUnderruns": r.listener.playbackUnderruns, "captureThread": r.speaker.captureThreadScheduling,
                    "playbackThread": r.listener.playbackThreadScheduling, "mediaThread": r.speaker.mediaThreadScheduling,
                    "jitterBufferMs": r.listener.jitterBufferDelayMilliseconds ?? NSNull(), "latenciesMs": r.latenciesMilliseconds,
                    "partsMs": Dictionary(uniqueKeysWithValues: r.parts.map { ($0.name, $0.milliseconds) }),
                    "seconds": seconds,
                ])
            }
        }
        print("")
        print("backend period  median ms  min ms    max ms    heard/spoken  overruns / underruns   capture / playback thread")
        for line in table { print(line) }
        if let json {
            let data = try JSONSerialization.data(withJSONObject: ["mouthToEar": rows], options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: json))
            print("figures written to \(json)")
        }
    }
}

extension MouthToEarProbe.Backend: ExpressibleByArgument {}
