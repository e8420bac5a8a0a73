import ArgumentParser
import Foundation
import TetherFaultLab
import TetherTestbed

/// `tether-bench links`: narrow and congested links (real `tc tbf` shaping between namespaces),
/// speech each way, measured.
struct LinksBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "links",
        abstract: "Narrow links: two `tether call` processes over a veth pair shaped with tc tbf (300 ms queue), speech each way, scored with wideband PESQ.",
        discussion: """
            Needs root, iproute2's tc, nftables, espeak-ng, sox and python3 with pesq (`make links` installs them and runs \
            this). Each row shapes both egresses of a veth pair between two namespaces (`tbf rate R burst 3000 latency \
            300ms`), starts `tether call` A (offers) and B (answers), each speaking a minute of espeak-ng speech, and \
            reads every second what each side put on the link (the qdisc's byte counter, link-layer headers included), \
            its round-trip time, and what its peer heard lost. A direction has settled from the first second after which \
            every second sends at most 90 % of the link, with the RTT at most 100 ms over its minimum and at most 2 % \
            heard lost. The recordings' last 20 s are scored with PESQ-WB (Benchmarks/quality/pesq_window.py).
            """)

    @OptionGroup var rows: LabRowOptions

    @Flag(help: "Also run each row with rate control off (the behaviour before it), for comparison.")
    var compare = false

    @Option(help: "Folder for the rows' logs and recordings.")
    var workDirectory: String = ".build/links"

    @Option(help: "Python with pesq and numpy (make links makes a venv for it); rows run unscored without.")
    var python: String = "python3"

    @Option(help: "Write every row as JSON to this file.")
    var json: String?

    func run() async throws {
        let matrix = LinkScenario.matrix
        if rows.list {
            for (i, s) in matrix.enumerated() { print(String(format: "%2d  %@", i + 1, s.description)) }
            return
        }
        if let missing = LinkLab.missingRequirement { throw ValidationError(missing) }
        let chosen = rows.chosen(from: matrix)
        let executable = try rows.executable()
        let work = URL(fileURLWithPath: workDirectory).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        // A minute of speech each side: the Harvard sentences of the quality bench, A's voices
        // and B's, each clip after the last.
        let speechA = work + "/speech-a.wav"
        let speechB = work + "/speech-b.wav"
        for (path, clips) in [(speechA, Array(QualityBench.clipSet.prefix(4))), (speechB, Array(QualityBench.clipSet.suffix(4)))] {
            var parts: [String] = []
            for (i, clip) in clips.enumerated() {
                let part = "\(work)/\(URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent)-\(i).wav"
                try QualityBench.synthesize(clip, into: part, scratch: work, leadSeconds: 0.3)
                parts.append(part)
            }
            let joined = ChildProcess.run(["sox"] + parts + parts + [path])
            guard joined.status == 0 else { throw ValidationError("sox failed: \(joined.output)") }
        }
        let scorer = URL(fileURLWithPath: QualityBench.scorerPath()).deletingLastPathComponent().appendingPathComponent("pesq_window.py").path
        let scored = ChildProcess.run([python, "-c", "import pesq, numpy"]).status == 0
        if !scored { print("links: \(python) has no pesq/numpy: rows run unscored (make links installs them)") }
        let lab = LinkLab(
            tetherExecutable: executable, workDirectory: work, speechA: speechA, speechB: speechB,
            python: scored ? python : nil, scorer: scored ? scorer : nil) { print("  \($0)") }
        var results: [LinkRowResult] = []
        for scenario in chosen {
            results.append(await lab.run(scenario, rateControl: true))
            if compare { results.append(await lab.run(scenario, rateControl: false)) }
        }
        print("")
        print(Self.table(results))
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(results).write(to: URL(fileURLWithPath: json))
            print("JSON: \(json)")
        }
    }

    /// One line a direction: settling, the last 20 s's wire rate against the link, RTT, heard
    /// loss and PESQ-WB.
    static func table(_ results: [LinkRowResult]) -> String {
        func f(_ v: Double?, _ format: String) -> String { v.map { String(format: format, $0) } ?? "–" }
        var lines = [
            "| link | rate control | direction | settled after | last 20 s: sent (link %) | RTT | heard loss | PESQ-WB | narrowing: settled / back / PESQ |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in results {
            if let error = r.error {
                lines.append("| \(r.scenario) | \(r.rateControl ? "on" : "off") | | not run: \(error) | | | | | |")
                continue
            }
            for d in r.directions {
                let link = d.seconds.last.map { Double($0.linkKilobits) } ?? 0
                let share = d.lastWindowWireKilobits.map { link > 0 ? String(format: "%.1f kb/s (%.0f %%)", $0, 100 * $0 / link) : "–" } ?? "–"
                let narrowing = d.settledAfterNarrowingSeconds != nil || d.narrowWindowPESQ != nil
                    ? "\(f(d.settledAfterNarrowingSeconds, "%.0f s")) / \(f(d.backToFullRateAfterSeconds, "%.0f s")) / \(f(d.narrowWindowPESQ, "%.2f"))" : ""
                lines.append(
                    "| \(r.scenario)\(r.tcpKilobits.map { String(format: " (TCP %.0f kb/s)", $0) } ?? "") | \(r.rateControl ? "on" : "off") | \(d.name) | "
                        + "\(f(d.settledAfterSeconds, "%.0f s")) | \(share) | \(f(d.lastWindowRoundTripMilliseconds, "%.0f ms")) | "
                        + "\(f(d.lastWindowHeardLossPercent, "%.1f %%")) | \(d.lastWindowPESQ.map { String(format: "%.2f", $0) } ?? d.pesqError ?? "–") | \(narrowing) |")
            }
        }
        return lines.joined(separator: "\n")
    }
}
