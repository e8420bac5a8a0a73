import TetherCore

/// Rewrites a session description so the peer reaches its sender through a relay: every
/// candidate is replaced by one host candidate at the relay's port that faces the peer.
///
/// The sender's own first UDP candidate is returned too, so the relay can be told where to
/// forward (ICE then runs through the relay as it would through a NAT).
public enum RelayCandidateRewriter {
    /// The rewritten SDP and the sender's real address (nil when it offered no usable candidate).
    public static func rewrite(_ sdp: String, relayAddress: String, relayPort: UInt16) throws -> (
        sdp: String, sender: (address: String, port: UInt16)?
    ) {
        var description = try SessionDescription.parse(sdp)
        var sender: (String, UInt16)?
        for i in description.media.indices where description.media[i].media == "audio" && description.media[i].port != 0 {
            if sender == nil, let c = description.media[i].candidates.first(where: { $0.transport.isUDP && $0.componentID == 1 }) {
                sender = (c.address, c.port)
            }
            description.media[i].candidates = [
                ICECandidate(
                    foundation: "relay", componentID: 1, priority: 2_130_706_431, address: relayAddress, port: relayPort, type: .host)
            ]
            description.media[i].port = relayPort
            description.media[i].connection = SDPConnectionData(address: relayAddress)
        }
        return (description.serialized(), sender)
    }
}
