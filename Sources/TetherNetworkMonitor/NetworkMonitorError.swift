/// Errors of ``NetworkChangeMonitor``.
public enum NetworkMonitorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A system call failed; `errno` is the C error number.
    case systemCall(String, errno: Int32)
    /// The network namespace file could not be opened or entered (`setns`).
    case namespaceUnavailable(path: String, errno: Int32)
    /// The kernel refused a dump request with the positive errno `code`.
    case dumpFailed(code: Int32)
    /// A dump did not complete within its time limit (milliseconds).
    case dumpTimedOut(milliseconds: Int)
    /// The monitor thread did not report ready within its time limit (milliseconds).
    case startupTimedOut(milliseconds: Int)

    /// A readable explanation.
    public var description: String {
        switch self {
        case .systemCall(let call, let errno): "\(call) failed with errno \(errno)"
        case .namespaceUnavailable(let path, let errno): "cannot enter network namespace \(path) (errno \(errno))"
        case .dumpFailed(let code): "rtnetlink dump failed with errno \(code)"
        case .dumpTimedOut(let milliseconds): "rtnetlink dump took longer than \(milliseconds) ms"
        case .startupTimedOut(let milliseconds): "network monitor did not start within \(milliseconds) ms"
        }
    }
}
