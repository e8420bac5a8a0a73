import Foundation
import Glibc

/// Runs the fault matrix: for each ``FaultScenario``, two real `tether call` processes (A offers,
/// B answers) in network namespaces made for the row, signaling relayed between them line by
/// line, each sending a test tone (A 440 Hz, B 660 Hz) and recording what it hears to WAV. The
/// fault is caused by the kernel event that causes it in real life; the row is judged by the
/// states both processes print *and* by the audio each recorded (the gap: from the last good
/// frame before the fault to the first good frame after it).
///
/// Needs root (namespaces, nftables), iproute2, nftables, conntrack, and coturn for the TURN rows
/// (``availability(for:)``). Used by `tether-bench faults` and by the fault-matrix tests.
public struct FaultLab: Sendable {
    /// The `tether` executable the rows run.
    public var tetherExecutable: String
    /// Where each row keeps its logs and recordings (a folder per row).
    public var workDirectory: String
    /// Progress lines.
    public var log: @Sendable (String) -> Void
    /// Seconds added to every time limit a row checks (detection, restoration, audio gaps, the
    /// give-up's tolerance). 0 for the bench, which holds Tether to the figures as specified; the
    /// tests add a margin so a loaded machine's scheduling delays do not fail them, while what
    /// they check (recovery at all, in about the right time, no give-up) still fails without
    /// the behaviour (a NAT rebinding repaired by a restart instead of a probe took 3.1 s).
    public var timingMarginSeconds: Double

    public init(
        tetherExecutable: String, workDirectory: String, timingMarginSeconds: Double = 0,
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.tetherExecutable = tetherExecutable
        self.workDirectory = workDirectory
        self.timingMarginSeconds = timingMarginSeconds
        self.log = log
    }

    /// Why `scenario` cannot run on this machine, or nil when it can.
    public static func availability(for scenario: FaultScenario) -> String? {
        if getuid() != 0 { return "needs root (network namespaces, nftables)" }
        for tool in ["ip", "nft"] where !Shell.has(tool) { return "needs \(tool)" }
        switch scenario {
        case .natRebinding: if !Shell.has("conntrack") { return "needs conntrack (Debian's conntrack)" }
        case .relayOnly, .relayOverTCP, .directPathDiesOntoRelay:
            if !Shell.has("turnserver") { return "needs turnserver (Debian's coturn)" }
        case .relayOverTLS, .directPathDiesOntoTLSRelayAndBack:
            if !Shell.has("turnserver") { return "needs turnserver (Debian's coturn)" }
            if !Shell.has("openssl") { return "needs openssl (to make the TURN server's certificate)" }
        default: break
        }
        return nil
    }

    /// Why some of `scenarios` cannot run here (the first reason), or nil when all can.
    public static func missingRequirement(for scenarios: [FaultScenario]) -> String? {
        scenarios.lazy.compactMap { availability(for: $0) }.first
    }

    /// Runs `scenarios`, at most `concurrency` at once (longest first), and returns their results
    /// in the order given.
    public func run(_ scenarios: [FaultScenario], concurrency: Int = 1) async -> [FaultRowResult] {
        let order = scenarios.indices.sorted { scenarios[$0].expectedSeconds > scenarios[$1].expectedSeconds }
        var results = [FaultRowResult?](repeating: nil, count: scenarios.count)
        await withTaskGroup(of: (Int, FaultRowResult).self) { group in
            var next = 0
            func launch() {
                guard next < order.count else { return }
                let index = order[next]
                next += 1
                group.addTask { (index, await self.run(scenarios[index])) }
            }
            for _ in 0..<max(1, concurrency) { launch() }
            for await (index, result) in group {
                results[index] = result
                launch()
            }
        }
        return results.map { $0! }
    }

