import Foundation
import Glibc

/// Runs system commands for the fault lab: `ip`, `nft`, `conntrack`, `sysctl` inside network
/// namespaces. Control-path code (it allocates, blocks and spawns processes).
enum Shell {
    /// The outcome of one command.
    struct Outcome: Sendable {
        var status: Int32
        var output: String
    }

    /// Runs `command` with `/bin/sh -c`, waits for it and returns its status and its standard
    /// output and error together.
    @discardableResult
    static func run(_ command: String) -> Outcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return Outcome(status: -1, output: "\(error)") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Outcome(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    /// Runs `command` and throws with its output when it fails.
    static func must(_ command: String) throws(FaultLabError) {
        let outcome = run(command)
        guard outcome.status == 0 else { throw .commandFailed(command: command, status: outcome.status, output: outcome.output) }
    }

    /// Runs `command` inside network namespace `namespace`.
    @discardableResult
    static func run(in namespace: String, _ command: String) -> Outcome {
        run("ip netns exec \(namespace) sh -c \(quoted(command))")
    }

    /// Runs `command` inside `namespace` and throws with its output when it fails.
    static func must(in namespace: String, _ command: String) throws(FaultLabError) {
        try must("ip netns exec \(namespace) sh -c \(quoted(command))")
    }

    /// `text` as one single-quoted shell word.
    static func quoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Whether `name` is a command on the search path.
    static func has(_ name: String) -> Bool {
        run("command -v \(name) >/dev/null 2>&1").status == 0
    }
}

/// Monotonic time in seconds (`CLOCK_MONOTONIC`, the clock every fault-lab instant is read on).
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Sleeps the current task for `seconds` (no-op for zero or less).
func pause(_ seconds: Double) async {
    guard seconds > 0 else { return }
    try? await Task.sleep(for: .milliseconds(Int((seconds * 1000).rounded())))
}

/// What can stop a fault-lab run.
public enum FaultLabError: Error, CustomStringConvertible, Sendable {
    /// A command that builds or changes the lab failed.
    case commandFailed(command: String, status: Int32, output: String)
    /// The lab cannot run here (not root, or a tool is missing).
    case unavailable(String)
    /// A `tether call` process could not be started.
    case processFailed(String)

    public var description: String {
        switch self {
        case let .commandFailed(command, status, output):
            "`\(command)` exited with \(status): \(output.trimmingCharacters(in: .whitespacesAndNewlines).prefix(400))"
        case let .unavailable(reason): "the fault lab cannot run here: \(reason)"
        case let .processFailed(reason): "tether call could not start: \(reason)"
        }
    }
}
