import Testing
import TetherCore

@Suite("MonotonicInstant")
struct MonotonicInstantTests {
    @Test func secondsAndMillisecondsConvertToExactNanoseconds() {
        let start = MonotonicInstant(milliseconds: 10_000)
        #expect(start.nanoseconds == 10_000_000_000)
        #expect(start.advanced(bySeconds: 50).nanoseconds == 60_000_000_000)
        #expect(start.advanced(bySeconds: 0.7).nanoseconds == 10_700_000_000)
        #expect(start.advanced(byMilliseconds: 20) == MonotonicInstant(nanoseconds: 10_020_000_000))
    }

    @Test func durationsSinceALaterInstantAreZero() {
        let early = MonotonicInstant(milliseconds: 1_000)
        let late = MonotonicInstant(milliseconds: 3_500)
        #expect(late.seconds(since: early) == 2.5)
        #expect(late.nanoseconds(since: early) == 2_500_000_000)
        #expect(early.seconds(since: late) == 0)
        #expect(early < late)
    }

    @Test func advancingSaturatesInsteadOfOverflowing() {
        let nearEnd = MonotonicInstant(nanoseconds: .max - 5)
        #expect(nearEnd.advanced(byNanoseconds: 10).nanoseconds == .max)
        #expect(nearEnd.advanced(byMilliseconds: .max).nanoseconds == .max)
    }

    @Test func descriptionShowsSecondsWithNanosecondPrecision() {
        #expect(MonotonicInstant(nanoseconds: 12_000_000_345).description == "12.000000345 s")
        #expect(MonotonicInstant.zero.description == "0.000000000 s")
    }
}
