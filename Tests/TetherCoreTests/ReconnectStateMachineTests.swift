import Testing
import TetherCore

// Outages below start at 10.010 s: the peer's last packet before each outage is the one sent at
// exactly 10.000 s (packets every 20 ms), so the disruption starts at 10.000 s, is detected at
// 11.000 s, renewal starts at 13.000 s, and the give-up instant is 60.000 s.

private typealias Record = RecoveryTimeline.Record

private func simulateOutage(_ outage: Range<UInt64>, until end: UInt64, configure: (inout ReconnectSimulation) -> Void = { _ in })
    -> ReconnectSimulation
{
    var simulation = ReconnectSimulation()
    simulation.inboundOutagesMilliseconds = [outage]
    configure(&simulation)
    simulation.run(untilMilliseconds: end)
    return simulation
}

/// Attempt `number` started at `start` milliseconds and answered 150 ms later.
private func attemptLog(_ number: Int, at start: UInt64, regather: Bool? = nil) -> [LoggedAction] {
    [logged(start, .restartICE(attempt: number, regatherCandidates: regather ?? (number > 1))),
     logged(start + 150, .applyRenewalAnswer(attempt: number))]
}

/// The log of an outage from 10.010 s up to (not including) the moment media comes back,
/// for the default policy: attempts at 13, 20, 28, 38, 52 s (timeouts at +6 s, pauses 1, 2, 4, 8 s).
private func renewalLog(attempts: Int) -> [LoggedAction] {
    let starts: [UInt64] = [13_000, 20_000, 28_000, 38_000, 52_000]
    var log = callSetUpLog + [
        logged(11_000, .changeState(to: .mediaDisrupted)),
        logged(13_000, .changeState(to: .renewingMedia)),
    ]
    for index in 0..<attempts {
        log += attemptLog(index + 1, at: starts[index])
        // Attempt 5 has no successor before the give-up at 60 s: it stays open.
        if index + 1 < attempts && index + 1 < 5 { log.append(logged(starts[index] + 6_000, .abandonAttempt(attempt: index + 1))) }
    }
    return log
}

@Suite("ReconnectStateMachine over a simulated network")
struct ReconnectStateMachineSimulationTests {
    @Test func halfSecondBlipChangesNothing() {
        let simulation = simulateOutage(10_010..<10_510, until: 20_000)
        #expect(simulation.log == callSetUpLog)
        #expect(simulation.machine.state == .established)
        #expect(simulation.machine.timeline.records.isEmpty)
    }

