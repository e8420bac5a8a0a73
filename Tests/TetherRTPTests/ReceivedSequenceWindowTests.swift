import Testing
@testable import TetherRTP

struct ReceivedSequenceWindowTests {
    /// Marks a packet and reports whether it was new (keeps mutation out of `#expect`).
    private func mark(_ window: inout ReceivedSequenceWindow, _ packetsBehind: Int) -> Bool {
        window.markReceived(packetsBehind: packetsBehind)
    }

    @Test func detectsDuplicatesAcrossWordBoundary() {
        var window = ReceivedSequenceWindow()
        window.reset()
        window.advance(by: 70)  // highest moved 70 ahead; old highest is now 70 behind
        let results = [
            mark(&window, 0), mark(&window, 70), mark(&window, 69), mark(&window, 69),
        ]
        #expect(results == [false, false, true, false])
        window.advance(by: 1)
        let afterAdvance = [mark(&window, 70), mark(&window, 71), mark(&window, 5), mark(&window, 127)]
        #expect(afterAdvance == [false, false, true, true])
    }

    @Test func largeAdvanceForgetsHistory() {
        var window = ReceivedSequenceWindow()
        window.reset()
        window.advance(by: 200)
        // 127 behind: new; 300 behind: outside window, reported as new; 0: the new highest.
        let results = [mark(&window, 127), mark(&window, 300), mark(&window, 0)]
        #expect(results == [true, true, false])
    }

    @Test func advanceByExactly64MovesLowWordToHighWord() {
        var window = ReceivedSequenceWindow()
        window.reset()
        window.advance(by: 64)
        let results = [mark(&window, 64), mark(&window, 63), mark(&window, 0)]
        #expect(results == [false, true, false])
    }
}
