import Foundation
import Synchronization
import Testing
import TetherFaults
import TetherRealtime
import TetherTestbed
import TetherTestSupport

@testable import Tether

/// Two sessions joined through the UDP impairment relay, with every state change timed.
final class RelayedCall: Sendable {
    let a: CallSession
    let b: CallSession
    let relay: UDPImpairmentRelay
    let signaling: InProcessSignaling
    private final class Log: Sendable {
        let entries = Mutex<[(side: String, state: String, atNanoseconds: UInt64)]>([])
        let reasons = Mutex<[String: CallTerminationReason]>([:])
    }

    func endReason(_ side: String) -> CallTerminationReason? { log.reasons.withLock { $0[side] } }

    private let log = Log()

    /// - Parameters:
    ///   - configure: applied to both sides' configurations.
    ///   - configureA: applied to A's alone, after `configure`; `configureB` to B's.
    init(
        policy: ReconnectionPolicy = ReconnectionPolicy(), configure: (inout CallConfiguration) -> Void = { _ in },
        configureA: (inout CallConfiguration) -> Void = { _ in }, configureB: (inout CallConfiguration) -> Void = { _ in }
    ) throws {
        relay = try UDPImpairmentRelay()
        var ca = CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: 440), localAddresses: ["127.0.0.1"], rtcpIntervalSeconds: 1,
            statisticsIntervalSeconds: 0, reconnection: policy)
        var cb = CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: 660), localAddresses: ["127.0.0.1"], rtcpIntervalSeconds: 1,
            statisticsIntervalSeconds: 0, reconnection: policy)
        configure(&ca)
        configure(&cb)
        configureA(&ca)
        configureB(&cb)
        a = try CallSession(configuration: ca)
        b = try CallSession(configuration: cb)
        let log = self.log
        signaling = InProcessSignaling(a: a, b: b, relay: relay) { side, event in
            if case .stateChanged(_, let to, _) = event {
                log.entries.withLock { $0.append((side.rawValue, to.name, MonotonicClock.nanoseconds())) }
                if case .ended(let reason) = to { log.reasons.withLock { $0[side.rawValue] = reason } }
            }
        }
    }

    func start() async throws {
        try await a.start()
        try await b.start()
        try await signaling.connect()
    }

    /// The first instant `side` entered `state` at or after `since`, waiting up to `timeoutSeconds`.
    func when(_ side: String, enters state: String, since: UInt64 = 0, timeoutSeconds: Double) async -> UInt64? {
        let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutSeconds * 1e9)
        while MonotonicClock.nanoseconds() < deadline {
            if let hit = log.entries.withLock({ $0.first { $0.side == side && $0.state == state && $0.atNanoseconds >= since }?.atNanoseconds }) {
                return hit
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }

    /// Starts the call, waits until A is established, lets media flow for a second, then cuts
    /// the path both ways. Returns the instant of the cut.
    func establishThenCut() async throws -> UInt64 {
        try await start()
        #expect(await when("A", enters: "established", timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .seconds(1))
        let cut = MonotonicClock.nanoseconds()
        relay.blackHole(true)
        return cut
    }

    func states(_ side: String) -> [String] { log.entries.withLock { $0.filter { $0.side == side }.map(\.state) } }

    func end() async {
        await a.hangUp()
        await b.hangUp()
        relay.stop()
    }
}

func seconds(_ from: UInt64, _ to: UInt64) -> Double { (Double(to) - Double(from)) / 1e9 }

/// Real outages through the relay over real libnice: disruption, renewal by ICE restart through
/// signaling, restoration, and the give-up.
@Suite("Outages over libnice through the impairment relay", .keepsLogPerTest, .serialized)
struct OutageTests {
    @Test func callThroughTheRelayEstablishes() async throws {
        let call = try RelayedCall()
        try await call.start()
        #expect(await call.when("A", enters: "established", timeoutSeconds: 5) != nil)
        #expect(await call.when("B", enters: "established", timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .milliseconds(500))
        #expect(call.relay.statistics().aToB.packetsForwarded > 20)
        #expect(call.relay.statistics().bToA.packetsForwarded > 20)
        await call.end()
    }