    @Test func outageOfOneAndAHalfSecondsRecoversWithoutRenewal() {
        let simulation = simulateOutage(10_010..<11_510, until: 20_000)
        // Packets resume at 11.520 s; that frame is decoded at 11.560 s.
        #expect(simulation.log == callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(11_560, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(10_000), end: reconnectInstant(11_560), cause: .inboundSilence, attempts: 0,
                   outcome: .mediaResumedWithoutRenewal),
        ])
        #expect(simulation.machine.timeline.totalDisruptedNanoseconds(now: reconnectInstant(20_000)) == 1_560_000_000)
    }

    @Test func fiveSecondOutageIsRenewedByTheFirstAttempt() {
        let simulation = simulateOutage(10_010..<15_010, until: 30_000)
        // Path back at 15.010 s, ICE usable 100 ms later, first packet 15.120 s, decoded 15.160 s.
        #expect(simulation.log == renewalLog(attempts: 1) + [logged(15_160, .changeState(to: .established))])
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(10_000), end: reconnectInstant(15_160), cause: .inboundSilence, attempts: 1,
                   outcome: .renewed(attempts: 1)),
        ])
        #expect(simulation.machine.nextDeadline() == reconnectInstant(31_000))
    }

    @Test func thirtySecondOutageRetriesWithDoublingBackoff() {
        let simulation = simulateOutage(10_010..<40_010, until: 60_000)
        let expected = callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(13_000, .changeState(to: .renewingMedia)),
            logged(13_000, .restartICE(attempt: 1, regatherCandidates: false)),
            logged(13_150, .applyRenewalAnswer(attempt: 1)),
            logged(19_000, .abandonAttempt(attempt: 1)),
            logged(20_000, .restartICE(attempt: 2, regatherCandidates: true)),  // after 1 s
            logged(20_150, .applyRenewalAnswer(attempt: 2)),
            logged(26_000, .abandonAttempt(attempt: 2)),
            logged(28_000, .restartICE(attempt: 3, regatherCandidates: true)),  // after 2 s
            logged(28_150, .applyRenewalAnswer(attempt: 3)),
            logged(34_000, .abandonAttempt(attempt: 3)),
            logged(38_000, .restartICE(attempt: 4, regatherCandidates: true)),  // after 4 s
            logged(38_150, .applyRenewalAnswer(attempt: 4)),
            logged(40_160, .changeState(to: .established)),
        ]
        #expect(simulation.log == expected)
        #expect(simulation.log == renewalLog(attempts: 4) + [logged(40_160, .changeState(to: .established))])
        #expect(simulation.machine.timeline.records.last?.outcome == .renewed(attempts: 4))
        #expect(simulation.machine.timeline.totalDisruptedSeconds(now: reconnectInstant(60_000)) == 30.16)
    }

    @Test func fortyNineSecondOutageIsRestoredByTheLastAttemptKeptOpen() {
        let simulation = simulateOutage(10_010..<59_010, until: 80_000)
        // 44 s: attempt 4 abandoned, next after 8 s (52 s). 58 s: attempt 5 times out but a sixth
        // attempt (66 s) would not start before the give-up at 60 s, so attempt 5 stays open.
        #expect(simulation.log == renewalLog(attempts: 5) + [logged(59_160, .changeState(to: .established))])
        #expect(simulation.log.contains(logged(44_000, .abandonAttempt(attempt: 4))))
        #expect(simulation.log.contains(logged(52_000, .restartICE(attempt: 5, regatherCandidates: true))))
        #expect(!simulation.log.contains(logged(58_000, .abandonAttempt(attempt: 5))))
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(10_000), end: reconnectInstant(59_160), cause: .inboundSilence, attempts: 5,
                   outcome: .renewed(attempts: 5)),
        ])
        #expect(simulation.machine.state == .established)
    }

    @Test(arguments: [61_010 as UInt64, 130_010])
    func outageBeyondTheBudgetGivesUpExactlyFiftySecondsAfterTheLastPacket(outageEnd: UInt64) {
        var simulation = simulateOutage(10_010..<outageEnd, until: 59_999)
        #expect(simulation.machine.nextDeadline() == reconnectInstant(60_000))
        simulation.run(untilMilliseconds: outageEnd + 10_000)
        let expected = renewalLog(attempts: 5) + [
            logged(60_000, .changeState(to: .ended(.mediaTimeout))),
            logged(60_000, .giveUp),
        ]
        #expect(simulation.log == expected)
        #expect(simulation.machine.state == .ended(.mediaTimeout))
        #expect(simulation.machine.nextDeadline() == nil)
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(10_000), end: reconnectInstant(60_000), cause: .inboundSilence, attempts: 5,
                   outcome: .gaveUp),
        ])
    }

    @Test func pathFlappingEverySevenHundredMillisecondsNeverDisrupts() {
        var simulation = ReconnectSimulation()
        simulation.inboundOutagesMilliseconds = (0..<10).map { (k: UInt64) in
            (10_010 + 1_400 * k)..<(10_710 + 1_400 * k)
        }
        simulation.run(untilMilliseconds: 40_000)
        // The longest silence is 0.72 s (10.000 s to 10.720 s), under the 1 s threshold.
        #expect(simulation.log == callSetUpLog)
        #expect(simulation.machine.timeline.disruptionCount == 0)
    }

    @Test func pathDownOneAndAHalfSecondsThenUpHalfASecondDisruptsAndRecoversEachTime() {
        var simulation = ReconnectSimulation()
        simulation.inboundOutagesMilliseconds = [10_010..<11_510, 12_010..<13_510, 14_010..<15_510]
        simulation.run(untilMilliseconds: 30_000)
        #expect(simulation.log == callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(11_560, .changeState(to: .established)),
            logged(13_000, .changeState(to: .mediaDisrupted)),
            logged(13_560, .changeState(to: .established)),
            logged(15_000, .changeState(to: .mediaDisrupted)),
            logged(15_560, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records.map(\.start) == [10_000, 12_000, 14_000].map(reconnectInstant))
        #expect(simulation.machine.timeline.records.allSatisfy { $0.outcome == .mediaResumedWithoutRenewal })
        #expect(simulation.machine.timeline.totalDisruptedNanoseconds(now: reconnectInstant(30_000)) == 4_680_000_000)
    }

    @Test func localNetworkChangeWhileEstablishedRenewsAtOnceWithRegathering() {
        var simulation = ReconnectSimulation()
        simulation.scripted = [(20_005, .localNetworkChanged)]
        simulation.run(untilMilliseconds: 30_000)
        // Restart at 20.005 s, answer at 20.155 s, ICE usable at 20.255 s, packet 20.260 s, decoded 20.300 s.
        // The frame of the 20.000 s packet, decoded at 20.040 s, predates the change and restores nothing.
        #expect(simulation.log == callSetUpLog + [
            logged(20_005, .changeState(to: .renewingMedia)),
            logged(20_005, .restartICE(attempt: 1, regatherCandidates: true)),
            logged(20_155, .applyRenewalAnswer(attempt: 1)),
            logged(20_300, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(20_000), end: reconnectInstant(20_300), cause: .localNetworkChange, attempts: 1,
                   outcome: .renewed(attempts: 1)),
        ])
    }

    @Test func localNetworkChangeDuringRenewalStartsARegatheringAttemptAtOnce() {
        let simulation = simulateOutage(10_010..<20_010, until: 30_000) {
            $0.scripted = [(15_500, .localNetworkChanged)]
        }
        #expect(simulation.log == renewalLog(attempts: 1) + [
            logged(15_500, .abandonAttempt(attempt: 1)),
            logged(15_500, .restartICE(attempt: 2, regatherCandidates: true)),
            logged(15_650, .applyRenewalAnswer(attempt: 2)),
            logged(20_160, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records.last?.outcome == .renewed(attempts: 2))
    }

    /// A link that drops and returns (Wi-Fi): the link-down event comes 300 ms after the last
    /// packet; with nothing else up there is nothing to renew on, so the machine waits — no
    /// attempt, no description — and the old path carries media again when the link is back.
    @Test func linkDownWithNothingElseUpWaitsAndResumesOnTheOldPath() {
        let simulation = simulateOutage(10_010..<11_510, until: 20_000) {
            $0.scripted = [(10_310, .localNetworkLost)]
        }
        #expect(simulation.log == callSetUpLog + [
            logged(10_310, .changeState(to: .mediaDisrupted)),
            logged(11_560, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(10_000), end: reconnectInstant(11_560), cause: .localNetworkChange, attempts: 0,
                   outcome: .mediaResumedWithoutRenewal),
        ])
    }

    /// The link never comes back: no attempt is ever made (there is nothing to gather on), and
    /// the give-up still ends the call 50 s after the last packet.
    @Test func linkDownForGoodSpendsNoAttemptsAndGivesUpOnTime() {
        let simulation = simulateOutage(10_010..<100_000, until: 70_000) {
            $0.scripted = [(10_310, .localNetworkLost)]
        }
        #expect(simulation.log == callSetUpLog + [
            logged(10_310, .changeState(to: .mediaDisrupted)),
            logged(60_000, .changeState(to: .ended(.mediaTimeout))),
            logged(60_000, .giveUp),
        ])
        #expect(simulation.machine.timeline.records.first?.attempts == 0)
    }

    /// While waiting for a network, a new one (another interface, an address back) starts a
    /// re-gathering attempt at once, and ICE failure or the renewal delay start nothing.
    @Test func aNetworkBackWhileWaitingStartsARegatheringAttemptAtOnce() {
        let simulation = simulateOutage(10_010..<20_600, until: 30_000) {
            $0.scripted = [(10_310, .localNetworkLost), (12_000, .iceFailed), (20_500, .localNetworkChanged)]
        }
        #expect(simulation.log == callSetUpLog + [
            logged(10_310, .changeState(to: .mediaDisrupted)),
            logged(20_500, .changeState(to: .renewingMedia)),
            logged(20_500, .restartICE(attempt: 1, regatherCandidates: true)),
            logged(20_650, .applyRenewalAnswer(attempt: 1)),
            logged(20_800, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records.last?.outcome == .renewed(attempts: 1))
    }

    /// An attempt whose gathering found nothing (the network went away meanwhile) is not
    /// counted and sends nothing; the machine waits for a network instead of retrying on a
    /// timer.
    @Test func anAttemptThatFoundNothingIsNotCountedAndWaitsForANetwork() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .keepsOwnOffer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.iceConnected, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(10))
        _ = machine.handle(.mediaDecoded, now: reconnectInstant(20))
        #expect(machine.handle(.localNetworkChanged, now: reconnectInstant(1_000)) == [
            .changeState(to: .renewingMedia), .restartICE(attempt: 1, regatherCandidates: true),
        ])
        #expect(machine.handle(.gatheringFoundNothing(attempt: 1), now: reconnectInstant(1_030)) == [
            .abandonAttempt(attempt: 1), .changeState(to: .mediaDisrupted),
        ])
        #expect(machine.isWaitingForNetwork && machine.attemptInFlight == nil)
        #expect(machine.nextDeadline() == reconnectInstant(50_010))  // the give-up only (50 s after the last packet)
        #expect(machine.handle(.tick, now: reconnectInstant(20_000)) == [])
        // A stale report for another attempt changes nothing.
        #expect(machine.handle(.gatheringFoundNothing(attempt: 7), now: reconnectInstant(20_001)) == [])
        #expect(machine.handle(.localNetworkChanged, now: reconnectInstant(21_000)) == [
            .changeState(to: .renewingMedia), .restartICE(attempt: 1, regatherCandidates: true),
        ])
        #expect(machine.timeline.records.last?.attempts == 1)
    }

    /// The peer offers a restart while we wait for a network: it is answered with re-gathered
    /// candidates (the answer is the driver's to withhold if it finds none).
    @Test func aPeerOfferWhileWaitingIsAnsweredWithRegathering() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .yieldsToPeer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.iceConnected, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(10))
        _ = machine.handle(.mediaDecoded, now: reconnectInstant(20))
        #expect(machine.handle(.localNetworkLost, now: reconnectInstant(300)) == [.changeState(to: .mediaDisrupted)])
        #expect(machine.handle(.peerRenewalOffer, now: reconnectInstant(2_000)) == [
            .changeState(to: .renewingMedia), .answerRenewalOffer(regatherCandidates: true),
        ])
        #expect(machine.handle(.gatheringFoundNothing(attempt: 1), now: reconnectInstant(2_020)) == [
            .abandonAttempt(attempt: 1), .changeState(to: .mediaDisrupted),
        ])
    }

    /// Both sides' networks change at once (an interface switch): our re-gathering attempt is
    /// under way when the controlling peer's offer comes. We yield, and the answer must carry the
    /// re-gathering (answering from the old stream would name the addresses the switch took
    /// away, and every later answer would repeat them). Once an attempt of ours was answered,
    /// a later peer offer answers at once.
    @Test func aPeerOfferDuringOurRegatheringAttemptIsAnsweredWithRegathering() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .yieldsToPeer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.iceConnected, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(10))
        _ = machine.handle(.mediaDecoded, now: reconnectInstant(20))
        #expect(machine.handle(.localNetworkChanged, now: reconnectInstant(1_000)) == [
            .changeState(to: .renewingMedia), .restartICE(attempt: 1, regatherCandidates: true),
        ])
        #expect(machine.handle(.peerRenewalOffer, now: reconnectInstant(1_001)) == [
            .abandonAttempt(attempt: 1), .answerRenewalOffer(regatherCandidates: true),
        ])
        // The answered attempt (2) gathered already: the peer's next offer is answered at once.
        #expect(machine.handle(.peerRenewalOffer, now: reconnectInstant(8_000)) == [
            .abandonAttempt(attempt: 2), .answerRenewalOffer(regatherCandidates: false),
        ])
    }

    @Test func localNetworkChangeWhileConnectingMakesTheNextAnswerRegather() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .yieldsToPeer)
        #expect(machine.handle(.mediaStarted, now: reconnectInstant(0)) == [.changeState(to: .connecting)])
        #expect(machine.handle(.localNetworkChanged, now: reconnectInstant(10)) == [])
        #expect(machine.handle(.peerRenewalOffer, now: reconnectInstant(20)) == [.answerRenewalOffer(regatherCandidates: true)])
        #expect(machine.handle(.peerRenewalOffer, now: reconnectInstant(30)) == [.answerRenewalOffer(regatherCandidates: false)])
        #expect(machine.state == .connecting)
    }

    @Test func iceFailureDuringRenewalEndsOnlyThatAttempt() {
        let simulation = simulateOutage(10_010..<40_010, until: 70_000) {
            $0.scripted = [(16_000, .iceFailed), (24_000, .iceFailed)]
        }
        #expect(simulation.log == renewalLog(attempts: 1) + [
            logged(16_000, .abandonAttempt(attempt: 1)),
            logged(17_000, .restartICE(attempt: 2, regatherCandidates: true)),  // 1 s after the failure
            logged(17_150, .applyRenewalAnswer(attempt: 2)),
            logged(23_000, .abandonAttempt(attempt: 2)),
            // 24 s: FAILED between attempts is ignored.
            logged(25_000, .restartICE(attempt: 3, regatherCandidates: true)),
            logged(25_150, .applyRenewalAnswer(attempt: 3)),
            logged(31_000, .abandonAttempt(attempt: 3)),
            logged(35_000, .restartICE(attempt: 4, regatherCandidates: true)),
            logged(35_150, .applyRenewalAnswer(attempt: 4)),
            logged(40_160, .changeState(to: .established)),
        ])
        #expect(!simulation.log.contains { $0.action == .giveUp })
    }

    @Test func iceFailureWhileDisruptedOrJustBeforeTheSilenceRenewsAtOnce() {
        let whileDisrupted = simulateOutage(10_010..<15_010, until: 20_000) { $0.scripted = [(11_500, .iceFailed)] }
        #expect(whileDisrupted.log == callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(11_500, .changeState(to: .renewingMedia)),
            logged(11_500, .restartICE(attempt: 1, regatherCandidates: false)),
            logged(11_650, .applyRenewalAnswer(attempt: 1)),
            logged(15_160, .changeState(to: .established)),
        ])

        let beforeSilence = simulateOutage(10_010..<15_010, until: 20_000) { $0.scripted = [(10_005, .iceFailed)] }
        #expect(beforeSilence.log == callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(11_000, .changeState(to: .renewingMedia)),
            logged(11_000, .restartICE(attempt: 1, regatherCandidates: false)),
            logged(11_150, .applyRenewalAnswer(attempt: 1)),
            logged(15_160, .changeState(to: .established)),
        ])

        // FAILED while packets keep flowing is forgotten at the next packet.
        let spurious = simulateOutage(20_010..<21_510, until: 30_000) { $0.scripted = [(10_005, .iceFailed)] }
        #expect(spurious.log == callSetUpLog + [
            logged(21_000, .changeState(to: .mediaDisrupted)),
            logged(21_560, .changeState(to: .established)),
        ])
    }

    @Test func hangUpDuringRenewalEndsTheCallWithNoFurtherActions() {
        var simulation = simulateOutage(10_010..<40_010, until: 30_000) { $0.scripted = [(14_000, .hangUp)] }
        simulation.run(untilMilliseconds: 80_000)
        #expect(simulation.log == renewalLog(attempts: 1) + [logged(14_000, .changeState(to: .ended(.localHangup)))])
        #expect(simulation.machine.nextDeadline() == nil)
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(10_000), end: reconnectInstant(14_000), cause: .inboundSilence, attempts: 1,
                   outcome: .hungUpDuring),
        ])
    }

    @Test func lateAnswerForTheAbandonedAttemptIsStillAppliedBeforeTheNextAttempt() {
        let simulation = simulateOutage(10_010..<18_010, until: 30_000) { $0.answerDelayMilliseconds = 6_500 }
        #expect(simulation.log == callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(13_000, .changeState(to: .renewingMedia)),
            logged(13_000, .restartICE(attempt: 1, regatherCandidates: false)),
            logged(19_000, .abandonAttempt(attempt: 1)),
            logged(19_500, .applyRenewalAnswer(attempt: 1)),
            logged(19_640, .changeState(to: .established)),  // usable 19.600 s, packet 19.600 s, decoded 19.640 s
        ])
    }

    @Test func answerArrivingAfterTheNextAttemptStartedIsDiscarded() {
        let simulation = simulateOutage(10_010..<18_010, until: 40_000) { $0.answerDelayMilliseconds = 7_500 }
        #expect(simulation.log == callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(13_000, .changeState(to: .renewingMedia)),
            logged(13_000, .restartICE(attempt: 1, regatherCandidates: false)),
            logged(19_000, .abandonAttempt(attempt: 1)),
            logged(20_000, .restartICE(attempt: 2, regatherCandidates: true)),
            logged(20_500, .discardRenewalAnswer(attempt: 1)),
            logged(26_000, .abandonAttempt(attempt: 2)),
            logged(27_500, .applyRenewalAnswer(attempt: 2)),
            logged(27_640, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records.last?.outcome == .renewed(attempts: 2))
    }

    @Test func restartThatIsNeverAnsweredGivesUpOnTimeEvenWithThePathBack() {
        let simulation = simulateOutage(10_010..<18_010, until: 90_000) { $0.answerDelayMilliseconds = nil }
        #expect(simulation.log == callSetUpLog + [
            logged(11_000, .changeState(to: .mediaDisrupted)),
            logged(13_000, .changeState(to: .renewingMedia)),
            logged(13_000, .restartICE(attempt: 1, regatherCandidates: false)),
            logged(19_000, .abandonAttempt(attempt: 1)),
            logged(20_000, .restartICE(attempt: 2, regatherCandidates: true)),
            logged(26_000, .abandonAttempt(attempt: 2)),
            logged(28_000, .restartICE(attempt: 3, regatherCandidates: true)),
            logged(34_000, .abandonAttempt(attempt: 3)),
            logged(38_000, .restartICE(attempt: 4, regatherCandidates: true)),
            logged(44_000, .abandonAttempt(attempt: 4)),
            logged(52_000, .restartICE(attempt: 5, regatherCandidates: true)),
            logged(60_000, .changeState(to: .ended(.mediaTimeout))),
            logged(60_000, .giveUp),
        ])
    }

    @Test func peerMuteWithDTXDuringAnOutageOnlyShiftsInstantsToTheDTXPackets() {
        let simulation = simulateOutage(10_010..<15_010, until: 30_000) { $0.peerDTXFromMilliseconds = 5_000 }
        // DTX packets every 400 ms (5.0 s … 10.0 s) keep the call established; after the outage the
        // first DTX packet through is at 15.200 s, decoded at 15.240 s.
        #expect(simulation.log == renewalLog(attempts: 1) + [logged(15_240, .changeState(to: .established))])
        #expect(simulation.machine.timeline.records.first?.start == reconnectInstant(10_000))
    }

    @Test func ourOwnDTXNeverLooksLikeOneWayAudio() {
        var simulation = ReconnectSimulation()
        simulation.ourPacketIntervalMilliseconds = 400
        simulation.peerReportIntervalMilliseconds = 1_000
        simulation.run(untilMilliseconds: 60_000)
        #expect(simulation.log == callSetUpLog)
    }

    @Test func onHoldRTCPKeepsTheCallAliveAndLongerSilenceDisrupts() {
        var simulation = ReconnectSimulation()
        simulation.scripted = [(5_000, .peerSendsMedia(false))]
        simulation.peerRTPStopsAtMilliseconds = 5_000
        simulation.peerRTCPAtMilliseconds = Array(stride(from: 6_000, through: 60_000, by: 4_000))
        simulation.inboundOutagesMilliseconds = [18_010..<33_010]
        simulation.run(untilMilliseconds: 29_999)
        // RTCP every 4 s from 6 s keeps it alive; the last one before the outage is at 18 s.
        #expect(simulation.log == callSetUpLog)
        #expect(simulation.machine.nextDeadline() == reconnectInstant(30_000))
        simulation.run(untilMilliseconds: 40_000)
        #expect(simulation.log == callSetUpLog + [
            logged(30_000, .changeState(to: .mediaDisrupted)),  // 18 s + 12 s on-hold threshold
            logged(32_000, .changeState(to: .renewingMedia)),
            logged(32_000, .restartICE(attempt: 1, regatherCandidates: false)),
            logged(32_150, .applyRenewalAnswer(attempt: 1)),
            logged(34_000, .changeState(to: .established)),  // RTCP alone restores an on-hold call
        ])
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(18_000), end: reconnectInstant(34_000), cause: .inboundSilence, attempts: 1,
                   outcome: .renewed(attempts: 1)),
        ])
    }

    @Test func oneWayAudioIsSurfacedWhileInboundIsFineAndClearedWhenReportsAdvance() {
        var simulation = ReconnectSimulation()
        simulation.peerReportIntervalMilliseconds = 1_000
        simulation.outboundOutagesMilliseconds = [10_010..<20_010]
        simulation.run(untilMilliseconds: 30_000)
        // Reports from 10 s on repeat the same sequence; at 14 s they span 4 s. Our packets reach
        // the peer again from 20.020 s; the 21 s report advances.
        #expect(simulation.log == callSetUpLog + [
            logged(14_000, .outboundDisruption(started: true)),
            logged(21_000, .outboundDisruption(started: false)),
        ])
        #expect(simulation.machine.state == .established)
        #expect(simulation.machine.timeline.records.isEmpty)
    }

    @Test func peerRestartDuringOneWayAudioRenewsUntilItsReportsAdvance() {
        var simulation = ReconnectSimulation()
        simulation.peerReportIntervalMilliseconds = 1_000
        simulation.outboundOutagesMilliseconds = [10_010..<15_000]
        simulation.scripted = [(15_000, .peerRenewalOffer)]
        simulation.run(untilMilliseconds: 30_000)
        // Inbound frames are decoded again from 15.140 s, but renewal ends only when the 16 s report advances.
        #expect(simulation.log == callSetUpLog + [
            logged(14_000, .outboundDisruption(started: true)),
            logged(15_000, .changeState(to: .renewingMedia)),
            logged(15_000, .answerRenewalOffer(regatherCandidates: false)),
            logged(16_000, .outboundDisruption(started: false)),
            logged(16_000, .changeState(to: .established)),
        ])
        #expect(simulation.machine.timeline.records == [
            Record(start: reconnectInstant(10_000), end: reconnectInstant(16_000), cause: .outboundStall, attempts: 1,
                   outcome: .renewed(attempts: 1)),
        ])
    }
}

