import Foundation

/// The fault matrix's relayed rows (TURN over UDP, TCP and TLS) and its consent row.
extension Row {
    /// Whether a `pair` line's pair goes through the relay at either end.
    func isRelayed(_ pair: [String: Any]?) -> Bool {
        pair?["localType"] as? String == "relay" || pair?["remoteType"] as? String == "relay"
    }

    /// "local type ⇄ remote type" of a `pair` line.
    func describePair(_ pair: [String: Any]?) -> String { "\(pair?["localType"] ?? "?") ⇄ \(pair?["remoteType"] ?? "?")" }

    /// Cuts the direct path between A and B (UDP from the peer's direct address dropped on
    /// arrival at both) and checks that A, once it has noticed, is on the relay within 1 s;
    /// then lets media flow `extra` seconds. The TURN server stays reachable.
    func cutDirectPathOntoRelay(_ r: inout FaultRowResult, relayName: String, measurement: String, extra: Double) async throws(FaultLabError) {
        let name = "on the \(relayName) ≤ 1 s after detection"
        let cut = monotonicSeconds()
        try net.dropUDP(net.a, table: "direct", input: true, output: false, peer: "10.93.0.2")
        try net.dropUDP(net.b, table: "direct", input: true, output: false, peer: "10.93.0.1")
        let detected = await a.waitFor(state: "mediaDisrupted", since: cut, timeout: 5)
        let relayed = await a.waitFor(type: "pair", since: cut, timeout: 10) { self.isRelayed($0) }
        await settle(after: cut, extra: extra)
        r.measurements["A detected"] = detected.map { $0 - cut } ?? -1
        if let detected, let restored = first(a, ["established"], since: detected) {
            r.measurements[measurement] = restored - detected
            r.check(
                name, within(restored - detected, 1) && relayed != nil,
                "established \(fmt(restored - detected)) after detection, pair \(relayed.map { describePair($0.object) } ?? "not relayed")")
        } else {
            r.check(name, false, "detected: \(fmt(detected.map { $0 - cut })), states \(a.states.map(\.state))")
        }
    }