    /// Random loss on the path: the peer's receiver reports carry it back, the sender raises its
    /// encoder's expected loss (keeping in-band FEC on), and the receiver rebuilds lost frames
    /// from the next packet's FEC. (A speaks a voiced signal: for a steady tone Opus sends no LBRR.)
    @Test func reportedLossRaisesTheSendersProtectionAndFECRebuildsFrames() async throws {
        let call = try RelayedCall(
            configure: { $0.redundancy = .off },
            configureA: { $0.audioSource = WAVFileSource(path: voicedSignalWAVPath, loop: true) })
        try await call.start()
        #expect(await call.when("A", enters: "established", timeoutSeconds: 5) != nil)
        #expect(call.a.statistics().encoderExpectedLossPercent == 0)  // the configured start: no loss seen yet
        #expect(!call.a.statistics().encoderInBandFEC)
        call.relay.updateImpairments { $0.lossPercent = 25 }
        var adapted = false
        for _ in 0..<400 {  // RTCP every ~1 s (randomised): allow 10 s
            let s = call.a.statistics()
            if s.encoderAdaptations >= 1 && s.encoderExpectedLossPercent >= 15 && s.encoderInBandFEC {
                adapted = true
                break
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(adapted, "A: expected loss \(call.a.statistics().encoderExpectedLossPercent) %, \(call.a.statistics().encoderAdaptations) adaptations")
        // The bitrate rises with the loss (5 × the expected loss: +75 % at 15 %, twice the base
        // from 20 %), up to B's maxaveragebitrate, which leaves that room above its own 32 kb/s —
        // as the rate control's estimate allows: it starts at 64 kb/s and grows while the path
        // shows no queue (random loss is not congestion).
        var bitrate = 0
        for _ in 0..<400 {  // up to 10 s on a loaded machine
            bitrate = call.a.statistics().targetBitrateBitsPerSecond
            if bitrate >= 56_000 { break }
            try await Task.sleep(for: .milliseconds(25))
        }
        #expect(bitrate >= 56_000 && bitrate <= 64_000, "estimate \(call.a.statistics().estimatedBandwidthBitsPerSecond ?? 0) b/s")
        // Wait (up to 6 s, for a loaded machine) for a loss whose successor carried its LBRR.
        for _ in 0..<240 where call.b.statistics().framesRecoveredByFEC == 0 {
            try await Task.sleep(for: .milliseconds(25))
        }
        let b = call.b.statistics()
        #expect(b.framesRecoveredByFEC > 0, "B lost \(b.packetsLost), rebuilt \(b.framesRecoveredByFEC) from FEC")
        // What the listener hears is the loss FEC could not rebuild.
        let lostPercent = 100 * Double(b.packetsLost) / Double(b.packetsReceived + b.packetsLost)
        #expect(b.heardLossPercent < lostPercent)
        call.relay.updateImpairments { $0.lossPercent = 0 }
        await call.end()
    }

    /// A's connectivity checks all go unanswered (the relay drops every Binding success
    /// response from B to A) while B's succeed: B is READY and sends, A is established by B's
    /// media with no pair to send on, and B hears nothing. A renews the path at once
    /// (`noSendPath`, 1 s after media: `ReconnectionPolicy.sendPathGraceSeconds`) — with the responses let through again from then — and
    /// B gets A's media. Without the renewal B stays `connecting` until its connect timeout.
    @Test func aSideWhoseChecksGoUnansweredRenewsAndThePeerGetsMedia() async throws {
        let call = try RelayedCall()
        call.relay.updateImpairments { $0.dropsBindingResponses = .bToA }
        try await call.start()
        #expect(await call.when("A", enters: "established", timeoutSeconds: 10) != nil)
        let renewing = try #require(await call.when("A", enters: "renewingMedia", timeoutSeconds: 15))
        call.relay.updateImpairments { $0.dropsBindingResponses = nil }
        #expect(call.relay.statistics().bToA.droppedBindingResponses > 0)
        // The restart's checks are answered (a first one that raced the line above is sent again
        // 0.5 s later): A sends, B hears it.
        #expect(await call.when("B", enters: "established", timeoutSeconds: 15) != nil)
        #expect(await call.when("A", enters: "established", since: renewing, timeoutSeconds: 15) != nil)
        let disruption = try #require(call.a.statistics().recovery.disruptions.first)
        #expect(disruption.cause == "no path to send on" && disruption.attempts >= 1, "\(disruption)")
        await call.a.hangUp()
        await call.b.hangUp()
    }

    /// The mirror case: B's checks go unanswered (the relay drops A's Binding success responses)
    /// while A's succeed. A nominates its pair and sends; B, established by A's media, has no
    /// pair and A hears nothing — and A, the controlling side, has nothing to renew (it is still
    /// `connecting`). So B, which otherwise leaves restart offers to A, offers one itself with
    /// fresh candidates one grace after the media; A answers it and hears B. (Before, B's
    /// renewal waited for an offer from A that never came, and A heard B only after B's first
    /// attempt timed out, 8 s into the call.)
    @Test func aControlledSideWhoseChecksGoUnansweredOffersTheRenewalItself() async throws {
        let call = try RelayedCall()
        call.relay.updateImpairments { $0.dropsBindingResponses = .aToB }
        try await call.start()
        let established = try #require(await call.when("B", enters: "established", timeoutSeconds: 10))
        let renewing = try #require(await call.when("B", enters: "renewingMedia", timeoutSeconds: 15))
        #expect(call.a.state == .connecting)  // A never heard B: nothing for it to renew
        // The fault lasts until libnice has given up on B's first pair (three transmissions over
        // about 2 s from the start): only a renewal can give B a pair after that.
        try await Task.sleep(for: .seconds(1.5))
        call.relay.updateImpairments { $0.dropsBindingResponses = nil }
        #expect(call.relay.statistics().aToB.droppedBindingResponses > 0)
        let aHears = try #require(await call.when("A", enters: "established", timeoutSeconds: 15))
        #expect(await call.when("B", enters: "established", since: renewing, timeoutSeconds: 15) != nil)
        let disruption = try #require(call.b.statistics().recovery.disruptions.first)
        #expect(disruption.cause == "no path to send on" && disruption.attempts == 1, "\(disruption)")
        // B renews one grace (1 s) after it was established; its offer goes out then, not after
        // a first attempt's time-out (6 s) and retry pause (1 s). 3 s of margin for a loaded machine.
        #expect(renewing - established < 4_000_000_000, "B renewed \(Double(renewing - established) / 1e9) s after it was established")
        #expect(aHears - established < 6_000_000_000, "A heard B \(Double(aHears - established) / 1e9) s after B was established")
        #expect(call.b.statistics().recovery.restartsOffered >= 1)
        await call.a.hangUp()
        await call.b.hangUp()
    }

    /// Under heavy loss each packet also carries the two frames before it (RFC 2198 RED,
    /// negotiated between two Tethers): a frame is lost only when its packet and the next two
    /// are. No packet is sent twice: the receiver sees no duplicates, SRTP no replays. A talks
    /// in bursts (0.8 s of tone a second), as speech pauses: B's jitter buffer lengthens its
    /// delay at quiet moments only, and needs them to keep the frames the copies reach back to.
    @Test func heavyLossSendsTheTwoFramesBeforeInEachPacket() async throws {
        let call = try RelayedCall(configureA: {
            $0.audioSource = TestSignalSource(frequencyHertz: 440, bursts: .init(onMilliseconds: 800, everyMilliseconds: 1000))
        })
        try await call.start()
        #expect(await call.when("A", enters: "established", timeoutSeconds: 5) != nil)
        // RED is on from the first packet; the clean path switches it off at A's third report
        // from B (about 2.5 s; 20 s of margin). Then the loss has to switch it on again.
        #expect(await waitUntil(timeoutSeconds: 20) { !call.a.statistics().sendsRedundantAudio })
        call.relay.updateImpairments { $0.lossPercent = 25 }
        // One frame back at the first lossy report; two once the reports' average reaches 10 %,
        // after about three reports at 25 %; 30 s of margin.
        #expect(await waitUntil(timeoutSeconds: 30) { call.a.statistics().redundantFramesPerPacket == 2 })
        // Counted over a window closed by what happened, not by the clock: until the relay has
        // dropped 100 RTP datagrams (about 8 s at 50 packets a second, 25 % dropped).
        let before = (b: call.b.statistics(), relay: call.relay.statistics().aToB, a: call.a.statistics())
        let windowClosed = await waitUntil(timeoutSeconds: 40) {
            call.relay.statistics().aToB.rtpDroppedByLoss - before.relay.rtpDroppedByLoss >= 100
        }
        try #require(windowClosed)
        let b = call.b.statistics()
        let relay = call.relay.statistics().aToB
        let a = call.a.statistics()
        let sent = a.packetsSent - before.a.packetsSent
        let carried = a.redundantFramesSent - before.a.redundantFramesSent
        #expect(a.sendsRedundantAudio && a.redundantFramesPerPacket == 2)
        // Two copies in each packet but the first two of a talkspurt (after a DTX pause).
        #expect(carried * 10 >= sent * 17, "\(carried) frames carried again in \(sent) packets")
        #expect(a.targetBitrateBitsPerSecond == 40_000)  // the base + 25 %
        let dropped = Int(relay.rtpDroppedByLoss - before.relay.rtpDroppedByLoss)
        let lost = b.packetsLost - before.b.packetsLost
        let recovered = b.framesRecoveredByRedundancy - before.b.framesRecoveredByRedundancy
        // A dropped packet's frame comes back when either of the next two packets arrives (94 %
        // of the time at 25 %).
        #expect(recovered * 4 >= lost * 3, "B recovered \(recovered) frames of the \(lost) packets lost (\(dropped) dropped)")
        let rebuilt = b.framesRecoveredByFEC - before.b.framesRecoveredByFEC
        print("heavy loss (25 %): \(sent) packets, \(carried) frames carried again; relay dropped \(dropped); B lost \(lost), recovered \(recovered) from RED and \(rebuilt) from FEC")
        // What the listener hears lost: under half of what the path lost (about a quarter).
        #expect(2 * (lost - recovered - rebuilt) < lost, "lost \(lost), recovered from RED \(recovered), from FEC \(rebuilt)")
        #expect(b.duplicatePackets == before.b.duplicatePackets)  // nothing sent twice
        #expect(b.srtpReplayFailures == 0)
        call.relay.updateImpairments { $0.lossPercent = 0 }
        await call.end()
    }

    /// Bursty loss (Gilbert–Elliott: runs of three on average, about 9 % lost — under RED's 10 %
    /// switch-on for independent loss): B tells A which of A's packets it lost (RTCP XR Loss RLE,
    /// which A's offer asked for), A sees the runs and switches RED on from 5 %, three frames
    /// back (the mean run is over two). What is checked
    /// here is the path of the runs (B's blocks reach A's adaptation, the mean run is the
    /// model's); the rule itself is `LossAdaptationTests`' (manual clock, seeded reports).
    @Test func burstyLossReachesTheSenderAsLossRunsAndSwitchesRedundancyOn() async throws {
        let call = try RelayedCall()
        try await call.start()
        #expect(await call.when("A", enters: "established", timeoutSeconds: 5) != nil)
        #expect(call.a.statistics().remoteMeanLossRunPackets == nil)  // nothing lost yet
        // RED from the first packet, off once the clean path has shown itself (third report).
        #expect(await waitUntil(timeoutSeconds: 20) { !call.a.statistics().sendsRedundantAudio })
        call.relay.updateImpairments { $0.burstLoss = BurstLoss(goodToBadProbability: 0.033, badToGoodProbability: 0.33) }
        // About 9 % in runs of three: the sustained loss passes 5 % within a few reports (each a
        // second); 45 s of margin (one frame back comes at the first lossy report).
        #expect(await waitUntil(timeoutSeconds: 45) { call.a.statistics().redundantFramesPerPacket >= 2 })
        // Runs long enough to be read (at least 60 runs, about 20 s).
        #expect(await waitUntil(timeoutSeconds: 60) { call.relay.statistics().aToB.rtpDroppedByLoss >= 180 })
        let a = call.a.statistics()
        let run = try #require(a.remoteMeanLossRunPackets)
        // Mean run of the model: 1 / 0.33 ≈ 3 packets (RED packets are packets: the runs are the path's).
        #expect(run > 2 && run < 4.5, "mean run \(run)")
        print("bursty loss: A told a mean loss run of \(run) packets, RED \(a.redundantFramesPerPacket) frames back")
        // Runs of two or more on average: four frames back, in the packets themselves (over the
        // next 150 packets, four copies in each but after a gap of A's own).
        #expect(a.redundantFramesPerPacket == 4)
        let start = call.a.statistics()
        #expect(await waitUntil(timeoutSeconds: 30) { call.a.statistics().packetsSent - start.packetsSent >= 150 })
        let end = call.a.statistics()
        let carried = end.redundantFramesSent - start.redundantFramesSent
        let sent = end.packetsSent - start.packetsSent
        #expect(carried * 10 >= sent * 36, "\(carried) frames carried again in \(sent) packets")
        // B measured the same stream: its own count of A's packets lost against what A was told.
        let b = call.b.statistics()
        #expect(b.packetsLost > 0 && a.remotePacketsLost > 0)
        call.relay.updateImpairments { $0.burstLoss = nil }
        await call.end()
    }

    /// A peer without RED (as baresip and most SIP phones): under the same heavy loss nothing is
    /// sent twice — its SRTP sees no replays, its receiver no duplicates (a plain second copy
    /// made baresip log a decrypt failure per packet).
    @Test func aPeerWithoutRedGetsNothingTwice() async throws {
        let call = try RelayedCall(configureB: { $0.redundantAudio = false })
        try await call.start()
        #expect(await call.when("A", enters: "established", timeoutSeconds: 5) != nil)
        call.relay.updateImpairments { $0.lossPercent = 25 }
        // Long enough for the sustained loss to pass RED's 10 % several times over (about 20
        // reports; three would do).
        let before = call.relay.statistics().aToB
        #expect(await waitUntil(timeoutSeconds: 60) { call.relay.statistics().aToB.rtpDroppedByLoss - before.rtpDroppedByLoss >= 250 })
        let a = call.a.statistics()
        let b = call.b.statistics()
        #expect(a.encoderInBandFEC && a.encoderExpectedLossPercent >= 15)  // the loss was seen
        #expect(!a.sendsRedundantAudio && a.redundantFramesSent == 0)
        #expect(b.duplicatePackets == 0 && b.srtpReplayFailures == 0)
        call.relay.updateImpairments { $0.lossPercent = 0 }
        await call.end()
    }

    @Test func statisticsAgreeWithWhatTheRelayDropped() async throws {
        // Redundancy under heavy loss would fill holes beside FEC; off here.
        // A speaks a voiced signal, so its packets carry LBRR once FEC is on.
        let call = try RelayedCall(
            configure: { $0.redundancy = .off },
            configureA: { $0.audioSource = WAVFileSource(path: voicedSignalWAVPath, loop: true) })
        try await call.start()
        #expect(await call.when("A", enters: "established", timeoutSeconds: 5) != nil)
        call.relay.updateImpairments { $0.lossPercent = 10 }
        // Loss until each direction has lost at least 20 RTP packets (about 4 s).
        try #require(
            await waitUntil(timeoutSeconds: 30) {
                let r = call.relay.statistics()
                return r.aToB.rtpDroppedByLoss >= 20 && r.bToA.rtpDroppedByLoss >= 20
            })
        call.relay.updateImpairments { $0.lossPercent = 0 }
        // Later packets close every gap; reports (every ~1 s, randomised ±50 %) carry the final
        // counts: wait until both sides' reports agree with the relay (or 10 s), then check.
        let relay = call.relay.statistics()
        _ = await waitUntil(timeoutSeconds: 10) {
            let (a, b) = (call.a.statistics(), call.b.statistics())
            return b.packetsLost == Int(relay.aToB.rtpDroppedByLoss) && a.packetsLost == Int(relay.bToA.rtpDroppedByLoss)
                && a.remotePacketsLost == b.packetsLost && b.remotePacketsLost == a.packetsLost
                && b.framesRecoveredByFEC + b.framesConcealed >= b.packetsLost  // lost frames played out
        }
        // Read back to back: media keeps flowing while the snapshots are taken.
        let b = call.b.statistics()
        let a = call.a.statistics()
        // Each side's count of lost packets (RFC 3550 A.3) is exactly what the relay dropped.
        #expect(b.packetsLost == Int(relay.aToB.rtpDroppedByLoss))
        #expect(a.packetsLost == Int(relay.bToA.rtpDroppedByLoss))
        // The peer's RTCP reports carry the same counts back.
        #expect(a.remotePacketsLost == b.packetsLost)
        #expect(b.remotePacketsLost == a.packetsLost)
        // Nothing is counted twice: sent = received + lost (the counters are published every
        // 100 ms, so the two sides' snapshots may be up to about five packets apart, more when
        // the machine is loaded; counting twice would be off by hundreds).
        #expect(abs(a.packetsSent - (b.packetsReceived + b.packetsLost)) <= 25)
        // Every lost frame was rebuilt from FEC or concealed; what is heard lost is what FEC missed.
        #expect(b.framesRecoveredByFEC > 0 && b.framesRecoveredByFEC <= b.packetsLost)
        #expect(b.framesRecoveredByFEC + b.framesConcealed >= b.packetsLost)
        let expected = Double(b.packetsReceived + b.packetsLost)
        #expect(abs(b.heardLossPercent - 100 * Double(b.packetsLost - b.framesRecoveredByFEC) / expected) < 1e-9)
        #expect(b.duplicatePackets == 0)
        await call.end()
    }

    /// A sender whose encoder has in-band FEC off (as baresip's default Opus): the packet after a
    /// loss holds no LBRR, so nothing is counted as rebuilt from FEC; every lost frame is
    /// concealed, and the loss the listener hears is the loss on the path.
    @Test func withoutFECFromThePeerNoFrameIsCountedAsRebuilt() async throws {
        let call = try RelayedCall(configure: { $0.redundancy = .off }, configureA: { $0.opus.inBandFEC = false })
        try await call.start()
        #expect(await call.when("B", enters: "established", timeoutSeconds: 5) != nil)
        call.relay.updateImpairments { $0.lossPercent = 10 }
        try #require(await waitUntil(timeoutSeconds: 30) { call.relay.statistics().aToB.rtpDroppedByLoss >= 20 })
        call.relay.updateImpairments { $0.lossPercent = 0 }
        // Later packets close every gap: B's count reaches what the relay dropped.
        // Then the jitter buffer plays those frames out (a loss is counted when the gap closes,
        // and concealed when its frame is due, up to the buffer's delay later).
        let dropped = Int(call.relay.statistics().aToB.rtpDroppedByLoss)
        #expect(await waitUntil(timeoutSeconds: 10) { call.b.statistics().packetsLost == dropped })
        _ = await waitUntil(timeoutSeconds: 5) { call.b.statistics().framesConcealed >= dropped }
        let b = call.b.statistics()
        #expect(!call.a.statistics().encoderInBandFEC)
        #expect(b.framesRecoveredByFEC == 0, "B lost \(b.packetsLost), counted \(b.framesRecoveredByFEC) rebuilt from FEC")
        #expect(b.framesConcealed >= b.packetsLost)
        let expected = Double(b.packetsReceived + b.packetsLost)
        #expect(abs(b.heardLossPercent - 100 * Double(b.packetsLost) / expected) < 1e-9)
        await call.end()
    }

    /// With no working path from the start (the relay drops everything, so ICE never selects a
    /// pair), nothing is sent and nothing is counted: no packets or bytes "sent", no failures.
    @Test func withoutACandidatePairNothingIsCountedAsSentOrFailed() async throws {
        let call = try RelayedCall { $0.connectTimeoutSeconds = 30 }
        call.relay.blackHole(true)
        try await call.start()
        #expect(await call.when("A", enters: "connecting", timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .seconds(2))
        for s in [call.a.statistics(), call.b.statistics()] {
            #expect(s.packetsSent == 0 && s.bytesSent == 0, "\(s.packetsSent) packets, \(s.bytesSent) bytes counted as sent")
            #expect(s.sendFailures == 0, "\(s.sendFailures) send failures")
            #expect(s.rtcpPacketsSent == 0)
        }
        await call.end()
    }

    @Test func shortOutageIsDetectedAndRecoversWithoutRestart() async throws {
        // A renewal delay longer than the outage: what is checked is the path coming back by
        // itself, with no restart (with the default 0.25 s one would begin as the path returns).
        let call = try RelayedCall(policy: ReconnectionPolicy(renewalDelaySeconds: 2))
        let cut = try await call.establishThenCut()
        let disruptedA = try #require(await call.when("A", enters: "mediaDisrupted", since: cut, timeoutSeconds: 5))
        let disruptedB = try #require(await call.when("B", enters: "mediaDisrupted", since: cut, timeoutSeconds: 5))
        // Detection 1.0 s after the last datagram that reached each side (the relay stamps what it
        // forwards on the same monotonic clock): never earlier, which catches a detector that fires
        // early; the upper margin is for a loaded 2-core machine (20 ms polling, the event's way to
        // the test). The exact instants are the state machine's tests, on a manual clock.
        let relay = call.relay.statistics()
        let lastToA = relay.bToA.lastForwardedNanoseconds
        let lastToB = relay.aToB.lastForwardedNanoseconds
        #expect(lastToA > 0 && lastToB > 0)
        #expect(seconds(lastToA, disruptedA) >= 1.0 && seconds(lastToA, disruptedA) < 1.6, "A: \(seconds(lastToA, disruptedA)) s after its last datagram")
        #expect(seconds(lastToB, disruptedB) >= 1.0 && seconds(lastToB, disruptedB) < 1.6, "B: \(seconds(lastToB, disruptedB)) s after its last datagram")
        // While nothing arrives there is no audio to rate: no jitter-buffer delay, no MOS (the
        // state says the call is disrupted), and no figure beyond what the buffer can hold.
        let silent = call.b.statistics()
        #expect(silent.jitterBufferDelayMilliseconds == nil, "B's jitter buffer during the outage: \(String(describing: silent.jitterBufferDelayMilliseconds)) ms")
        #expect(silent.meanOpinionScore == nil)
        try await Task.sleep(until: .now + .milliseconds(1500 - Int(seconds(cut, MonotonicClock.nanoseconds()) * 1000)))
        let back = MonotonicClock.nanoseconds()
        call.relay.blackHole(false)
        let restoredA = try #require(await call.when("A", enters: "established", since: back, timeoutSeconds: 3))
        // Media again: a delay figure within the buffer's bounds, and a score (after the next
        // publication of the counters, every 100 ms).
        #expect(await waitUntil(timeoutSeconds: 3) { call.b.statistics().meanOpinionScore != nil })
        let resumed = call.b.statistics()
        #expect(resumed.jitterBufferDelayMilliseconds.map { $0 <= 220 } == true, "B's jitter buffer after the outage: \(String(describing: resumed.jitterBufferDelayMilliseconds)) ms")
        #expect(resumed.meanOpinionScore != nil)
        #expect(seconds(back, restoredA) < 1.0)  // before renewal would begin (3 s after the cut)
        #expect(!call.states("A").contains("renewingMedia"))
        let recovery = call.a.statistics().recovery
        #expect(recovery.disruptions.count == 1)
        #expect(recovery.disruptions.first?.outcome == "media resumed")
        #expect(recovery.restartCount == 0)
        await call.end()
    }

    @Test(arguments: [3.0, 10.0])
    func outageIsRenewedByICERestartAndRestored(outageSeconds: Double) async throws {
        let call = try RelayedCall()
        let cut = try await call.establishThenCut()
        #expect(await call.when("A", enters: "mediaDisrupted", since: cut, timeoutSeconds: 3) != nil)
        #expect(await call.when("A", enters: "renewingMedia", since: cut, timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .seconds(outageSeconds - seconds(cut, MonotonicClock.nanoseconds())))
        let back = MonotonicClock.nanoseconds()
        call.relay.blackHole(false)
        let restoredA = try #require(await call.when("A", enters: "established", since: back, timeoutSeconds: 15))
        let restoredB = try #require(await call.when("B", enters: "established", since: back, timeoutSeconds: 15))
        #expect(seconds(back, max(restoredA, restoredB)) < 10)
        let sa = call.a.statistics()
        #expect(sa.recovery.restartsOffered >= 1)
        #expect(call.b.statistics().recovery.restartsAnswered >= 1)
        #expect(sa.recovery.disruptions.last?.outcome?.hasPrefix("renewed") == true)
        // Media really flows again after the restart, with the same SRTP keys.
        let before = sa.packetsReceived
        #expect(await waitUntil(timeoutSeconds: 5) { call.a.statistics().packetsReceived - before > 25 })
        #expect(call.a.statistics().srtpAuthenticationFailures == 0)
        await call.end()
        // The report tells the same story: set up, one disruption renewed by a restart, ended.
        let report = call.a.report()
        #expect(report.state == "ended" && report.end?.cause == "local hang-up" && report.endedAt != nil)
        #expect((report.setUpSeconds ?? 0) > 0 && (report.connectedSeconds ?? 0) > outageSeconds)
        #expect(report.disruptions.last?.cause == "media silence" && report.disruptions.last?.outcome?.hasPrefix("renewed") == true)
        #expect(report.totalDisruptedSeconds > outageSeconds - 2 && report.totalDisruptedSeconds < outageSeconds + 10, "\(report.totalDisruptedSeconds) s")
        #expect(report.iceRestarts.offered >= 1 && !report.paths.isEmpty)
        #expect(report.quality.packetsLost > 0 && report.quality.concealedPercent > 0 && report.quality.meanOpinionScoreMean != nil)
    }
}

/// The 50-second give-up, for real (a slow test: about 52 s).
@Suite("Give-up over libnice through the impairment relay", .keepsLogPerTest)
struct GiveUpTests {
    @Test func outageLongerThanFiftySecondsEndsTheCallAtFiftySecondsWithARetryableError() async throws {
        let call = try RelayedCall()
        let cut = try await call.establishThenCut()
        let endedA = try #require(await call.when("A", enters: "ended", since: cut, timeoutSeconds: 60))
        let endedB = try #require(await call.when("B", enters: "ended", since: cut, timeoutSeconds: 5))
        // 50 s after the last packet before the cut (≤ 20 ms before it), within ±1 s.
        #expect(abs(seconds(cut, endedA) - 50) < 1, "A gave up after \(seconds(cut, endedA)) s")
        #expect(abs(seconds(cut, endedB) - 50) < 1, "B gave up after \(seconds(cut, endedB)) s")
        let sa = call.a.statistics()
        #expect(sa.recovery.disruptions.last?.outcome == "gave up")
        #expect(sa.recovery.restartsOffered >= 4)
        #expect(call.states("A").suffix(3) == ["mediaDisrupted", "renewingMedia", "ended"])
        for side in ["A", "B"] {
            let reason = try #require(call.endReason(side))
            #expect(reason.cause == .mediaTimeout)
            #expect(reason.error?.code == .mediaTimeout && reason.error?.code.rawValue == 1004)
            #expect(reason.error?.isTerminal == true && reason.error?.canRetry == true)
        }
        let end = try #require(call.a.report().end)
        #expect(end.cause == "media timeout" && end.causeCode == 4 && end.errorCode == 1004 && end.retryable == true)
        #expect(call.a.report().disruptions.last?.outcome == "gave up")
        call.relay.stop()
    }
}
