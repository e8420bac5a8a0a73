import Foundation
import Testing
import TetherFuzzing

/// The committed fuzz corpus and every crash a fuzzer ever found, replayed through the same
/// targets libFuzzer runs (`make fuzz`). A crash saved under `Fuzz/regressions/<target>/` is a
/// regression test from then on: this suite traps on it until the bug is fixed.
@Suite("Fuzz corpus and regressions")
struct FuzzCorpusTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func inputs(_ target: FuzzTarget, _ kind: String) -> [String] {
        FuzzTarget.files(at: fuzzFolder.appendingPathComponent(kind).appendingPathComponent(target.rawValue).path)
    }

    @Test(arguments: FuzzTarget.allCases)
    func committedCorpusRunsWithoutViolatingAnInvariant(target: FuzzTarget) throws {
        let files = Self.inputs(target, "corpus")
        // A missing or emptied corpus would make this test pass without testing anything.
        #expect(files.count >= 5, "\(files.count) corpus files for \(target.rawValue)")
        for file in files {
            target.run([UInt8](try Data(contentsOf: URL(fileURLWithPath: file))))
        }
    }

    @Test(arguments: FuzzTarget.allCases)
    func everySavedCrashNowRunsCleanly(target: FuzzTarget) throws {
        for file in Self.inputs(target, "regressions") {
            target.run([UInt8](try Data(contentsOf: URL(fileURLWithPath: file))))
        }
    }

    @Test(arguments: FuzzTarget.allCases)
    func seedsRunAndTheCommittedCorpusHoldsThem(target: FuzzTarget) throws {
        let names = Set(Self.inputs(target, "corpus").map { URL(fileURLWithPath: $0).lastPathComponent })
        for seed in target.seeds() {
            target.run(seed.bytes)
            #expect(names.contains(seed.name), "seed \(seed.name) is not in Fuzz/corpus/\(target.rawValue) (fuzz-\(target.rawValue) --write-seeds)")
        }
    }
}
