import Foundation
import Logging
import Testing
import TetherTestSupport

/// Which test's log a message lands in: the test whose task logs it, else the test that created
/// the logger, else the unattributed log; and the process's loggers reach the folder
/// `scripts/run-tests.sh` gives.
@Suite("Test logs", .keepsLogPerTest)
struct TestLogHandlerTests {
    let directory: TestLogDirectory

    init() throws {
        let path = NSTemporaryDirectory() + "tether-test-log-\(UUID().uuidString)"
        directory = TestLogDirectory(path: path)
    }

    func logger(creator: TestLogDirectory.Owner? = .current) -> Logger {
        Logger(label: "probe") { [directory] in TestLogHandler(label: $0, directory: directory, creator: creator) }
    }

    @Test func aMessageLoggedInATestLandsInThatTestsLog() throws {
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let me = try #require(TestLogDirectory.Owner.current)
        #expect(me.consoleName == "aMessageLoggedInATestLandsInThatTestsLog()")
        logger().info("inside the test", metadata: ["call-id": "x1"])
        let log = try #require(directory.contents(of: me))
        let lines = log.split(separator: "\n")
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first == "== aMessageLoggedInATestLandsInThatTestsLog()  (\(me.id))")
        #expect(lines.last?.hasSuffix(" info probe: call-id=x1 inside the test") == true, "\(log)")
        #expect(directory.contents(of: nil) == nil)
        let index = try String(contentsOfFile: directory.path + "/" + TestLogDirectory.indexFileName, encoding: .utf8)
        #expect(index.split(separator: "\n").map { $0.split(separator: "\t").dropFirst().map(String.init) } == [[me.consoleName, me.id]])
    }

    /// A library's thread or a detached task has no `Test.current`: the logger's creator owns it.
    @Test func aMessageFromOutsideTheTestsTasksGoesToTheTestThatCreatedTheLogger() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let me = try #require(TestLogDirectory.Owner.current)
        let logger = logger()
        let seen = await Task.detached {
            logger.warning("from a detached task")
            return TestLogDirectory.Owner.current
        }.value
        #expect(seen == nil, "a detached task should not see the test")
        let thread = Thread { logger.error("from a thread") }
        thread.start()
        #expect(await waitUntil { directory.contents(of: me)?.contains("from a thread") == true })
        let log = try #require(directory.contents(of: me))
        #expect(log.contains(" warning probe: from a detached task"), "\(log)")
        #expect(directory.contents(of: nil) == nil)
    }

    /// A logger created outside any test (a global's) logs into the test running in the task
    /// that logs; outside every test's tasks, into the unattributed log.
    @Test func aMessageNoTestOwnsGoesToTheUnattributedLog() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let me = try #require(TestLogDirectory.Owner.current)
        let orphan = logger(creator: nil)
        orphan.notice("in the test's task")
        await Task.detached { orphan.notice("in no test's task") }.value
        #expect(directory.contents(of: me)?.contains(" notice probe: in the test's task") == true)
        let unattributed = try #require(directory.contents(of: nil))
        #expect(unattributed.split(separator: "\n").count == 1)
        #expect(unattributed.contains(" notice probe: in no test's task"), "\(unattributed)")
    }

    /// A logger another test created, used by this one (a session that outlived its test): the
    /// running test wins.
    @Test func theRunningTestWinsOverTheLoggersCreator() throws {
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let me = try #require(TestLogDirectory.Owner.current)
        let other = TestLogDirectory.Owner(id: "Elsewhere/other()/X.swift:1:1", consoleName: "other()")
        logger(creator: other).info("logged here")
        #expect(directory.contents(of: me)?.contains("logged here") == true)
        #expect(directory.contents(of: other) == nil)
    }

    /// Under `scripts/run-tests.sh` the process's own loggers (`Logger(label:)`, as
    /// `CallConfiguration`'s default) write into the folder it gave.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[TestLog.directoryVariable] != nil))
    func theProcessLoggersWriteIntoTheRunnersFolder() throws {
        let folder = try #require(TestLog.directory)
        #expect(folder.path == ProcessInfo.processInfo.environment[TestLog.directoryVariable])
        let me = try #require(TestLogDirectory.Owner.current)
        let marker = "bootstrap probe \(UUID().uuidString)"
        Logger(label: "tether").info("\(marker)")
        #expect(folder.contents(of: me)?.contains(marker) == true)
    }

    func waitUntil(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}
