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
}
