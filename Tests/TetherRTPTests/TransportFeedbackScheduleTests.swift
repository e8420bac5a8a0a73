import Testing

@testable import TetherRTP

/// When transport-cc feedback goes out: once per interval while packets come, none without.
struct TransportFeedbackScheduleTests {
    /// Runs a receiver for `seconds` getting a packet every `packetMilliseconds` and polled every
    /// 10 ms, as the media loop is; returns the feedbacks sent.
    private func feedbacks(packetMilliseconds: UInt64, receivingBitsPerSecond: Int, seconds: UInt64) -> [UInt64] {
        var schedule = TransportFeedbackSchedule()
        let interval = TransportFeedbackSchedule.interval(receivingBitsPerSecond: receivingBitsPerSecond)
        var unreported = 0
        var sent: [UInt64] = []
        var now: UInt64 = 1_000_000_000
        let end = now + seconds * 1_000_000_000
        while now < end {
            if (now / 1_000_000) % packetMilliseconds == 0 { unreported += 1 }
            if let due = schedule.due(unreported: unreported, interval: interval), now >= due {
                sent.append(now)
                unreported = 0
                schedule.sent(now: now)
            }
            // Never a deadline already past.
            if let due = schedule.due(unreported: unreported, interval: interval) { #expect(due > now) }
            now += 10_000_000
        }
        return sent
    }

    /// A narrow stream (60 ms packets, ~11 kb/s): a feedback every 360 ms or so, not one per
    /// packet or two (the interval once counted from the first packet after the last feedback:
    /// 100 ms after it, so 6 to 8 a second).
    @Test func aNarrowStreamGetsFeedbackAtItsIntervalNotPerPacket() {
        let interval = TransportFeedbackSchedule.interval(receivingBitsPerSecond: 11_000)
        #expect(interval >= 350_000_000 && interval <= 370_000_000)
        let sent = feedbacks(packetMilliseconds: 60, receivingBitsPerSecond: 11_000, seconds: 20)
        #expect(sent.count >= 52 && sent.count <= 58, "\(sent.count) feedbacks in 20 s")
        for (earlier, later) in zip(sent, sent.dropFirst()) {
            #expect(later - earlier >= interval)
        }
    }

    /// A full-rate stream (20 ms packets, ~64 kb/s on the wire here): about 7 a second.
    @Test func aWideStreamGetsFeedbackAboutEveryHundredMilliseconds() {
        let interval = TransportFeedbackSchedule.interval(receivingBitsPerSecond: 64_000)
        #expect(interval >= 130_000_000 && interval <= 140_000_000)
        #expect(TransportFeedbackSchedule.interval(receivingBitsPerSecond: 500_000) == 100_000_000)
        #expect(TransportFeedbackSchedule.interval(receivingBitsPerSecond: 0) == 500_000_000)
        let sent = feedbacks(packetMilliseconds: 20, receivingBitsPerSecond: 64_000, seconds: 10)
        #expect(sent.count >= 68 && sent.count <= 75, "\(sent.count) feedbacks in 10 s")
    }

    /// No packets, no feedback and no deadline; the first packet after a pause is reported at
    /// once when an interval has passed since the last feedback, else when it has.
    @Test func aPauseHasNoDeadlineAndTheFirstPacketAfterItWaitsOnlyForTheInterval() {
        var schedule = TransportFeedbackSchedule()
        let interval: UInt64 = 300_000_000
        func isDue(_ now: UInt64, unreported: Int) -> Bool {
            schedule.due(unreported: unreported, interval: interval).map { now >= $0 } ?? false
        }
        #expect(isDue(1_000_000_000, unreported: 1))
        schedule.sent(now: 1_000_000_000)
        #expect(!isDue(1_050_000_000, unreported: 0))
        #expect(schedule.due(unreported: 0, interval: interval) == nil)
        // A packet 100 ms after the feedback: due 300 ms after it, not 100 ms after the packet.
        #expect(!isDue(1_100_000_000, unreported: 1))
        #expect(schedule.due(unreported: 1, interval: interval) == 1_300_000_000)
        #expect(!isDue(1_299_000_000, unreported: 2))
        #expect(isDue(1_300_000_000, unreported: 3))
        schedule.sent(now: 1_300_000_000)
        // Two seconds of silence, then a packet: reported on the next pass.
        #expect(!isDue(2_000_000_000, unreported: 0))
        #expect(isDue(3_300_000_000, unreported: 1))
    }
}
