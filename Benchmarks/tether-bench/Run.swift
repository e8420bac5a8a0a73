import ArgumentParser
import Foundation
import Tether
import TetherTestbed

/// `tether-bench` (or `tether-bench run`): everything, with live progress, a table, JSON and a
/// Markdown report with an SVG disruption timeline.
struct RunBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Everything in one run: CPU against the C floor, allocations, ring hand-off, calls per core, recovery, mouth-to-ear latency.",
        discussion: """
            --quick takes about a minute with the devices; the full run about 3 minutes (it includes the \
            50 s give-up and a longer calls-per-core ramp). Figures go to the terminal as a table, \
            to --json and to --report (Markdown, with the disruption timeline as SVG next to it). \
            Mouth-to-ear latency needs the private PulseAudio daemon: `make bench` runs this \
            under scripts/with-test-audio.sh.
            """)

    @Flag(help: "Shorter measurements, no give-up case (under 2 minutes).")
    var quick = false

    @Option(help: "Opus complexity (0…10).")
    var complexity: Int = 9

    @Option(help: "Write every figure as JSON to this file.")
    var json: String = ".build/bench/bench.json"

    @Option(help: "Write a Markdown report (with an SVG timeline beside it) to this file.")
    var report: String = ".build/bench/report.md"

    func run() async throws {
        let started = Date()
        var figures: [String: Any] = [:]
        var table: [(String, String, String)] = []  // figure, value, target
        func progress(_ line: String) { say(String(format: "[%6.1f s] ", Date().timeIntervalSince(started)) + line) }
        say("tether-bench \(quick ? "--quick" : "(full)"): Opus 48 kHz mono 20 ms 32 kb/s complexity \(complexity), AES_CM_128_HMAC_SHA1_80, loopback")

        // 1–2. Hot path against the C floor, allocations.
        let frames = quick ? 1000 : 3000
        let repetitions = 5
        progress("hot path: \(frames) frames × \(repetitions) repetitions, Tether and the C floor…")
        let hot = try HotPathBench.measure(frames: frames, complexity: complexity, repetitions: repetitions)
        figures["hotPath"] = hot.dictionary
        table.append(("send path µs/frame (Tether / floor)", String(format: "%.1f / %.1f", hot.sendTether, hot.sendFloor), ""))
        table.append(("send ratio", String(format: "%.3f", hot.sendTether / hot.sendFloor), "≤ 1.10"))
        table.append(("receive path µs/frame (Tether / floor)", String(format: "%.1f / %.1f", hot.receiveTether, hot.receiveFloor), ""))
        table.append(("receive ratio", String(format: "%.3f", hot.receiveTether / hot.receiveFloor), "≤ 1.10"))
        table.append(("heap allocations per frame, Tether's own", String(format: "%.2f", hot.allocationsTether), "0"))
        table.append(("heap allocations per frame, libsrtp's", String(format: "%.1f", hot.allocationsLibsrtp), "(reported)"))

        // 3. Rings.
        let messages = quick ? 5_000 : 60_000  // full: 3 s, three periods of the kernel's realtime throttling
        progress("hand-off: SPSC ring + event count against mutex + condition, \(messages) messages each…")
        let ring = RingBench.measure({ RingBench.RingChannel() }, messages: messages, burst: quick ? 500_000 : 2_000_000)
        let worker = RingBench.measure({ RingBench.RingChannel(spinsOn: .count) }, messages: messages, burst: quick ? 500_000 : 2_000_000)
        let mutex = RingBench.measure({ RingBench.MutexChannel() }, messages: messages, burst: quick ? 500_000 : 2_000_000)
        figures["handOff"] = ["ring": ring.dictionary, "ringAsTheMediaWorkerWaits": worker.dictionary, "mutexQueue": mutex.dictionary]
        table.append(("hand-off latency median / p99 / max, ring", ring.latencyText, "median, p99 below the mutex queue's"))
        table.append(("hand-off latency median / p99 / max, ring as the worker waits", worker.latencyText, ""))
        table.append(("hand-off latency median / p99 / max, mutex queue", mutex.latencyText, ""))
        table.append(("throughput, ring / as the worker waits / mutex queue", String(format: "%.1f / %.1f / %.1f M msg/s", ring.messagesPerSecond / 1e6, worker.messagesPerSecond / 1e6, mutex.messagesPerSecond / 1e6), "ring above"))

        // 4. Calls per core.
        let cores = Double(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        // Quick mode still reaches 24 calls: the fixed costs (a device clock tick, a worker pass)
        // are shared by the calls, so a small step understates how many fit.
        let ramp = quick ? [4, 12, 24] : [2, 4, 8, 12, 16, 24, 32]
        var steps: [CallsBench.LoadStep] = []
        for calls in ramp {
            progress("calls per core: \(calls) calls (\(2 * calls) endpoints) in one process…")
            let step = try await CallsBench.load(calls: calls, seconds: quick ? 3 : 8, complexity: complexity)
            steps.append(step)
            progress(String(format: "  %d calls: %.2f cores, late frames %.3f %%%@", calls, step.coresUsed, 100 * step.lateFrameRatio, step.established ? "" : ", not all established"))
            if step.coresUsed > 0.85 * cores || step.lateFrameRatio > 0.01 || !step.established { break }
        }
        // A clean step: every call established, at most 1 % late frames, and the cores not
        // saturated (at most 85 % used; beyond, the figure measures contention, not cost).
        let good = steps.filter { $0.established && $0.lateFrameRatio <= 0.01 && $0.coresUsed <= 0.85 * cores }
        let perEndpoint = good.last.map { $0.coresUsed / Double($0.endpoints) } ?? 0
        let endpointsPerCore = perEndpoint > 0 ? 1 / perEndpoint : 0
        figures["callsPerCore"] = [
            "steps": steps.map { ["calls": $0.calls, "endpoints": $0.endpoints, "coresUsed": $0.coresUsed, "lateFrameRatio": $0.lateFrameRatio, "concealedWithoutLoss": $0.concealedWithoutLoss, "playbackUnderruns": $0.playbackUnderruns, "captureOverruns": $0.captureOverruns, "established": $0.established] },
            "endpointsPerCore": endpointsPerCore, "callsPerCoreBothEndsInProcess": endpointsPerCore / 2, "cores": cores,
        ]
        table.append(("calls per core (one endpoint each, from the largest clean step)", String(format: "%.1f", endpointsPerCore), "≥ 30"))
        if let last = good.last {
            table.append(("largest clean step", String(format: "%d calls (%d endpoints), %.2f cores", last.calls, last.endpoints, last.coresUsed), ""))
        }

        // 4b. Call set-up, SDES against DTLS-SRTP.
        progress("call set-up: SDES and DTLS-SRTP, \(quick ? 5 : 20) calls each…")
        let sdesSetUp = try await SetUpBench.measure(keying: .sdes, calls: quick ? 5 : 20)
        let dtlsSetUp = try await SetUpBench.measure(keying: .dtls, calls: quick ? 5 : 20)
        figures["callSetUp"] = ["sdes": sdesSetUp.dictionary, "dtls": dtlsSetUp.dictionary]
        for f in [sdesSetUp, dtlsSetUp] {
            table.append((
                "call set-up, offer → established (\(f.keying == .sdes ? "SDES" : "DTLS-SRTP")) median [min–max]",
                String(format: "%.1f ms [%.1f–%.1f]", f.median, f.minimum, f.maximum), "(reported)"))
        }

        // 5. Recovery.
        progress("recovery: 1.5 s outage…")
        let short = try await CallsBench.recovery(outageSeconds: 1.5, restore: true)
        progress("recovery: 3 s outage (ICE restart)…")
        let restart = try await CallsBench.recovery(outageSeconds: 3, restore: true)
        var giveUp: CallsBench.Recovery?
        if !quick {
            progress("recovery: 55 s outage (the 50 s give-up)…")
            giveUp = try await CallsBench.recovery(outageSeconds: 55, restore: false)
        }
        func recoveryFigures(_ r: CallsBench.Recovery) -> [String: Any] {
            var o: [String: Any] = ["outageSeconds": r.outageSeconds, "detectionSeconds": r.detectionSeconds, "restartsOffered": r.restartsOffered]
            if let s = r.restorationSeconds { o["restorationSeconds"] = s }
            if !r.endedAfterSeconds.isEmpty { o["endedAfterSeconds"] = r.endedAfterSeconds; o["endCodes"] = r.endCodes }
            return o
        }
        figures["recovery"] = ["short": recoveryFigures(short), "restart": recoveryFigures(restart)].merging(giveUp.map { ["giveUp": recoveryFigures($0)] } ?? [:]) { a, _ in a }
        let detection = short.detectionSeconds + restart.detectionSeconds
        table.append(("cut → mediaDisrupted", detection.isEmpty ? "n/a" : String(format: "%.2f–%.2f s", detection.min()!, detection.max()!), "≤ 1.1 s"))
        table.append(("path back → established (1.5 s outage)", short.restorationSeconds.map { String(format: "%.2f s (%d restarts offered)", $0, short.restartsOffered) } ?? "n/a", "≤ 0.5 s"))
        table.append(("path back → established (3 s outage)", restart.restorationSeconds.map { String(format: "%.2f s (%d restarts offered)", $0, restart.restartsOffered) } ?? "n/a", "≤ 1 s"))
        if let g = giveUp {
            table.append(("give-up after the cut (55 s outage)", g.endedAfterSeconds.isEmpty ? "did not end" : g.endedAfterSeconds.map { String(format: "%.2f s", $0) }.joined(separator: ", ") + " (codes \(g.endCodes.map(String.init).joined(separator: ", ")))", "50 s ± 1 after the last packet"))
        } else {
            table.append(("give-up accuracy", "full mode only", ""))
        }

        // 6. Mouth-to-ear.
        if MouthToEarProbe.devicesAvailable() {
            progress("mouth-to-ear: PulseAudio, 20 ms periods, \(quick ? 5 : 10) s…")
            let probe = MouthToEarProbe(backend: .pulse, periodMilliseconds: 20, seconds: quick ? 5 : 10)
            let r = try await probe.run { _ in }
            figures["mouthToEar"] = ["backend": "pulse", "periodMs": 20, "medianMs": r.medianMilliseconds, "minMs": r.minimumMilliseconds, "maxMs": r.maximumMilliseconds, "bursts": r.latenciesMilliseconds.count]
            table.append(("mouth-to-ear (PulseAudio, 20 ms) median [min–max]", String(format: "%.1f ms [%.1f–%.1f]", r.medianMilliseconds, r.minimumMilliseconds, r.maximumMilliseconds), "(reported)"))
        } else {
            table.append(("mouth-to-ear", "skipped: no loopback devices (make bench provides them)", ""))
        }
        figures["seconds"] = Date().timeIntervalSince(started)
        figures["mode"] = quick ? "quick" : "full"

        // Output.
        say("")
        let width = table.map { $0.0.count }.max() ?? 0
        let valueWidth = table.map { $0.1.count }.max() ?? 0
        for (name, value, target) in table {
            say(name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + value.padding(toLength: valueWidth + 2, withPad: " ", startingAt: 0) + target)
        }
        let jsonURL = URL(fileURLWithPath: json)
        try FileManager.default.createDirectory(at: jsonURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: figures, options: [.prettyPrinted, .sortedKeys]).write(to: jsonURL)
        let reportURL = URL(fileURLWithPath: report)
        try FileManager.default.createDirectory(at: reportURL.deletingLastPathComponent(), withIntermediateDirectories: true)
        let svgName = reportURL.deletingPathExtension().lastPathComponent + "-timeline.svg"
        try TimelinePlot.svg(restart.timeline, title: "3 s outage: A's state and packets received per second").write(
            to: reportURL.deletingLastPathComponent().appendingPathComponent(svgName), atomically: true, encoding: .utf8)
        var md = "# tether-bench \(quick ? "--quick" : "(full)")\n\n"
        md += String(format: "%.0f s on %.0f cores, %@.\n\n", Date().timeIntervalSince(started), cores, ProcessInfo.processInfo.hostName)
        md += "| figure | value | target |\n|---|---|---|\n"
        for (name, value, target) in table { md += "| \(name) | \(value) | \(target) |\n" }
        md += "\n## Disruption timeline\n\n![A's state and packets received per second through a 3 s outage](\(svgName))\n"
        try md.write(to: reportURL, atomically: true, encoding: .utf8)
        say("")
        say("figures: \(json); report: \(report) (timeline: \(svgName))")
        if hot.allocationsTether > 0 {
            throw ValidationError("allocation budget exceeded: Tether's own hot path allocated \(hot.allocationsTether) times per frame")
        }
    }
}

