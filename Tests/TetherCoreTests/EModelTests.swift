import Testing
import TetherCore

/// Values computed by hand from the formulas in `EModel`'s documentation.
@Suite("E-model (ITU-T G.107, simplified)")
struct EModelTests {
    @Test(arguments: [
        // (one-way delay ms, loss %, burst ratio, R, MOS)
        (0.0, 0.0, 1.0, 93.2, 4.4093),
        (100.0, 0.0, 1.0, 90.8, 4.3581),
        (200.0, 0.0, 1.0, 85.903, 4.2262),  // past 177.3 ms the delay term steepens
        (0.0, 5.0, 1.0, 74.2, 3.7873),
        (150.0, 10.0, 1.0, 57.9333, 2.9924),
        (300.0, 20.0, 2.0, 9.1697, 1.0246),  // bursty loss hurts more than random loss
    ])
    func ratingAndMOSMatchHandComputedValues(delay: Double, loss: Double, burst: Double, r: Double, mos: Double) {
        let rating = EModel.opus.rating(oneWayDelayMilliseconds: delay, lossPercent: loss, burstRatio: burst)
        #expect(abs(rating - r) < 0.001, "R \(rating)")
        #expect(abs(EModel.meanOpinionScore(rating: rating) - mos) < 0.0005, "MOS \(EModel.meanOpinionScore(rating: rating))")
    }

    @Test func burstyLossRatesWorseThanTheSameRandomLoss() {
        let random = EModel.opus.rating(oneWayDelayMilliseconds: 80, lossPercent: 8, burstRatio: 1)
        let bursty = EModel.opus.rating(oneWayDelayMilliseconds: 80, lossPercent: 8, burstRatio: 3)
        #expect(bursty < random)
    }

    @Test func mosIsClampedOutsideTheRatingScale() {
        #expect(EModel.meanOpinionScore(rating: -20) == 1)
        #expect(EModel.meanOpinionScore(rating: 0) == 1)
        #expect(EModel.meanOpinionScore(rating: 100) == 4.5)
        #expect(EModel.meanOpinionScore(rating: 130) == 4.5)
    }

    @Test func outOfRangeInputsAreClampedNotPropagated() {
        let worst = EModel.opus.rating(oneWayDelayMilliseconds: 0, lossPercent: 250)
        #expect(worst == EModel.opus.rating(oneWayDelayMilliseconds: 0, lossPercent: 100))
        #expect(EModel.opus.rating(oneWayDelayMilliseconds: -5, lossPercent: -1) == 93.2)
    }
}
