import Glibc
import Logging
import Testing

/// The tests' swift-log bootstrap: with `TETHER_TEST_LOG_DIR` set (`scripts/run-tests.sh` sets it
/// for every `make test` phase), every message goes to its test's log in that folder
/// (``TestLogHandler``) instead of the terminal, and the runner prints the logs of the tests that
/// failed at the end of the run. Without it swift-log keeps its default (stderr), as for a
/// developer's `swift test --filter`.
///
/// swift-log takes one bootstrap per process, before the loggers it should reach are created.
/// The ``Trait/keepsLogPerTest`` trait bootstraps when swift-testing builds its list of tests,
/// which it does for every test in the process before running any, filtered or not.
public enum TestLog {
    /// The environment variable naming the folder.
    public static let directoryVariable = "TETHER_TEST_LOG_DIR"

    /// The folder the process's messages go to, once bootstrapped; nil without `TETHER_TEST_LOG_DIR`.
    public static var directory: TestLogDirectory? { bootstrapped }

    /// Where a child process the running test starts should write its standard error: a file
    /// beside the test's log (``TestLogDirectory/childErrorPath(owner:process:)``); nil outside a
    /// test or without `TETHER_TEST_LOG_DIR`.
    public static func childErrorPath(process: String) -> String? {
        guard let directory, let owner = TestLogDirectory.Owner.current else { return nil }
        return directory.childErrorPath(owner: owner, process: process)
    }

    /// Bootstraps swift-log (once; later calls do nothing).
    public static func bootstrap() {
        _ = bootstrapped
    }

    // A lazy global: initialised once, thread-safely, on first use.
    private static let bootstrapped: TestLogDirectory? = {
        guard let path = getenv(directoryVariable).map({ String(cString: $0) }), !path.isEmpty else { return nil }
        let directory = TestLogDirectory(path: path)
        LoggingSystem.bootstrap { label in TestLogHandler(label: label, directory: directory) }
        return directory
    }()
}

/// Bootstraps ``TestLog`` when swift-testing builds its list of tests; see ``TestLog``.
public struct KeepsLogPerTestTrait: SuiteTrait, TestTrait {
    public var isRecursive: Bool { false }

    public func prepare(for test: Test) async throws {
        TestLog.bootstrap()
    }
}

extension Trait where Self == KeepsLogPerTestTrait {
    /// Keeps swift-log's messages in a log per test (``TestLog``).
    public static var keepsLogPerTest: Self {
        TestLog.bootstrap()
        return Self()
    }
}
