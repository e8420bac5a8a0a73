import Testing
import TetherCore

@Suite("Sender adaptation to the loss the peer reports")
struct LossAdaptationTests {
    func at(_ seconds: Double) -> MonotonicInstant { MonotonicInstant(nanoseconds: UInt64(seconds * 1e9)) }

    @Test func cleanReportsChangeNothing() {
        var a = LossAdaptation(baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true)
        #expect(a.settings == .init(expectedLossPercent: 0, inBandFEC: false, bitrateBitsPerSecond: 32_000))
        for t in stride(from: 0.0, to: 30, by: 2.5) { #expect(a.reportReceived(fractionLost: 0, now: at(t)) == nil) }
    }

    @Test func lossTurnsFECOnAtOnceAndRaisesTheBitrateWithinItsBound() throws {
        var a = LossAdaptation(baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true)
        let sChange = a.reportReceived(fractionLost: 26.0 / 256, now: at(5))
        let s = try #require(sChange)  // 10.2 %
        #expect(s == .init(expectedLossPercent: 10, inBandFEC: true, bitrateBitsPerSecond: 48_000))  // +50 %
        let heavyChange = a.reportReceived(fractionLost: 0.5, now: at(7.5))
        let heavy = try #require(heavyChange)
        #expect(heavy.expectedLossPercent == 30)  // bounded
        #expect(heavy.bitrateBitsPerSecond == 64_000)  // twice the base at most
    }

    @Test func oneCleanReportDoesNotSwitchProtectionOffButItDecaysWithItsHalfLife() throws {
        var a = LossAdaptation(baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true)
        _ = a.reportReceived(fractionLost: 0.2, now: at(0))
        // 2.5 s later: 20 % × 0.5^(2.5/8) = 16.1 % → 16 (a change of 4 points ≥ hysteresis).
        #expect(a.reportReceived(fractionLost: 0, now: at(2.5))?.expectedLossPercent == 16)
        // 8 s after the loss: 10 %.
        #expect(a.reportReceived(fractionLost: 0, now: at(8))?.expectedLossPercent == 10)
        // It reaches zero (and FEC goes off) only after about 5 half-lives of clean reports.
        var t = 8.0
        while a.settings.expectedLossPercent > 0 && t < 120 {
            t += 2.5
            _ = a.reportReceived(fractionLost: 0, now: at(t))
        }
        #expect(a.settings == .init(expectedLossPercent: 0, inBandFEC: false, bitrateBitsPerSecond: 32_000))
        #expect(t > 30 && t < 50, "protection ended at \(t) s")
    }

    @Test func smallWobblesWithinTheHysteresisDoNotReconfigure() throws {
        var a = LossAdaptation(baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true)
        let first = a.reportReceived(fractionLost: 0.05, now: at(0))
        #expect(first != nil)
        #expect(a.reportReceived(fractionLost: 0.06, now: at(0.5)) == nil)  // 6 vs 5: below 2 points
        #expect(a.reportReceived(fractionLost: 0.07, now: at(1))?.expectedLossPercent == 7)
    }

    @Test func aPeerThatRefusesFECGetsExpectedLossButNoFEC() throws {
        var a = LossAdaptation(baseBitrateBitsPerSecond: 24_000, maximumBitrateBitsPerSecond: 24_000, peerAcceptsFEC: false)
        let sChange = a.reportReceived(fractionLost: 0.1, now: at(1))
        let s = try #require(sChange)
        #expect(s == .init(expectedLossPercent: 10, inBandFEC: false, bitrateBitsPerSecond: 24_000))  // capped by the maximum
    }

    @Test func heavyLossSendsPacketsTwiceAndReadsTheReportsAsBothCopiesLost() throws {
        var a = LossAdaptation(
            baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true, allowsRedundancy: true)
        // 10 %: FEC and more bitrate, no copies yet.
        let moderateChange = a.reportReceived(fractionLost: 0.10, now: at(1))
        let moderate = try #require(moderateChange)
        #expect(!moderate.redundancy && moderate.bitrateBitsPerSecond == 48_000)
        // 20 %: copies, and the bitrate is the base + 25 % (twice that on the wire).
        let heavyChange = a.reportReceived(fractionLost: 0.20, now: at(2))
        let heavy = try #require(heavyChange)
        #expect(heavy == .init(expectedLossPercent: 20, inBandFEC: true, bitrateBitsPerSecond: 40_000, redundancy: true))
        // The peer now loses a packet only when both copies were lost: 4 % reported is the
        // same 20 % path, and nothing changes.
        #expect(a.reportReceived(fractionLost: 0.04, now: at(3)) == nil)
        #expect(a.settings.redundancy && a.lossEstimate > 0.19)
        // The path gets better: 0.25 % reported (5 % path) — the estimate decays (8 s half-life)
        // and the copies stop once it is under 8 %.
        var t = 4.0
        while a.settings.redundancy && t < 60 {
            _ = a.reportReceived(fractionLost: 0.0025, now: at(t))
            t += 2.5
        }
        #expect(!a.settings.redundancy)
        #expect(t > 10 && t < 25)  // 20 % → 8 %: 1.3 half-lives ≈ 10.6 s
        #expect(a.settings.expectedLossPercent < 8 && a.settings.inBandFEC)
    }

    @Test func copiesAreNotSentWhenNotAllowed() throws {
        var a = LossAdaptation(baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true)
        let change = a.reportReceived(fractionLost: 0.3, now: at(1))
        let s = try #require(change)
        #expect(!s.redundancy && s.bitrateBitsPerSecond == 64_000)
    }
}
