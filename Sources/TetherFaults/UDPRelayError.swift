/// Errors of ``UDPImpairmentRelay``.
public enum UDPRelayError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text is not an IPv4 address (or `address:port`).
    case invalidAddress(String)
    /// A system call failed; `errno` is the C error number.
    case systemCall(String, errno: Int32)
    /// A control command could not be understood.
    case invalidCommand(String)

    /// A readable explanation.
    public var description: String {
        switch self {
        case .invalidAddress(let text): "not an IPv4 address: \(text)"
        case .systemCall(let call, let errno): "\(call) failed with errno \(errno)"
        case .invalidCommand(let text): "invalid relay command: \(text)"
        }
    }
}
