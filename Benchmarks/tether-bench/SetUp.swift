import ArgumentParser
import Foundation
import Synchronization
import Tether
import Glibc
import TetherFaultLab
import TetherFaults
import TetherRealtime
import TetherTestbed

/// Call set-up time on loopback, SDES against DTLS-SRTP: from the moment the offer exists (ICE
/// gathered) to both sides `established` (media decoded both ways).
enum SetUpBench {
    struct Figures {
        var keying: CallConfiguration.Keying
        var milliseconds: [Double]
        var median: Double { milliseconds.sorted()[milliseconds.count / 2] }
        var minimum: Double { milliseconds.min() ?? 0 }
        var maximum: Double { milliseconds.max() ?? 0 }
        var dictionary: [String: Any] { ["keying": keying.rawValue, "medianMs": median, "minMs": minimum, "maxMs": maximum, "calls": milliseconds.count] }
    }

    static func measure(keying: CallConfiguration.Keying, calls: Int) async throws -> Figures {
        var out: [Double] = []
        for _ in 0..<calls {
            var configuration = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false)
            configuration.keying = keying
            let a = try CallSession(configuration: configuration)
            let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false))
            try await a.start()
            try await b.start()
            let offer = try await a.makeOffer()
            let started = MonotonicClock.nanoseconds()
            try await a.applyAnswer(try await b.acceptOffer(offer))
            let deadline = started + 10_000_000_000
            while !(a.state == .established && b.state == .established), MonotonicClock.nanoseconds() < deadline {
                try await Task.sleep(for: .milliseconds(1))
            }
            let ms = Double(MonotonicClock.nanoseconds() - started) / 1e6
            guard a.state == .established && b.state == .established else {
                throw ValidationError("a \(keying.rawValue) call did not establish within 10 s")
            }
            out.append(ms)
            await a.hangUp()
            await b.hangUp()
        }
        return Figures(keying: keying, milliseconds: out)
    }
}

/// Call set-up through the impairment relay with random loss both ways: how long until each side
/// hears the other. The offer and answer go without loss (signaling is another path); the ICE
/// checks, DTLS-free SDES media and RTCP go through the relay. Each call its own loss seed.
enum LossySetUpBench {
    struct Call {
        var seed: UInt64
        /// Offer made → A `established` (A decoded B's media), and → B `established`; nil: not
        /// within the limit.
        var aHears: Double?
        var bHears: Double?
        /// ICE-restart descriptions (offers and answers) A and B sent during set-up.
        var restarts: Int
        var bothHear: Double? { aHears.flatMap { a in bHears.map { max(a, $0) } } }
    }

    static func measure(lossPercent: Double, calls: Int, firstSeed: UInt64, limitSeconds: Double) async throws -> [Call] {
        var out: [Call] = []
        for index in 0..<calls {
            let seed = firstSeed + UInt64(index)
            let relay = try UDPImpairmentRelay(seed: seed)
            defer { relay.stop() }
            // Each side its own source and sink (a configuration's devices are objects).
            func configuration() -> CallConfiguration {
                CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false)
            }
            let a = try CallSession(configuration: configuration())
            let b = try CallSession(configuration: configuration())
            let started = Mutex<UInt64>(0)
            let heard = Mutex<(a: Double?, b: Double?, restarts: Int)>((nil, nil, 0))
            let signaling = InProcessSignaling(a: a, b: b, relay: relay) { side, event in
                switch event {
                case .stateChanged(_, .established, _):
                    let t = Double(MonotonicClock.nanoseconds() - started.withLock { $0 }) / 1e9
                    heard.withLock {
                        if side == .a, $0.a == nil { $0.a = t }
                        if side == .b, $0.b == nil { $0.b = t }
                    }
                case .localDescription(let message) where message.isRestart:
                    heard.withLock { $0.restarts += 1 }
                default: break
                }
            }
            relay.updateImpairments { $0.lossPercent = lossPercent }
            try await a.start()
            try await b.start()
            started.withLock { $0 = MonotonicClock.nanoseconds() }
            try await signaling.connect()
            let deadline = started.withLock { $0 } + UInt64(limitSeconds * 1e9)
            while MonotonicClock.nanoseconds() < deadline {
                let h = heard.withLock { $0 }
                if h.a != nil && h.b != nil { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            let h = heard.withLock { $0 }
            await a.hangUp()
            await b.hangUp()
            await signaling.waitUntilFinished()
            out.append(Call(seed: seed, aHears: h.a, bHears: h.b, restarts: h.restarts))
        }
        return out
    }
}

struct SetUpBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup", abstract: "Call set-up time on loopback (offer made → both sides established), SDES against DTLS-SRTP; with --loss, through the impairment relay with random loss both ways, seed by seed.")

    @Option(help: "Calls per keying (per loss figure with --loss).")
    var calls = 20

    @Option(help: "Random loss both ways, percent: measure set-up through the impairment relay instead (each call its own seed, SDES).")
    var loss: Double?

    @Option(help: "First loss seed with --loss.")
    var firstSeed: UInt64 = 1

    @Flag(help: "Measure from makeOffer() called (before gathering) to both established, without and with trickle ICE, against no server, a STUN server that never answers, a TURN server (coturn on loopback) and a TURN server that never answers.")
    var trickle = false