/// An SVG plot of a disruption: packets per second as a line, the call state as coloured bands.
enum TimelinePlot {
    static func svg(_ samples: [CallsBench.Sample], title: String) -> String {
        let w = 800.0, h = 300.0, left = 50.0, right = 20.0, top = 40.0, bottom = 50.0
        guard let first = samples.first, let last = samples.last, last.seconds > first.seconds else {
            return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"60\"><text x=\"10\" y=\"30\">no samples</text></svg>"
        }
        let maxRate = max(60, samples.map(\.packetsPerSecond).max() ?? 60)
        func x(_ t: Double) -> Double { left + (t - first.seconds) / (last.seconds - first.seconds) * (w - left - right) }
        func y(_ r: Double) -> Double { top + (1 - r / maxRate) * (h - top - bottom) }
        let colours = ["established": "#d8f0d8", "mediaDisrupted": "#f8e0b0", "renewingMedia": "#f8c8c8", "ending": "#dddddd", "ended": "#cccccc", "connecting": "#e0e8f8"]
        var out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(w))\" height=\"\(Int(h))\" font-family=\"sans-serif\" font-size=\"12\">\n"
        out += "<text x=\"\(left)\" y=\"20\" font-size=\"14\">\(title)</text>\n"
        // Legend (narrow bands carry no label of their own).
        var legendX = w - right - 360
        for state in ["established", "mediaDisrupted", "renewingMedia"] {
            out += String(format: "<rect x=\"%.1f\" y=\"10\" width=\"12\" height=\"12\" fill=\"%@\"/>", legendX, colours[state]!)
            out += String(format: "<text x=\"%.1f\" y=\"20\">%@</text>\n", legendX + 16, state)
            legendX += 16 + 7 * Double(state.count) + 14
        }
        // State bands.
        var bandStart = first
        for (i, s) in samples.enumerated() where i == samples.count - 1 || samples[i + 1].state != s.state {
            let end = i == samples.count - 1 ? s.seconds : samples[i + 1].seconds
            out += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%@\"><title>%@</title></rect>\n",
                          x(bandStart.seconds), top, max(0.5, x(end) - x(bandStart.seconds)), h - top - bottom, colours[s.state] ?? "#eeeeee", s.state)
            if x(end) - x(bandStart.seconds) >= 7 * Double(s.state.count) {  // room for the label
                out += String(format: "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">%@</text>\n", x(bandStart.seconds) + 3, top + 14, s.state)
            }
            if i + 1 < samples.count { bandStart = samples[i + 1] }
        }
        // Rate line.
        let points = samples.map { String(format: "%.1f,%.1f", x($0.seconds), y($0.packetsPerSecond)) }.joined(separator: " ")
        out += "<polyline fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"2\" points=\"\(points)\"/>\n"
        // Axes.
        out += String(format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", left, h - bottom, w - right, h - bottom)
        out += String(format: "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>\n", left, top, left, h - bottom)
        for r in stride(from: 0.0, through: maxRate, by: 25) {
            out += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n", left - 4, y(r) + 4, r)
        }
        var t = (first.seconds).rounded(.up)
        while t <= last.seconds {
            out += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x(t), h - bottom + 16, t == 0 ? 0 : t)
            t += 1
        }
        out += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">seconds from the cut</text>\n", (left + w - right) / 2, h - 12)
        out += String(format: "<text x=\"12\" y=\"%.1f\" transform=\"rotate(-90 12 %.1f)\" text-anchor=\"middle\">packets/s received (last 0.5 s)</text>\n", (top + h - bottom) / 2, (top + h - bottom) / 2)
        out += "</svg>\n"
        return out
    }
}
