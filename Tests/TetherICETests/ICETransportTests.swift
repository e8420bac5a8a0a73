import Glibc
import Synchronization
import Testing
import TetherRealtime

@testable import TetherICE

/// Collects one transport's events and lets a test await the first that matches.
final class EventLog: Sendable {
    private let events = Mutex<[ICETransportEvent]>([])
    private let wakeup = Wakeup()

    func append(_ e: ICETransportEvent) {
        events.withLock { $0.append(e) }
        wakeup.signal()
    }

    var all: [ICETransportEvent] { events.withLock { $0 } }

    func count(of event: ICETransportEvent) -> Int { all.filter { $0 == event }.count }

    func count(where match: (ICETransportEvent) -> Bool) -> Int { all.filter(match).count }

    /// Waits up to `seconds` for an event `match` accepts. `match` may also read state that
    /// changes without an event (a transport's counters): it is asked again every 10 ms, not only
    /// when an event arrives (a drop counted without one once left each wait to its full time
    /// out: 80 s for one test on a loaded machine).
    func first<T>(within seconds: Double, _ match: (ICETransportEvent) -> T?) -> T? {
        let deadline = MonotonicClock.nanoseconds() + UInt64(seconds * 1e9)
        while true {
            let snapshot = events.withLock { $0 }
            if let hit = snapshot.lazy.compactMap(match).first { return hit }
            let now = MonotonicClock.nanoseconds()
            if now >= deadline { return nil }
            _ = wakeup.wait(untilMonotonicNanoseconds: min(deadline, now + 10_000_000))
        }
    }
}

/// Sends `count` RTP-looking datagrams of `bytes` from `a` and returns how many `b` received
/// within `seconds`.
func deliver(_ count: Int, from a: Peer, to b: Peer, bytes: Int = 60, within seconds: Double = 3) -> Int {
    for i in 0..<count {
        var datagram = [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: bytes)
        datagram[0] = 0x80
        datagram.withUnsafeBytes { _ = a.transport.send($0) }
    }
    var received = 0
    let deadline = MonotonicClock.nanoseconds() + UInt64(seconds * 1e9)
    while received < count {
        let ticket = b.wakeup.prepareToWait()
        while b.ring.pop({ _, _ in true }) != nil { received += 1 }
        if received < count, !b.wakeup.wait(ticket, untilMonotonicNanoseconds: deadline) { break }
    }
    return received
}

struct Peer {
    let transport: ICETransport
    let log: EventLog
    let ring: PacketRing
    let wakeup: EventCount

    init(controlling: Bool) throws {
        try self.init(configuration: ICETransportConfiguration(controlling: controlling, localAddresses: ["127.0.0.1"]))
    }

    init(configuration: ICETransportConfiguration) throws {
        let log = EventLog()
        ring = PacketRing(slotCount: 256)
        wakeup = EventCount()
        self.log = log
        transport = try ICETransport(configuration: configuration, receiveRing: ring, receiveWakeup: wakeup, eventHandler: { log.append($0) })
    }

    /// Gathers and returns the candidates (within `seconds`: a TURN server that fails takes
    /// libnice several seconds to give up on).
    func gather(within seconds: Double = 5) throws -> [String] {
        transport.gatherCandidates()
        let c = log.first(within: seconds) { if case .gatheringDone(let c) = $0 { c } else { nil } }
        return try #require(c)
    }
}

