import ArgumentParser
import Foundation
import Logging
import Synchronization

/// `--log-level` and `--log-format`: how `tether call` (and the demo) write their log on stderr.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Lowest level logged on stderr: trace, debug, info, notice, warning, error, critical (default: info for call, warning for demo, whose timeline shows the rest).")
    var logLevel: Logger.Level?

    @Option(help: "Log lines on stderr: text (one human-readable line a message) or json (one JSON object a message: time, level, label, message, and its metadata such as call-id).")
    var logFormat: LogFormat = .text

    enum LogFormat: String, ExpressibleByArgument, Sendable { case text, json }

    /// Bootstraps swift-log with the chosen handler (once per process) and returns the command's
    /// logger at the chosen level.
    func bootstrap(label: String = "tether", defaultLevel: Logger.Level = .info) -> Logger {
        let format = logFormat
        let level = logLevel ?? defaultLevel
        LoggingSystemBootstrap.once {
            LoggingSystem.bootstrap { label in
                var handler = StderrLogHandler(label: label, format: format)
                handler.logLevel = level
                return handler
            }
        }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// swift-log allows one bootstrap per process.
enum LoggingSystemBootstrap {
    private static let done = Mutex(false)

    static func once(_ body: () -> Void) {
        let first = done.withLock { d in
            defer { d = true }
            return !d
        }
        if first { body() }
    }
}

/// Writes each message as one line on stderr, whole (lines of two threads never interleave).
struct StderrLogHandler: LogHandler {
    let label: String
    let format: LoggingOptions.LogFormat
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, format: LoggingOptions.LogFormat) {
        self.label = label
        self.format = format
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        let line = format == .json ? Self.json(event, merged, label: label) : Self.text(event, merged)
        StderrLines.write(line)
    }

    /// `tether: LEVEL: message [key=value …]` (the call id last: it is on every line).
    static func text(_ event: LogEvent, _ metadata: Logger.Metadata) -> String {
        var line = "tether: "
        if event.level != .info { line += "\(event.level): " }
        line += "\(event.message)"
        let keys = metadata.keys.sorted { a, b in (a == "call-id" ? 1 : 0, a) < (b == "call-id" ? 1 : 0, b) }
        if !keys.isEmpty { line += " [" + keys.map { "\($0)=\(metadata[$0]!)" }.joined(separator: " ") + "]" }
        return line
    }

    /// `{"time":…,"level":…,"label":…,"message":…,"call-id":…,…}`: metadata as top-level
    /// fields (a key that would overwrite one of the first four is prefixed with `meta-`).
    static func json(_ event: LogEvent, _ metadata: Logger.Metadata, label: String) -> String {
        var object: [String: Any] = [
            "time": ISO8601DateFormatter.string(from: Date(), timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds]),
            "level": event.level.rawValue, "label": label, "message": "\(event.message)",
        ]
        for (key, value) in metadata {
            object[object[key] == nil ? key : "meta-" + key] = jsonValue(value)
        }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]),
            let text = String(data: data, encoding: .utf8)
        else { return #"{"level":"error","message":"a log message could not be encoded"}"# }
        return text
    }

    private static func jsonValue(_ value: Logger.MetadataValue) -> Any {
        switch value {
        case .string(let s): s
        case .stringConvertible(let c): c.description
        case .array(let a): a.map(jsonValue)
        case .dictionary(let d): d.mapValues(jsonValue)
        }
    }
}

/// Whole lines on stderr.
enum StderrLines {
    private static let lock = Mutex(())

    static func write(_ line: String) {
        lock.withLock { _ in FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }
}
