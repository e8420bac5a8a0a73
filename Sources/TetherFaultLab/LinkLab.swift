import Foundation
import Glibc

/// One row of the narrow-link matrix: two `tether call` processes in two network namespaces
/// joined by a veth pair whose egresses are shaped with `tc tbf` (a token bucket and a 300 ms
/// queue: what a narrow access link does), speech each way.
public enum LinkScenario: Sendable, Hashable, CustomStringConvertible {
    /// Both directions at `kilobits` kb/s for the whole call.
    case shaped(kilobits: Int)
    /// Both directions at `kilobits`, narrowed to `to` kb/s at `at` seconds for `seconds`, then
    /// widened again.
    case narrowing(kilobits: Int, to: Int, at: Double, seconds: Double)
    /// Both directions at `kilobits` with `percent` % random loss on arrival as well.
    case shapedWithLoss(kilobits: Int, percent: Int)
    /// Both directions at `kilobits`, and a bulk TCP transfer from A to B through the same
    /// queue from `at` seconds on.
    case sharedWithTCP(kilobits: Int, at: Double)

    /// The matrix of issue 34.
    public static let matrix: [LinkScenario] = [
        .shaped(kilobits: 24), .shaped(kilobits: 40), .shaped(kilobits: 64), .shaped(kilobits: 128), .shaped(kilobits: 1000),
        .narrowing(kilobits: 1000, to: 40, at: 20, seconds: 20), .shapedWithLoss(kilobits: 64, percent: 5),
        .sharedWithTCP(kilobits: 1000, at: 15),
    ]

    /// How long the call runs, in seconds.
    public var callSeconds: Double {
        switch self {
        case .shaped, .shapedWithLoss: 45
        case .narrowing(_, _, let at, let seconds): at + seconds + 25
        case .sharedWithTCP(_, let at): at + 35
        }
    }

    /// The link's rate at `second` of the call, kb/s.
    public func kilobits(at second: Double) -> Int {
        switch self {
        case .shaped(let k), .shapedWithLoss(let k, _), .sharedWithTCP(let k, _): k
        case .narrowing(let k, let to, let at, let seconds): second >= at && second < at + seconds ? to : k
        }
    }

    public var description: String {
        switch self {
        case .shaped(let k): "tbf \(k) kb/s"
        case .narrowing(let k, let to, let at, let seconds): "tbf \(k) kb/s, \(to) kb/s from \(Int(at)) s for \(Int(seconds)) s"
        case .shapedWithLoss(let k, let p): "tbf \(k) kb/s + \(p) % random loss"
        case .sharedWithTCP(let k, let at): "tbf \(k) kb/s shared with a TCP transfer from \(Int(at)) s"
        }
    }
}

/// What one direction of a row measured, second by second and over the windows that matter.
public struct LinkDirectionResult: Sendable, Codable {
    /// One second as the lab saw it: the link's rate, what the sender put on it (bytes the
    /// qdisc sent, link-layer headers included), what it dropped, and the sender's and the
    /// receiver's figures.
    public struct Second: Sendable, Codable {
        public var second: Int
        public var linkKilobits: Int
        public var wireKilobits: Double
        public var qdiscDrops: Int
        public var roundTripMilliseconds: Double?
        public var packetMilliseconds: Int?
        public var estimateKilobits: Double?
        public var opusKilobits: Double?
        public var heardLossPercent: Double?
    }

    /// `A→B` or `B→A`.
    public var name: String
    public var seconds: [Second] = []
    /// From when (seconds after the call's start, or after the link's change) every later second
    /// (to the next change) fits: wire rate ≤ 90 % of the link, RTT ≤ 100 ms over the unshaped
    /// path's (its minimum), and what the receiver heard lost in that second ≤ 2 %; nil if never.
    public var settledAfterSeconds: Double?
    /// The same after the link narrowed (narrowing rows).
    public var settledAfterNarrowingSeconds: Double?
    /// Back to the full rate (the wide stretch's median wire rate within 10 %) after widening.
    public var backToFullRateAfterSeconds: Double?
    /// Over the call's last 20 s: the wire rate, median RTT, heard loss, PESQ-WB of the speech.
    public var lastWindowWireKilobits: Double?
    public var lastWindowRoundTripMilliseconds: Double?
    public var lastWindowHeardLossPercent: Double?
    public var lastWindowPESQ: Double?
    /// For narrowing rows: PESQ-WB of the last 20 s of the narrow stretch.
    public var narrowWindowPESQ: Double?
    public var pesqError: String?
}