@Suite("ICETransport over loopback")
struct ICETransportTests {
    @Test func twoAgentsOnLoopbackReachReadyAndExchangeDatagrams() throws {
        let a = try Peer(controlling: true)
        let b = try Peer(controlling: false)
        defer {
            a.transport.close()
            b.transport.close()
        }
        let ca = try a.gather()
        let cb = try b.gather()
        #expect(!ca.isEmpty && ca.allSatisfy { $0.contains("127.0.0.1") && $0.contains("typ host") })
        let credA = a.transport.localCredentials()
        let credB = b.transport.localCredentials()
        #expect(credA.ufrag.count >= 4 && credA.password.count >= 22)
        try a.transport.setRemote(ufrag: credB.ufrag, password: credB.password, candidates: cb)
        try b.transport.setRemote(ufrag: credA.ufrag, password: credA.password, candidates: ca)
        let readyA = a.log.first(within: 5) { $0 == .componentStateChanged(.ready) ? true : nil }
        let readyB = b.log.first(within: 5) { $0 == .componentStateChanged(.ready) ? true : nil }
        #expect(readyA == true && readyB == true)

        // 50 datagrams each way, content checked.
        for i in 0..<50 {
            var bytes = [UInt8](repeating: UInt8(i), count: 100 + i)
            bytes[0] = 0x80
            bytes.withUnsafeBytes { _ = a.transport.send($0) }
        }
        var received = 0
        let deadline = MonotonicClock.nanoseconds() + 5_000_000_000
        while received < 50 {
            let ticket = b.wakeup.prepareToWait()
            while let ok = b.ring.pop({ buf, _ in buf.count == 100 + Int(buf[1]) && buf[buf.count - 1] == buf[1] }) {
                #expect(ok)
                received += 1
            }
            if received < 50, !b.wakeup.wait(ticket, untilMonotonicNanoseconds: deadline) { break }
        }
        #expect(received == 50)
        #expect(a.transport.sendFailureCount == 0)
        // A UDP host pair is selected: every datagram went straight from this thread to the
        // selected socket, none through the GLib thread's queue.
        #expect(a.transport.directSendCount == 50)
    }

    /// A user that drops a transport without `close()` while one of its closures waits on the
    /// GLib thread: the closure held the last reference, and its release ran the transport's
    /// teardown on the GLib thread (which joined itself and freed the loop it was running). The
    /// teardown now runs elsewhere, and completes.
    @Test func aTransportDroppedWhileItsClosureRunsIsTornDownOffTheGLibThread() throws {
        /// Which threads ran the closure and the teardown.
        final class Threads: Sendable {
            let glib = Mutex<pthread_t?>(nil)
            let teardown = Mutex<pthread_t?>(nil)
            let tornDown = Wakeup()
        }
        /// Held by the transport's event handler: released in its teardown.
        final class Sentinel: Sendable {
            let threads: Threads
            init(_ threads: Threads) { self.threads = threads }
            deinit {
                let me = pthread_self()
                threads.teardown.withLock { $0 = me }
                threads.tornDown.signal()
            }
        }
        let threads = Threads()
        let gate = Wakeup()
        let ran = Wakeup()
        do {
            let sentinel = Sentinel(threads)
            let transport = try ICETransport(
                configuration: ICETransportConfiguration(controlling: true, localAddresses: ["127.0.0.1"]),
                receiveRing: PacketRing(slotCount: 16), receiveWakeup: EventCount(), eventHandler: { _ in _ = sentinel })
            transport.onLoopThreadForTesting {
                let me = pthread_self()
                threads.glib.withLock { $0 = me }
                _ = gate.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 10_000_000_000)
                ran.signal()
            }
        }
        // Only the queued closure holds the transport now.
        gate.signal()
        #expect(ran.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 10_000_000_000))
        #expect(threads.tornDown.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 10_000_000_000), "never torn down")
        let glib = try #require(threads.glib.withLock { $0 })
        let teardown = try #require(threads.teardown.withLock { $0 })
        #expect(pthread_equal(glib, teardown) == 0, "the transport was torn down on its own GLib thread")
    }

    /// A peer flooding DTLS bytes (first byte 20…63, which go to the event handler, not the
    /// media ring): no more than `maximumPendingDTLSDatagrams` wait unacknowledged, the rest are
    /// dropped and counted; acknowledged ones make room again.
    @Test func unacknowledgedDTLSDatagramsAreBounded() throws {
        let (a, b) = try ICETransportRestartTests().connectedPair()
        defer {
            a.transport.close()
            b.transport.close()
        }
        func dtlsEvents() -> Int { b.log.count { if case .dtlsDatagram = $0 { true } else { false } } }
        let flood = [UInt8](repeating: 22, count: 100)
        /// Sends `count` in batches of ten, each once the last has arrived (not faster than the
        /// send queue and the socket take them).
        func send(_ count: Int) -> Bool {
            let before = dtlsEvents() + b.transport.dtlsDatagramsDropped
            for batch in 1...(count / 10) {
                for _ in 0..<10 { _ = flood.withUnsafeBytes { a.transport.send($0) } }
                let arrived = b.log.first(within: 5) { _ in
                    dtlsEvents() + b.transport.dtlsDatagramsDropped >= before + 10 * batch ? true : nil
                }
                if arrived != true { return false }
            }
            return true
        }
        let limit = ICETransport.maximumPendingDTLSDatagrams
        #expect(send(500))
        #expect(dtlsEvents() == limit)
        #expect(b.transport.dtlsDatagramsDropped == 500 - limit)
        // Handled: as many again get through.
        for _ in 0..<limit { b.transport.dtlsDatagramHandled() }
        #expect(send(2 * limit + 6))
        #expect(dtlsEvents() == 2 * limit)
    }

    @Test func malformedRemoteCandidateIsATypedError() throws {
        let a = try Peer(controlling: true)
        defer { a.transport.close() }
        _ = try a.gather()
        #expect(throws: ICETransportError.invalidRemoteCandidate("candidate:garbage")) {
            try a.transport.setRemote(ufrag: "abcd", password: "0123456789012345678901", candidates: ["candidate:garbage"])
        }
    }

    @Test func aPeersIPv6LinkLocalCandidatesAreSkipped() throws {
        let a = try Peer(controlling: true)
        defer { a.transport.close() }
        _ = try a.gather()
        let linkLocal = "candidate:2 1 UDP 2015363583 fe80::860:9aff:fecf:e72b 51574 typ host"
        let global = "candidate:1 1 UDP 2015363327 fd00:70::2 58477 typ host"
        let skipped = try a.transport.setRemote(ufrag: "abcd", password: "0123456789012345678901", candidates: [global, linkLocal])
        #expect(skipped == 1)
        // Only link-local: nothing usable, said so.
        #expect(throws: ICETransportError.invalidRemoteCandidate(linkLocal)) {
            try a.transport.setRemote(ufrag: "abcd", password: "0123456789012345678901", candidates: [linkLocal])
        }
    }

    @Test func nonLiteralLocalAddressIsRejected() {
        #expect(throws: ICETransportError.invalidLocalAddress("not-an-address")) {
            _ = try ICETransport(
                configuration: ICETransportConfiguration(controlling: true, localAddresses: ["not-an-address"]),
                receiveRing: PacketRing(slotCount: 4), receiveWakeup: EventCount(), eventHandler: { _ in })
        }
    }
}

