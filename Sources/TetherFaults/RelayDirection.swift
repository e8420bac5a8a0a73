/// The direction a datagram travels through a ``UDPImpairmentRelay``.
public enum RelayDirection: Int, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Arrived on the relay's A socket (from peer A), leaves through the B socket to peer B.
    case aToB = 0
    /// Arrived on the relay's B socket (from peer B), leaves through the A socket to peer A.
    case bToA = 1

    /// `"A→B"` or `"B→A"`.
    public var description: String { self == .aToB ? "A→B" : "B→A" }
}