/// What a row measured.
public struct LinkRowResult: Sendable, Codable {
    public var scenario: String
    public var rateControl: Bool
    public var directions: [LinkDirectionResult] = []
    /// Sharing rows: the TCP transfer's rate over the last 20 s (kb/s).
    public var tcpKilobits: Double?
    public var error: String?
    public var directory = ""
    public var wallSeconds = 0.0
}

/// Runs the narrow-link matrix (``LinkScenario``): `tc tbf` on both egresses of a veth pair
/// between two namespaces, a `tether call` in each (A offers), A speaking `speechA` and B
/// `speechB` (48 kHz mono WAV files, looped), each recording what it hears. Every second the
/// lab reads both qdiscs' counters and both processes' statistics lines; after the call the
/// recordings are scored with wideband PESQ by `scorer` (Benchmarks/quality/pesq_window.py)
/// over the windows that matter.
///
/// Needs root, iproute2's `tc` with the `tbf` qdisc, nftables for the loss row, and python3 with
/// `pesq` and `numpy` for the scores (the rows run without them, unscored).
public struct LinkLab: Sendable {
    public var tetherExecutable: String
    public var workDirectory: String
    public var speechA: String
    public var speechB: String
    /// `python scorer` for the PESQ windows; nil: not scored.
    public var python: String?
    public var scorer: String?
    public var log: @Sendable (String) -> Void

    public init(
        tetherExecutable: String, workDirectory: String, speechA: String, speechB: String, python: String?, scorer: String?,
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.tetherExecutable = tetherExecutable
        self.workDirectory = workDirectory
        self.speechA = speechA
        self.speechB = speechB
        self.python = python
        self.scorer = scorer
        self.log = log
    }

    /// Why the lab cannot run here, or nil when it can.
    public static var missingRequirement: String? {
        if getuid() != 0 { return "needs root (network namespaces, tc)" }
        for tool in ["ip", "tc", "nft"] where !Shell.has(tool) { return "needs \(tool)" }
        return nil
    }

    public func run(_ scenario: LinkScenario, rateControl: Bool = true, extraArguments: [String] = []) async -> LinkRowResult {
        var result = LinkRowResult(scenario: scenario.description, rateControl: rateControl)
        if let reason = Self.missingRequirement {
            result.error = reason
            return result
        }
        let (tag, folder) = makeRowFolder(in: workDirectory)
        result.directory = folder
        let started = monotonicSeconds()
        log("\(scenario) (rate control \(rateControl ? "on" : "off")): starting (\(folder))")
        do {
            let net = try await LabNetwork(shape: .direct(links: 1), tag: tag)
            defer { net.tearDown() }
            try await play(scenario, rateControl: rateControl, extra: extraArguments, net: net, folder: folder, into: &result)
        } catch {
            result.error = "\(error)"
        }
        result.wallSeconds = monotonicSeconds() - started
        for d in result.directions {
            log(
                "  \(d.name): settled \(d.settledAfterSeconds.map { String(format: "%.0f s", $0) } ?? "never"), last 20 s "
                    + "\(d.lastWindowWireKilobits.map { String(format: "%.1f", $0) } ?? "?") kb/s, RTT \(d.lastWindowRoundTripMilliseconds.map { String(format: "%.0f", $0) } ?? "?") ms, "
                    + "heard loss \(d.lastWindowHeardLossPercent.map { String(format: "%.1f", $0) } ?? "?") %, PESQ \(d.lastWindowPESQ.map { String(format: "%.2f", $0) } ?? d.pesqError ?? "?")")
        }
        if let error = result.error { log("  ✘ \(error)") }
        return result
    }

    private func shape(_ net: LabNetwork, kilobits: Int, change: Bool) throws(FaultLabError) {
        for ns in [net.a, net.b] {
            try Shell.must(in: ns, "tc qdisc \(change ? "change" : "add") dev e0 root tbf rate \(kilobits)kbit burst 3000 latency 300ms")
        }
    }

