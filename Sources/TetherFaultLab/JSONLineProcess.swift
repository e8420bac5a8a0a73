import Foundation
import Glibc
import Synchronization

/// A child process that speaks JSON lines on its standard input and output — `tether call`, or a
/// third-party peer's driver — whose every output line is recorded with the instant it arrived
/// (monotonic nanoseconds) and can be relayed to another such process's input, as an embedder's
/// signaling would carry it. The fault lab's calls and the interop tests both run on it.
public final class JSONLineProcess: @unchecked Sendable {
    /// A line the process printed: as text, parsed (nil when it is not a JSON object), and when.
    public struct Line: @unchecked Sendable {
        public let text: String
        public let object: [String: Any]?
        public let atNanoseconds: UInt64
        /// The object's `type` field ("" for none).
        public var type: String { object?["type"] as? String ?? "" }
    }

    public let name: String
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors: FileHandle?
    private let transcript: FileHandle?
    private let lines = Mutex<[Line]>([])
    private let forward = Mutex<(@Sendable (String) -> Void)?>(nil)
    private let outputEnded = Atomic<Bool>(false)

    /// Starts `executable ARGUMENTS`.
    /// - Parameters:
    ///   - errorPath: a file that receives the process's standard error (its log); nil: discarded.
    ///   - transcriptPath: a file that receives every output line, prefixed with its arrival
    ///     instant in seconds (for the record); nil: none.
    public init(
        name: String, executable: String, arguments: [String], errorPath: String? = nil, transcriptPath: String? = nil
    ) throws {
        Glibc.signal(SIGPIPE, SIG_IGN)  // a peer that already exited must not kill us with SIGPIPE
        self.name = name
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        errors = errorPath.flatMap { path in
            FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil
        }
        process.standardError = errors ?? FileHandle.nullDevice
        transcript = transcriptPath.flatMap { path in
            FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil
        }
        let transcript = transcript
        let buffer = Mutex<Data>(Data())
        output.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let chunk = handle.availableData
            // End of output: stop watching, which lets Foundation cancel and free its dispatch
            // source (left set, it keeps the handle and the process alive for ever).
            if chunk.isEmpty {
                handle.readabilityHandler = nil
                self?.outputEnded.store(true, ordering: .releasing)
            }
            guard let self, !chunk.isEmpty else { return }
            let now = Self.monotonicNanoseconds()
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
                let stamped = complete.map { String(format: "%.3f ", Double(now) / 1e9) + $0 + "\n" }.joined()
                try? transcript.write(contentsOf: Data(stamped.utf8))
            }
            for text in complete {
                let object = text.data(using: .utf8).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
                // Record and forward under one lock so a relay neither misses nor repeats a line.
                let send = self.lines.withLock { entries -> (@Sendable (String) -> Void)? in
                    entries.append(Line(text: text, object: object, atNanoseconds: now))
                    return self.forward.withLock { $0 }
                }
                send?(text)
            }
        }
        try process.run()
    }

    deinit {
        output.fileHandleForReading.readabilityHandler = nil
        // SIGKILL: processes started through Foundation's `Process` inherit a signal mask that
        // blocks SIGTERM.
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        try? errors?.close()
        try? transcript?.close()
    }

    /// The monotonic clock the lines are stamped with (CLOCK_MONOTONIC, nanoseconds).
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Every line so far, in order.
    public var recorded: [Line] { lines.withLock { $0 } }

    /// The process's output reached its end (every line it printed has been recorded).
    public var outputFinished: Bool { outputEnded.load(ordering: .acquiring) }

    /// Sends every line this process prints to `peer`'s standard input, lines printed before
    /// first, in order. `rewrite` changes each line on its way (a peer that hides its addresses).
    public func relayLines(to peer: JSONLineProcess, rewrite: (@Sendable (String) -> String)? = nil) {
        let earlier = lines.withLock { entries in
            forward.withLock { $0 = { [weak peer] line in peer?.send(rewrite?(line) ?? line) } }
            return entries.map(\.text)
        }
        for line in earlier { peer.send(rewrite?(line) ?? line) }
    }

    /// Writes one line to the process's standard input.
    public func send(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// The process ID.
    public var pid: pid_t { process.processIdentifier }

    /// Whether the process still runs.
    public var isRunning: Bool { process.isRunning }

    /// Sends a signal to the process (SIGSTOP, SIGCONT, SIGKILL, …).
    public func send(signal number: Int32) { Glibc.kill(pid, number) }

    /// Waits for the process to exit (up to `timeoutSeconds`, then kills it); returns its status.
    public func waitForExit(timeoutSeconds: Double) async -> Int32 {
        let deadline = Self.monotonicNanoseconds() &+ UInt64(max(0, timeoutSeconds) * 1e9)
        while process.isRunning && Self.monotonicNanoseconds() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)  // SIGTERM is blocked in processes Foundation starts
            process.waitUntilExit()
        }
        // The last lines may still be on their way through the pipe: wait for its end (a few
        // seconds at most; a child that kept the pipe open must not hang the caller).
        let drained = Self.monotonicNanoseconds() &+ 5_000_000_000
        while !outputFinished && Self.monotonicNanoseconds() < drained { try? await Task.sleep(for: .milliseconds(10)) }
        output.fileHandleForReading.readabilityHandler = nil
        return process.terminationStatus
    }
}
