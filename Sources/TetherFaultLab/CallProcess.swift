import Foundation
import Glibc
import Synchronization

/// One `tether call` process inside a network namespace, whose JSON lines are recorded with the
/// instant each arrived (monotonic seconds) and can be relayed to the peer's standard input, as
/// an embedder's signaling would carry them.
final class LabCallProcess: @unchecked Sendable {
    /// A line the process printed, parsed.
    struct Line: @unchecked Sendable {
        var object: [String: Any]
        var at: Double
        var type: String { object["type"] as? String ?? "" }
    }

    let name: String
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors: FileHandle?
    /// Every line printed, as printed, each prefixed with its arrival instant (for the record).
    private let transcript: FileHandle?
    private let lines = Mutex<[Line]>([])
    private let forward = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Starts `tether call ARGUMENTS` in `namespace`; its standard error goes to `logPath`.
    init(name: String, executable: String, namespace: String, arguments: [String], logPath: String) throws(FaultLabError) {
        Glibc.signal(SIGPIPE, SIG_IGN)  // a peer that exited must not kill the lab with SIGPIPE
        self.name = name
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        // `ip netns exec` execs the command in place: the process's PID is tether's own.
        process.arguments = ["netns", "exec", namespace, executable, "call"] + arguments
        process.standardInput = input
        process.standardOutput = output
        errors = FileManager.default.createFile(atPath: logPath, contents: nil) ? FileHandle(forWritingAtPath: logPath) : nil
        process.standardError = errors ?? FileHandle.nullDevice
        let transcriptPath = logPath.hasSuffix(".log") ? String(logPath.dropLast(4)) + ".jsonl" : logPath + ".jsonl"
        transcript = FileManager.default.createFile(atPath: transcriptPath, contents: nil) ? FileHandle(forWritingAtPath: transcriptPath) : nil
        let transcript = transcript
        let buffer = Mutex<Data>(Data())
        output.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let chunk = handle.availableData
            if chunk.isEmpty { handle.readabilityHandler = nil }
            guard let self, !chunk.isEmpty else { return }
            let now = monotonicSeconds()
            let complete: [String] = buffer.withLock { data in
                data.append(chunk)
                var out: [String] = []
                while let newline = data.firstIndex(of: 0x0A) {
                    out.append(String(decoding: data[data.startIndex..<newline], as: UTF8.self))
                    data.removeSubrange(data.startIndex...newline)
                }
                return out
            }
            if let transcript {
                let stamped = complete.map { String(format: "%.3f ", now) + $0 + "\n" }.joined()
                try? transcript.write(contentsOf: Data(stamped.utf8))
            }
            for text in complete {
                // Record and forward under one lock so the relay neither misses nor repeats a line.
                let send = self.lines.withLock { entries -> (@Sendable (String) -> Void)? in
                    if let data = text.data(using: .utf8), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
                        entries.append(Line(object: object, at: now))
                    }
                    return self.forward.withLock { $0 }
                }
                send?(text)
            }
        }
        do { try process.run() } catch { throw .processFailed("\(error)") }
    }

    deinit {
        output.fileHandleForReading.readabilityHandler = nil
        // SIGKILL: processes started through Foundation's `Process` inherit a signal mask that
        // blocks SIGTERM.
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? errors?.close()
        try? transcript?.close()
    }

    /// The process ID (tether's own, inside its namespace).
    var pid: pid_t { process.processIdentifier }

    /// Sends every line this process prints to `peer`'s standard input, earlier lines first.
    func relayLines(to peer: LabCallProcess) {
        let earlier = lines.withLock { entries in
            forward.withLock { $0 = { [weak peer] line in peer?.send(line) } }
            return entries.compactMap { entry in
                (try? JSONSerialization.data(withJSONObject: entry.object)).map { String(decoding: $0, as: UTF8.self) }
            }
        }
        for line in earlier { peer.send(line) }
    }

    /// Writes one line to the process's standard input.
    func send(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Every line so far.
    var recorded: [Line] { lines.withLock { $0 } }

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
    func send(signal number: Int32) { kill(pid, number) }

    /// Whether the process still runs.
    var isRunning: Bool { process.isRunning }

    /// Waits for the process to exit (up to `timeout`, then terminates it); returns its status.
    func waitForExit(timeout: Double) async -> Int32 {
        let deadline = monotonicSeconds() + timeout
        while process.isRunning && monotonicSeconds() < deadline { await pause(0.02) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)  // SIGTERM is blocked in processes Foundation starts
            process.waitUntilExit()
        }
        output.fileHandleForReading.readabilityHandler = nil
        return process.terminationStatus
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