    /// The qdisc's counters in `ns`: bytes sent and packets dropped.
    private func qdiscCounters(_ ns: String) -> (bytes: Int, drops: Int) {
        let text = Shell.run(in: ns, "tc -s qdisc show dev e0").output
        // " Sent 123456 bytes 789 pkt (dropped 12, overlimits 34 requeues 0)"
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," || $0 == "(" || $0 == ")" })
        var bytes = 0
        var drops = 0
        for (i, w) in words.enumerated() {
            if w == "Sent", i + 1 < words.count { bytes = Int(words[i + 1]) ?? 0 }
            if w == "dropped", i + 1 < words.count { drops = Int(words[i + 1]) ?? 0 }
        }
        return (bytes, drops)
    }

    private func play(
        _ scenario: LinkScenario, rateControl: Bool, extra: [String], net: LabNetwork, folder: String, into result: inout LinkRowResult
    ) async throws(FaultLabError) {
        try shape(net, kilobits: scenario.kilobits(at: 0), change: false)
        if case .shapedWithLoss(_, let percent) = scenario {
            try net.dropUDP(net.a, table: "loss", input: true, output: false, percent: percent)
            try net.dropUDP(net.b, table: "loss", input: true, output: false, percent: percent)
        }
        let common = ["--statistics-interval", "1"] + (rateControl ? [] : ["--no-rate-control"]) + extra
        let a = try LabCallProcess(
            name: "A", executable: tetherExecutable, namespace: net.a,
            arguments: ["--role", "offer", "--local-address", "10.70.0.1", "--input", "wav:\(speechA)", "--output", "wav:\(folder)/a.wav"] + common,
            logPath: folder + "/a.log")
        let b = try LabCallProcess(
            name: "B", executable: tetherExecutable, namespace: net.b,
            arguments: ["--role", "answer", "--local-address", "10.70.0.2", "--input", "wav:\(speechB)", "--output", "wav:\(folder)/b.wav"] + common,
            logPath: folder + "/b.log")
        defer {
            if a.isRunning { a.send(signal: SIGKILL) }
            if b.isRunning { b.send(signal: SIGKILL) }
        }
        a.relayLines(to: b)
        b.relayLines(to: a)
        guard let upA = await a.waitFor(state: "established", timeout: 30), await b.waitFor(state: "established", timeout: 30) != nil else {
            throw .processFailed("the call did not establish within 30 s (A: \(a.states.map(\.state)), B: \(b.states.map(\.state)))")
        }
        // Every second: the qdiscs' counters (A's egress carries A→B, B's B→A).
        var counters = [(a: qdiscCounters(net.a), b: qdiscCounters(net.b))]
        var marks: [Double] = [upA]
        var tcp: TCPTransfer?
        var rate = scenario.kilobits(at: 0)
        let total = Int(scenario.callSeconds)
        for second in 1...total {
            let due = upA + Double(second)
            await pause(due - monotonicSeconds())
            counters.append((qdiscCounters(net.a), qdiscCounters(net.b)))
            marks.append(monotonicSeconds())
            let wanted = scenario.kilobits(at: Double(second))
            if wanted != rate {
                try shape(net, kilobits: wanted, change: true)
                rate = wanted
                log("  \(second) s: link now \(wanted) kb/s")
            }
            if case .sharedWithTCP(_, let at) = scenario, Double(second) >= at, tcp == nil {
                tcp = try TCPTransfer(from: net.a, to: net.b, address: "10.70.0.2", folder: folder)
                log("  \(second) s: TCP transfer A → B started")
            }
        }
        if let tcp {
            result.tcpKilobits = tcp.kilobitsPerSecond(lastSeconds: 20)
            tcp.stop()
        }
        a.send(#"{"type":"hangup"}"#)
        _ = await a.waitForExit(timeout: 10)
        _ = await b.waitForExit(timeout: 10)

        for (name, sender, receiver, isA) in [("A→B", a, b, true), ("B→A", b, a, false)] {
            var d = LinkDirectionResult(name: name)
            let sent = sender.statistics(since: upA)
            let heard = receiver.statistics(since: upA)
            for second in 1..<counters.count {
                let before = isA ? counters[second - 1].a : counters[second - 1].b
                let after = isA ? counters[second].a : counters[second].b
                let s = sent.last { $0.at <= marks[second] }
                let h = heard.last { $0.at <= marks[second] }
                let hPrevious = heard.last { $0.at <= marks[second - 1] }
                d.seconds.append(
                    LinkDirectionResult.Second(
                        second: second, linkKilobits: scenario.kilobits(at: Double(second - 1)),
                        wireKilobits: Double(after.bytes - before.bytes) * 8 / 1000, qdiscDrops: after.drops - before.drops,
                        roundTripMilliseconds: s?.object["rttMs"] as? Double, packetMilliseconds: s?.object["sentPacketMs"] as? Int,
                        estimateKilobits: (s?.object["estimatedBandwidth"] as? Int).map { Double($0) / 1000 },
                        opusKilobits: (s?.object["targetBitrate"] as? Int).map { Double($0) / 1000 },
                        heardLossPercent: Self.heardLoss(from: hPrevious?.object, to: h?.object)))
            }
            judge(&d, scenario: scenario)
            result.directions.append(d)
        }
        score(&result, scenario: scenario, folder: folder)
    }

    /// The loss heard between two statistics lines: lost and not rebuilt, over what was expected.
    static func heardLoss(from before: [String: Any]?, to after: [String: Any]?) -> Double? {
        func n(_ o: [String: Any]?, _ key: String) -> Int { o?[key] as? Int ?? 0 }
        guard let after else { return nil }
        let received = n(after, "packetsReceived") - n(before, "packetsReceived")
        let lost = n(after, "packetsLost") - n(before, "packetsLost")
        let rebuilt = n(after, "framesRecoveredByFEC") - n(before, "framesRecoveredByFEC")
            + n(after, "framesRecoveredByRedundancy") - n(before, "framesRecoveredByRedundancy")
        let expected = received + max(0, lost)
        guard expected > 0 else { return nil }
        return 100 * Double(max(0, lost - rebuilt)) / Double(expected)
    }

    private func judge(_ d: inout LinkDirectionResult, scenario: LinkScenario) {
        let baseRTT = d.seconds.compactMap(\.roundTripMilliseconds).min() ?? 0
        func fits(_ s: LinkDirectionResult.Second) -> Bool {
            s.wireKilobits <= 0.9 * Double(s.linkKilobits) && (s.roundTripMilliseconds ?? .infinity) <= baseRTT + 100
                && (s.heardLossPercent ?? 0) <= 2
        }
        /// The first second from which every second up to `end` fits, counted from `start`.
        func settled(from start: Int, to end: Int) -> Double? {
            guard start < end else { return nil }
            var first: Int?
            for i in start..<end { if fits(d.seconds[i]) { first = first ?? i } else { first = nil } }
            return first.map { Double($0 - start + 1) }
        }
        var changes = [0]
        if case .narrowing(_, _, let at, let seconds) = scenario { changes += [Int(at), Int(at + seconds)] }
        d.settledAfterSeconds = settled(from: 0, to: changes.count > 1 ? changes[1] : d.seconds.count)
        if changes.count == 3 {
            d.settledAfterNarrowingSeconds = settled(from: changes[1], to: changes[2])
            let wide = d.seconds[max(0, changes[1] - 8)..<changes[1]].map(\.wireKilobits).sorted()
            if let median = wide.isEmpty ? nil : wide[wide.count / 2] {
                let after = d.seconds[changes[2]...]
                d.backToFullRateAfterSeconds = after.first { abs($0.wireKilobits - median) <= 0.1 * median }.map { Double($0.second - changes[2]) }
            }
        }
        let last = d.seconds.suffix(20)
        if !last.isEmpty {
            d.lastWindowWireKilobits = last.map(\.wireKilobits).reduce(0, +) / Double(last.count)
            let rtts = last.compactMap(\.roundTripMilliseconds).sorted()
            d.lastWindowRoundTripMilliseconds = rtts.isEmpty ? nil : rtts[rtts.count / 2]
            let losses = last.compactMap(\.heardLossPercent)
            d.lastWindowHeardLossPercent = losses.isEmpty ? nil : losses.reduce(0, +) / Double(losses.count)
        }
    }

    /// PESQ-WB of each recording's last 20 s (and of the narrow stretch's last 20 s), against the
    /// speech its peer sent, aligned by the scorer.
    private func score(_ result: inout LinkRowResult, scenario: LinkScenario, folder: String) {
        guard let python, let scorer else { return }
        var windows: [(direction: Int, reference: String, degraded: String, end: Double, narrow: Bool)] = []
        let end = scenario.callSeconds
        windows.append((0, speechA, "\(folder)/b.wav", end, false))
        windows.append((1, speechB, "\(folder)/a.wav", end, false))
        if case .narrowing(_, _, let at, let seconds) = scenario {
            windows.append((0, speechA, "\(folder)/b.wav", at + seconds, true))
            windows.append((1, speechB, "\(folder)/a.wav", at + seconds, true))
        }
        for w in windows {
            let outcome = Shell.run("\(python) \(scorer) \(w.reference) \(w.degraded) \(String(format: "%.1f", max(0, w.end - 21))) 20")
            let line = outcome.output.split(separator: "\n").last.map(String.init) ?? ""
            let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            if let value = object?["pesq_wb"] as? Double {
                if w.narrow { result.directions[w.direction].narrowWindowPESQ = value } else { result.directions[w.direction].lastWindowPESQ = value }
            } else if !w.narrow {
                result.directions[w.direction].pesqError = (object?["error"] as? String) ?? "scorer: \(outcome.output.suffix(200))"
            }
        }
    }
}

/// A bulk TCP transfer between two namespaces (python3 sockets: a sink in one, a sender in the
/// other), and what it carried.
final class TCPTransfer: @unchecked Sendable {
    private let sink: Process
    private let sender: Process
    private let counterPath: String
    private let started = monotonicSeconds()

