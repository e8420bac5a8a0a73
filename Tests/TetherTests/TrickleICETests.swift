import Foundation
import Glibc
import InMemoryLogging
import Logging
import Synchronization
import Testing
import TetherRealtime
import TetherTestSupport
import TetherFaultLab
import TetherTestbed

@testable import Tether

/// Trickle ICE (RFC 8838/8840) between two sessions with real libnice on loopback.
@Suite("Trickle ICE", .keepsLogPerTest, .serialized, .timeLimit(.minutes(2)))
struct TrickleICETests {
    func configuration(trickle: Bool, stun: SilentUDPServer? = nil, logger: Logger? = nil) -> CallConfiguration {
        var c = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false)
        c.trickleICE = trickle
        if let stun { c.stunServer = IceServer(address: "127.0.0.1", port: stun.port) }
        if let logger { c.logger = logger }
        return c
    }

    /// Both sides trickle; the STUN server never answers. Offer and answer leave with the host
    /// candidates and `a=ice-options:trickle` and without `a=end-of-candidates`, while gathering
    /// still waits for the server; the end of candidates follows on each side, and the call is
    /// established. Without trickle, the offer waits for the server.
    @Test func theOfferAndAnswerDoNotWaitForAnUnansweringSTUNServer() async throws {
        let stun = try SilentUDPServer()
        let a = try CallSession(configuration: configuration(trickle: true, stun: stun))
        let b = try CallSession(configuration: configuration(trickle: true, stun: stun))
        let sent = Mutex<[(side: InProcessSignaling.Side, event: String, at: UInt64)]>([])
        let signaling = InProcessSignaling(a: a, b: b) { side, event in
            let now = MonotonicClock.nanoseconds()
            switch event {
            case .localDescription(let d): sent.withLock { $0.append((side, d.kind.rawValue + ":" + d.sdp, now)) }
            case .localCandidate(let c): sent.withLock { $0.append((side, c.isEndOfCandidates ? "end" : "candidate", now)) }
            case .stateChanged(_, let to, _): sent.withLock { $0.append((side, to.name, now)) }
            default: break
            }
        }
        try await a.start()
        try await b.start()
        try await signaling.connect()
        let ended = await waitUntil(timeoutSeconds: 30) {
            sent.withLock { log in
                [InProcessSignaling.Side.a, .b].allSatisfy { side in
                    log.contains { $0.side == side && $0.event == "end" } && log.contains { $0.side == side && $0.event == "established" }
                }
            }
        }
        let log = sent.withLock { $0 }
        await a.hangUp()
        await b.hangUp()
        await signaling.waitUntilFinished()
        #expect(signaling.errors.isEmpty)
        #expect(ended, "both sides are established and end their candidates: \(log.map { "\($0.side.rawValue) \($0.event.prefix(12))" })")
        for side in [InProcessSignaling.Side.a, .b] {
            let description = try #require(log.first { $0.side == side && ($0.event.hasPrefix("offer:") || $0.event.hasPrefix("answer:")) })
            #expect(description.event.contains("a=ice-options:trickle"))
            #expect(!description.event.contains("a=end-of-candidates"))
            #expect(description.event.contains("typ host"))
            #expect(log.contains { $0.side == side && $0.event == "established" })
            // The description left while gathering still waited for the STUN server: no end in
            // it, and the end came after it. (How much sooner is `tether-bench setup --trickle`'s
            // to measure: a test on a loaded machine cannot.)
            let end = try #require(log.first { $0.side == side && $0.event == "end" })
            #expect(description.at < end.at)
        }

        // The control: without trickle the offer comes after the STUN server was given up on.
        let c = try CallSession(configuration: configuration(trickle: false, stun: stun))
        let recorder = EventRecorder(c)
        try await c.start()
        let offer = try await c.makeOffer()
        #expect(offer.contains("a=end-of-candidates"))
        #expect(!offer.contains("a=ice-options:trickle"))
        await c.hangUp()
        await recorder.finished()
    }

    /// Candidates that come only trickled, some before the description they belong to: A's
    /// offer reaches B without its candidates, which follow one by one; B's answer reaches A
    /// without its candidates, which A got before it. The call is established.
    @Test func candidatesThatComeOnlyTrickledAndEarlyAreUsed() async throws {
        let a = try CallSession(configuration: configuration(trickle: true))
        let b = try CallSession(configuration: configuration(trickle: true))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await a.start()
        try await b.start()
        func split(_ sdp: String) -> (description: String, candidates: [String], fragment: String) {
            let lines = sdp.components(separatedBy: "\r\n")
            let fragment = lines.first { $0.hasPrefix("a=ice-ufrag:") }.map { String($0.dropFirst(12)) } ?? ""
            let candidates = lines.filter { $0.hasPrefix("a=candidate:") }.map { String($0.dropFirst(2)) }
            return (lines.filter { !$0.hasPrefix("a=candidate:") }.joined(separator: "\r\n"), candidates, fragment)
        }
        let offer = split(try await a.makeOffer())
        try #require(!offer.candidates.isEmpty)
        let answer = split(try await b.acceptOffer(offer.description))
        try #require(!answer.candidates.isEmpty)
        // B's candidates reach A before B's answer does.
        for line in answer.candidates {
            try await a.addRemoteCandidate(ICECandidateMessage(candidate: line, sdpMid: nil, sdpMLineIndex: 0, usernameFragment: answer.fragment))
        }
        try await a.applyAnswer(answer.description)
        for line in offer.candidates {
            try await b.addRemoteCandidate(ICECandidateMessage(candidate: line, sdpMid: nil, sdpMLineIndex: 0, usernameFragment: offer.fragment))
        }
        try await b.addRemoteCandidate(ICECandidateMessage(candidate: "", usernameFragment: offer.fragment))
        #expect(await ra.waitFor("established", timeoutSeconds: 20) != nil)
        #expect(await rb.waitFor("established", timeoutSeconds: 20) != nil)
        // A candidate of another generation is not given to ICE; one that does not parse is
        // refused (3001).
        try await a.addRemoteCandidate(ICECandidateMessage(candidate: "candidate:9 1 UDP 1 127.0.0.1 9 typ host", usernameFragment: "stale"))
        let remote = await a.transport?.remoteCandidates() ?? []
        #expect(!remote.isEmpty && !remote.contains { $0.contains(" 127.0.0.1 9 typ") }, "\(remote)")
        do {
            try await a.addRemoteCandidate(ICECandidateMessage(candidate: "candidate:garbage", usernameFragment: answer.fragment))
            Issue.record("a candidate that does not parse was taken")
        } catch {
            #expect(error.code == .malformedSessionDescription)
        }
        await a.hangUp()
        await b.hangUp()
        await ra.finished()
        await rb.finished()
        #expect(ra.endReason?.cause == .localHangup)
    }

    /// An offer that does not advertise trickle gets a full answer from a side that trickles:
    /// its candidates complete and ended, and no candidate events.
    @Test func anOfferWithoutTrickleGetsAFullAnswer() async throws {
        let stun = try SilentUDPServer()
        let a = try CallSession(configuration: configuration(trickle: false))
        let b = try CallSession(configuration: configuration(trickle: true, stun: stun))
        let candidates = Mutex(0)
        let signaling = InProcessSignaling(a: a, b: b) { side, event in
            if case .localCandidate = event { candidates.withLock { $0 += 1 } }
        }
        let rb = EventRecorder(b, subscribing: true)
        try await a.start()
        try await b.start()
        try await signaling.connect()
        #expect(await rb.waitFor("established", timeoutSeconds: 20) != nil)
        let answer = try #require(rb.descriptions.first { $0.kind == .answer })
        // Complete (it still says it takes trickled candidates: RFC 8840 lets an answer say so).
        #expect(answer.sdp.contains("a=end-of-candidates"))
        await a.hangUp()
        await b.hangUp()
        await signaling.waitUntilFinished()
        #expect(candidates.withLock { $0 } == 0)
        #expect(signaling.errors.isEmpty)
    }

    /// A peer that takes no trickled candidates (its answer does not advertise trickle, and its
    /// signaling drops candidate lines) gets the candidates our offer lacked in a re-offer once
    /// gathering ends: here the relayed candidate of a TURN server (coturn on loopback), in the
    /// same ICE session (same credentials: no restart), answered, and the call stays up.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/turnserver"), "needs turnserver (Debian's coturn)"))
    func aPeerThatTakesNoTrickledCandidatesGetsThemInAReoffer() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let port = Int.random(in: 20_000...29_999)
        let turn = try await TurnServer(
            listeningAddresses: ["127.0.0.1"], relayAddress: "127.0.0.1", port: port, allowLoopbackPeers: true,
            logPath: folder + "/turnserver.log")
        defer { turn.stop() }
        var ca = configuration(trickle: true)
        ca.turnServer = IceServer(address: "127.0.0.1", port: UInt16(port), username: TurnServer.username, password: TurnServer.password)
        let a = try CallSession(configuration: ca)
        let b = try CallSession(configuration: configuration(trickle: false))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await a.start()
        try await b.start()
        let offer = try await a.makeOffer()
        #expect(!offer.contains("typ relay"), "the trickled offer leaves before the allocation")
        let answer = try await b.acceptOffer(offer)
        #expect(!answer.contains("a=ice-options:trickle"))
        try await a.applyAnswer(answer)
        let reoffered = await waitUntil(timeoutSeconds: 20) { ra.descriptions.contains { $0.kind == .offer && $0.isRestart } }
        #expect(reoffered, "A re-offers once gathering has ended")
        let reoffer = try #require(ra.descriptions.first { $0.kind == .offer && $0.isRestart })
        func ufrag(_ sdp: String) -> String? { sdp.components(separatedBy: "\r\n").first { $0.hasPrefix("a=ice-ufrag:") } }
        #expect(reoffer.sdp.contains("typ relay"))
        #expect(ufrag(reoffer.sdp) == ufrag(offer), "the same ICE session: no restart")
        try await a.applyAnswer(try await b.acceptOffer(reoffer.sdp))
        // B's ICE has A's relayed candidate now, to check and fall back on.
        let remote = await b.transport?.remoteCandidates() ?? []
        #expect(remote.contains { $0.contains("typ relay") }, "B's remote candidates: \(remote)")
        #expect(await ra.waitFor("established", timeoutSeconds: 20) != nil)
        #expect(await rb.waitFor("established", timeoutSeconds: 20) != nil)
        #expect(ra.descriptions.filter { $0.kind == .offer && $0.isRestart }.count == 1)
        await a.hangUp()
        await b.hangUp()
        await ra.finished()
        await rb.finished()
        #expect(!rb.stateNames.contains("mediaDisrupted") && !ra.stateNames.contains("mediaDisrupted"))
        #expect(ra.recordedErrors.isEmpty && rb.recordedErrors.isEmpty)
    }

    /// Checks fail before the peer has trickled its working candidate (the offer named only a
    /// port nobody answers on, and the offerer has none of the answerer's to check): the
    /// answerer does not end the call, but waits for the candidates still to come; the working
    /// ones arrive and the call is established.
    /// ... and when the end of candidates comes with nothing that works, the failure stands.
    @Test(arguments: [false, true])
    func aFailureBeforeTheTrickledCandidatesArriveWaitsForThem(withoutWorkingCandidates: Bool) async throws {
        let log = InMemoryLogHandler()
        var logger = Logger(label: "b") { _ in log }
        logger.logLevel = .notice
        let a = try CallSession(configuration: configuration(trickle: true))
        // A set-up time-out far beyond the test's waits, so only ICE can end B's call.
        var cb = configuration(trickle: true, logger: logger)
        cb.connectTimeoutSeconds = 120
        let b = try CallSession(configuration: cb)
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await a.start()
        try await b.start()
        let full = try await a.makeOffer()
        let lines = full.components(separatedBy: "\r\n")
        let fragment = try #require(lines.first { $0.hasPrefix("a=ice-ufrag:") }).dropFirst(12)
        let real = lines.filter { $0.hasPrefix("a=candidate:") }.map { String($0.dropFirst(2)) }
        // A port nothing listens on: its checks fail (ICMP port unreachable on loopback).
        let dead = closedPort()
        let offer = lines.map { $0.hasPrefix("a=candidate:") ? "" : $0 }.filter { !$0.isEmpty }
            .map { $0.hasPrefix("a=ice-ufrag:") ? "a=candidate:9 1 UDP 2130706431 127.0.0.1 \(dead) typ host\r\n" + $0 : $0 }
            .joined(separator: "\r\n")
        // A gets B's answer without B's candidates, so nothing reaches B before A's trickle does.
        let answer = try await b.acceptOffer(offer)
        try await a.applyAnswer(answer.components(separatedBy: "\r\n").filter { !$0.hasPrefix("a=candidate:") }.joined(separator: "\r\n"))
        let held = await waitUntil(timeoutSeconds: 30) {
            log.entries.contains { $0.message.description.contains("waiting for the candidates still to come") }
        }
        #expect(held, "B's checks failed and the failure waits")
        #expect(rb.endReason == nil)
        if !withoutWorkingCandidates {
            for line in real {
                try await b.addRemoteCandidate(ICECandidateMessage(candidate: line, usernameFragment: String(fragment)))
            }
        }
        try await b.addRemoteCandidate(ICECandidateMessage(candidate: "", usernameFragment: String(fragment)))
        if withoutWorkingCandidates {
            // The end of candidates, and nothing works: the held failure stands once the last
            // checks had their time.
            #expect(await rb.waitFor("ended", timeoutSeconds: 30) != nil)
            #expect(rb.endReason?.cause == .connectionFailed)
            #expect(rb.stateNames.contains("established") == false)
        } else {
            #expect(await rb.waitFor("established", timeoutSeconds: 20) != nil)
            #expect(await ra.waitFor("established", timeoutSeconds: 20) != nil)
        }
        await a.hangUp()
        await b.hangUp()
        await ra.finished()
        await rb.finished()
    }
}

/// A loopback UDP port with no socket on it (bound, then closed).
func closedPort() -> UInt16 {
    (try? SilentUDPServer())?.port ?? 9
}