@Suite("ReconnectStateMachine inputs")
struct ReconnectStateMachineInputTests {
    /// A machine established at 40 ms with a packet at 0 ms (ICE connected at 0 ms).
    private func establishedMachine(glareRole: ReconnectStateMachine.GlareRole = .keepsOwnOffer) -> ReconnectStateMachine {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: glareRole)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.iceConnected, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(0))
        _ = machine.handle(.mediaDecoded, now: reconnectInstant(40))
        return machine
    }

    @Test func idleMachineNeedsNoTimerAndStartsConnecting() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .keepsOwnOffer)
        #expect(machine.state == .idle)
        #expect(machine.nextDeadline() == nil)
        #expect(machine.handle(.tick, now: reconnectInstant(5)) == [])
        #expect(machine.handle(.mediaStarted, now: reconnectInstant(10)) == [.changeState(to: .connecting)])
        #expect(machine.handle(.mediaStarted, now: reconnectInstant(20)) == [])
        #expect(machine.nextDeadline() == nil)
    }

    @Test func connectingIsEstablishedByDecodedMediaNotByICE() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .keepsOwnOffer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        #expect(machine.handle(.iceConnected, now: reconnectInstant(100)) == [])
        #expect(machine.handle(.inboundPacket, now: reconnectInstant(120)) == [])
        #expect(machine.handle(.iceFailed, now: reconnectInstant(130)) == [])
        #expect(machine.handle(.mediaDecoded, now: reconnectInstant(160)) == [.changeState(to: .established)])
        #expect(machine.nextDeadline() == reconnectInstant(1_120))
    }

    @Test func lateTickFiresEveryDueDeadlineInOrderAtItsOwnInstant() {
        var machine = establishedMachine()
        // No tick until 10.5 s: disrupted at 1 s, renewal at 3 s, attempt 1 timed out at 9 s,
        // attempt 2 at 10 s (its timeout at 16 s).
        #expect(machine.handle(.tick, now: reconnectInstant(10_500)) == [
            .changeState(to: .mediaDisrupted),
            .changeState(to: .renewingMedia),
            .restartICE(attempt: 1, regatherCandidates: false),
            .abandonAttempt(attempt: 1),
            .restartICE(attempt: 2, regatherCandidates: true),
        ])
        #expect(machine.nextDeadline() == reconnectInstant(16_000))
    }

    @Test func packetArrivingAfterAMissedDeadlineIsSeenAfterTheDisruption() {
        var machine = establishedMachine()
        #expect(machine.handle(.inboundPacket, now: reconnectInstant(1_300)) == [.changeState(to: .mediaDisrupted)])
        #expect(machine.handle(.mediaDecoded, now: reconnectInstant(1_340)) == [.changeState(to: .established)])
        #expect(machine.timeline.records.first?.outcome == .mediaResumedWithoutRenewal)
    }

    @Test func iceConnectedNeverRestoresARenewal() {
        var machine = establishedMachine()
        _ = machine.handle(.localNetworkChanged, now: reconnectInstant(500))
        #expect(machine.state == .renewingMedia)
        #expect(machine.handle(.renewalAnswered(attempt: 1), now: reconnectInstant(650)) == [.applyRenewalAnswer(attempt: 1)])
        #expect(machine.handle(.iceConnected, now: reconnectInstant(700)) == [])
        #expect(machine.state == .renewingMedia)
        #expect(machine.handle(.renewalAnswered(attempt: 1), now: reconnectInstant(710)) == [.discardRenewalAnswer(attempt: 1)])
        _ = machine.handle(.inboundPacket, now: reconnectInstant(720))
        #expect(machine.handle(.mediaDecoded, now: reconnectInstant(760)) == [.changeState(to: .established)])
    }

    /// The peer's media establishes the call but our checks failed (no pair to send on): one
    /// grace (1 s by default) after the media, renewal at once — the controlling side restarts,
    /// the other offers with fresh candidates (the peer, hearing nothing, offers nothing). The
    /// call is restored only when ICE connects and media flows — inbound media alone, which
    /// never stopped, does not restore it.
    @Test(arguments: [ReconnectStateMachine.GlareRole.keepsOwnOffer, .yieldsToPeer])
    func noPairOneGraceAfterMediaRenewsAtOnceAndWaitsForICEToConnect(role: ReconnectStateMachine.GlareRole) {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: role)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(0))
        #expect(machine.handle(.mediaDecoded, now: reconnectInstant(40)) == [.changeState(to: .established)])
        // The grace ends before the silence threshold would (media keeps arriving anyway).
        #expect(machine.nextDeadline() == reconnectInstant(1_000))
        for t in stride(from: 20 as UInt64, through: 1_020, by: 20) {
            _ = machine.handle(.inboundPacket, now: reconnectInstant(t))
            if t < 1_040 { #expect(machine.state == .established) }
        }
        #expect(machine.nextDeadline() == reconnectInstant(1_040))
        #expect(machine.handle(.tick, now: reconnectInstant(1_045)) == [
            .changeState(to: .renewingMedia),
            .restartICE(attempt: 1, regatherCandidates: role == .yieldsToPeer),
        ])
        #expect(machine.handle(.renewalAnswered(attempt: 1), now: reconnectInstant(1_150)) == [.applyRenewalAnswer(attempt: 1)])
        // The peer's media goes on arriving: not restored while we still have no pair.
        for t in stride(from: 1_040 as UInt64, through: 1_300, by: 20) {
            _ = machine.handle(.inboundPacket, now: reconnectInstant(t))
            #expect(machine.handle(.mediaDecoded, now: reconnectInstant(t + 5)) == [])
        }
        #expect(machine.state == .renewingMedia)
        #expect(machine.handle(.iceConnected, now: reconnectInstant(1_310)) == [.changeState(to: .established)])
        #expect(machine.timeline.records == [
            Record(start: reconnectInstant(1_040), end: reconnectInstant(1_310), cause: .noSendPath, attempts: 1,
                   outcome: .renewed(attempts: 1))
        ])
        // No second grace, and a later iceConnected (a path change) changes nothing.
        #expect(machine.nextDeadline() == reconnectInstant(2_300))
        #expect(machine.handle(.iceConnected, now: reconnectInstant(1_400)) == [])
    }

    /// The peer stops consenting (RFC 7675) while its media still arrives: renewal at once, and
    /// the call is restored only when a new pair is selected and media flows; inbound media
    /// alone, which never stopped, does not restore it.
    @Test func consentLostWhileEstablishedRenewsAtOnceAndWaitsForANewPair() {
        var machine = establishedMachine()
        #expect(machine.handle(.consentLost, now: reconnectInstant(500)) == [
            .changeState(to: .renewingMedia), .restartICE(attempt: 1, regatherCandidates: false),
        ])
        for t in stride(from: 520 as UInt64, through: 900, by: 20) {
            _ = machine.handle(.inboundPacket, now: reconnectInstant(t))
            #expect(machine.handle(.mediaDecoded, now: reconnectInstant(t + 5)) == [])
        }
        #expect(machine.handle(.renewalAnswered(attempt: 1), now: reconnectInstant(950)) == [.applyRenewalAnswer(attempt: 1)])
        #expect(machine.state == .renewingMedia)
        #expect(machine.handle(.iceConnected, now: reconnectInstant(1_000)) == [.changeState(to: .established)])
        #expect(machine.timeline.records == [
            Record(start: reconnectInstant(500), end: reconnectInstant(1_000), cause: .consentLost, attempts: 1, outcome: .renewed(attempts: 1))
        ])
    }

    /// Consent lost during a silence disruption renews at once (no renewal delay), and the
    /// silence's restoration then also waits for a new pair; while renewing, it changes no
    /// attempt but holds the restoration the same way; while waiting for a network, nothing.
    @Test func consentLostDuringADisruptionRenewsAndHoldsTheRestorationUntilANewPair() {
        var machine = establishedMachine()
        #expect(machine.handle(.tick, now: reconnectInstant(1_000)) == [.changeState(to: .mediaDisrupted)])
        #expect(machine.handle(.consentLost, now: reconnectInstant(1_200)) == [
            .changeState(to: .renewingMedia), .restartICE(attempt: 1, regatherCandidates: false),
        ])
        #expect(machine.handle(.consentLost, now: reconnectInstant(1_300)) == [])
        _ = machine.handle(.inboundPacket, now: reconnectInstant(1_400))
        #expect(machine.handle(.mediaDecoded, now: reconnectInstant(1_420)) == [])
        #expect(machine.handle(.iceConnected, now: reconnectInstant(1_500)) == [.changeState(to: .established)])
        #expect(machine.timeline.records.last?.cause == .inboundSilence)

        var waiting = establishedMachine()
        _ = waiting.handle(.localNetworkLost, now: reconnectInstant(300))
        #expect(waiting.isWaitingForNetwork)
        #expect(waiting.handle(.consentLost, now: reconnectInstant(400)) == [])
        #expect(waiting.state == .mediaDisrupted)
    }

    @Test func consentLostBeforeMediaIsLeftToTheSetUp() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .keepsOwnOffer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        #expect(machine.handle(.consentLost, now: reconnectInstant(100)) == [])
        #expect(machine.state == .connecting)
    }

    /// A pair selected before the media came (the usual order), or within the grace: no timer,
    /// no renewal, ever. Before media (connecting) nothing is timed either.
    @Test func aPairBeforeOrWithinTheGraceRenewsNothing() {
        var before = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .keepsOwnOffer)
        _ = before.handle(.mediaStarted, now: reconnectInstant(0))
        _ = before.handle(.iceConnected, now: reconnectInstant(10))
        #expect(before.nextDeadline() == nil)
        _ = before.handle(.inboundPacket, now: reconnectInstant(20))
        _ = before.handle(.mediaDecoded, now: reconnectInstant(40))
        #expect(before.nextDeadline() == reconnectInstant(1_020))  // the silence threshold only

        var within = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .yieldsToPeer)
        _ = within.handle(.mediaStarted, now: reconnectInstant(0))
        #expect(within.handle(.tick, now: reconnectInstant(5_000)) == [])  // connecting: no grace
        _ = within.handle(.inboundPacket, now: reconnectInstant(5_000))
        _ = within.handle(.mediaDecoded, now: reconnectInstant(5_040))
        #expect(within.nextDeadline() == reconnectInstant(6_000))
        _ = within.handle(.inboundPacket, now: reconnectInstant(5_900))
        #expect(within.handle(.iceConnected, now: reconnectInstant(5_950)) == [])
        #expect(within.nextDeadline() == reconnectInstant(6_900))
        for t in stride(from: 5_920 as UInt64, through: 9_000, by: 20) {
            #expect(within.handle(.inboundPacket, now: reconnectInstant(t)) == [])
        }
        #expect(within.state == .established && within.timeline.records.isEmpty)
    }

    /// Silence that comes before the grace ends is a silence disruption, not a missing path;
    /// media resuming by itself while ICE still has no pair starts a fresh grace.
    @Test func silenceBeforeTheGraceIsASilenceDisruptionAndResumingStartsAnotherGrace() {
        var policy = twoSecondRenewal
        policy.sendPathGraceSeconds = 3
        var machine = ReconnectStateMachine(policy: policy, glareRole: .keepsOwnOffer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(0))
        _ = machine.handle(.mediaDecoded, now: reconnectInstant(40))
        #expect(machine.handle(.tick, now: reconnectInstant(1_000)) == [.changeState(to: .mediaDisrupted)])
        #expect(machine.timeline.records.last?.cause == .inboundSilence)
        _ = machine.handle(.inboundPacket, now: reconnectInstant(1_500))
        #expect(machine.handle(.mediaDecoded, now: reconnectInstant(1_540)) == [.changeState(to: .established)])
        #expect(machine.nextDeadline() == reconnectInstant(2_500))  // silence first; the grace at 4 540
        for t in stride(from: 1_520 as UInt64, through: 4_520, by: 20) { _ = machine.handle(.inboundPacket, now: reconnectInstant(t)) }
        #expect(machine.handle(.tick, now: reconnectInstant(4_540)) == [
            .changeState(to: .renewingMedia), .restartICE(attempt: 1, regatherCandidates: false),
        ])
        #expect(machine.timeline.records.last?.cause == .noSendPath)
    }

    @Test func glareKeepsTheCallersOfferAndTheCalleeYields() {
        var caller = establishedMachine(glareRole: .keepsOwnOffer)
        _ = caller.handle(.localNetworkChanged, now: reconnectInstant(500))
        #expect(caller.handle(.peerRenewalOffer, now: reconnectInstant(550)) == [.declineRenewalOffer])
        #expect(caller.handle(.renewalAnswered(attempt: 1), now: reconnectInstant(600)) == [.applyRenewalAnswer(attempt: 1)])
        // Once our offer is answered, a new peer offer is answered as the next attempt.
        #expect(caller.handle(.peerRenewalOffer, now: reconnectInstant(700)) == [
            .abandonAttempt(attempt: 1), .answerRenewalOffer(regatherCandidates: false),
        ])

        // The callee yields; its own attempt re-gathered for its network change, so the answer
        // re-gathers too (it shares a gathering still under way).
        var callee = establishedMachine(glareRole: .yieldsToPeer)
        _ = callee.handle(.localNetworkChanged, now: reconnectInstant(500))
        #expect(callee.handle(.peerRenewalOffer, now: reconnectInstant(550)) == [
            .abandonAttempt(attempt: 1), .answerRenewalOffer(regatherCandidates: true),
        ])
        #expect(callee.handle(.renewalAnswered(attempt: 1), now: reconnectInstant(600)) == [.discardRenewalAnswer(attempt: 1)])
        // Attempt 2 (the answered peer offer) times out 6 s after 550 ms.
        #expect(callee.nextDeadline() == reconnectInstant(6_550))
    }

    @Test func peerRestartWhileEstablishedIsAnsweredWithoutLeavingEstablished() {
        var machine = establishedMachine()
        #expect(machine.handle(.peerRenewalOffer, now: reconnectInstant(500)) == [.answerRenewalOffer(regatherCandidates: false)])
        #expect(machine.state == .established)
    }

    @Test func peerRestartWhileDisruptedEntersRenewal() {
        var machine = establishedMachine()
        _ = machine.handle(.tick, now: reconnectInstant(1_000))
        #expect(machine.handle(.peerRenewalOffer, now: reconnectInstant(1_200)) == [
            .changeState(to: .renewingMedia), .answerRenewalOffer(regatherCandidates: false),
        ])
        #expect(machine.nextDeadline() == reconnectInstant(7_200))
    }

    @Test(arguments: [ReconnectStateMachine.Input.tick, .inboundPacket, .mediaDecoded, .iceFailed, .iceConnected,
                      .localNetworkChanged, .renewalAnswered(attempt: 1), .peerRenewalOffer,
                      .peerSendsMedia(false), .weSendMedia(false), .peerReport(extendedHighestSequence: 7), .hangUp,
                      .mediaStarted, .consentLost])
    func everyInputIsIgnoredAfterTheCallEnded(input: ReconnectStateMachine.Input) {
        var machine = establishedMachine()
        #expect(machine.handle(.hangUp, now: reconnectInstant(500)) == [.changeState(to: .ended(.localHangup))])
        #expect(machine.handle(input, now: reconnectInstant(90_000)) == [])
        #expect(machine.state == .ended(.localHangup))
        #expect(machine.nextDeadline() == nil)
    }

    @Test func hangUpBeforeMediaEndsTheIdleMachine() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .keepsOwnOffer)
        #expect(machine.handle(.hangUp, now: reconnectInstant(0)) == [.changeState(to: .ended(.localHangup))])
        #expect(machine.timeline.records.isEmpty)
    }

    @Test func hangUpDueAtTheGiveUpInstantStillEndsAsLocalHangUp() {
        var machine = establishedMachine()
        _ = machine.handle(.tick, now: reconnectInstant(1_000))
        // The give-up is due at 50 s, but the hang-up wins and nothing else is returned.
        #expect(machine.handle(.hangUp, now: reconnectInstant(50_000)) == [.changeState(to: .ended(.localHangup))])
        #expect(machine.timeline.records.last?.outcome == .hungUpDuring)
    }

    @Test func timelineKeepsTheLatestRecordsAndCountsThemAll() {
        var machine = establishedMachine()
        var t: UInt64 = 0
        for _ in 0..<70 {
            _ = machine.handle(.tick, now: reconnectInstant(t + 1_000))
            _ = machine.handle(.inboundPacket, now: reconnectInstant(t + 1_200))
            _ = machine.handle(.mediaDecoded, now: reconnectInstant(t + 1_240))
            t += 1_200
        }
        #expect(machine.state == .established)
        #expect(machine.timeline.records.count == RecoveryTimeline.maximumRecords)
        #expect(machine.timeline.disruptionCount == 70)
        #expect(machine.timeline.records.last == Record(
            start: reconnectInstant(69 * 1_200), end: reconnectInstant(70 * 1_200 + 40), cause: .inboundSilence,
            attempts: 0, outcome: .mediaResumedWithoutRenewal))
        #expect(machine.timeline.totalDisruptedNanoseconds(now: reconnectInstant(t)) == 70 * 1_240_000_000)
    }

    @Test func openDisruptionCountsTowardTheTotalUpToNow() {
        var machine = establishedMachine()
        _ = machine.handle(.tick, now: reconnectInstant(1_000))
        #expect(machine.timeline.current?.start == reconnectInstant(0))
        #expect(machine.timeline.totalDisruptedSeconds(now: reconnectInstant(2_500)) == 2.5)
    }
}

