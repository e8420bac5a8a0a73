import Glibc
import Logging

/// A swift-log handler that writes each message into the log of the test it belongs to
/// (``TestLogDirectory``): the test running in the task that logs it, else the test that created
/// the handler (a message from a library thread or a detached task of that test's call), else the
/// directory's unattributed log.
///
/// A `Logger` calls its bootstrapped factory once, when it is created, so a test's
/// `CallConfiguration` (whose default logger is `Logger(label: "tether")`) carries a handler that
/// knows the test even where `Test.current` does not reach.
public struct TestLogHandler: LogHandler {
    public let label: String
    /// The test that created this handler, if any.
    public let creator: TestLogDirectory.Owner?
    private let directory: TestLogDirectory
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// A handler for `label` whose messages go to `directory`; `creator` defaults to the test
    /// running now.
    public init(label: String, directory: TestLogDirectory, creator: TestLogDirectory.Owner? = .current) {
        self.label = label
        self.directory = directory
        self.creator = creator
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let explicit = event.metadata { all.merge(explicit) { $1 } }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let text = "\(Self.timestamp()) \(event.level) \(label):\(fields.isEmpty ? "" : " " + fields) \(event.message)"
        directory.append(text, owner: .current ?? creator)
    }

    /// The wall-clock time of day with milliseconds (UTC), to line a message up with the others.
    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let seconds = Int(now.tv_sec % 86_400)
        let milliseconds = Int(now.tv_nsec / 1_000_000)
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let ms = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
        return "\(two(seconds / 3600)):\(two(seconds / 60 % 60)):\(two(seconds % 60)).\(ms)"
    }
}
