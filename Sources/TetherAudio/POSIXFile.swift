import Glibc

/// Messages for errno values.
enum SystemError {
    /// The C library's message for `code` (an errno value).
    static func message(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }
}

/// Whole-file reads and writes with POSIX calls (control paths only: these allocate).
enum POSIXFile {
    /// Reads the whole file at `path`.
    static func readAll(path: String) throws(AudioDeviceError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .cannotOpenFile(path: path, reason: SystemError.message(errno)) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw .cannotOpenFile(path: path, reason: SystemError.message(errno))
        }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw .cannotOpenFile(path: path, reason: "not a regular file")
        }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        var filled = 0
        while filled < bytes.count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                read(fd, buffer.baseAddress! + filled, buffer.count - filled)
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw .cannotOpenFile(path: path, reason: SystemError.message(errno))
            }
            if got == 0 { break }  // The file shrank while we read it.
            filled += got
        }
        if filled < bytes.count { bytes.removeLast(bytes.count - filled) }
        return bytes
    }

    /// Creates or truncates `path` (mode 0644) and writes `bytes` to it.
    static func writeAll(_ bytes: [UInt8], path: String) throws(AudioDeviceError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .cannotOpenFile(path: path, reason: SystemError.message(errno)) }
        let written = bytes.withUnsafeBytes { writeFully(fd, $0.baseAddress, $0.count) }
        let writeErrno = errno
        let closed = close(fd)
        if !written { throw .cannotWriteFile(path: path, reason: SystemError.message(writeErrno)) }
        if closed != 0 { throw .cannotWriteFile(path: path, reason: SystemError.message(errno)) }
    }

    /// Writes `count` bytes from `base`, retrying after signals and short writes.
    /// - Returns: `false` on error (`errno` tells why).
    /// - Note: Safe on device threads: no allocation.
    static func writeFully(_ fd: Int32, _ base: UnsafeRawPointer?, _ count: Int) -> Bool {
        guard count > 0, let base else { return true }
        var done = 0
        while done < count {
            let n = write(fd, base + done, count - done)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            if n == 0 { errno = EIO; return false }
            done += n
        }
        return true
    }
}