@Suite("ReconnectStateMachine renewal timing")
struct ReconnectStateMachineRenewalTimingTests {
    @Test func packetsWithoutDecodedFramesPostponeRenewalUntilSilentAgain() {
        var machine = ReconnectStateMachine(policy: twoSecondRenewal, glareRole: .keepsOwnOffer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.iceConnected, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(0))
        _ = machine.handle(.mediaDecoded, now: reconnectInstant(40))
        #expect(machine.handle(.tick, now: reconnectInstant(1_000)) == [.changeState(to: .mediaDisrupted)])
        #expect(machine.nextDeadline() == reconnectInstant(3_000))
        // A lone RTCP packet: the path shows life, so renewal waits for a new second of silence.
        #expect(machine.handle(.inboundPacket, now: reconnectInstant(2_900)) == [])
        #expect(machine.nextDeadline() == reconnectInstant(3_900))
        #expect(machine.handle(.tick, now: reconnectInstant(3_900)) == [
            .changeState(to: .renewingMedia), .restartICE(attempt: 1, regatherCandidates: false),
        ])
        // The give-up instant still counts from the packet before the silence (0 s).
        #expect(machine.timeline.current?.start == reconnectInstant(0))
    }

    @Test func customPolicyTimersAreHonoured() {
        let policy = ReconnectionPolicy(
            disruptionThresholdSeconds: 0.5, renewalDelaySeconds: 0, renewalAttemptTimeoutSeconds: 2,
            firstRetryDelaySeconds: 0.25, retryDelayMultiplier: 3, maximumRetryDelaySeconds: 1, giveUpSeconds: 13)
        var machine = ReconnectStateMachine(policy: policy, glareRole: .keepsOwnOffer)
        _ = machine.handle(.mediaStarted, now: reconnectInstant(0))
        _ = machine.handle(.iceConnected, now: reconnectInstant(0))
        _ = machine.handle(.inboundPacket, now: reconnectInstant(0))
        _ = machine.handle(.mediaDecoded, now: reconnectInstant(40))
        var wakeUps: [(UInt64, [ReconnectStateMachine.Action])] = []
        while let deadline = machine.nextDeadline() {
            wakeUps.append((deadline.nanoseconds / 1_000_000, machine.handle(.tick, now: deadline)))
        }
        // Attempts: 0.5–2.5 s, pause 0.25 s; 2.75–4.75 s, pause 0.75 s; 5.5–7.5 s, pause 1 s;
        // 8.5–10.5 s, pause 1 s; 11.5 s–(13 s: a 13.5 s start would not fit, so it stays open).
        #expect(wakeUps.map(\.0) == [500, 2_500, 2_750, 4_750, 5_500, 7_500, 8_500, 10_500, 11_500, 13_000])
        #expect(wakeUps.first?.1 == [
            .changeState(to: .mediaDisrupted), .changeState(to: .renewingMedia),
            .restartICE(attempt: 1, regatherCandidates: false),
        ])
        #expect(wakeUps.last?.1 == [.changeState(to: .ended(.mediaTimeout)), .giveUp])
        #expect(machine.timeline.records.last?.attempts == 5)
    }
}
