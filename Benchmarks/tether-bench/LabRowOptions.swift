import ArgumentParser
import Foundation

/// What the lab benches (`faults`, `links`) take alike: the tether executable, the rows, --list.
struct LabRowOptions: ParsableArguments {
    @Option(help: "The tether executable (default: the one next to this bench).")
    var tether: String?

    @Option(help: "Rows to run, by number (1-based, as listed by --list); default: all.")
    var row: [Int] = []

    @Flag(help: "List the rows and exit.")
    var list = false

    /// The rows chosen from `matrix` (all when none was named).
    func chosen<Row>(from matrix: [Row]) -> [Row] {
        row.isEmpty ? matrix : row.compactMap { $0 >= 1 && $0 <= matrix.count ? matrix[$0 - 1] : nil }
    }

    /// The tether executable: the one given, or the one next to this bench; throws when absent.
    func executable() throws -> String {
        let path = tether ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tether").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ValidationError("no tether executable at \(path) (build it, or give --tether)")
        }
        return path
    }
}
