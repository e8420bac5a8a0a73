import Foundation
import Testing
import TetherTestSupport

/// The folder's files when a run has more tests than it keeps descriptors open for, and the
/// files of a test's child processes.
@Suite("Test log folder")
struct TestLogDirectoryTests {
    @Test func aTestsLogReopenedAfterManyOthersKeepsOneHeaderAndEveryLine() throws {
        let directory = TestLogDirectory(path: NSTemporaryDirectory() + "tether-test-log-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let owners = (0..<20).map { TestLogDirectory.Owner(id: "M.S/t\($0)()/S.swift:\($0):1", consoleName: "t\($0)()") }
        for round in 0..<3 {
            for owner in owners { directory.append("round \(round)", owner: owner) }
        }
        for owner in owners {
            #expect(directory.contents(of: owner) == "== \(owner.consoleName)  (\(owner.id))\nround 0\nround 1\nround 2\n")
        }
        let index = try String(contentsOfFile: directory.path + "/" + TestLogDirectory.indexFileName, encoding: .utf8)
        #expect(index.split(separator: "\n").count == 20)
    }

    @Test func eachChildProcessGetsItsOwnFileBesideTheTestsLog() throws {
        let directory = TestLogDirectory(path: NSTemporaryDirectory() + "tether-test-log-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let owner = TestLogDirectory.Owner(id: "M.S/calls()/S.swift:1:1", consoleName: "calls()")
        let first = directory.childErrorPath(owner: owner, process: "tether A")
        let second = directory.childErrorPath(owner: owner, process: "tether A")
        let log = directory.path + "/" + owner.fileName
        #expect(first == log.dropLast(".log".count) + ".tether_A.stderr")
        #expect(second == log.dropLast(".log".count) + ".tether_A-2.stderr")
        // The test is in the index even if it logs nothing itself: the runner finds its processes.
        #expect(directory.contents(of: owner) == "== calls()  (M.S/calls()/S.swift:1:1)\n")
    }
}
