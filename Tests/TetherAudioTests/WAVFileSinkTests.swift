import Testing
import TetherAudio
import TetherRealtime

@Suite("WAVFileSink")
struct WAVFileSinkTests {
    /// A frame whose samples all hold `value`.
    static func frame(_ value: Int16, samplesPerFrame: Int = 960) -> [Int16] {
        Array(repeating: value, count: samplesPerFrame)
    }

    @Test("records the frames played, then silence for each underrun, one frame per tick")
    func recordsFramesAndUnderrunSilence() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("out.wav")
        let endpoint = AudioEndpoint(ringCapacityFrames: 16)
        for value in 1...5 { #expect(push(Self.frame(Int16(value)), into: endpoint.ring)) }

        let sink = WAVFileSink(path: path)
        let started = MonotonicClock.nanoseconds()
        try sink.start(endpoint)
        #expect(waitForSignals(endpoint, count: 12))
        sink.stop()
        let elapsedSeconds = Double(MonotonicClock.nanoseconds() - started) / 1e9
        let statistics = sink.statistics

        #expect(sink.writeError == nil)
        #expect(statistics.framesTransferred == 5)
        #expect(statistics.underruns >= 7)
        let file = try WAVFile.read(path: path)
        #expect(file.sampleRateHertz == 48_000)
        let framesInFile = file.samples.count / 960
        #expect(file.samples.count == (statistics.framesTransferred + statistics.underruns) * 960)
        // One frame per 20 ms tick: never more than real time allows, and not far fewer.
        #expect(Double(framesInFile) <= elapsedSeconds / 0.020 + 1)
        #expect(framesInFile >= 12)
        let expected = (1...5).flatMap { Self.frame(Int16($0)) }
            + Array(repeating: 0, count: (framesInFile - 5) * 960)
        #expect(file.samples == expected)
    }

    @Test("the header is patched with the real sizes at stop")
    func headerSizesArePatched() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("sizes.wav")
        let format = AudioFormat(sampleRateHertz: 16_000, frameDurationMilliseconds: 10)
        let endpoint = AudioEndpoint(format: format)
        let sink = WAVFileSink(path: path)
        try sink.start(endpoint)
        #expect(waitForSignals(endpoint, count: 3))
        sink.stop()

        let bytes = try #require(fileBytes(path))
        func field(_ offset: Int) -> Int {
            Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16 | Int(bytes[offset + 3]) << 24
        }
        #expect(bytes.count >= 44 + 3 * 320)
        #expect(field(4) == bytes.count - 8)
        #expect(field(40) == bytes.count - 44)
        #expect(field(24) == 16_000)
        #expect((bytes.count - 44) % 320 == 0)
    }

    @Test("what a media loop feeds on each wake-up is recorded in order")
    func recordsFedAudioInOrder() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("fed.wav")
        let endpoint = AudioEndpoint(ringCapacityFrames: 8)
        let sink = WAVFileSink(path: path)
        var nextValue: Int16 = 1
        // Keep two frames queued, topping up on every wake-up, like the media loop.
        for _ in 0..<2 {
            push(Self.frame(nextValue), into: endpoint.ring)
            nextValue += 1
        }
        try sink.start(endpoint)
        let limit = deadline(afterSeconds: 10)
        while nextValue <= 20 && endpoint.wakeup.waitForNextSignal(untilMonotonicNanoseconds: limit) {
            while nextValue <= 20 && endpoint.ring.availableToRead < 2 * 960 {
                push(Self.frame(nextValue), into: endpoint.ring)
                nextValue += 1
            }
        }
        #expect(nextValue == 21)
        #expect(waitForSignals(endpoint, count: 4))  // the last frames are played
        sink.stop()

        let samples = try WAVFile.read(path: path).samples
        let played = samples.filter { $0 != 0 }
        #expect(played == (1...20).flatMap { Self.frame(Int16($0)) })
        #expect(sink.statistics.framesTransferred == 20)
    }

    @Test("a path that cannot be created is refused at start")
    func uncreatablePathIsRefused() {
        let sink = WAVFileSink(path: "/nonexistent-tether-directory/out.wav")
        #expect {
            try sink.start(AudioEndpoint())
        } throws: { error in
            guard case .cannotOpenFile(let path, _) = error as? AudioDeviceError else { return false }
            return path == "/nonexistent-tether-directory/out.wav"
        }
        sink.stop()  // harmless when never started
    }
}
