import Testing
import TetherRTP

struct SequenceNumberTests {
    @Test func distanceIsSignedAndWrapAware() {
        #expect(SequenceNumber.distance(from: 65535, to: 0) == 1)
        #expect(SequenceNumber.distance(from: 0, to: 65535) == -1)
        #expect(SequenceNumber.distance(from: 65500, to: 100) == 136)
        #expect(SequenceNumber.distance(from: 10, to: 10) == 0)
        #expect(SequenceNumber.distance(from: 0, to: 32767) == 32767)
        #expect(SequenceNumber.distance(from: 0, to: 32768) == -32768)
    }

    @Test func newerAndOlderFollowSerialNumberArithmetic() {
        #expect(SequenceNumber.isNewer(0, than: 65535))
        #expect(!SequenceNumber.isNewer(65535, than: 0))
        #expect(SequenceNumber.isOlder(65535, than: 0))
        #expect(!SequenceNumber.isNewer(5, than: 5))
        #expect(!SequenceNumber.isOlder(5, than: 5))
        #expect(SequenceNumber.isNewer(1000, than: 999))
        #expect(SequenceNumber.newer(65530, 3) == 3)
        #expect(SequenceNumber.newer(3, 65530) == 3)
    }

    @Test func distanceIsAntisymmetricExceptAtHalfRange() {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<1000 {
            let a = UInt16.random(in: .min ... .max, using: &rng)
            let b = UInt16.random(in: .min ... .max, using: &rng)
            let forward = SequenceNumber.distance(from: a, to: b)
            #expect(UInt16(truncatingIfNeeded: Int(a) + forward) == b)
            if forward != -32768 {
                #expect(SequenceNumber.distance(from: b, to: a) == -forward)
            }
        }
    }
}
