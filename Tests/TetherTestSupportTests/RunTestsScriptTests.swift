import Foundation
import Testing
import TetherTestSupport

/// `scripts/run-tests.sh` with a stand-in for `swift test` that prints swift-testing's lines and
/// copies logs written by `TestLogDirectory` into the folder the script gives: a failed run ends
/// with the failed test's log and its name; a passing test's log is never shown.
@Suite("scripts/run-tests.sh")
struct RunTestsScriptTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../scripts/run-tests.sh").standardized.path

    /// Runs the script with a command that prints `output`, copies `logs` into the script's
    /// folder and exits with `status`; returns what the script printed and its status.
    func run(output: String, logs: TestLogDirectory, status: Int32, locale: String = "C.UTF-8") throws -> (text: String, status: Int32) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [
            Self.script, "1", "bash", "-c",
            #"cp -R "$SOURCE"/. "$TETHER_TEST_LOG_DIR"/ && printf '%s' "$TETHER_TEST_LOG_DIR" > "$SOURCE/folder""#
                + #"; printf '%s' "$OUTPUT"; exit "$STATUS""#,
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["SOURCE"] = logs.path
        environment["OUTPUT"] = output
        environment["STATUS"] = "\(status)"
        environment["TETHER_KEEP_TEST_LOGS"] = nil
        environment["LC_ALL"] = locale
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (String(decoding: data, as: UTF8.self), process.terminationStatus)
    }

    /// Removes the folder of logs the script kept (it names it on its last line).
    func removeKeptLogs(_ text: String) {
        if let match = text.firstMatch(of: /all logs: (\/[^\s)]+)/) {
            try? FileManager.default.removeItem(atPath: String(match.1))
        }
    }

    func logs() -> TestLogDirectory {
        let directory = TestLogDirectory(path: NSTemporaryDirectory() + "tether-run-tests-\(UUID().uuidString)")
        let passing = TestLogDirectory.Owner(id: "M.S/passes()/S.swift:1:1", consoleName: "passes()")
        let failing = TestLogDirectory.Owner(id: "M.S/fails()/S.swift:9:1", consoleName: "fails()")
        let named = TestLogDirectory.Owner(id: "M.S/named()/S.swift:20:1", consoleName: "\"a named test\"")
        directory.append("info tether: the passing test's message", owner: passing)
        for i in 1...250 { directory.append("info tether: the failing test's message \(i)", owner: failing) }
        _ = FileManager.default.createFile(
            atPath: directory.childErrorPath(owner: failing, process: "A"), contents: Data("the failing test's process A\n".utf8))
        _ = FileManager.default.createFile(
            atPath: directory.childErrorPath(owner: passing, process: "A"), contents: Data("the passing test's process A\n".utf8))
        directory.append("error tether: the named test's message", owner: named)
        let cases = TestLogDirectory.Owner(id: "M.S/cases(n:)/S.swift:30:1", consoleName: "\"failing cases\"")
        directory.append("notice tether: the parameterized test's message", owner: cases)
        directory.append("warning tether: a message no test owned", owner: nil)
        return directory
    }

    static let passingRun = """
        ◇ Test run started.
        ◇ Test passes() started.
        ✔ Test passes() passed after 0.001 seconds.

        """

    /// In a UTF-8 locale and in the C locale (where a symbol of swift-testing's is three characters).
    @Test(arguments: ["C.UTF-8", "C"])
    func aFailedRunEndsWithTheFailedTestsLogAndNotThePassingOnes(locale: String) throws {
        let logs = logs()
        defer { try? FileManager.default.removeItem(atPath: logs.path) }
        let output =
            Self.passingRun + """
                ◇ Test fails() started.
                ✘ Test fails() recorded an issue at S.swift:12:5: Expectation failed: 1 == 2
                ✘ Test fails() failed after 0.002 seconds with 1 issue.
                ◇ Test "a named test" started.
                ✘ Test "a named test" failed after 0.003 seconds with 1 issue.
                ◇ Test "passing cases" started.
                ◇ Test case passing 1 argument n → 1 to "passing cases" started.
                ✔ Test "passing cases" with 1 test case passed after 0.001 seconds.
                ◇ Test "failing cases" started.
                ◇ Test case passing 1 argument n → 1 to "failing cases" started.
                ◇ Test case passing 1 argument n → 2 to "failing cases" started.
                ✘ Test "failing cases" recorded an issue with 1 argument n → 2 at S.swift:31:9: Expectation failed
                ✘ Test "failing cases" with 2 test cases failed after 0.004 seconds with 1 issue.
                ◇ Test cancelsItself() started.
                ➜ Test cancelsItself() was cancelled after 0.300 seconds: "the machine fed it too slowly"
                ✘ Test run with 6 tests in 1 suite failed after 0.005 seconds with 3 issues.

                """
        let (text, status) = try run(output: output, logs: logs, status: 1, locale: locale)
        defer { removeKeptLogs(text) }
        #expect(status == 1)
        let summary = try #require(text.range(of: "==== tests failed (exit 1)")).upperBound
        let tail = text[summary...]
        #expect(tail.contains("---- log of fails(): 250 lines, the last 200"), "\(tail)")
        #expect(tail.contains("the failing test's message 250\n") && tail.contains("the failing test's message 51\n"))
        #expect(!tail.contains("the failing test's message 50\n"))
        #expect(
            tail.contains("the failing test's message 250\n---- stderr of its process A: 1 lines\nthe failing test's process A\n"),
            "\(tail)")
        #expect(tail.contains("== \"a named test\"  (M.S/named()/S.swift:20:1)\nerror tether: the named test's message"), "\(tail)")
        #expect(tail.contains("== \"failing cases\"  (M.S/cases(n:)/S.swift:30:1)\nnotice tether: the parameterized test's message"))
        #expect(tail.contains("a message no test owned"))
        // A test that cancelled itself has ended: not reported as unfinished, nor failed.
        #expect(!tail.contains("not finished"), "\(tail)")
        #expect(!tail.contains("cancelsItself"), "\(tail)")
        #expect(!text.contains("the passing test's"))
        let last = try #require(text.split(separator: "\n").last)
        #expect(last.hasPrefix("==== failed: fails(), \"a named test\", \"failing cases\" (exit 1; all logs: "), "\(last)")
    }

    /// A test process that dies in a test: that test's log is shown though it never got a `✘` line.
    @Test(arguments: ["C.UTF-8", "C"])
    func aTestTheProcessDiedInShowsItsLog(locale: String) throws {
        let logs = logs()
        defer { try? FileManager.default.removeItem(atPath: logs.path) }
        let (text, status) = try run(output: Self.passingRun + "◇ Test fails() started.\n", logs: logs, status: 134, locale: locale)
        defer { removeKeptLogs(text) }
        #expect(status == 134)
        #expect(text.contains("Tests started and not finished (the test process ended in them):\n  fails()\n"), "\(text)")
        #expect(text.contains("---- log of fails(): 250 lines"))
        #expect(!text.contains("the passing test's message"))
    }

    @Test func aPassingRunPrintsNoLogAndKeepsNone() throws {
        let logs = logs()
        defer { try? FileManager.default.removeItem(atPath: logs.path) }
        let (text, status) = try run(output: Self.passingRun, logs: logs, status: 0)
        #expect(status == 0)
        #expect(text == Self.passingRun, "\(text)")
        let folder = try String(contentsOfFile: logs.path + "/folder", encoding: .utf8)
        #expect(folder.hasPrefix("/") && !FileManager.default.fileExists(atPath: folder), "\(folder)")
    }
}
