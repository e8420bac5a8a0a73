/// What a `CallSession` reports on its `events` stream, in order.
public enum CallEvent: Sendable {
    /// The call moved from one state to another, `secondsSinceStart` after the session was created.
    case stateChanged(from: CallState, to: CallState, secondsSinceStart: Double)
    /// A session description the embedder must deliver to the peer.
    case localDescription(SessionDescriptionMessage)
    /// Something went wrong. Non-terminal errors leave the call running.
    case error(TetherError)
    /// Periodic call statistics.
    case statistics(CallStatistics)
    /// ICE selected a candidate pair (local and remote `address:port` and candidate types).
    case candidatePairSelected(local: String, remote: String, localType: String, remoteType: String)
}

/// A session description to carry to the peer, with its role in offer/answer.
public struct SessionDescriptionMessage: Sendable, Equatable {
    /// Offer or answer.
    public enum Kind: String, Sendable, Equatable { case offer, answer }
    /// Offer or answer.
    public var kind: Kind
    /// The SDP text (CRLF line endings).
    public var sdp: String

    public init(kind: Kind, sdp: String) {
        self.kind = kind
        self.sdp = sdp
    }
}
