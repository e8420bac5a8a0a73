import Testing

@testable import TetherCore

@Suite("Deadline set")
struct DeadlineSetTests {
    enum Timer: Hashable, Sendable { case connect, retransmit, statistics }

    @Test func theSoonestIsNextAndDueOnesAreTakenInOrderOnce() {
        var set = DeadlineSet<Timer>()
        #expect(set.next == nil)
        #expect(set.takeDue(now: MonotonicInstant(milliseconds: 1_000_000)).isEmpty)
        set.arm(.connect, at: MonotonicInstant(milliseconds: 10_000))
        set.arm(.statistics, at: MonotonicInstant(milliseconds: 2_000))
        set.arm(.retransmit, at: MonotonicInstant(milliseconds: 1_000))
        #expect(set.next == MonotonicInstant(milliseconds: 1_000))
        #expect(set.takeDue(now: MonotonicInstant(milliseconds: 999)).isEmpty)
        #expect(set.takeDue(now: MonotonicInstant(milliseconds: 2_000)) == [.retransmit, .statistics])
        #expect(!set.isArmed(.retransmit) && !set.isArmed(.statistics) && set.isArmed(.connect))
        #expect(set.next == MonotonicInstant(milliseconds: 10_000))
        #expect(set.takeDue(now: MonotonicInstant(milliseconds: 2_000)).isEmpty)
    }

    @Test func armingAgainMovesTheDeadlineAndDisarmingForgetsIt() {
        var set = DeadlineSet<Timer>()
        set.arm(.retransmit, at: MonotonicInstant(milliseconds: 1_000))
        set.arm(.retransmit, at: MonotonicInstant(milliseconds: 3_000))  // a later flight's timer
        #expect(set.takeDue(now: MonotonicInstant(milliseconds: 2_000)).isEmpty)
        #expect(set.next == MonotonicInstant(milliseconds: 3_000))
        set.disarm(.retransmit)
        set.disarm(.connect)
        #expect(set.next == nil)
        set.arm(.connect, at: .zero)
        set.removeAll()
        #expect(set.takeDue(now: MonotonicInstant(milliseconds: 5_000)).isEmpty)
    }
}
