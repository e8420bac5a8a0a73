import ArgumentParser
import Foundation
import TetherFaultLab

/// `tether-bench faults`: the fault matrix with real kernel events, measured.
struct FaultsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "faults",
        abstract: "The fault matrix: real kernel events between two `tether call` processes in network namespaces, judged by their states and their recorded audio.",
        discussion: """
            Needs root, iproute2, nftables, conntrack and coturn (`make faults` installs them and runs this). Each row \
            builds its own namespaces (IPv4 only), starts `tether call` A (offers, 440 Hz) and B (answers, 660 Hz), \
            relays their signaling, causes the fault and measures: when each side noticed, when it was back, how it \
            ended, and the audio gap each listener recorded (from the last good 20 ms frame before the fault to the \
            first good one after). Logs and recordings stay in the work directory.
            """)

    @OptionGroup var rows: LabRowOptions

    @Option(help: "Rows run at once.")
    var concurrency: Int = 4

    @Option(help: "Seconds of the random-loss row (10 minutes in full).")
    var lossSeconds: Double = 600

    @Option(help: "Folder for the rows' logs and recordings.")
    var workDirectory: String = ".build/faults"

    @Option(help: "Write every row as JSON to this file.")
    var json: String?

    func run() async throws {
        let matrix = FaultScenario.matrix(lossSeconds: lossSeconds)
        if rows.list {
            for (i, s) in matrix.enumerated() { print(String(format: "%2d  %@ — %@", i + 1, s.description, s.requirement)) }
            return
        }
        let chosen = rows.chosen(from: matrix)
        let executable = try rows.executable()
        let work = URL(fileURLWithPath: workDirectory).standardizedFileURL.path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        print("fault matrix: \(chosen.count) rows, \(concurrency) at a time, tether \(executable), logs in \(work)")
        let lab = FaultLab(tetherExecutable: executable, workDirectory: work) { print("  \($0)") }
        let started = Date()
        let results = await lab.run(chosen, concurrency: concurrency)
        print("")
        print(Self.table(results))
        print(String(format: "%d of %d rows passed in %.0f s", results.filter(\.passed).count, results.count, Date().timeIntervalSince(started)))
        if let json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(results).write(to: URL(fileURLWithPath: json))
            print("JSON: \(json)")
        }
        if !results.allSatisfy(\.passed) { throw ExitCode(1) }
    }

    /// The matrix as a Markdown table: row, requirement, what was measured, verdict.
    static func table(_ results: [FaultRowResult]) -> String {
        var lines = ["| fault | must show | measured | |", "|---|---|---|---|"]
        for r in results {
            let verdict = r.error != nil ? "not run: \(r.error!)" : r.passed ? "✔" : "✘ " + r.checks.filter { !$0.passed }.map { "\($0.name) (\($0.detail))" }.joined(separator: "; ")
            lines.append("| \(r.scenario) | \(r.requirement) | \(r.measured) | \(verdict) |")
        }
        return lines.joined(separator: "\n")
    }
}
