import Testing
@testable import TetherCore

@Suite struct PathProbeScheduleTests {
    let t0 = MonotonicInstant(milliseconds: 10_000)

    @Test func probesAfterTheSilenceAndAtTheIntervalWhileItLasts() {
        var s = PathProbeSchedule(silenceSeconds: 0.2)
        s.packetArrived(at: t0)
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 199), peerSendsMedia: true); #expect(!due) }
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 200), peerSendsMedia: true); #expect(due) }
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 399), peerSendsMedia: true); #expect(!due) }
        #expect(s.nextProbe(peerSendsMedia: true) == t0.advanced(byMilliseconds: 400))
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 430), peerSendsMedia: true); #expect(due) }
        // Intervals run from the probe actually sent (a late driver does not cause a burst).
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 600), peerSendsMedia: true); #expect(!due) }
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 630), peerSendsMedia: true); #expect(due) }
    }

    @Test func aPacketEndsTheSilence() {
        var s = PathProbeSchedule(silenceSeconds: 0.2)
        s.packetArrived(at: t0)
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 250), peerSendsMedia: true); #expect(due) }
        s.packetArrived(at: t0.advanced(byMilliseconds: 300))
        #expect(s.lastProbe == nil)
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 450), peerSendsMedia: true); #expect(!due) }
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 500), peerSendsMedia: true); #expect(due) }
        // An arrival reported out of order does not move the silence back.
        s.packetArrived(at: t0.advanced(byMilliseconds: 100))
        #expect(s.lastInboundPacket == t0.advanced(byMilliseconds: 300))
    }

    @Test func noProbeBeforeMediaWhileThePeerDoesNotSendOrWhenOff() {
        var s = PathProbeSchedule(silenceSeconds: 0.2)
        do { let due = s.probeIfDue(now: t0, peerSendsMedia: true); #expect(!due) }
        #expect(s.nextProbe(peerSendsMedia: true) == nil)
        s.packetArrived(at: t0)
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 5_000), peerSendsMedia: false); #expect(!due) }
        do { let due = s.probeIfDue(now: t0.advanced(byMilliseconds: 5_000), peerSendsMedia: true); #expect(due) }
        var off = PathProbeSchedule(silenceSeconds: 0)
        off.packetArrived(at: t0)
        do { let due = off.probeIfDue(now: t0.advanced(byMilliseconds: 60_000), peerSendsMedia: true); #expect(!due) }
    }

    @Test func thePolicyAcceptsZeroAndRejectsNegativeProbeIntervals() {
        var p = ReconnectionPolicy()
        #expect(p.pathProbeSeconds == 0.2)
        p.pathProbeSeconds = 0
        #expect(p.validate() == nil)
        p.pathProbeSeconds = -1
        #expect(p.validate() != nil)
    }
}
