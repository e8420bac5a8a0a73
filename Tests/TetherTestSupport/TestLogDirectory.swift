import Foundation
import Glibc
import Synchronization
import Testing

/// A folder of test logs: one file per test (`<name>.<hash>.log`, its first line naming the test),
/// beside it the standard error of each child process it started (`<name>.<hash>.<process>.stderr`),
/// `unattributed.log` for messages no test owns, and `index.tsv` (file, the test's name as the
/// console prints it, the test's ID) for `scripts/run-tests.sh` to find a failed test's log by the
/// name on its `✘` line.
///
/// Every line is written with one `write(2)` on a file opened `O_APPEND`, so nothing waits in a
/// buffer when the test process crashes and lines of two threads never interleave.
public final class TestLogDirectory: Sendable {
    /// The test a message belongs to.
    public struct Owner: Sendable, Hashable {
        /// The test's ID (`Module.Suite/function()/File.swift:line:column`).
        public var id: String
        /// The name `swift test` prints on the test's `◇`/`✔`/`✘` lines: the display name in
        /// quotes, or the function's name.
        public var consoleName: String

        public init(id: String, consoleName: String) {
            self.id = id
            self.consoleName = consoleName
        }

        /// The test running in this task, nil outside a test's task tree (a detached task, a
        /// library's own thread).
        public static var current: Owner? {
            Test.current.map { Owner(id: "\($0.id)", consoleName: $0.displayName.map { "\"\($0)\"" } ?? $0.name) }
        }

        /// The file name: the readable part of the ID, cut short, and a hash of the whole ID
        /// (two tests may share a name, and a long name would pass the file system's limit).
        public var fileName: String {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a, 64 bits
            for byte in id.utf8 {
                hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
            }
            var readable = ""
            for scalar in id.unicodeScalars.prefix(120) {
                readable.unicodeScalars.append(TestLogDirectory.keepsInFileName(scalar) ? scalar : "_")
            }
            return readable + "." + String(hash, radix: 16) + ".log"
        }
    }

    /// The name of the file of messages no test owns.
    public static let unattributedFileName = "unattributed.log"
    /// The name of the index of test files.
    public static let indexFileName = "index.tsv"

    public let path: String
    private struct Files {
        /// Open descriptors by file name: the last few tests' (a run has hundreds of tests, and
        /// the process's descriptors are for the tests' sockets and devices).
        var descriptors: [String: Int32] = [:]
        /// The logs that have their first line and index entry.
        var started: Set<String> = []
        /// The child processes' files handed out.
        var children: Set<String> = []
    }

    /// Descriptors kept open at most.
    private static let openLimit = 8
    private let files = Mutex(Files())

    /// Uses `path`, creating it if needed.
    public init(path: String) {
        self.path = path
        mkdir(path, 0o755)
    }

    deinit {
        files.withLock { for fd in $0.descriptors.values { close(fd) } }
    }

    /// Appends `line` (a newline is added) to `owner`'s log, or to `unattributed.log`.
    public func append(_ line: String, owner: Owner?) {
        files.withLock { files in
            guard let fd = open(owner, in: &files) else { return }
            Self.write(line + "\n", to: fd)
        }
    }

    /// A file for the standard error of `owner`'s child process `process` (a `tether call`, a
    /// peer's driver), beside its log: `scripts/run-tests.sh` shows it after the log when the
    /// test fails. A second process of the same name in one test gets `<process>-2`, and so on.
    public func childErrorPath(owner: Owner, process: String) -> String {
        var name = ""
        for scalar in process.unicodeScalars.prefix(40) {
            name.unicodeScalars.append(Self.keepsInFileName(scalar) ? scalar : "_")
        }
        let base = path + "/" + owner.fileName.dropLast(".log".count) + "." + name
        return files.withLock { files in
            _ = open(owner, in: &files)
            var candidate = base + ".stderr"
            var n = 1
            while files.children.contains(candidate) || access(candidate, F_OK) == 0 {
                n += 1
                candidate = base + "-\(n).stderr"
            }
            files.children.insert(candidate)
            return candidate
        }
    }

    /// The descriptor of `owner`'s log, opened (with its first line and its index entry) when
    /// first needed; nil when it cannot be created.
    private func open(_ owner: Owner?, in files: inout Files) -> Int32? {
        let name = owner?.fileName ?? Self.unattributedFileName
        if let fd = files.descriptors[name] { return fd }
        if files.descriptors.count >= Self.openLimit {
            for fd in files.descriptors.values { close(fd) }
            files.descriptors = [:]
        }
        let fd = Glibc.open(path + "/" + name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
        files.descriptors[name] = fd
        if let owner, files.started.insert(name).inserted {
            Self.write("== \(owner.consoleName)  (\(owner.id))\n", to: fd)
            let index = Glibc.open(path + "/" + Self.indexFileName, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            if index >= 0 {
                Self.write("\(name)\t\(owner.consoleName)\t\(owner.id)\n", to: index)
                close(index)
            }
        }
        return fd
    }

    static func keepsInFileName(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
            || "._-".unicodeScalars.contains(scalar)
    }

    /// The text of `owner`'s log (nil: the unattributed one), or nil when it has none.
    public func contents(of owner: Owner?) -> String? {
        try? String(contentsOfFile: path + "/" + (owner?.fileName ?? Self.unattributedFileName), encoding: .utf8)
    }

    private static func write(_ text: String, to fd: Int32) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return
            }
        }
    }
}