@Suite("ICETransport restart and re-gathering")
struct ICETransportRestartTests {
    /// Connects two peers (A controlling) and returns them ready; `consentFreshness` turns the
    /// option on at both ends, `peerConsentFreshness` at B only.
    func connectedPair(consentFreshness: Bool = false, peerConsentFreshness: Bool? = nil) throws -> (Peer, Peer) {
        func peer(_ controlling: Bool, _ consent: Bool) throws -> Peer {
            try Peer(
                configuration: ICETransportConfiguration(controlling: controlling, localAddresses: ["127.0.0.1"], consentFreshness: consent))
        }
        let a = try peer(true, consentFreshness)
        let b = try peer(false, peerConsentFreshness ?? consentFreshness)
        let ca = try a.gather()
        let cb = try b.gather()
        let credA = a.transport.localCredentials()
        let credB = b.transport.localCredentials()
        try a.transport.setRemote(ufrag: credB.ufrag, password: credB.password, candidates: cb)
        try b.transport.setRemote(ufrag: credA.ufrag, password: credA.password, candidates: ca)
        #expect(a.log.first(within: 5) { $0 == .componentStateChanged(.ready) ? true : nil } == true)
        #expect(b.log.first(within: 5) { $0 == .componentStateChanged(.ready) ? true : nil } == true)
        return (a, b)
    }

    /// Selected-pair changes `peer` has reported so far.
    func selectedPairs(_ peer: Peer) -> Int {
        peer.log.count { (e: ICETransportEvent) in if case .selectedPairChanged = e { true } else { false } }
    }

    /// Waits until `peer` has reported more than `count` selected pairs.
    func awaitNewPair(_ peer: Peer, after count: Int) -> Bool {
        peer.log.first(within: 5) { _ in selectedPairs(peer) > count ? true : nil } == true
    }

    /// Replaces A's stream (`regather`) and waits for its new candidates.
    func regather(_ a: Peer) throws -> [String] {
        let gatheredBefore = a.log.count { (e: ICETransportEvent) in if case .gatheringDone = e { true } else { false } }
        a.transport.regather()
        let fresh = a.log.first(within: 5) { _ -> [String]? in
            let all = a.log.all.compactMap { e -> [String]? in if case .gatheringDone(let c) = e { c } else { nil } }
            return all.count > gatheredBefore ? all.last : nil
        }
        return try #require(fresh)
    }

