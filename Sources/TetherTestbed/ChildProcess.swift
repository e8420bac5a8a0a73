import CTetherSystem
import Glibc

/// A child process started with `posix_spawn` and reaped with `waitpid` on its own process ID.
///
/// Tests and tools use this for helper commands (`pactl`, `parecord`, `pulseaudio`, `ip`) instead
/// of Foundation's `Process`: on Linux that reaps children from its own monitor, which was seen
/// to leave a short-lived child a zombie (and `waitUntilExit` hanging) while a long-lived one ran.
/// Here every wait is on one known process ID, so nothing depends on a shared reaper.
public struct ChildProcess: Sendable {
    /// What a finished command printed and how it ended.
    public struct Result: Sendable {
        /// The exit status, 128 + the signal number when a signal ended it, or -1 when it could
        /// not be started or waited for.
        public var status: Int32
        /// Its standard output (when captured).
        public var output: String
    }

    public let pid: pid_t

    /// Starts `arguments[0]` (searched in PATH). Standard input is /dev/null; standard output and
    /// error go to /dev/null too. Returns nil when the program cannot be started.
    public static func spawn(_ arguments: [String]) -> ChildProcess? {
        guard let pid = start(arguments, stdoutDescriptor: -1) else { return nil }
        return ChildProcess(pid: pid)
    }

    /// Runs a command to its end and returns its status and standard output.
    @discardableResult
    public static func run(_ arguments: [String]) -> Result {
        var fds: [Int32] = [-1, -1]
        // Other children close every descriptor above 2 (CTetherSystem_spawn), so the pipe needs no
        // close-on-exec flag to stay private to this one.
        guard pipe(&fds) == 0 else { return Result(status: -1, output: "") }
        let pid = start(arguments, stdoutDescriptor: fds[1])
        close(fds[1])
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if n > 0 {
                bytes += chunk[0..<n]
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        close(fds[0])
        guard let pid else { return Result(status: -1, output: "") }
        return Result(status: ChildProcess(pid: pid).waitForExit(), output: String(decoding: bytes, as: UTF8.self))
    }

    /// Sends `signal` (SIGTERM by default).
    public func signal(_ signal: Int32 = SIGTERM) {
        kill(pid, signal)
    }

    /// Blocks until it ends and returns its status (see `Result.status`). Call it once.
    @discardableResult
    public func waitForExit() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno != EINTR { return -1 }
        }
        let signalNumber = status & 0x7f
        return signalNumber == 0 ? (status >> 8) & 0xff : 128 + signalNumber
    }

    /// Sends SIGTERM and reaps it.
    public func terminate() {
        signal(SIGTERM)
        waitForExit()
    }

    private static func start(_ arguments: [String], stdoutDescriptor: Int32) -> pid_t? {
        guard !arguments.isEmpty else { return nil }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { for p in argv { free(p) } }
        let pid = CTetherSystem_spawn(&argv, stdoutDescriptor, -1)
        return pid > 0 ? pid : nil
    }
}
