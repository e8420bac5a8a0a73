/// What the ICE transport reports. Delivered on the GLib thread; handlers must hand off quickly.
public enum ICETransportEvent: Sendable, Equatable {
    /// Gathering finished; the local candidates as SDP attribute values (`candidate:…`).
    case gatheringDone(candidates: [String])
    /// One local candidate was gathered on the current stream (SDP attribute value,
    /// `candidate:…`), as libnice found it: host candidates at once, server-reflexive and relayed
    /// ones as their servers answer. For trickle ICE (RFC 8838); `gatheringDone` still follows
    /// with all of them. IPv6 link-local candidates are not reported (see `localCandidates()`).
    /// `ufrag` is the stream's local username fragment: an event of a stream that a re-gathering
    /// has since replaced can still be waiting in the handler's queue, and says so by it.
    case candidateGathered(String, ufrag: String)
    /// The component changed state.
    case componentStateChanged(ICEComponentState)
    /// A pair was selected and carries media now.
    case selectedPairChanged(ICESelectedPair)
    /// The peer no longer consents to receive on the selected pair (RFC 7675: no answer to a
    /// consent check for 30 s, or a 403 answer). Nothing is sent on that pair from now on (sends
    /// report `.noPath`) until a new pair is selected (an ICE restart). Once per selected pair.
    case consentLost
    /// A DTLS datagram arrived (first byte 20…63, RFC 7983): handshake flights and alerts, which
    /// never enter the media ring. Acknowledge each with `ICETransport.dtlsDatagramHandled()`:
    /// at most `ICETransport.maximumPendingDTLSDatagrams` are delivered unacknowledged.
    case dtlsDatagram([UInt8])
}

/// The candidate pair media goes over.
public struct ICESelectedPair: Sendable, Equatable {
    /// Local transport address (`address:port`, IPv6 in brackets).
    public var local: String
    /// Remote transport address.
    public var remote: String
    /// Local candidate type: `host`, `srflx`, `prflx` or `relay`.
    public var localType: String
    /// Remote candidate type.
    public var remoteType: String
    /// The local interface address the pair's socket is bound to (the candidate's base; for a
    /// relayed candidate, the address its connection to the TURN server leaves from), without port.
    public var localBase: String

    public init(local: String, remote: String, localType: String, remoteType: String, localBase: String) {
        self.local = local
        self.remote = remote
        self.localType = localType
        self.remoteType = remoteType
        self.localBase = localBase
    }
}
