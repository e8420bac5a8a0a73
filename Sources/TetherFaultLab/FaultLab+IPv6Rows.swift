import Foundation

/// The IPv6 rows: a path with no IPv4 at all, and a dual-stack one.
extension Row {
    /// A's only link down for `seconds` on an IPv6-only path. With `flushed`, the kernel removes
    /// A's addresses at link down (Linux's default), and the lab gives the global one back once
    /// the link is operational again, as the network's router advertisement or DHCPv6 reply
    /// does; the path is back when that address has passed duplicate address detection.
    func ipv6LinkFlap(_ r: inout FaultRowResult, seconds: Double, flushed: Bool) async throws(FaultLabError) {
        if !flushed { try net.run(net.a, "sysctl -qw net.ipv6.conf.e0.keep_addr_on_down=1") }
        try await startCall()
        let global = LabNetwork.ipv6(link: 0, side: 1)
        let ours = "[" + global.prefix { $0 != "/" } + "]"
        r.check("set up on A's global IPv6 address", pairLocalAddress(a)?.hasPrefix(ours) ?? false, "A's pair is on \(pairLocalAddress(a) ?? "none")")
        let cut = monotonicSeconds()
        try net.linkDown(net.a, "e0")
        let left = Shell.run(in: net.a, "ip -6 -o addr show dev e0").output.contains("inet6")
        r.check(
            flushed ? "the kernel flushed A's IPv6 addresses at link down" : "A kept its IPv6 addresses at link down", left != flushed,
            left ? "addresses left on e0" : "no address left on e0")
        await pause(seconds)
        let up = monotonicSeconds()
        try net.linkUp(net.a, "e0")
        guard let operational = await net.operationalSince(net.a, "e0") else {
            throw .commandFailed(command: "ip link set e0 up", status: -1, output: "e0 not operational within 5 s")
        }
        if flushed { try net.run(net.a, "ip addr add \(global) dev e0") }
        // Back when A's global address is usable again (its link-local one may settle later; the
        // call does not use it).
        guard let back = await net.waitAddressesSettled(net.a, address: global) else {
            throw .commandFailed(command: "wait for A's IPv6 addresses", status: -1, output: "still tentative 5 s after the link came back")
        }
        r.measurements["link operational after up"] = operational - up
        r.measurements["addresses usable after the link"] = back - operational
        await settle(after: back)
        await hangUp()
        judgeOutage(&r, cut: cut, back: back, seconds: back - cut, restoreLimit: 1.0)
        r.check("back on A's global IPv6 address", pairLocalAddress(a)?.hasPrefix(ours) ?? false, "A's pair is on \(pairLocalAddress(a) ?? "none")")
        judgeNoLinkLocalCandidates(&r)
    }

    /// Neither side offered an IPv6 link-local candidate in any description (see
    /// `ICETransport.localCandidates()`), though both had link-local addresses all along.
    func judgeNoLinkLocalCandidates(_ r: inout FaultRowResult) {
        for (name, side) in [("A", a!), ("B", b!)] {
            let descriptions = side.recorded.filter { $0.type == "offer" || $0.type == "answer" }.compactMap { $0.object["sdp"] as? String }
            let linkLocal = descriptions.flatMap { $0.split(whereSeparator: \.isNewline) }.filter { $0.hasPrefix("a=candidate:") && $0.lowercased().contains(" fe80:") }
            r.check(
                "\(name) offers no link-local candidate", !descriptions.isEmpty && linkLocal.isEmpty,
                linkLocal.first.map(String.init) ?? "\(descriptions.count) descriptions, none with fe80::")
        }
    }

    /// Dual stack: the call starts on one family (IPv6: libnice ranks host candidates by their
    /// place in `getifaddrs`, which lists IPv4 addresses before IPv6 ones, and the later ranks
    /// higher — the preference RFC 8421 recommends); A's address of that family is removed and
    /// the call must move to the other; the address comes back, the other family's goes, and
    /// the call must move back.
    func dualStackFamilySwitch(_ r: inout FaultRowResult) async throws(FaultLabError) {
        try await startCall()
        let v4 = LabNetwork.ipv4(link: 0, side: 1)
        let v6 = LabNetwork.ipv6(link: 0, side: 1)
        func family(_ local: String?) -> String { local.map { $0.hasPrefix("[") ? "IPv6" : "IPv4" } ?? "none" }
        let chosen = family(pairLocalAddress(a))
        r.check("set up on IPv6", chosen == "IPv6", "A's pair is on \(pairLocalAddress(a) ?? "none")")
        for (round, (gone, other)) in [(v6, v4), (v4, v6)].enumerated() {
            if round == 1 {
                try net.run(net.a, "ip addr add \(v6) dev e0")
                _ = await net.waitAddressesSettled(net.a, address: v6)
                await pause(1)
            }
            let goneFamily = gone.contains(":") ? "IPv6" : "IPv4"
            let otherFamily = other.contains(":") ? "IPv6" : "IPv4"
            let change = monotonicSeconds()
            try net.run(net.a, "ip addr del \(gone) dev e0")
            await settle(after: change, extra: 3)
            for (name, listener) in [("B", b!), ("A", a!)] {
                let g = gap(at: listener, from: change, to: change)
                r.measurements["\(goneFamily) removed: gap at \(name)"] = g ?? -1
                r.check("\(goneFamily) removed: audio gap at \(name) ≤ 1 s", within(g, 1), "gap \(fmt(g))")
            }
            let now = family(pairLocalAddress(a))
            r.check("\(goneFamily) removed: the call moved to \(otherFamily)", now == otherFamily, "A's pair is on \(pairLocalAddress(a) ?? "none")")
            judgeRestored(&r, sides: [("A", a!), ("B", b!)], back: change, limit: 1)
        }
        await hangUp()
        judgeNoGiveUp(&r)
        judgeNoLinkLocalCandidates(&r)
    }
}
