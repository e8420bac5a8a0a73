import TetherICE
import TetherNetworkMonitor

/// What a local network change means for a call's media path. Pure: fed the change, the
/// addresses usable now and what the call uses; the session feeds its verdict to the
/// reconnection core.
///
/// A change matters when the path's local side went away (its address removed, or its link down
/// or no longer running), or when a usable network appeared while media is disrupted. A change
/// elsewhere (another interface, an address the call does not use) leaves the call alone: a
/// working path is never renegotiated for nothing.
struct NetworkPathJudge: Sendable {
    /// What to tell the reconnection core.
    enum Verdict: Sendable, Equatable {
        /// Nothing that concerns the path.
        case ignore
        /// Renew on fresh candidates: `ReconnectStateMachine.Input.localNetworkChanged`.
        case renew
        /// The path's local network is gone and nothing usable is left:
        /// `ReconnectStateMachine.Input.localNetworkLost` (wait for a network).
        case lost
    }

    /// The addresses the call may gather on (`CallConfiguration.localAddresses`; empty: any).
    var pinnedAddresses: [String] = []

    /// - Parameters:
    ///   - change: the debounced change.
    ///   - usable: every local address on a link that is up and running now (loopback and
    ///     link-local included).
    ///   - pair: the selected pair carrying media, if any.
    ///   - gatheredAddresses: the addresses of our current local candidates.
    ///   - disrupted: media is disrupted (`mediaDisrupted` or `renewingMedia`).
    func verdict(
        change: NetworkChange, usable: [InterfaceAddress], pair: ICESelectedPair?, gatheredAddresses: Set<String>, disrupted: Bool
    ) -> Verdict {
        let candidates = usable.filter { address in
            pinnedAddresses.isEmpty ? !address.address.isLoopback : pinnedAddresses.contains(address.address.description)
        }
        let usableSet = Set(candidates.map { $0.address.description })
        let broken: Bool
        if let pair {
            // The interface address the pair's socket is bound to (for a relayed pair, the one
            // that reaches the TURN server).
            broken = !usableSet.contains(pair.localBase)
        } else {
            // No pair yet: broken when none of the addresses we gathered on is usable any more.
            broken = !gatheredAddresses.isEmpty && gatheredAddresses.isDisjoint(with: usableSet)
        }
        if broken { return usableSet.isEmpty ? .lost : .renew }
        if disrupted && !usableSet.isEmpty && (!change.addedAddresses.isEmpty || !change.linksUp.isEmpty) { return .renew }
        return .ignore
    }
}