    func relay(_ r: inout FaultRowResult) async throws(FaultLabError) {
        turn = try await TurnServer(namespace: net.middle!, logPath: folder + "/turnserver.log")
        let transport = scenario == .relayOverTCP ? "tcp" : "udp"
        if scenario == .relayOverTCP {
            try net.dropUDP(net.a, table: "nudp")
            try net.dropUDP(net.b, table: "nudp")
        }
        let setUp = monotonicSeconds()
        try await startCall(extraA: TurnServer.option(forSide: "A", transport: transport), extraB: TurnServer.option(forSide: "B", transport: transport))
        let established = (first(a, ["established"], since: 0) ?? setUp) - setUp
        r.measurements["set-up"] = established
        let pair = a.recorded.last { $0.type == "pair" }?.object
        let onRelay = isRelayed(pair)
        switch scenario {
        case .relayOnly:
            r.check("set up through the relay", onRelay, "A's pair: \(describePair(pair))")
            let cut = monotonicSeconds()
            let cuts = try blackHole(true)
            await pause(3)
            let back = try liftBlackHole(&r)
            await settle(after: back)
            // A renews its path on fresh candidates (`renew`: a new stream, a new allocation);
            // once the new stream carries media the old allocation must be released, not left to
            // expire: the server holds two again (one per side), not three.
            let pairsBefore = a.recorded.filter { $0.type == "pair" }.count
            let renew = monotonicSeconds()
            a.send(#"{"type":"renew"}"#)
            _ = await a.waitFor(type: "pair", since: renew, timeout: 10) { _ in true }
            var held = (turn?.allocations ?? 0)
            for _ in 0..<100 where held != 2 {
                await pause(0.05)
                held = (turn?.allocations ?? 0)
            }
            r.measurements["allocations after A's re-gather count"] = Double(held)
            r.check(
                "A's re-gather moved the call and released its old allocation",
                a.recorded.filter { $0.type == "pair" }.count > pairsBefore && held == 2,
                "\(held) allocations held after the re-gather (2: one per side)")
            await settle(after: renew, extra: 1)
            if let renewing = first(a, ["renewingMedia"], since: renew) {
                let again = first(a, ["established"], since: renewing).map { $0 - renewing }
                r.measurements["A renewed"] = again ?? -1
                r.check("A's renewal done ≤ 1 s", within(again, 1), "established \(fmt(again)) after renewingMedia")
            }
            // Make before break: the old pair carried media until the new one took over.
            for (name, listener) in [("B", b!), ("A", a!)] {
                let g = gap(at: listener, from: renew, to: renew + 3)
                r.measurements["gap at \(name) while A renewed"] = g ?? -1
                r.check("no audio gap at \(name) while A renewed", within(g, 0.2), "gap \(fmt(g))")
            }
            await hangUpReleasingAllocations(&r)
            judgeOutage(&r, cut: cut, back: back, seconds: back - (cuts.values.min() ?? cut), restoreLimit: 1.0)
        case .relayOverTCP:
            r.check("carried through the relay", onRelay, "A's pair: \(describePair(pair))")
            await pause(3)
            let received = (b.recorded.last { $0.type == "statistics" }?.object["packetsReceived"] as? Int) ?? 0
            r.measurements["B packets count"] = Double(received)
            r.check("media flows over TCP", received > 150, "B received \(received) packets")
            await hangUpReleasingAllocations(&r)
            judgeNoGiveUp(&r)
        default:
            r.check("set up on the direct path", !onRelay, "A's pair: \(describePair(pair))")
            try await cutDirectPathOntoRelay(&r, relayName: "relay", measurement: "on relay after detection", extra: 2)
            await hangUpReleasingAllocations(&r)
            judgeNoGiveUp(&r)
        }
    }

    /// B answers no connectivity check for `seconds`: STUN binding requests (message type
    /// 0x0001 in the first two bytes of the UDP payload) are dropped on arrival at B, while media,
    /// STUN answers and B's own checks pass. With consent freshness on (`--consent-freshness`),
    /// A's consent (RFC 7675) lapses at most 30 s after B's last answer (libnice 0.1.21 withdraws
    /// it after 10 s): A must stop sending then,
    /// and say why. Once checks pass again, the renewal under way restores the call at its next
    /// attempt (retry delays of 1, 2, 4 and 8 s, after an attempt of up to 2 s): within 12 s.
    func consentWithdrawn(_ r: inout FaultRowResult, seconds: Double) async throws(FaultLabError) {
        try await startCall(extraA: ["--consent-freshness"], extraB: ["--consent-freshness"])
        let cut = monotonicSeconds()
        try net.nft(net.b, table: "nochecks", "chain in { type filter hook input priority 0; policy accept; udp length > 28 @th,64,16 0x0001 drop; }")
        await pause(seconds)
        let back = monotonicSeconds()
        try net.nftDelete(net.b, table: "nochecks")
        await settle(after: back, extra: 2)
        await hangUp()
        // When A's media stopped reaching B: B's last statistics line whose packet count rose.
        let received = b.recorded.filter { $0.type == "statistics" && $0.at >= cut && $0.at <= back }
            .compactMap { line in (line.object["packetsReceived"] as? Int).map { (line.at, $0) } }
        var lastRise: Double?
        for (previous, next) in zip(received, received.dropFirst()) where next.1 > previous.1 { lastRise = next.0 }
        let stopped = lastRise.map { $0 - cut }
        r.measurements["A stopped sending after the cut"] = stopped ?? -1
        // Counted from the cut, which is after B's last answer; statistics lines come each second.
        r.check(
            "A stops sending ≤ 30 s after B's last answer", within(stopped, 30),
            "B's packet count last rose \(fmt(stopped)) after B stopped answering")
        let causes = (a.recorded.last { $0.type == "report" }?.object["disruptions"] as? [[String: Any]] ?? []).compactMap { $0["cause"] as? String }
        r.check("A says the peer withdrew consent", causes.contains("peer withdrew consent"), "A's disruptions: \(causes)")
        judgeRestored(&r, sides: [("A", a!), ("B", b!)], back: back, limit: 12)
        judgeNoGiveUp(&r)
    }

    /// The TURN-over-TLS rows: the server's TLS port is 443, its certificate is the lab's, and
    /// A and B reach the server only on TCP 443, so a relayed pair can only have come through TLS.
    func relayOverTLS(_ r: inout FaultRowResult) async throws(FaultLabError) {
        let certificate = try LabCertificate.make(in: folder, name: "turn.tether.test", addresses: ["10.92.1.1", "10.92.2.1"])
        turn = try await TurnServer(
            namespace: net.middle!,
            tls: .init(certificatePath: certificate.certificatePath, keyPath: certificate.keyPath, port: TurnServer.tlsPort),
            logPath: folder + "/turnserver.log")
        let direct = scenario == .directPathDiesOntoTLSRelayAndBack
        try net.onlyHTTPS(net.a, to: "10.92.1.1", noUDP: !direct)
        try net.onlyHTTPS(net.b, to: "10.92.2.1", noUDP: !direct)
        let setUp = monotonicSeconds()
        try await startCall(
            extraA: TurnServer.option(forSide: "A", transport: "tls", certificate: certificate),
            extraB: TurnServer.option(forSide: "B", transport: "tls", certificate: certificate))
        r.measurements["set-up"] = (first(a, ["established"], since: 0) ?? setUp) - setUp
        let pair = a.recorded.last { $0.type == "pair" }?.object
        guard direct else {
            r.check("carried through the relay (over TLS: nothing else reaches it)", isRelayed(pair), "A's pair: \(describePair(pair))")
            await pause(3)
            for (name, side) in [("A", a!), ("B", b!)] {
                let received = (side.recorded.last { $0.type == "statistics" }?.object["packetsReceived"] as? Int) ?? 0
                r.measurements["\(name) packets count"] = Double(received)
                r.check("media reaches \(name) over TLS", received > 150, "\(name) received \(received) packets")
            }
            await hangUpReleasingAllocations(&r)
            judgeNoGiveUp(&r)
            return
        }
        r.check("set up on the direct path", !isRelayed(pair), "A's pair: \(describePair(pair))")
        try await cutDirectPathOntoRelay(&r, relayName: "TLS relay", measurement: "on the TLS relay after detection", extra: 1)
        // The direct path returns; A renews its path on fresh candidates and the better (direct)
        // pair wins again: the relay was a way through, not a place to stay.
        try net.nftDelete(net.a, table: "direct")
        try net.nftDelete(net.b, table: "direct")
        await pause(0.5)
        let renew = monotonicSeconds()
        a.send(#"{"type":"renew"}"#)
        let back = await a.waitFor(type: "pair", since: renew, timeout: 10) { !self.isRelayed($0) }
        await settle(after: renew, extra: 1)
        r.measurements["off the relay after the re-gather"] = back.map { $0.at - renew } ?? -1
        r.check("off the relay after A's re-gather", back != nil, "A's pairs since: \(a.recorded.filter { $0.type == "pair" && $0.at >= renew }.map { describePair($0.object) })")
        for (name, listener) in [("B", b!), ("A", a!)] {
            let g = gap(at: listener, from: renew, to: renew + 3)
            r.measurements["gap at \(name) while A moved off the relay"] = g ?? -1
            r.check("no audio gap at \(name) moving off the relay", within(g, 0.2), "gap \(fmt(g))")
        }
        await hangUpReleasingAllocations(&r)
        judgeNoGiveUp(&r)
    }

    /// Hangs up a relayed call, checking that the TURN server's allocations (a relayed socket
    /// each) are gone right after: released by the clients, not left to expire.
    func hangUpReleasingAllocations(_ r: inout FaultRowResult) async {
        let held = (turn?.allocations ?? 0)
        await hangUp()
        var left = (turn?.allocations ?? 0)
        for _ in 0..<50 where left > 0 {
            await pause(0.05)
            left = (turn?.allocations ?? 0)
        }
        r.measurements["allocations during the call count"] = Double(held)
        r.check("TURN allocations released at hang-up", held > 0 && left == 0, "\(held) held during the call, \(left) left after the hang-up")
    }
}
