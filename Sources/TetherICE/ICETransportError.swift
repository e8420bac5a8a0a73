/// A failure of the ICE transport.
public enum ICETransportError: Error, Equatable, Sendable, CustomStringConvertible {
    /// libnice could not create the agent or the stream.
    case agentCreationFailed(String)
    /// A local address given in the configuration is not an IP literal.
    case invalidLocalAddress(String)
    /// A remote candidate line libnice could not parse.
    case invalidRemoteCandidate(String)
    /// libnice refused the remote credentials or candidates.
    case remoteRejected(String)
    /// A STUN/TURN server address is not an IP literal.
    case invalidServer(String)
    /// TURN over TLS cannot start: the trusted certificates cannot be loaded, or the loopback
    /// listener libnice connects to cannot be opened.
    case turnTLSUnavailable(String)
    /// The transport is closed.
    case closed

    public var description: String {
        switch self {
        case .agentCreationFailed(let s): "ICE agent creation failed: \(s)"
        case .invalidLocalAddress(let s): "invalid local address '\(s)'"
        case .invalidRemoteCandidate(let s): "invalid remote candidate '\(s)'"
        case .remoteRejected(let s): "libnice refused the remote description: \(s)"
        case .invalidServer(let s): "invalid STUN/TURN server address '\(s)'"
        case .turnTLSUnavailable(let s): "TURN over TLS unavailable: \(s)"
        case .closed: "ICE transport closed"
        }
    }
}
