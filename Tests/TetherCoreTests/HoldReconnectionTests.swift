import Testing
import TetherCore

/// Hold (RFC 3264 §8.4) in the reconnection core: while a side holds, no RTP flows one way or
/// either; RTCP alone must keep the call established, and a peer that vanishes must still be
/// given up on. Driven by hand with explicit instants (milliseconds).
@Suite("Reconnection core on hold")
struct HoldReconnectionTests {
    /// A machine on an established call: media started (ICE connected) at 0, a frame decoded at 40 ms.
    private func establishedMachine(glareRole: ReconnectStateMachine.GlareRole = .keepsOwnOffer) -> ReconnectStateMachine {
        var m = ReconnectStateMachine(glareRole: glareRole)
        _ = m.handle(.mediaStarted, now: reconnectInstant(0))
        _ = m.handle(.iceConnected, now: reconnectInstant(0))
        _ = m.handle(.inboundPacket, now: reconnectInstant(20))
        _ = m.handle(.mediaDecoded, now: reconnectInstant(40))
        #expect(m.state == .established)
        return m
    }

    /// Feeds `input` at `ms` after firing every deadline due before it; returns all actions.
    private func run(_ m: inout ReconnectStateMachine, _ script: [(UInt64, ReconnectStateMachine.Input)], until end: UInt64)
        -> [LoggedAction]
    {
        var log: [LoggedAction] = []
        func tickUntil(_ t: UInt64) {
            while let d = m.nextDeadline(), d <= reconnectInstant(t) {
                log += m.handle(.tick, now: d).map { LoggedAction(at: d, action: $0) }
            }
        }
        for (at, input) in script {
            tickUntil(at)
            log += m.handle(input, now: reconnectInstant(at)).map { logged(at, $0) }
        }
        tickUntil(end)
        return log
    }

    /// RTCP every 4 s from the peer (about our stream, stuck at the sequence we stopped at).
    private func rtcp(from start: UInt64, through end: UInt64, every step: UInt64 = 4_000, sequence: UInt32 = 500)
        -> [(UInt64, ReconnectStateMachine.Input)]
    {
        stride(from: start, through: end, by: Int(step)).flatMap { t in
            [(UInt64(t), ReconnectStateMachine.Input.inboundPacket),
             (UInt64(t), .peerReport(extendedHighestSequence: sequence, missesRecentPackets: false))]
        }
    }

    /// We hold the peer (sendonly: we send no RTP, it sends none to us): RTCP both ways keeps
    /// the call established for a minute; the peer's reports, stuck at the last sequence it got,
    /// are not one-way audio, because we send nothing.
    @Test func whileWeHoldRTCPAloneKeepsTheCallEstablished() {
        var m = establishedMachine()
        let log = run(
            &m, [(1_000, .weSendMedia(false)), (1_000, .peerSendsMedia(false))] + rtcp(from: 3_000, through: 60_000), until: 61_000)
        #expect(log.isEmpty)
        #expect(m.state == .established)
        #expect(m.timeline.records.isEmpty)
    }

    /// Both hold (inactive): the same, and resuming expects media again with a full normal
    /// threshold from the change.
    @Test func resumingExpectsMediaWithAFullThresholdFromTheResume() {
        var m = establishedMachine()
        _ = run(&m, [(1_000, .weSendMedia(false)), (1_000, .peerSendsMedia(false))] + rtcp(from: 3_000, through: 19_000), until: 20_000)
        #expect(m.state == .established)
        // The on-hold threshold runs from the last RTCP (19 s + 12 s).
        #expect(m.nextDeadline() == reconnectInstant(31_000))
        let resumed = run(&m, [(20_000, .peerSendsMedia(true)), (20_000, .weSendMedia(true))], until: 20_500)
        #expect(resumed.isEmpty)
        #expect(m.nextDeadline() == reconnectInstant(21_000))  // 1 s from the resume, not from the last packet
        let log = run(&m, [(20_600, .inboundPacket), (20_640, .mediaDecoded)], until: 25_000)
        // Media is expected again: 1 s of silence after the last packet disrupts the call.
        #expect(log.first == logged(21_600, .changeState(to: .mediaDisrupted)))
    }

    /// The peer vanishes while held: the call is disrupted after the on-hold threshold and
    /// given up on 50 s after its last packet, as any call.
    @Test func aPeerThatVanishesWhileHeldIsGivenUpFiftySecondsAfterItsLastPacket() {
        var m = establishedMachine()
        let log = run(&m, [(1_000, .weSendMedia(false)), (1_000, .peerSendsMedia(false))] + rtcp(from: 3_000, through: 7_000), until: 60_000)
        #expect(log.first == logged(19_000, .changeState(to: .mediaDisrupted)))  // 7 s + 12 s
        #expect(log.contains(logged(19_250, .changeState(to: .renewingMedia))))
        #expect(log.suffix(2) == [logged(57_000, .changeState(to: .ended(.mediaTimeout))), logged(57_000, .giveUp)])
        #expect(m.timeline.records.map(\.outcome) == [.gaveUp])
    }

    /// A network change during hold renews the path; the held call is restored by the peer's
    /// RTCP on the new path (there is no frame to decode on hold).
    @Test func aRenewalDuringHoldIsRestoredByRTCP() {
        var m = establishedMachine()
        let log = run(
            &m,
            [(1_000, .weSendMedia(false)), (1_000, .peerSendsMedia(false)), (3_000, .inboundPacket),
             (10_000, .localNetworkChanged), (10_200, .renewalAnswered(attempt: 1)), (10_500, .inboundPacket)],
            until: 12_000)
        #expect(log == [
            logged(10_000, .changeState(to: .renewingMedia)),
            logged(10_000, .restartICE(attempt: 1, regatherCandidates: true)),
            logged(10_200, .applyRenewalAnswer(attempt: 1)),
            logged(10_500, .changeState(to: .established)),
        ])
    }

    /// The peer's restart offer while it holds us is answered as any restart (hold and restart
    /// interleave; the direction is the session's to keep).
    @Test func thePeersRestartOfferDuringHoldIsAnswered() {
        var m = establishedMachine(glareRole: .yieldsToPeer)
        let log = run(&m, [(1_000, .peerSendsMedia(false)), (2_000, .inboundPacket), (5_000, .peerRenewalOffer)], until: 6_000)
        #expect(log == [logged(5_000, .answerRenewalOffer(regatherCandidates: false))])
        #expect(m.state == .established)
    }

    /// While we send (the peer holds us, recvonly on its side), its stuck reports are one-way
    /// audio; once we stop sending (we hold too) the check is off and the flag clears.
    @Test func stuckReportsAreOneWayAudioOnlyWhileWeSend() {
        var m = establishedMachine()
        let log = run(&m, [(1_000, .peerSendsMedia(false))] + rtcp(from: 2_000, through: 10_000, every: 1_000) + [(10_500, .weSendMedia(false))],
            until: 11_000)
        #expect(log.contains(where: { $0.action == ReconnectStateMachine.Action.outboundDisruption(started: true) }))
        #expect(log.last == logged(10_500, .outboundDisruption(started: false)))
    }
}
