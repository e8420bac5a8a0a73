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
            Needs a PulseAudio-protocol server (PulseAudio, or PipeWire with pipewire-pulse) with null \
            sinks `mic` (its monitor is the microphone) and `spk` (its monitor is the ear), and ALSA PCMs \
            tether_mic/tether_spk through the pulse plugin: `make latency` runs it under \
            scripts/with-test-audio.sh, which provides them, once on PulseAudio and once on PipeWire.
            """)

    @Option(help: "Backends to measure (pulse, alsa).")
    var backend: [MouthToEarProbe.Backend] = [.pulse, .alsa]

    @Option(help: "Device periods in milliseconds.")
    var period: [Int] = [10, 20]

    @Option(help: "Opus frame durations in milliseconds (10, 20, 40, 60), both sessions.")
    var frame: [Int] = [20]

    @Option(help: "Seconds of call per measurement (one burst per second).")
    var seconds: Double = 20

    @Option(help: "Write every figure as JSON to this file.")
    var json: String?

    func run() async throws {
        let server = Self.soundServer()
        print("mouth-to-ear latency: 100 ms 1 kHz bursts spoken into `mic`, heard on `spk.monitor`; adaptive jitter buffer, loopback ICE")
        print("sound server: \(server)")
        var rows: [[String: Any]] = []
        var table: [String] = []
        for f in frame {
            for b in backend {
                for p in period {
                    var probe = MouthToEarProbe(backend: b, periodMilliseconds: p, seconds: seconds)
                    probe.frameMilliseconds = f
                    let label = "\(b.rawValue) \(p) ms, Opus \(f) ms"
                    let r = try await probe.run { line in print("  [\(label)] \(line)") }
                    let line = String(
                        format: "%-16@ %-6@ %4d ms %4d ms %7.1f %7.1f %7.1f   %5d/%-5d %5d / %-5d %6.1f  %5.0f %6.1f / %-6.1f",
                        server as NSString, b.rawValue as NSString, p, f, r.medianMilliseconds, r.minimumMilliseconds, r.maximumMilliseconds,
                        r.latenciesMilliseconds.count, r.burstsSpoken, r.speaker.captureOverruns, r.listener.playbackUnderruns,
                        r.processCPUPercent, r.packetsPerSecond, r.payloadBitsPerSecond / 1000, r.wireBitsPerSecond / 1000)
                    print("  per burst (ms): " + r.latenciesMilliseconds.map { String(format: "%.1f", $0) }.joined(separator: " "))
                    print("  where the time goes (each part as the sessions measured it, mean of one reading a second):")
                    for part in r.parts {
                        print("    " + part.name.padding(toLength: 16, withPad: " ", startingAt: 0)
                            + String(format: "%6.1f ms   ", part.milliseconds) + part.source)
                    }
                    print("    " + "sum".padding(toLength: 16, withPad: " ", startingAt: 0)
                        + String(format: "%6.1f ms   measured median %.1f ms: %+.1f ms not in the parts", r.partsMilliseconds,
                            r.medianMilliseconds, r.medianMilliseconds - r.partsMilliseconds))
                    print("  threads: capture \(r.speaker.captureThreadScheduling), playback \(r.listener.playbackThreadScheduling), media \(r.speaker.mediaThreadScheduling)")
                    table.append(line)
                    print("  " + line)
                    rows.append([
                        "server": server, "backend": b.rawValue, "periodMs": p, "frameMs": f, "medianMs": r.medianMilliseconds,
                        "minMs": r.minimumMilliseconds, "maxMs": r.maximumMilliseconds, "burstsHeard": r.latenciesMilliseconds.count,
                        "burstsSpoken": r.burstsSpoken, "calibrationMs": r.calibrationMilliseconds,
                        "captureOverruns": r.speaker.captureOverruns, "playbackUnderruns": r.listener.playbackUnderruns,
                        "captureThread": r.speaker.captureThreadScheduling, "playbackThread": r.listener.playbackThreadScheduling,
                        "mediaThread": r.speaker.mediaThreadScheduling, "latenciesMs": r.latenciesMilliseconds,
                        "partsMs": Dictionary(uniqueKeysWithValues: r.parts.map { ($0.name, $0.milliseconds) }),
                        "processCPUPercent": r.processCPUPercent, "packetsPerSecond": r.packetsPerSecond,
                        "payloadBitsPerSecond": r.payloadBitsPerSecond, "wireBitsPerSecond": r.wireBitsPerSecond, "seconds": seconds,
                    ])
                }
            }
        }
        print("")
        print("The null sinks' monitors get samples when the sink renders them, a little before the latency the sink")
        print("reports, so the parts may add up to more than was measured. CPU: the whole process (both sessions, the")
        print("devices, the probe's player and recorders). Wire: payload + 50 bytes a packet (IPv4, UDP, RTP, SRTP tag).")
        print("server           backend period frame   median   min     max     heard/spoken over/underruns  CPU %  pkt/s  kb/s payload / wire")
        for line in table { print(line) }
        if let json {
            let data = try JSONSerialization.data(withJSONObject: ["mouthToEar": rows], options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: json))
            print("figures written to \(json)")
        }
    }
}

extension LatencyBench {
    /// The server behind PULSE_SERVER as `pactl info` names it: "pulseaudio" or, through
    /// pipewire-pulse, "PipeWire 0.3.65".
    static func soundServer() -> String {
        let info = ChildProcess.run(["pactl", "info"])
        guard info.status == 0,
            let line = info.output.split(separator: "\n").first(where: { $0.hasPrefix("Server Name:") })
        else { return "unknown" }
        let name = line.dropFirst("Server Name:".count).trimmingCharacters(in: .whitespaces)
        if let range = name.range(of: "(on "), name.hasSuffix(")") {
            return String(name[range.upperBound..<name.index(before: name.endIndex)])  // "PipeWire 0.3.65"
        }
        return name
    }
}

extension MouthToEarProbe.Backend: ExpressibleByArgument {}
