import Foundation

/// Network namespaces the lab creates for one scenario, joined by veth pairs, and the kernel
/// events it causes in them: links down and up, addresses added and removed, routes removed,
/// nftables rules, conntrack flushed. Everything is deleted by `tearDown()`; nothing touches the
/// machine's own namespace. IPv6 is switched off inside unless the shape asks for it, so that a
/// link-local pair cannot quietly survive a fault meant to break an IPv4 path.
final class LabNetwork: @unchecked Sendable {
    /// Which address families a direct shape's links carry.
    enum Families: Sendable {
        case ipv4
        /// IPv6 only: link i is fd00:(70+i)::1/64 (A) ⇄ ::2 (B), plus the kernel's link-local
        /// addresses; no IPv4 address at all.
        case ipv6
        /// Both: the IPv4 and the IPv6 addresses on every link.
        case dual
    }

    /// The shapes a scenario can ask for.
    enum Shape: Sendable {
        /// A and B joined directly by `links` veth pairs: link i is 10.(70+i).0.1/24 (A) ⇄ .2 (B)
        /// and/or fd00:(70+i)::1/64 ⇄ ::2, by `families`.
        case direct(links: Int, families: Families = .ipv4)
        /// A — R — B through a router namespace: A 10.80.1.2/24 (default via R), B 10.80.2.2/24
        /// (default via R). With `nat`, R masquerades A behind 10.80.2.1 with random ports and
        /// drops what B starts towards A (a NAT's filtering), so A reaches B only through its
        /// mapping (a peer-reflexive candidate at B), and every new conntrack entry has a new
        /// external port.
        case routed(nat: Bool)
        /// A and B reach only T (A 10.92.1.2 ⇄ T 10.92.1.1, B 10.92.2.2 ⇄ T 10.92.2.1; T does
        /// not forward), where a TURN server relays on 10.92.0.1; with `direct`, A and B are also
        /// joined directly (10.93.0.1 ⇄ 10.93.0.2).
        case relayed(direct: Bool)
    }

    let prefix: String
    let a: String
    let b: String
    /// The router (routed) or TURN (relayed) namespace.
    let middle: String?
    private(set) var namespaces: [String] = []

    /// Creates the namespaces and links of `shape` and waits until every link is operational.
    init(shape: Shape, tag: String) async throws(FaultLabError) {
        prefix = "tfl-\(tag)"
        a = prefix + "-a"
        b = prefix + "-b"
        switch shape {
        case .direct: middle = nil
        case .routed: middle = prefix + "-r"
        case .relayed: middle = prefix + "-t"
        }
        do {
            try build(shape)
        } catch {
            tearDown()
            throw error
        }
        for ns in namespaces {
            for link in links(in: ns) {
                if await waitOperational(ns, link) { continue }
                tearDown()
                throw .commandFailed(command: "wait for \(link) in \(ns)", status: -1, output: "the link did not come up within 5 s")
            }
            // IPv6 addresses are usable once duplicate address detection is over (1–2 s).
            if await waitAddressesSettled(ns) == nil {
                tearDown()
                throw .commandFailed(command: "wait for IPv6 addresses in \(ns)", status: -1, output: "still tentative after 5 s")
            }
        }
    }

    /// The IPv4 address (with prefix) of `side` (1: A, 2: B) on direct link `link`.
    static func ipv4(link: Int, side: Int) -> String { "10.\(70 + link).0.\(side)/24" }
    /// The IPv6 address (with prefix) of `side` (1: A, 2: B) on direct link `link`.
    static func ipv6(link: Int, side: Int) -> String { "fd00:\(70 + link)::\(side)/64" }