    /// Runs one row.
    public func run(_ scenario: FaultScenario) async -> FaultRowResult {
        var result = FaultRowResult(scenario: scenario.description, requirement: scenario.requirement)
        if let reason = Self.availability(for: scenario) {
            result.error = reason
            return result
        }
        let (tag, folder) = makeRowFolder(in: workDirectory)
        result.directory = folder
        let started = monotonicSeconds()
        log("\(scenario): starting (\(folder))")
        do {
            let row = try await Row(scenario: scenario, tag: tag, folder: folder, lab: self)
            defer { row.tearDown() }
            try await row.play(&result)
        } catch {
            result.error = "\(error)"
        }
        result.wallSeconds = monotonicSeconds() - started
        log("\(scenario): \(result.passed ? "passed" : "FAILED") in \(Int(result.wallSeconds)) s — \(result.measured)")
        for check in result.checks where !check.passed { log("  ✘ \(check.name): \(check.detail)") }
        if let error = result.error { log("  ✘ \(error)") }
        return result
    }
}

/// One row being played: its network, its two processes and what they printed and recorded.
final class Row: @unchecked Sendable {
    let scenario: FaultScenario
    let folder: String
    let lab: FaultLab
    let net: LabNetwork
    var turn: TurnServer?
    var a: LabCallProcess!
    var b: LabCallProcess!

    /// Whether a measured time is within `limit` (plus the lab's margin).
    func within(_ value: Double?, _ limit: Double) -> Bool {
        value.map { $0 <= limit + lab.timingMarginSeconds } ?? false
    }

    init(scenario: FaultScenario, tag: String, folder: String, lab: FaultLab) async throws(FaultLabError) {
        self.scenario = scenario
        self.folder = folder
        self.lab = lab
        net = try await LabNetwork(shape: scenario.shape, tag: tag)
    }

    func tearDown() {
        if let a, a.isRunning { a.send(signal: SIGKILL) }
        if let b, b.isRunning { b.send(signal: SIGKILL) }
        turn?.stop()
        net.tearDown()
    }

    // MARK: Starting the call

    /// Starts both processes, joins their signaling and waits until both are established.
    func startCall(extraA: [String] = [], extraB: [String] = []) async throws(FaultLabError) {
        let common = ["--statistics-interval", "1"]
        a = try LabCallProcess(
            name: "A", executable: lab.tetherExecutable, namespace: net.a,
            arguments: ["--role", "offer", "--input", "tone:440:-12", "--output", "wav:\(folder)/a.wav"] + common + extraA,
            logPath: folder + "/a.log")
        b = try LabCallProcess(
            name: "B", executable: lab.tetherExecutable, namespace: net.b,
            arguments: ["--role", "answer", "--input", "tone:660:-12", "--output", "wav:\(folder)/b.wav"] + common + extraB,
            logPath: folder + "/b.log")
        a.relayLines(to: b)
        b.relayLines(to: a)
        let upA = await a.waitFor(state: "established", timeout: 20)
        let upB = await b.waitFor(state: "established", timeout: 20)
        guard upA != nil, upB != nil else {
            throw .processFailed("the call did not establish within 20 s (A: \(a.states.map(\.state)), B: \(b.states.map(\.state)))")
        }
        // Media flows for a while before the fault, so the recordings have audio on both sides of it.
        await pause(2)
    }