    init(from: String, to: String, address: String, folder: String) throws(FaultLabError) {
        counterPath = folder + "/tcp-received"
        let sinkScript = """
            import socket, time
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 5201)); s.listen(1)
            c, _ = s.accept(); total = 0; last = 0
            with open('\(counterPath)', 'w') as f:
                while True:
                    data = c.recv(65536)
                    if not data: break
                    total += len(data)
                    now = time.monotonic()
                    if now - last >= 0.5:
                        f.write(f"{now} {total}\\n"); f.flush(); last = now
            """
        let senderScript = """
            import socket, time
            for _ in range(50):
                try:
                    s = socket.create_connection(('\(address)', 5201)); break
                except OSError: time.sleep(0.1)
            block = b'x' * 65536
            while True: s.sendall(block)
            """
        sink = Process()
        sink.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        sink.arguments = ["ip", "netns", "exec", to, "python3", "-c", sinkScript]
        sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        sender.arguments = ["ip", "netns", "exec", from, "python3", "-c", senderScript]
        for p in [sink, sender] {
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
        }
        do {
            try sink.run()
            try sender.run()
        } catch {
            throw .processFailed("cannot start the TCP transfer: \(error)")
        }
    }

    /// The transfer's rate over its last `lastSeconds` seconds, from the sink's counter file.
    func kilobitsPerSecond(lastSeconds: Double) -> Double? {
        guard let text = try? String(contentsOfFile: counterPath, encoding: .utf8) else { return nil }
        let samples = text.split(separator: "\n").compactMap { line -> (Double, Double)? in
            let f = line.split(separator: " ")
            guard f.count == 2, let t = Double(f[0]), let n = Double(f[1]) else { return nil }
            return (t, n)
        }
        guard let newest = samples.last, let oldest = samples.first(where: { $0.0 >= newest.0 - lastSeconds }), newest.0 > oldest.0 else {
            return nil
        }
        return (newest.1 - oldest.1) * 8 / 1000 / (newest.0 - oldest.0)
    }

    func stop() {
        for p in [sender, sink] where p.isRunning { kill(p.processIdentifier, SIGKILL) }
    }

    deinit { stop() }
}
