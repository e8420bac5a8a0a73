import Testing
import TetherRTP

struct ExtendedSequenceTrackerTests {
    @Test func extendsAcrossWrapAround() {
        var tracker = ExtendedSequenceTracker()
        let extended = [65534, 65535, 0, 1].map { tracker.extend(UInt16($0)) }
        #expect(extended == [65534, 65535, 65536, 65537])
        #expect(tracker.highestExtended == 65537)
    }

    @Test func reorderingAcrossWrapMapsToPreviousCycle() {
        var tracker = ExtendedSequenceTracker()
        let extended = [65535, 1, 0, 65534, 2].map { tracker.extend(UInt16($0)) }
        #expect(extended == [65535, 65537, 65536, 65534, 65538])
        #expect(tracker.highestExtended == 65538)
    }

    @Test func packetBeforeFirstAcrossWrapIsNegative() {
        var tracker = ExtendedSequenceTracker()
        #expect(tracker.extend(0) == 0)
        #expect(tracker.extend(65535) == -1)
        #expect(tracker.highestExtended == 0)
    }

    @Test func followsManyWrapsMonotonically() {
        var tracker = ExtendedSequenceTracker()
        var expected: Int64 = 40000
        #expect(tracker.extend(UInt16(expected)) == expected)
        for _ in 0..<20 {
            expected += 20000
            #expect(tracker.extend(UInt16(truncatingIfNeeded: expected)) == expected)
        }
        #expect(tracker.highestExtended == 440000)
    }

    @Test func extendedValueDoesNotRecord() {
        var tracker = ExtendedSequenceTracker()
        #expect(tracker.highestExtended == nil)
        tracker.extend(65535)
        #expect(tracker.extendedValue(for: 3) == 65539)
        #expect(tracker.highestExtended == 65535)
        tracker.reset()
        #expect(tracker.highestExtended == nil)
        #expect(tracker.extend(3) == 3)
    }
}
