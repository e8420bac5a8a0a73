/// One row of the fault matrix: a real fault between two `tether call` processes in two network
/// namespaces, caused by the kernel event that causes it in real life.
public enum FaultScenario: Sendable, Hashable, CustomStringConvertible {
    /// A's only link goes down (`ip link set … down`) for `seconds`, then up, as when Wi-Fi drops.
    case linkFlap(seconds: Double)
    /// A's only link goes down and stays down past the give-up.
    case linkLost
    /// A new address on A's link and the old one removed (a new DHCP lease).
    case renumber
    /// A and B joined by two links; the one carrying the call is cut for good, then restored and
    /// the other cut (the call must follow both ways).
    case interfaceSwitch
    /// A and B both renumbered at once.
    case bothRenumber
    /// A behind a router that masquerades it with random ports; the router's conntrack is
    /// flushed mid-call, so A's external port changes.
    case natRebinding
    /// A's default route (its way to B through a router) removed for `seconds`, then restored.
    case routeRemoved(seconds: Double)
    /// A's outgoing UDP dropped for `seconds` (one-way audio), then let through again.
    case oneWay(seconds: Double)
    /// All UDP in A's namespace dropped for `seconds` while the link stays up.
    case blackHole(seconds: Double)
    /// A stopped with SIGSTOP for `seconds` (a laptop lid), then continued.
    case processStopped(seconds: Double)
    /// A killed with SIGKILL: B is left alone and must give up.
    case peerKilled
    /// `percent` % of UDP in each direction dropped at random for `seconds`.
    case randomLoss(percent: Int, seconds: Double)
    /// A and B reach each other only through a TURN server (UDP between them blocked): the call
    /// is set up over TURN/UDP, restored through it after a 3 s outage of A's UDP, and A's
    /// re-gather (`renew`: a new allocation) releases the old allocation.
    case relayOnly
    /// All UDP blocked in A's and B's namespaces: the call runs over TURN on TCP.
    case relayOverTCP
    /// The direct path between A and B dies mid-call (TURN still reachable): the restart moves
    /// the call onto the relay.
    case directPathDiesOntoRelay
    /// A and B may reach the TURN server only on TCP port 443 (all UDP and every other port
    /// blocked, as on a corporate network that lets only HTTPS out): the call runs over TURN
    /// over TLS, with a certificate the lab makes.
    case relayOverTLS
    /// B stops answering connectivity checks for `seconds` (STUN binding requests arriving at B
    /// dropped; media, answers and B's own checks pass), as an address that no longer agrees to
    /// receive: A's consent (RFC 7675) expires and A must stop sending to B within 30 s.
    case consentWithdrawn(seconds: Double)
    /// Only TCP 443 reaches the TURN server, and the direct path between A and B dies mid-call:
    /// the restart moves the call onto TURN over TLS; when the direct path is back, A's
    /// re-gather moves it off the relay again.
    case directPathDiesOntoTLSRelayAndBack
    /// IPv6 only (no IPv4 address anywhere): A's only link goes down for `seconds`, then up.
    /// With `flushed` (Linux's default, `keep_addr_on_down=0`) the kernel removes A's IPv6
    /// addresses at link down, and the network gives the global one back after the link returns
    /// (as a router advertisement or DHCPv6 does), so it is usable only once duplicate address
    /// detection is over; without, A keeps its addresses (`keep_addr_on_down=1`).
    case ipv6LinkFlap(seconds: Double, flushed: Bool)
    /// Dual stack (IPv4 and IPv6 on the link): the call's family goes away on A (its address
    /// removed, as when a network withdraws its IPv6 prefix), the call moves to the other; then
    /// it comes back and the other goes, and the call moves back.
    case dualStackFamilySwitch
    /// Both sides trickle ICE (`--trickle`) and are given a STUN server that never answers (a
    /// black-hole route): the call is set up on the host candidates without waiting for it; then
    /// A and B are joined by a second link, and the one carrying the call is cut for good (a
    /// restart with trickle on).
    case trickleSetUpAndSwitch

    /// The whole matrix, as issue 13 describes it. `lossSeconds` shortens the random-loss row
    /// (10 minutes in full).
    public static func matrix(lossSeconds: Double = 600) -> [FaultScenario] {
        [
            .linkFlap(seconds: 0.5), .linkFlap(seconds: 1.5), .linkFlap(seconds: 5), .linkFlap(seconds: 30), .linkLost,
            .renumber, .interfaceSwitch, .bothRenumber, .natRebinding, .routeRemoved(seconds: 3), .oneWay(seconds: 5),
            .blackHole(seconds: 0.5), .blackHole(seconds: 1.5), .blackHole(seconds: 5), .blackHole(seconds: 30),
            .processStopped(seconds: 10), .peerKilled, .consentWithdrawn(seconds: 35), .randomLoss(percent: 20, seconds: lossSeconds),
            .relayOnly, .relayOverTCP, .directPathDiesOntoRelay, .relayOverTLS, .directPathDiesOntoTLSRelayAndBack,
            .ipv6LinkFlap(seconds: 1.5, flushed: false), .ipv6LinkFlap(seconds: 1.5, flushed: true), .dualStackFamilySwitch,
            .trickleSetUpAndSwitch,
        ]
    }