    /// Hangs up from A (or B when A is gone) and waits for both processes to exit.
    func hangUp() async {
        if a.isRunning { a.send(#"{"type":"hangup"}"#) } else if b.isRunning { b.send(#"{"type":"hangup"}"#) }
        _ = await a.waitForExit(timeout: 10)
        _ = await b.waitForExit(timeout: 10)
    }

    // MARK: Reading what happened

    /// The first instant `side` entered one of `states` at or after `since`.
    func first(_ side: LabCallProcess, _ states: Set<String>, since: Double) -> Double? {
        side.states.first { states.contains($0.state) && $0.at >= since }?.at
    }

    /// Whether `side` printed any of `states` at or after `since`.
    func entered(_ side: LabCallProcess, _ states: Set<String>, since: Double) -> Bool { first(side, states, since: since) != nil }

    /// The end of the call on `side`: instant, cause code and error code.
    func ended(_ side: LabCallProcess) -> (at: Double, errorCode: Int?)? {
        guard let line = side.states.last(where: { $0.state == "ended" }) else { return nil }
        return (line.at, line.line.object["errorCode"] as? Int)
    }

    /// The longest audio gap `listener` recorded between `from` and `to` (lab instants), in
    /// seconds: 0 when the audio never stopped, nil without a usable recording.
    func gap(at listener: LabCallProcess, from: Double, to: Double) -> Double? {
        let path = folder + (listener === a ? "/a.wav" : "/b.wav")
        let frequency = listener === a ? 660.0 : 440.0
        guard let recording = ToneRecording(path: path, frequencyHertz: frequency),
            let established = listener.states.first(where: { $0.state == "established" })?.at,
            let firstGood = recording.firstGoodSeconds
        else { return nil }
        // Recording time of a lab instant: the first good frame is (about) when the listener said
        // it was established.
        let offset = firstGood - established
        let window = (from + offset - 0.3)...(to + offset + 0.5)
        let candidates = recording.gaps().filter { $0.end >= window.lowerBound && $0.start <= window.upperBound }
        return candidates.map(\.seconds).max() ?? 0
    }

    /// The last `jitterBufferMs` figures `side` printed after `since`.
    func jitterBufferFigures(_ side: LabCallProcess, since: Double) -> [Double] {
        side.recorded.filter { $0.type == "statistics" && $0.at >= since }.compactMap { $0.object["jitterBufferMs"] as? Double }
    }

    /// The local address of the pair `side` last selected.
    func pairLocalAddress(_ side: LabCallProcess) -> String? {
        side.recorded.last { $0.type == "pair" }.flatMap { $0.object["local"] as? String }
    }

    // MARK: The rows

    func play(_ r: inout FaultRowResult) async throws(FaultLabError) {
        switch scenario {
        case .linkFlap(let seconds):
            try await startCall()
            let cut = monotonicSeconds()
            try net.linkDown(net.a, "e0")
            await pause(seconds)
            let up = monotonicSeconds()
            try net.linkUp(net.a, "e0")
            // The link is back when the kernel reports it operational: a veth's carrier comes
            // up to a second after `ip link set up` (the kernel's link watch), and until then
            // nothing can cross it.
            guard let back = await net.operationalSince(net.a, "e0") else {
                throw .commandFailed(command: "ip link set e0 up", status: -1, output: "e0 not operational within 5 s")
            }
            r.measurements["link operational after up"] = back - up
            await settle(after: back)
            await hangUp()
            judgeOutage(&r, cut: cut, back: back, seconds: back - cut, restoreLimit: 1.0)
        case .blackHole(let seconds):
            try await startCall()
            // Silent, as a path that dies somewhere between: dropped on arrival both ways, while
            // sending still works.
            let cut = monotonicSeconds()
            let cuts = try blackHole(true)
            await pause(seconds)
            let back = try liftBlackHole(&r)
            await settle(after: back)
            await hangUp()
            judgeOutage(&r, cut: cut, back: back, seconds: back - (cuts.values.min() ?? cut), restoreLimit: 1.0)
            if seconds >= 1.5 {
                for (name, side) in [("A", a!), ("B", b!)] {
                    let sideCut = cuts[name] ?? cut
                    let detected = first(side, ["mediaDisrupted", "renewingMedia"], since: sideCut).map { $0 - sideCut }
                    r.measurements["\(name) detected"] = detected ?? -1
                    r.check("\(name) detects the outage ≤ 1.1 s", within(detected, 1.1), "\(fmt(detected)) after the cut")
                }
            }
        case .routeRemoved(let seconds):
            try await startCall()
            let cut = monotonicSeconds()
            try net.run(net.a, "ip route del default")
            await pause(seconds)
            let back = monotonicSeconds()
            try net.run(net.a, "ip route add default via 10.80.1.1")
            await settle(after: back)
            await hangUp()
            judgeOutage(&r, cut: cut, back: back, seconds: seconds, restoreLimit: 1.0)
        case .linkLost, .peerKilled:
            try await startCall()
            let cut = monotonicSeconds()
            if scenario == .peerKilled { a.send(signal: SIGKILL) } else { try net.linkDown(net.a, "e0") }
            let sides = scenario == .peerKilled ? [("B", b!)] : [("A", a!), ("B", b!)]
            for (_, side) in sides { _ = await side.waitFor(state: "ended", since: cut, timeout: 60) }
            for (name, side) in sides {
                let end = ended(side)
                let after = end.map { $0.at - cut }
                r.measurements["\(name) ended"] = after ?? -1
                r.measurements["\(name) error code"] = Double(end?.errorCode ?? 0)
                r.check("\(name) gives up 50 ± 0.5 s after the last packet", after.map { abs($0 - 50) <= 0.5 + lab.timingMarginSeconds } ?? false, "ended \(fmt(after)) after the cut")
                r.check("\(name) ends with 1004", end?.errorCode == 1004, "error code \(end?.errorCode.map(String.init) ?? "none")")
            }
            await hangUp()
        case .renumber, .bothRenumber:
            try await startCall()
            let change = monotonicSeconds()
            try net.renumber(net.a, "e0", from: "10.70.0.1/24", to: "10.70.0.11/24")
            if scenario == .bothRenumber { try net.renumber(net.b, "e0", from: "10.70.0.2/24", to: "10.70.0.12/24") }
            let limit = scenario == .bothRenumber ? 2.0 : 1.0
            await settle(after: change, extra: 3)
            await hangUp()
            judgeChange(&r, change: change, limit: limit)
        case .natRebinding:
            try await startCall()
            let before = net.natPorts(net.middle!)
            let flush = monotonicSeconds()
            try net.flushConntrack(net.middle!)
            await settle(after: flush, extra: 3)
            let after = net.natPorts(net.middle!)
            await hangUp()
            // The fault is real only if A's traffic left through a new external port.
            r.check(
                "A's external port changed", !before.isEmpty && !after.isEmpty && after.isDisjoint(with: before),
                "ports before \(before.sorted()), after \(after.sorted())")
            judgeChange(&r, change: flush, limit: 1.0)
        case .interfaceSwitch:
            try await interfaceSwitch(&r)
        case .oneWay(let seconds):
            try await startCall()
            // What A sends is lost on the way (dropped on arrival at B); B's media still reaches A.
            let cut = monotonicSeconds()
            try net.dropUDP(net.b, table: "fault", input: true, output: false, peer: "10.70.0.1")
            await pause(seconds)
            let back = monotonicSeconds()
            try net.nftDelete(net.b, table: "fault")
            await settle(after: back)
            await hangUp()
            let outbound = a.recorded.first { $0.type == "outbound" && $0.at >= cut && ($0.object["disrupted"] as? Bool) == true }.map { $0.at - cut }
            let bDisrupted = first(b, ["mediaDisrupted"], since: cut).map { $0 - cut }
            r.measurements["A outbound disrupted"] = outbound ?? -1
            r.measurements["B detected"] = bDisrupted ?? -1
            r.check("A reports outbound disruption ≤ 3 s", within(outbound, 3), "\(fmt(outbound)) after the block")
            r.check("B detects ≤ 1.1 s", within(bDisrupted, 1.1), "\(fmt(bDisrupted)) after the block")
            let outboundBack = a.recorded.first { $0.type == "outbound" && $0.at >= back && ($0.object["disrupted"] as? Bool) == false }.map { $0.at - back }
            r.measurements["A outbound restored"] = outboundBack ?? -1
            r.check("A's outbound restored ≤ 1 s", within(outboundBack, 1), "\(fmt(outboundBack)) after unblocking")
            judgeRestored(&r, sides: [("B", b!)], back: back, limit: 1.0)
            judgeNoGiveUp(&r)
        case .processStopped(let seconds):
            try await processStopped(&r, seconds: seconds)
        case .randomLoss(let percent, let seconds):
            try await randomLoss(&r, percent: percent, seconds: seconds)
        case .relayOnly, .relayOverTCP, .directPathDiesOntoRelay:
            try await relay(&r)
        case .relayOverTLS, .directPathDiesOntoTLSRelayAndBack:
            try await relayOverTLS(&r)
        case .consentWithdrawn(let seconds):
            try await consentWithdrawn(&r, seconds: seconds)
        case .ipv6LinkFlap(let seconds, let flushed):
            try await ipv6LinkFlap(&r, seconds: seconds, flushed: flushed)
        case .dualStackFamilySwitch:
            try await dualStackFamilySwitch(&r)
        case .trickleSetUpAndSwitch:
            try await trickleSetUpAndSwitch(&r)
        }
    }

    /// Waits until both sides are established again after `since` (up to 12 s), then lets
    /// media flow `extra` seconds more so the recordings show it back. First it gives a fault
    /// time to be noticed (the 1 s disruption threshold), so "still established" is not taken
    /// for "back".
    func settle(after since: Double, extra: Double = 2) async {
        await pause(since + 1.3 - monotonicSeconds())
        for side in [a!, b!] where side.currentState != "established" {
            _ = await side.waitFor(state: "established", since: since, timeout: 12)
        }
        await pause(extra)
    }

    /// Drops (or lets through again) every UDP datagram arriving at A and at B.
    /// - Returns: when each side's rule was in force ("A", "B"; its command had returned): one
    ///   command per namespace, so B's inbound is cut after A's (about 0.1 s on a loaded machine,
    ///   once over a second), and each side's detection is measured from its own cut.
    @discardableResult
    func blackHole(_ on: Bool) throws(FaultLabError) -> [String: Double] {
        var started: [String: Double] = [:]
        for (name, ns) in [("A", net.a), ("B", net.b)] {
            if on { try net.dropUDP(ns, table: "fault", input: true, output: false) } else { try net.nftDelete(ns, table: "fault") }
            // Stamped when `nft` returns: its rule set is committed at the end of the run, after
            // the process started and parsed (which took over a second under load once, and
            // stamped before, the side's detection read 2.19 s where the other read 1.03).
            started[name] = monotonicSeconds()
        }
        return started
    }

    /// Lifts the black hole and returns when the path is back: when the last side's rule is
    /// gone, stamped as `nft` returns (as the cut is: under load one `nft` run took over a second,
    /// and a stamp taken before both once read B "restored 2.24 s" after a return B had not yet
    /// seen). Records how long the lifting took.
    func liftBlackHole(_ r: inout FaultRowResult) throws(FaultLabError) -> Double {
        let lifting = monotonicSeconds()
        let back = try blackHole(false).values.max() ?? lifting
        r.measurements["path back after lifting"] = back - lifting
        return back
    }

    /// An outage of `seconds` from `cut` to `back`: both sides back within `restoreLimit` of the
    /// path's return (if they noticed at all), no give-up, and audio gaps no longer than the
    /// outage plus that limit.
    func judgeOutage(_ r: inout FaultRowResult, cut: Double, back: Double, seconds: Double, restoreLimit: Double) {
        judgeRestored(&r, sides: [("A", a!), ("B", b!)], back: back, limit: restoreLimit)
        judgeNoGiveUp(&r)
        for (name, listener) in [("B", b!), ("A", a!)] {
            let g = gap(at: listener, from: cut, to: back)
            r.measurements["gap at \(name)"] = g ?? -1
            r.check("audio back at \(name) ≤ \(restoreLimit) s after the path", within(g, seconds + restoreLimit + 0.1), "gap \(fmt(g)) for a \(fmt(seconds)) outage")
        }
    }

    /// Each side that left `established` is back within `limit` of `back`.
    func judgeRestored(_ r: inout FaultRowResult, sides: [(String, LabCallProcess)], back: Double, limit: Double) {
        for (name, side) in sides {
            let states = side.states
            let disrupted = states.indices.filter { states[$0].at >= back - 60 && ["mediaDisrupted", "renewingMedia"].contains(states[$0].state) }
            guard let firstLeft = disrupted.first else { continue }
            // Back in `established` after the disruption that was under way when the path
            // returned (it may be an instant before the lab saw the path back: the kernel
            // reports a link's state after packets already cross it), counted from the return.
            // By the lines' order, not their instants: a process continued after SIGSTOP prints
            // mediaDisrupted, renewingMedia and established within the same millisecond.
            let from = disrupted.last { states[$0].at < back } ?? firstLeft
            let restored = states[(from + 1)...].first { $0.state == "established" }.map { max(0, $0.at - back) }
            r.measurements["\(name) restored"] = restored ?? -1
            r.check("\(name) restored ≤ \(limit) s", within(restored, limit), "\(fmt(restored)) after the path returned")
        }
    }

    func judgeNoGiveUp(_ r: inout FaultRowResult) {
        for (name, side) in [("A", a!), ("B", b!)] {
            let end = ended(side)
            r.check("\(name) does not give up", end == nil || end?.errorCode == nil, "ended with \(end?.errorCode.map(String.init) ?? "no error")")
        }
    }

    /// A change at `change` after which both sides are back and the audio gaps are within `limit`.
    func judgeChange(_ r: inout FaultRowResult, change: Double, limit: Double) {
        judgeRestored(&r, sides: [("A", a!), ("B", b!)], back: change, limit: limit)
        judgeNoGiveUp(&r)
        for (name, listener) in [("B", b!), ("A", a!)] {
            let g = gap(at: listener, from: change, to: change)
            r.measurements["gap at \(name)"] = g ?? -1
            r.check("audio back at \(name) ≤ \(limit) s", within(g, limit), "gap \(fmt(g))")
        }
    }

    func interfaceSwitch(_ r: inout FaultRowResult) async throws(FaultLabError) {
        try await startCall()
        for round in 1...2 { try await switchLinks(&r, round: round) }
        await hangUp()
        judgeNoGiveUp(&r)
    }

    /// Trickle ICE on both sides, each given a STUN server that never answers (10.99.9.9, a
    /// black-hole route: what is sent there vanishes, as to a server out of reach): the offer and
    /// the answer leave with the host candidates, and the call is established long before
    /// libnice gives up on the server; then the link carrying it is cut for good, and the
    /// restart (trickled too: the new stream's host candidates at once) moves it.
    func trickleSetUpAndSwitch(_ r: inout FaultRowResult) async throws(FaultLabError) {
        for ns in [net.a, net.b] { try net.run(ns, "ip route add blackhole 10.99.9.9/32") }
        let trickle = ["--trickle", "--stun", "10.99.9.9:3478"]
        try await startCall(extraA: trickle, extraB: trickle)
        for (name, side) in [("A", a!), ("B", b!)] {
            // The state line's own clock: seconds since the side's session began.
            let seconds = side.states.first { $0.state == "established" }?.line.object["seconds"] as? Double
            r.measurements["\(name) established after its session began"] = seconds ?? -1
            r.check("\(name) established ≤ 1 s after its session began", within(seconds, 1), "\(fmt(seconds))")
            let ended = side.recorded.contains { $0.type == "candidate" && ($0.object["candidate"] as? String) == "" }
            r.check("\(name) trickled its end of candidates", ended, ended ? "sent" : "no end-of-candidates line")
        }
        try await switchLinks(&r, round: 1)
        await hangUp()
        judgeNoGiveUp(&r)
    }

    /// Cuts the link the call uses now (from A's selected pair) for good, on both sides; in round
    /// 2 the other one is brought back first. The call must move with an audio gap ≤ 0.5 s.
    func switchLinks(_ r: inout FaultRowResult, round: Int) async throws(FaultLabError) {
        let local = pairLocalAddress(a) ?? ""
        let used = local.hasPrefix("10.71.") ? "e1" : "e0"
        let other = used == "e0" ? "e1" : "e0"
        if round == 2 {
            try net.linkUp(net.a, other)
            try net.linkUp(net.b, other)
            _ = await net.waitOperational(net.a, other)
            await pause(2)
        }
        let cut = monotonicSeconds()
        try net.linkDown(net.a, used)
        try net.linkDown(net.b, used)
        await settle(after: cut, extra: 3)
        for (name, listener) in [("B", b!), ("A", a!)] {
            let g = gap(at: listener, from: cut, to: cut)
            r.measurements["switch \(round) gap at \(name)"] = g ?? -1
            r.check("switch \(round): audio gap at \(name) ≤ 0.5 s", within(g, 0.5), "gap \(fmt(g)) (cut \(used))")
        }
        let moved = pairLocalAddress(a) ?? ""
        r.check("switch \(round): the call moved to \(other)", moved.hasPrefix(other == "e1" ? "10.71." : "10.70."), "A's pair is on \(moved)")
    }

    func processStopped(_ r: inout FaultRowResult, seconds: Double) async throws(FaultLabError) {
        try await startCall()
        let stop = monotonicSeconds()
        a.send(signal: SIGSTOP)
        await pause(seconds)
        let resume = monotonicSeconds()
        a.send(signal: SIGCONT)
        await settle(after: resume, extra: 4)
        await hangUp()
        judgeRestored(&r, sides: [("A", a!), ("B", b!)], back: resume, limit: 2.0)
        judgeNoGiveUp(&r)
        // No backlog played: A's playout delay is back within the buffer's bound soon after.
        let figures = jitterBufferFigures(a, since: resume + 2)
        let worst = figures.max()
        r.measurements["A jitter buffer after resume ms"] = worst ?? -1
        r.check("A plays no stale backlog (jitter buffer ≤ 250 ms from 2 s after the resume)", worst.map { $0 <= 250 } ?? false, "at most \(worst.map { "\(Int($0)) ms" } ?? "no figure")")
        let g = gap(at: b, from: stop, to: resume)
        r.measurements["gap at B"] = g ?? -1
        r.check("audio back at B ≤ 2 s after the resume", within(g, seconds + 2), "gap \(fmt(g)) for a \(fmt(seconds)) stop")
    }

    func randomLoss(_ r: inout FaultRowResult, percent: Int, seconds: Double) async throws(FaultLabError) {
        try await startCall()
        let start = monotonicSeconds()
        // Each direction loses `percent` %, on arrival.
        try net.dropUDP(net.a, table: "fault", input: true, output: false, percent: percent)
        try net.dropUDP(net.b, table: "fault", input: true, output: false, percent: percent)
        await pause(min(30, seconds / 3))
        let early = (a.residentKilobytes() ?? 0, b.residentKilobytes() ?? 0)
        await pause(seconds - min(30, seconds / 3))
        let late = (a.residentKilobytes() ?? 0, b.residentKilobytes() ?? 0)
        try net.nftDelete(net.a, table: "fault")
        try net.nftDelete(net.b, table: "fault")
        await pause(1)
        await hangUp()
        for (name, side) in [("A", a!), ("B", b!)] {
            let left = side.states.filter { $0.at >= start && $0.state != "established" && $0.state != "ending" && $0.state != "ended" }
            r.check("\(name) never leaves established", left.isEmpty, left.isEmpty ? "stayed established" : "went \(left.map(\.state))")
        }
        let growth = (Double(late.0 - early.0) / 1024, Double(late.1 - early.1) / 1024)
        r.measurements["A RSS growth MB"] = growth.0
        r.measurements["B RSS growth MB"] = growth.1
        r.check("A's memory flat (± 2 MB)", abs(growth.0) <= 2, String(format: "%+.2f MB", growth.0))
        r.check("B's memory flat (± 2 MB)", abs(growth.1) <= 2, String(format: "%+.2f MB", growth.1))
    }
}

func fmt(_ seconds: Double?) -> String {
    seconds.map { String(format: "%.2f s", $0) } ?? "never"
}

/// A new folder under `workDirectory` for one row's logs and recordings, named by a random tag
/// (which also names the row's namespaces).
func makeRowFolder(in workDirectory: String) -> (tag: String, folder: String) {
    let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16)
    let folder = workDirectory + "/" + tag
    try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return (tag, folder)
}