    func run() async throws {
        if trickle {
            let folder = NSTemporaryDirectory() + "tether-setup-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let port = Int.random(in: 20_000...29_999)
            let turn = try? await TurnServer(
                listeningAddresses: ["127.0.0.1"], relayAddress: "127.0.0.1", port: port, allowLoopbackPeers: true, logPath: folder + "/turnserver.log")
            defer { turn?.stop() }
            say("offer asked for → both established, SDES, loopback, \(calls) calls a row (median [min–max])")
            say("| server | full descriptions | trickle ICE |")
            say("|---|---|---|")
            for server in TrickleSetUpBench.Server.allCases {
                if server == .turn && turn == nil {
                    say("| \(server.rawValue) | (no turnserver: Debian's coturn) | |")
                    continue
                }
                var cells: [String] = []
                for trickle in [false, true] {
                    let ms = try await TrickleSetUpBench.measure(server, trickle: trickle, calls: calls, turn: turn, turnPort: port).sorted()
                    cells.append(String(format: "%.0f ms [%.0f–%.0f]", ms[ms.count / 2], ms.first ?? 0, ms.last ?? 0))
                }
                say("| \(server.rawValue) | \(cells[0]) | \(cells[1]) |")
            }
            return
        }
        if let loss {
            let limit = 10.0
            let results = try await LossySetUpBench.measure(lossPercent: loss, calls: calls, firstSeed: firstSeed, limitSeconds: limit)
            for r in results {
                say(String(format: "seed %3llu: A hears B %@, B hears A %@, restarts %d", r.seed,
                    r.aHears.map { String(format: "%.2f s", $0) } ?? "no", r.bHears.map { String(format: "%.2f s", $0) } ?? "no", r.restarts))
            }
            let both = results.map { $0.bothHear ?? limit }.sorted()
            let over = { (s: Double) in results.filter { ($0.bothHear ?? limit) > s }.count }
            say(String(format: "%.0f %% loss, %d calls: both hear each other, median %.2f s, 90th %.2f s, worst %.2f s; over 1 s: %d, over 2 s: %d, not within %.0f s: %d; calls with an ICE restart: %d",
                loss, results.count, both[both.count / 2], both[min(both.count - 1, both.count * 9 / 10)], both.last ?? 0,
                over(1), over(2), limit, results.filter { $0.bothHear == nil }.count, results.filter { $0.restarts > 0 }.count))
            return
        }
        for keying in [CallConfiguration.Keying.sdes, .dtls] {
            let f = try await SetUpBench.measure(keying: keying, calls: calls)
            say(String(format: "%@: median %.1f ms [%.1f–%.1f] over %d calls", keying == .sdes ? "SDES     " : "DTLS-SRTP", f.median, f.minimum, f.maximum, calls))
        }
    }
}

/// Set-up time from the offer being asked for (`makeOffer()` called, before any gathering) to
/// both sides `established`, with and without trickle ICE, against the servers a call may be
/// given: none, a STUN server that never answers, a TURN server (coturn on loopback) and a TURN
/// server that never answers. Descriptions and trickled candidates go through
/// `InProcessSignaling` without delay.
enum TrickleSetUpBench {
    enum Server: String, CaseIterable {
        case none = "no STUN/TURN server"
        case silentSTUN = "STUN server that never answers"
        case turn = "TURN/UDP server (coturn on loopback)"
        case silentTURN = "TURN server that never answers"
    }

    static func measure(_ server: Server, trickle: Bool, calls: Int, turn: TurnServer?, turnPort: Int) async throws -> [Double] {
        let silent = try SilentUDPServer()
        var out: [Double] = []
        for _ in 0..<calls {
            func configuration() -> CallConfiguration {
                var c = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false)
                c.trickleICE = trickle
                switch server {
                case .none: break
                case .silentSTUN: c.stunServer = IceServer(address: "127.0.0.1", port: silent.port)
                case .turn:
                    c.turnServer = IceServer(address: "127.0.0.1", port: UInt16(turnPort), username: TurnServer.username, password: TurnServer.password)
                case .silentTURN: c.turnServer = IceServer(address: "127.0.0.1", port: silent.port, username: "u", password: "p")
                }
                return c
            }
            let a = try CallSession(configuration: configuration())
            let b = try CallSession(configuration: configuration())
            let established = Mutex<(a: UInt64?, b: UInt64?)>((nil, nil))
            let signaling = InProcessSignaling(a: a, b: b) { side, event in
                if case .stateChanged(_, .established, _) = event {
                    let now = MonotonicClock.nanoseconds()
                    established.withLock { if side == .a { $0.a = $0.a ?? now } else { $0.b = $0.b ?? now } }
                }
            }
            try await a.start()
            try await b.start()
            let started = MonotonicClock.nanoseconds()
            try await signaling.connect()
            let deadline = started + 20_000_000_000
            var both: UInt64?
            while MonotonicClock.nanoseconds() < deadline {
                let e = established.withLock { $0 }
                if let ea = e.a, let eb = e.b {
                    both = max(ea, eb)
                    break
                }
                try await Task.sleep(for: .milliseconds(1))
            }
            await a.hangUp()
            await b.hangUp()
            await signaling.waitUntilFinished()
            guard let both else { throw ValidationError("a call (\(server.rawValue), trickle \(trickle)) did not establish within 20 s") }
            out.append(Double(both - started) / 1e6)
        }
        return out
    }
}
