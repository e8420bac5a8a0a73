/// What the ICE transport reports. Delivered on the GLib thread; handlers must hand off quickly.
public enum ICETransportEvent: Sendable, Equatable {
    /// Gathering finished; the local candidates as SDP attribute values (`candidate:…`).
    case gatheringDone(candidates: [String])
    /// The component changed state.
    case componentStateChanged(ICEComponentState)
    /// A pair was selected: local and remote transport addresses (`address:port`) and candidate types.
    case selectedPairChanged(local: String, remote: String, localType: String, remoteType: String)
}
