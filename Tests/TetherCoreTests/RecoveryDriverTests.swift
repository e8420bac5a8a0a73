import Testing

@testable import TetherCore

/// The reconnection core as a call drives it: the media loop's published instants, fed once each
/// and never before an instant already fed, with explicit instants.
@Suite("Recovery driver")
struct RecoveryDriverTests {
    static func at(_ milliseconds: UInt64) -> MonotonicInstant { MonotonicInstant(milliseconds: milliseconds) }
    static func ns(_ milliseconds: UInt64) -> UInt64 { milliseconds * 1_000_000 }

    static func started() -> RecoveryDriver {
        var driver = RecoveryDriver(machine: ReconnectStateMachine(glareRole: .keepsOwnOffer), pathProbeSeconds: 0.2)
        _ = driver.handle(.mediaStarted, at: at(1_000))
        return driver
    }

    @Test func eachObservationIsFedOnceAndLateArrivalsAtTheLatestInstantFed() {
        var driver = Self.started()
        let first = RecoveryDriver.Observation(lastMediaArrivalNanoseconds: Self.ns(1_100), lastDecodedNanoseconds: Self.ns(1_120))
        let actions = driver.observe(first, now: Self.at(1_130))
        #expect(actions.contains(.changeState(to: .established)))
        #expect(driver.machine.liveness.lastInboundPacket == Self.at(1_100))
        #expect(driver.machine.liveness.lastMediaDecoded == Self.at(1_120))
        // The same counters 1.4 s later: nothing new arrived, and the silence is a disruption.
        let silent = driver.observe(first, now: Self.at(2_500))
        #expect(silent.contains(.changeState(to: .mediaDisrupted)))
        #expect(driver.machine.liveness.lastInboundPacket == Self.at(1_100))
        // A packet stamped 2.4 s, published after 2.5 s was fed: fed at 2.5 s, not before it.
        let late = RecoveryDriver.Observation(lastMediaArrivalNanoseconds: Self.ns(2_400), lastDecodedNanoseconds: Self.ns(2_450))
        let back = driver.observe(late, now: Self.at(2_600))
        #expect(back.contains(.changeState(to: .established)))
        #expect(driver.machine.liveness.lastInboundPacket == Self.at(2_500))
        #expect(driver.lastFed == Self.at(2_600))
    }

    @Test func theFirstFrameToldAtOnceIsNotFedAgainFromTheCounters() {
        var driver = Self.started()
        let decoded = driver.firstFrameDecoded(now: Self.at(1_200))
        #expect(decoded.contains(.changeState(to: .established)))
        #expect(driver.machine.liveness.lastMediaDecoded == Self.at(1_200))
        _ = driver.handle(.tick, at: Self.at(1_300))
        // The counters publish that frame (decoded at 1.15 s) only now: not fed a second time.
        let published = RecoveryDriver.Observation(lastMediaArrivalNanoseconds: Self.ns(1_140), lastDecodedNanoseconds: Self.ns(1_150))
        _ = driver.observe(published, now: Self.at(1_350))
        #expect(driver.machine.liveness.lastMediaDecoded == Self.at(1_200))
        #expect(driver.machine.liveness.lastInboundPacket == Self.at(1_300))  // its packet is news
        // A later frame is.
        _ = driver.observe(RecoveryDriver.Observation(lastMediaArrivalNanoseconds: Self.ns(1_360), lastDecodedNanoseconds: Self.ns(1_370)), now: Self.at(1_380))
        #expect(driver.machine.liveness.lastMediaDecoded == Self.at(1_370))
    }

    @Test func aPeerReportIsFedWithItsArrivalAndAQuietPathIsProbedOncePerInterval() {
        var driver = Self.started()
        let seen = RecoveryDriver.Observation(
            lastMediaArrivalNanoseconds: Self.ns(1_100), peerReportArrivalNanoseconds: Self.ns(1_105), peerReportedHighestSequence: 70_000,
            lastDecodedNanoseconds: Self.ns(1_110))
        _ = driver.observe(seen, now: Self.at(1_120))
        let probes = [1_250, 1_300, 1_310, 1_500].map { driver.probeIfDue(now: Self.at($0)) }
        // 150 ms of silence: not yet; 200 ms: a probe, then the next 200 ms later.
        #expect(probes == [false, true, false, true])
        #expect(driver.nextDeadline != nil)  // the disruption threshold
    }

    static func renewing(_ role: ReconnectStateMachine.GlareRole) -> RecoveryDriver {
        var driver = RecoveryDriver(machine: ReconnectStateMachine(glareRole: role), pathProbeSeconds: 0.2)
        _ = driver.handle(.mediaStarted, at: at(1_000))
        _ = driver.observe(RecoveryDriver.Observation(lastMediaArrivalNanoseconds: ns(1_100), lastDecodedNanoseconds: ns(1_110)), now: at(1_120))
        let changed = driver.handle(.localNetworkChanged, at: at(2_000))
        #expect(changed.contains(.restartICE(attempt: 1, regatherCandidates: true)))
        return driver
    }

    @Test func theAnswerToTheLatestOfferIsAppliedAndAnAnswerToAnOvertakenOneDiscarded() {
        var driver = Self.renewing(.keepsOwnOffer)
        // The network changes again before the answer: attempt 1 is overtaken by attempt 2.
        let again = driver.handle(.localNetworkChanged, at: Self.at(2_100))
        #expect(again.contains(.restartICE(attempt: 2, regatherCandidates: true)))
        let late = driver.renewalAnswered(attempt: 1, at: Self.at(2_200))
        #expect(late.verdict == .discard)
        #expect(late.actions.isEmpty)  // the verdict is not also among the actions
        let latest = driver.renewalAnswered(attempt: 2, at: Self.at(2_300))
        #expect(latest.verdict == .apply)
        #expect(latest.actions.isEmpty)
    }

    @Test func aPeerRestartCollidingWithOurUnansweredOfferIsDeclinedOrAnsweredWithFreshCandidatesByGlareRole() {
        var keeps = Self.renewing(.keepsOwnOffer)
        let declined = keeps.peerRenewalOffer(at: Self.at(2_100))
        #expect(declined.verdict == .decline)
        #expect(declined.actions.isEmpty)
        var yields = Self.renewing(.yieldsToPeer)
        let answered = yields.peerRenewalOffer(at: Self.at(2_100))
        // Our re-gathering attempt is abandoned and the answer carries fresh candidates.
        #expect(answered.verdict == .answer(regatherCandidates: true))
        #expect(answered.actions == [.abandonAttempt(attempt: 1)])
        // Answered, the peer's restart is the attempt in flight: our late answer to 1 is dropped.
        #expect(yields.renewalAnswered(attempt: 1, at: Self.at(2_200)).verdict == .discard)
    }
}