    /// After A re-gathered: B restarts in place, and each side learns the other's new credentials
    /// and candidates.
    func exchange(afterRegatherOf a: Peer, candidates: [String], with b: Peer) throws {
        let credA = a.transport.localCredentials()
        let rb = try #require(b.transport.restart())
        try a.transport.setRemote(ufrag: rb.ufrag, password: rb.password, candidates: rb.candidates)
        try b.transport.setRemote(ufrag: credA.ufrag, password: credA.password, candidates: candidates)
    }

    func deliver(_ count: Int, from a: Peer, to b: Peer) -> Int { TetherICETests.deliver(count, from: a, to: b) }

    /// Restarts both peers in place and waits for A's new pair.
    func restartBoth(_ a: Peer, _ b: Peer) throws -> Bool {
        let ra = try #require(a.transport.restart())
        let rb = try #require(b.transport.restart())
        let pairsBefore = selectedPairs(a)
        try a.transport.setRemote(ufrag: rb.ufrag, password: rb.password, candidates: rb.candidates)
        try b.transport.setRemote(ufrag: ra.ufrag, password: ra.password, candidates: ra.candidates)
        return awaitNewPair(a, after: pairsBefore)
    }

    @Test func restartGivesNewCredentialsAndReachesReadyAgainWithMediaFlowing() throws {
        let (a, b) = try connectedPair()
        defer {
            a.transport.close()
            b.transport.close()
        }
        let oldA = a.transport.localCredentials()
        let ra = try #require(a.transport.restart())
        let rb = try #require(b.transport.restart())
        #expect(ra.ufrag != oldA.ufrag && ra.password != oldA.password)
        #expect(!ra.candidates.isEmpty)
        // Media still flows on the old pair while the restart runs.
        #expect(deliver(20, from: a, to: b) == 20)
        let readyBefore = a.log.count(of: .componentStateChanged(.ready))
        try a.transport.setRemote(ufrag: rb.ufrag, password: rb.password, candidates: rb.candidates)
        try b.transport.setRemote(ufrag: ra.ufrag, password: ra.password, candidates: ra.candidates)
        let readyAgain = a.log.first(within: 5) { _ in a.log.count(of: .componentStateChanged(.ready)) > readyBefore ? true : nil }
        #expect(readyAgain == true)
        #expect(deliver(20, from: b, to: a) == 20)
    }

    /// RFC 7675 with real libnice at both ends: B withdraws its consent (its agent answers A's
    /// next consent check, within 4–6 s, with 403); A reports it once, stops sending at once
    /// (the direct route is withdrawn: sends say `.noPath`, B receives nothing), and a restart on
    /// both sides brings a new pair with consent, and media, back.
    @Test(.timeLimit(.minutes(1)))
    func aPeerWithdrawingConsentIsNoLongerSentToUntilARestart() throws {
        let (a, b) = try connectedPair(consentFreshness: true)
        defer {
            a.transport.close()
            b.transport.close()
        }
        #expect(deliver(10, from: a, to: b) == 10)
        b.transport.revokeConsentForTesting()
        let lost = a.log.first(within: 10) { $0 == .consentLost ? true : nil }
        #expect(lost == true)
        #expect(a.transport.consentLossCount == 1)
        var sample = [UInt8](repeating: 0, count: 60)
        sample[0] = 0x80
        #expect(sample.withUnsafeBytes { a.transport.send($0) } == .noPath)
        #expect(deliver(10, from: a, to: b) == 0)
        // B still has A's consent: its media goes on reaching A.
        #expect(deliver(10, from: b, to: a) == 10)
        #expect(try restartBoth(a, b))
        #expect(deliver(20, from: a, to: b) == 20)
        #expect(a.log.count(of: .consentLost) == 1)
    }

    /// Without consent freshness (the default) nothing is checked, and a peer's withdrawal goes
    /// unnoticed: the behaviour the option exists to change.
    @Test(.timeLimit(.minutes(1)))
    func withoutConsentFreshnessAWithdrawalGoesUnnoticed() throws {
        // B withdraws consent as in the test above (it needs the option to do so).
        let (a, b) = try connectedPair(peerConsentFreshness: true)
        defer {
            a.transport.close()
            b.transport.close()
        }
        b.transport.revokeConsentForTesting()
        #expect(a.log.first(within: 8) { $0 == .consentLost ? true : nil } == nil)
        #expect(deliver(10, from: a, to: b) == 10)
    }

