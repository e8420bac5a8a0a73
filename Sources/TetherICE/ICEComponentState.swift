/// libnice's component state (RFC 8445 checking/connected/failed as libnice reports it).
public enum ICEComponentState: Int, Sendable, Equatable, CustomStringConvertible {
    /// No activity scheduled.
    case disconnected = 0
    /// Gathering local candidates.
    case gathering = 1
    /// Connectivity checks under way.
    case connecting = 2
    /// At least one working pair.
    case connected = 3
    /// Checks finished and a pair is selected.
    case ready = 4
    /// Checks failed (not final in libnice 0.1.21: a later restart may succeed).
    case failed = 5

    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .gathering: "gathering"
        case .connecting: "connecting"
        case .connected: "connected"
        case .ready: "ready"
        case .failed: "failed"
        }
    }
}
