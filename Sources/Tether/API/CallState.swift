/// The media view of a call (see the state table in the documentation, <doc:CallStatesAndReconnection>).
public enum CallState: Sendable, Equatable, CustomStringConvertible {
    /// Created; nothing negotiated yet.
    case new
    /// Offer/answer applied and ICE checking; no media decoded yet.
    case connecting
    /// Media flowing: packets from the peer are being decoded.
    case established
    /// Nothing (RTP or RTCP) received for the disruption threshold.
    case mediaDisrupted
    /// An ICE restart or re-gathering is under way.
    case renewingMedia
    /// Hang-up in progress.
    case ending
    /// Terminal, with the reason.
    case ended(CallTerminationReason)

    /// The state's name as used in events and JSON output.
    public var name: String {
        switch self {
        case .new: "new"
        case .connecting: "connecting"
        case .established: "established"
        case .mediaDisrupted: "mediaDisrupted"
        case .renewingMedia: "renewingMedia"
        case .ending: "ending"
        case .ended: "ended"
        }
    }

    /// Whether the call is over.
    public var isEnded: Bool { if case .ended = self { true } else { false } }

    public var description: String {
        if case .ended(let reason) = self { return "ended(\(reason))" }
        return name
    }
}