    /// A short name for tables and logs.
    public var description: String {
        func s(_ v: Double) -> String { v == v.rounded() ? "\(Int(v)) s" : "\(v) s" }
        switch self {
        case .linkFlap(let d): return "only link down \(s(d)), then up"
        case .linkLost: return "only link down for good (give-up)"
        case .renumber: return "address renumbered (new DHCP lease)"
        case .interfaceSwitch: return "interface switch and back"
        case .bothRenumber: return "both sides renumbered at once"
        case .natRebinding: return "NAT rebinding (conntrack flushed)"
        case .routeRemoved(let d): return "default route removed \(s(d)), restored"
        case .oneWay(let d): return "A's output blocked \(s(d)) (one-way)"
        case .blackHole(let d): return "all UDP black-holed \(s(d)), link up"
        case .processStopped(let d): return "A stopped \(s(d)) (SIGSTOP/SIGCONT)"
        case .peerKilled: return "A killed (SIGKILL)"
        case .consentWithdrawn(let d): return "B answers no checks \(s(d)) (consent withdrawn)"
        case .randomLoss(let p, let d): return "\(p) % random loss for \(s(d))"
        case .relayOnly: return "TURN/UDP only: 3 s outage, re-gather"
        case .relayOverTCP: return "all UDP blocked: TURN over TCP"
        case .directPathDiesOntoRelay: return "direct path dies: onto TURN"
        case .relayOverTLS: return "only TCP 443 out: TURN over TLS"
        case .directPathDiesOntoTLSRelayAndBack: return "only TCP 443 to TURN, direct path dies and returns"
        case .ipv6LinkFlap(let d, let flushed):
            return "IPv6 only: link down \(s(d)), addresses \(flushed ? "flushed (Linux default)" : "kept")"
        case .dualStackFamilySwitch: return "dual stack: the call's family removed, then the other"
        case .trickleSetUpAndSwitch: return "trickle ICE, a STUN server that never answers: set-up, then interface switch"
        }
    }

    /// What the row must show, in words (the README's and the bench's "must show" column).
    public var requirement: String {
        switch self {
        case .linkFlap: "restored ≤ 1 s after the link is back; no give-up"
        case .linkLost: "ended 50 ± 0.5 s after the last packet, 1004, both sides"
        case .renumber: "restored ≤ 1 s after the change"
        case .interfaceSwitch: "audio gap ≤ 500 ms each way"
        case .bothRenumber: "restored ≤ 2 s"
        case .natRebinding: "restored ≤ 1 s"
        case .routeRemoved: "restored ≤ 1 s after the route is back"
        case .oneWay: "A outbound-disrupted ≤ 3 s, B disrupted ≤ 1.1 s; both restored ≤ 1 s after"
        case .blackHole: "detected ≤ 1.1 s, restored ≤ 1 s after the path returns"
        case .processStopped: "both recover; no stale audio after the resume"
        case .peerKilled: "B ends 50 ± 0.5 s after the last packet, 1004"
        case .consentWithdrawn: "A stops sending ≤ 30 s after B's last answer and says why; both restored ≤ 12 s after checks pass (the next renewal attempt)"
        case .randomLoss: "never leaves established; RSS flat (± 2 MB)"
        case .relayOnly: "set up through TURN/UDP; restored ≤ 1 s after the outage; a re-gather releases the old allocation"
        case .relayOverTCP: "set up and carried through TURN/TCP"
        case .directPathDiesOntoRelay: "on the relay ≤ 1 s after detection"
        case .relayOverTLS: "set up and carried through TURN over TLS; allocations released at hang-up"
        case .directPathDiesOntoTLSRelayAndBack: "on the TLS relay ≤ 1 s after detection; off it after a re-gather once the direct path is back"
        case .ipv6LinkFlap: "restored ≤ 1 s after the path is back (the link up, and A's address out of duplicate address detection)"
        case .dualStackFamilySwitch: "set up on IPv6; on IPv4 ≤ 1 s after A's IPv6 address goes (audio gap ≤ 1 s); back on IPv6 likewise"
        case .trickleSetUpAndSwitch: "both established ≤ 1 s after their sessions began (not after the STUN server's time-out); audio gap ≤ 500 ms at the switch"
        }
    }

    /// The network the row needs.
    var shape: LabNetwork.Shape {
        switch self {
        case .interfaceSwitch, .trickleSetUpAndSwitch: .direct(links: 2)
        case .natRebinding: .routed(nat: true)
        case .routeRemoved: .routed(nat: false)
        case .relayOnly, .relayOverTCP, .relayOverTLS: .relayed(direct: false)
        case .directPathDiesOntoRelay, .directPathDiesOntoTLSRelayAndBack: .relayed(direct: true)
        case .ipv6LinkFlap: .direct(links: 1, families: .ipv6)
        case .dualStackFamilySwitch: .direct(links: 1, families: .dual)
        default: .direct(links: 1)
        }
    }

    /// Roughly how long the row takes, in seconds (for scheduling).
    public var expectedSeconds: Double {
        switch self {
        case .linkFlap(let d), .routeRemoved(let d), .oneWay(let d), .blackHole(let d), .processStopped(let d): 10 + d
        case .linkLost, .peerKilled: 62
        case .directPathDiesOntoTLSRelayAndBack, .dualStackFamilySwitch: 24
        case .randomLoss(_, let d): 12 + d
        case .consentWithdrawn(let d): 16 + d
        default: 16
        }
    }
}
