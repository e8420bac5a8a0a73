import Foundation
import Glibc
import Synchronization

/// One `tether call` process inside a network namespace (a `JSONLineProcess`), whose lines are
/// read with the lab's instants (monotonic seconds), and relayed to the peer's standard input as
/// an embedder's signaling would carry them.
final class LabCallProcess: Sendable {
    /// A line the process printed, parsed.
    struct Line: @unchecked Sendable {
        var object: [String: Any]
        var at: Double
        var type: String { object["type"] as? String ?? "" }
    }

    let name: String
    private let lines: JSONLineProcess

    /// Starts `tether call ARGUMENTS` in `namespace`; its standard error goes to `logPath`, and
    /// every line it prints, stamped, to the `.jsonl` file beside it.
    init(name: String, executable: String, namespace: String, arguments: [String], logPath: String) throws(FaultLabError) {
        self.name = name
        let transcriptPath = logPath.hasSuffix(".log") ? String(logPath.dropLast(4)) + ".jsonl" : logPath + ".jsonl"
        do {
            // `ip netns exec` execs the command in place: the process's PID is tether's own.
            lines = try JSONLineProcess(
                name: name, executable: "/usr/sbin/ip", arguments: ["netns", "exec", namespace, executable, "call"] + arguments,
                errorPath: logPath, transcriptPath: transcriptPath)
        } catch {
            throw .processFailed("\(error)")
        }
    }

    /// The process ID (tether's own, inside its namespace).
    var pid: pid_t { lines.pid }

    /// Sends every line this process prints to `peer`'s standard input, earlier lines first.
    func relayLines(to peer: LabCallProcess) {
        lines.relayLines(to: peer.lines)
    }

    /// Writes one line to the process's standard input.
    func send(_ line: String) {
        lines.send(line)
    }

    /// Every JSON line so far.
    var recorded: [Line] {
        lines.recorded.compactMap { line in line.object.map { Line(object: $0, at: Double(line.atNanoseconds) / 1e9) } }
    }

    /// The state lines so far: (state, instant). The instant is when tether entered the state,
    /// by its own clock (the line's `seconds`, since the session began) moved onto the lab's
    /// clock, not when the line reached the lab: on a loaded machine a line can wait in the pipe
    /// or for the lab's reader, which is no part of what a row measures.
    var states: [(state: String, at: Double, line: Line)] {
        let all = recorded
        let offset = Self.clockOffset(all)
        return all.compactMap { line in
            guard line.type == "state" else { return nil }
            let at = (line.object["seconds"] as? Double).flatMap { s in offset.map { s + $0 } } ?? line.at
            return ((line.object["state"] as? String) ?? "", min(at, line.at), line)
        }
    }

    /// Lab instant of tether's session clock origin: the smallest (arrival − `seconds`) over
    /// the lines that carry `seconds` (delivery only ever adds delay, so the least delayed line
    /// gives the best estimate; statistics lines supply one a second).
    private static func clockOffset(_ lines: [Line]) -> Double? {
        lines.lazy.compactMap { line in (line.object["seconds"] as? Double).map { line.at - $0 } }.min()
    }

    /// The first instant at or after `since` when `state` was entered, waiting up to `timeout`.
    func waitFor(state: String, since: Double = 0, timeout: Double) async -> Double? {
        let deadline = monotonicSeconds() + timeout
        while true {
            if let hit = states.first(where: { $0.state == state && $0.at >= since }) { return hit.at }
            if monotonicSeconds() >= deadline { return nil }
            await pause(0.01)
        }
    }

    /// The first line of `type` at or after `since` matching `where`, waiting up to `timeout`.
    func waitFor(type: String, since: Double = 0, timeout: Double, where match: @escaping ([String: Any]) -> Bool = { _ in true }) async -> Line? {
        let deadline = monotonicSeconds() + timeout
        while true {
            if let hit = recorded.first(where: { $0.type == type && $0.at >= since && match($0.object) }) { return hit }
            if monotonicSeconds() >= deadline { return nil }
            await pause(0.01)
        }
    }

    /// The state the process is in now (the last one it printed).
    var currentState: String? { states.last?.state }

    /// Sends a signal to the process (SIGSTOP, SIGCONT, SIGKILL, …).
    func send(signal number: Int32) { lines.send(signal: number) }

    /// Whether the process still runs.
    var isRunning: Bool { lines.isRunning }

    /// Waits for the process to exit (up to `timeout`, then kills it); returns its status.
    func waitForExit(timeout: Double) async -> Int32 {
        await lines.waitForExit(timeoutSeconds: timeout)
    }

    /// Resident memory now, in kilobytes (`VmRSS` in /proc), or nil once the process is gone.
    func residentKilobytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "")
        }
        return nil
    }

    /// The `statistics` lines printed at or after `since`, in order.
    func statistics(since: Double) -> [Line] {
        recorded.filter { $0.type == "statistics" && $0.at >= since }
    }
}