    @Test func regatherReplacesTheStreamAndConnectsAgain() throws {
        let (a, b) = try connectedPair()
        defer {
            a.transport.close()
            b.transport.close()
        }
        let candidates = try regather(a)
        #expect(!candidates.isEmpty)
        let readyBefore = a.log.count(of: .componentStateChanged(.ready))
        let bPairsBefore = selectedPairs(b)
        try exchange(afterRegatherOf: a, candidates: candidates, with: b)
        // The new stream reports its own READY (the old stream's signals are filtered out).
        let readyAgain = a.log.first(within: 5) { _ in a.log.count(of: .componentStateChanged(.ready)) > readyBefore ? true : nil }
        #expect(readyAgain == true)
        // B restarted in place, so until it selects a pair toward A's new stream it still sends
        // toward A's old one, which went with the old stream. A's READY can come first.
        #expect(awaitNewPair(b, after: bPairsBefore))
        #expect(deliver(20, from: a, to: b) == 20)
        #expect(deliver(20, from: b, to: a) == 20)
    }

    /// Make before break: while the new stream gathers and is negotiated, the old pair keeps
    /// carrying media both ways (so a path that comes back by itself needs nothing); once the
    /// new stream selects a pair, sends move to its socket and the old stream goes.
    @Test func aRegatherKeepsTheOldPairCarryingMediaUntilTheNewStreamWorks() throws {
        let (a, b) = try connectedPair()
        defer {
            a.transport.close()
            b.transport.close()
        }
        #expect(deliver(10, from: a, to: b) == 10)
        #expect(a.transport.directSendCount == 10)
        let oldLocal = try #require(lastPair(a)).local
        let candidates = try regather(a)
        #expect(!candidates.isEmpty)
        #expect(deliver(10, from: a, to: b) == 10)
        #expect(deliver(10, from: b, to: a) == 10)
        #expect(a.transport.directSendCount == 20)
        let pairsBefore = selectedPairs(a)
        let bPairsBefore = selectedPairs(b)
        try exchange(afterRegatherOf: a, candidates: candidates, with: b)
        #expect(awaitNewPair(a, after: pairsBefore))
        #expect(awaitNewPair(b, after: bPairsBefore))
        // The new pair is the new stream's: another local socket, which carries the media now.
        #expect(try #require(lastPair(a)).local != oldLocal)
        #expect(deliver(20, from: a, to: b) == 20)
        #expect(a.transport.directSendCount == 40)
        #expect(deliver(20, from: b, to: a) == 20)
    }

    /// A re-gather whose candidates are never offered (the renewal was overtaken) is undone:
    /// descriptions speak for the stream carrying media again, and media keeps flowing on it.
    @Test func anAbandonedRegatherLeavesTheMediaStreamSpeaking() throws {
        let (a, b) = try connectedPair()
        defer {
            a.transport.close()
            b.transport.close()
        }
        let before = a.transport.localCredentials()
        let gathered = a.log.count { (e: ICETransportEvent) in if case .gatheringDone = e { true } else { false } }
        let token = a.transport.regather()
        #expect(a.log.first(within: 5) { (_: ICETransportEvent) -> Bool? in
            a.log.count { (e: ICETransportEvent) in if case .gatheringDone = e { true } else { false } } > gathered ? true : nil
        } == true)
        #expect(a.transport.localCredentials() != before)
        a.transport.abandonRegather(token + 1)  // not the newest: ignored
        #expect(a.transport.localCredentials() != before)
        a.transport.abandonRegather(token)
        #expect(a.transport.localCredentials() == before)
        #expect(deliver(10, from: a, to: b) == 10)
        #expect(deliver(10, from: b, to: a) == 10)
        // A restart in place on the old stream still connects.
        #expect(try restartBoth(a, b))
        #expect(deliver(10, from: b, to: a) == 10)
    }

    /// The pair `peer` reported last.
    func lastPair(_ peer: Peer) -> ICESelectedPair? {
        peer.log.all.compactMap { e -> ICESelectedPair? in if case .selectedPairChanged(let p) = e { p } else { nil } }.last
    }
}