    private func build(_ shape: Shape) throws(FaultLabError) {
        var ipv6 = false
        if case .direct(_, let families) = shape, families != .ipv4 { ipv6 = true }
        for ns in [a, b] + (middle.map { [$0] } ?? []) { try addNamespace(ns, ipv6: ipv6) }
        switch shape {
        case .direct(let count, let families):
            for i in 0..<count {
                switch families {
                case .ipv4: try veth(a, "e\(i)", Self.ipv4(link: i, side: 1), b, "e\(i)", Self.ipv4(link: i, side: 2))
                case .ipv6: try veth(a, "e\(i)", Self.ipv6(link: i, side: 1), b, "e\(i)", Self.ipv6(link: i, side: 2))
                case .dual:
                    try veth(a, "e\(i)", Self.ipv4(link: i, side: 1), b, "e\(i)", Self.ipv4(link: i, side: 2))
                    try Shell.must("ip -n \(a) addr add \(Self.ipv6(link: i, side: 1)) dev e\(i)")
                    try Shell.must("ip -n \(b) addr add \(Self.ipv6(link: i, side: 2)) dev e\(i)")
                }
            }
        case .routed(let nat):
            let r = middle!
            try veth(a, "e0", "10.80.1.2/24", r, "ea", "10.80.1.1/24")
            try veth(b, "e0", "10.80.2.2/24", r, "eb", "10.80.2.1/24")
            try Shell.must(in: r, "sysctl -qw net.ipv4.ip_forward=1")
            try Shell.must("ip -n \(a) route add default via 10.80.1.1")
            try Shell.must("ip -n \(b) route add default via 10.80.2.1")
            if nat {
                try nft(r, table: "nat", "chain post { type nat hook postrouting priority 100; oifname \"eb\" masquerade random; }", family: "ip")
                // A NAT's filtering: nothing from outside reaches A unless A's traffic opened it.
                try nft(r, table: "filter", "chain forward { type filter hook forward priority 0; iifname \"eb\" ct state new drop; }", family: "ip")
            }
        case .relayed(let direct):
            let t = middle!
            try veth(a, "e0", "10.92.1.2/24", t, "ea", "10.92.1.1/24")
            try veth(b, "e0", "10.92.2.2/24", t, "eb", "10.92.2.1/24")
            try Shell.must("ip -n \(t) addr add 10.92.0.1/32 dev lo")  // the relay address (no dummy links in this kernel)
            try Shell.must("ip -n \(a) route add 10.92.0.1/32 via 10.92.1.1")
            try Shell.must("ip -n \(b) route add 10.92.0.1/32 via 10.92.2.1")
            if direct {
                try veth(a, "e1", "10.93.0.1/24", b, "e1", "10.93.0.2/24")
                // The server reaches both sides' direct-link addresses too (through their
                // uplinks), as it would a multi-homed laptop's: allocations succeed from every
                // local address, and the relay can reach a peer's host candidate.
                try Shell.must("ip -n \(t) route add 10.93.0.1/32 via 10.92.1.2")
                try Shell.must("ip -n \(t) route add 10.93.0.2/32 via 10.92.2.2")
            }
            // Like any server on the internet, T has a default route: what it relays to an
            // address nobody answers for vanishes on the way (a veth whose far end drops
            // everything) instead of failing at once, which coturn answers by closing the
            // whole allocation.
            try Shell.must("ip -n \(t) link add sk0 type veth peer name sk1")
            try Shell.must("ip -n \(t) addr add 10.99.0.1/30 dev sk0")
            try Shell.must("ip -n \(t) link set sk0 up")
            try Shell.must("ip -n \(t) link set sk1 up")
            try Shell.must("ip -n \(t) neigh add 10.99.0.2 lladdr 02:00:00:00:00:99 dev sk0 nud permanent")
            try Shell.must("ip -n \(t) route add default via 10.99.0.2")
        }
    }

    private func addNamespace(_ ns: String, ipv6: Bool) throws(FaultLabError) {
        _ = Shell.run("ip netns del \(ns) 2>/dev/null")
        try Shell.must("ip netns add \(ns)")
        namespaces.append(ns)
        let v6 = ipv6 ? "" : "net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 "
        try Shell.must(
            in: ns, "ip link set lo up; sysctl -qw \(v6)net.ipv4.conf.all.promote_secondaries=1 net.ipv4.conf.default.promote_secondaries=1")
    }

    private func veth(_ ns1: String, _ dev1: String, _ address1: String, _ ns2: String, _ dev2: String, _ address2: String) throws(FaultLabError) {
        try Shell.must("ip link add \(dev1) netns \(ns1) type veth peer name \(dev2) netns \(ns2)")
        try Shell.must("ip -n \(ns1) addr add \(address1) dev \(dev1) && ip -n \(ns1) link set \(dev1) up")
        try Shell.must("ip -n \(ns2) addr add \(address2) dev \(dev2) && ip -n \(ns2) link set \(dev2) up")
    }

    private func links(in ns: String) -> [String] {
        // "7: ea@if6: <…> …" per link; `ip` may add warnings ("Peer netns reference is invalid.").
        Shell.run("ip -n \(ns) -o link show type veth").output.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: ":", maxSplits: 2)
            guard fields.count >= 2, Int(fields[0].trimmingCharacters(in: .whitespaces)) != nil else { return nil }
            return String(fields[1].trimmingCharacters(in: .whitespaces).split(separator: "@").first ?? "")
        }
    }

    /// Waits (up to 5 s) until `link` in `ns` is operationally up: the kernel reports a new
    /// link's carrier up to a second late, and libnice finds no usable interface until then.
    func waitOperational(_ ns: String, _ link: String) async -> Bool {
        await operationalSince(ns, link) != nil
    }

    /// Waits (up to 5 s) until `link` in `ns` is operationally up and returns the earliest
    /// instant it may have come up: the start of the last look that still found it down (or of
    /// the first look, if that found it up). Nil if it did not come up.
    func operationalSince(_ ns: String, _ link: String) async -> Double? {
        var lastDown = monotonicSeconds()
        for _ in 0..<250 {
            let look = monotonicSeconds()
            if Shell.run("ip -n \(ns) -o link show \(link)").output.contains("state UP") { return lastDown }
            lastDown = look
            await pause(0.02)
        }
        return nil
    }

    /// Waits (up to 5 s) until no address in `ns` is tentative (IPv6 duplicate address detection
    /// over; the kernel refuses to bind a tentative address) and returns the instant it saw that,
    /// or nil if some address still was after 5 s. With `address` (as `ip` prints it, with its
    /// prefix), only that one counts, and it must be there.
    func waitAddressesSettled(_ ns: String, address: String? = nil) async -> Double? {
        for _ in 0..<250 {
            let look = monotonicSeconds()
            let tentative = Shell.run("ip -n \(ns) -6 -o addr show tentative").output
            if let address {
                let all = Shell.run("ip -n \(ns) -6 -o addr show").output
                if all.contains(" \(address) ") && !tentative.contains(" \(address) ") { return look }
            } else if !tentative.contains("inet6") {
                return look
            }
            await pause(0.02)
        }
        return nil
    }

    /// Deletes every namespace (and with them their links and rules). Idempotent.
    func tearDown() {
        for ns in namespaces.reversed() { _ = Shell.run("ip netns del \(ns)") }
        namespaces = []
    }

    deinit { tearDown() }

    // MARK: Faults

    func linkDown(_ ns: String, _ dev: String) throws(FaultLabError) { try Shell.must("ip -n \(ns) link set \(dev) down") }
    func linkUp(_ ns: String, _ dev: String) throws(FaultLabError) { try Shell.must("ip -n \(ns) link set \(dev) up") }

    /// Adds `new` and removes `old` on `dev` in one `ip -batch` (a new DHCP lease).
    func renumber(_ ns: String, _ dev: String, from old: String, to new: String) throws(FaultLabError) {
        try Shell.must(in: ns, "printf 'addr add \(new) dev \(dev)\\naddr del \(old) dev \(dev)\\n' | ip -batch -")
    }

    /// Installs nftables table `table` (family `family`) with `body` in `ns`.
    func nft(_ ns: String, table: String, _ body: String, family: String = "inet") throws(FaultLabError) {
        try Shell.must(in: ns, "nft -f - <<'NFT'\ntable \(family) \(table) {\n\(body)\n}\nNFT")
    }

    /// Removes nftables table `table` from `ns`.
    func nftDelete(_ ns: String, table: String, family: String = "inet") throws(FaultLabError) {
        try Shell.must(in: ns, "nft delete table \(family) \(table)")
    }

    /// Drops UDP in `ns`: inbound, outbound or both, optionally only a random `percent` of it,
    /// optionally only to and from `peer`.
    func dropUDP(_ ns: String, table: String, input: Bool = true, output: Bool = true, percent: Int? = nil, peer: String? = nil) throws(FaultLabError) {
        let sample = percent.map { "numgen random mod 100 < \($0) " } ?? ""
        var chains = ""
        if input {
            let match = peer.map { "ip saddr \($0) " } ?? ""
            chains += "chain in { type filter hook input priority 0; policy accept; \(match)meta l4proto udp \(sample)drop; }\n"
        }
        if output {
            let match = peer.map { "ip daddr \($0) " } ?? ""
            chains += "chain out { type filter hook output priority 0; policy accept; \(match)meta l4proto udp \(sample)drop; }\n"
        }
        try nft(ns, table: table, chains)
    }

    /// Lets `ns` reach `server` only on TCP port 443 (HTTPS), as a corporate firewall does;
    /// with `noUDP`, no UDP leaves or enters `ns` at all (a stateful firewall lets no UDP in
    /// when it lets none out). Loopback is not filtered.
    func onlyHTTPS(_ ns: String, to server: String, noUDP: Bool, table: String = "https") throws(FaultLabError) {
        let udp = noUDP ? "meta l4proto udp drop; " : ""
        let inbound = noUDP ? "chain in { type filter hook input priority 0; policy accept; iifname \"lo\" accept; meta l4proto udp drop; }\n" : ""
        try nft(
            ns, table: table,
            inbound
                + "chain out { type filter hook output priority 0; policy accept; oifname \"lo\" accept; \(udp)ip daddr \(server) tcp dport 443 accept; ip daddr \(server) drop; }")
    }

    /// Forgets every connection-tracking entry in `ns` (NAT mappings are made anew).
    func flushConntrack(_ ns: String) throws(FaultLabError) { try Shell.must(in: ns, "conntrack -F") }

    /// The external UDP ports the NAT in `ns` maps A (10.80.1.2) to, from its conntrack table
    /// (the reply direction's destination port of each entry).
    func natPorts(_ ns: String) -> Set<Int> {
        let listing = Shell.run(in: ns, "conntrack -L -p udp -s 10.80.1.2 2>/dev/null").output
        var ports: Set<Int> = []
        for line in listing.split(separator: "\n") {
            // "udp 17 29 src=A dst=B sport=x dport=y [UNREPLIED] src=B dst=NAT sport=y dport=EXTERNAL ..."
            let dports = line.split(separator: " ").filter { $0.hasPrefix("dport=") }
            if dports.count >= 2, let port = Int(dports[1].dropFirst(6)) { ports.insert(port) }
        }
        return ports
    }

    func run(_ ns: String, _ command: String) throws(FaultLabError) { try Shell.must(in: ns, command) }
}
