import Testing
import TetherAudio
import TetherRealtime

@Suite("WAVFileSource")
struct WAVFileSourceTests {
    /// Samples 1, 2, 3, … so order and position are visible.
    static func ramp(count: Int) -> [Int16] { (1...count).map { Int16($0) } }

    @Test("streams the file in order, then silence when not looping")
    func streamsInOrderThenSilence() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("ramp.wav")
        let content = Self.ramp(count: 2_400)  // 2.5 frames of 960
        try WAVFile.write(samples: content, sampleRateHertz: 48_000, to: path)

        let source = WAVFileSource(path: path, loop: false)
        let endpoint = AudioEndpoint(ringCapacityFrames: 16)
        try source.start(endpoint)
        #expect(!source.hasReachedEnd)
        let captured = captureFrames(from: endpoint, seconds: 10, frameLimit: 5)
        source.stop()

        try #require(captured.frames == 5)
        #expect(source.hasReachedEnd)
        #expect(source.statistics.overruns == 0)
        #expect(Array(captured.samples.prefix(2_400)) == content)
        #expect(captured.samples.dropFirst(2_400).allSatisfy { $0 == 0 })
    }

    @Test("loops back to the start of the file")
    func loopsToTheStart() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("short.wav")
        let content = Self.ramp(count: 1_000)  // not a whole number of frames
        try WAVFile.write(samples: content, sampleRateHertz: 16_000, to: path)

        let format = AudioFormat(sampleRateHertz: 16_000, frameDurationMilliseconds: 10)  // 160-sample frames
        let source = WAVFileSource(path: path)
        let endpoint = AudioEndpoint(format: format, ringCapacityFrames: 32)
        try source.start(endpoint)
        let captured = captureFrames(from: endpoint, seconds: 10, frameLimit: 20)  // 3 200 samples
        source.stop()

        try #require(captured.frames == 20)
        #expect(!source.hasReachedEnd)
        let expected = (0..<3_200).map { content[$0 % content.count] }
        #expect(captured.samples == expected)
    }

    @Test("a stereo float file is streamed downmixed")
    func streamsDownmixedStereoFloat() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("stereo.wav")
        let frames: [[Float]] = (0..<960).map { n in [Float(n) / 32_768, Float(n + 2) / 32_768] }
        writeFile(path, WAVBuilder.build(.float32(frames)))

        let source = WAVFileSource(path: path, loop: false)
        let endpoint = AudioEndpoint(ringCapacityFrames: 4)
        try source.start(endpoint)
        let captured = captureFrames(from: endpoint, seconds: 10, frameLimit: 1)
        source.stop()
        #expect(captured.samples == (0..<960).map { Int16($0 + 1) })
    }

    @Test("a file at another sample rate is refused, naming the rate")
    func wrongSampleRateIsRefused() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("cd.wav")
        try WAVFile.write(samples: Self.ramp(count: 100), sampleRateHertz: 44_100, to: path)

        let source = WAVFileSource(path: path)
        #expect {
            try source.start(AudioEndpoint())
        } throws: { error in
            guard case .unsupportedWAVFormat(let reason) = error as? AudioDeviceError else { return false }
            return reason.contains("44100") && reason.contains("48000")
        }
        #expect(source.statistics.scheduling == .notStarted)
        // The failed start left nothing running: a good endpoint still starts.
        let ok = WAVFileSource(path: path)
        try ok.start(AudioEndpoint(format: AudioFormat(sampleRateHertz: 44_100, frameDurationMilliseconds: 10)))
        ok.stop()
    }

    @Test("missing and garbage files are refused at start")
    func unreadableFilesAreRefused() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let garbage = directory.file("garbage.wav")
        writeFile(garbage, Array(repeating: 0x5A, count: 100))
        #expect {
            try WAVFileSource(path: directory.file("missing.wav")).start(AudioEndpoint())
        } throws: { error in
            guard case .cannotOpenFile = error as? AudioDeviceError else { return false }
            return true
        }
        #expect {
            try WAVFileSource(path: garbage).start(AudioEndpoint())
        } throws: { error in
            guard case .invalidWAVFile = error as? AudioDeviceError else { return false }
            return true
        }
    }

    @Test("an empty non-looping file sends silence and reports the end at once")
    func emptyFileSendsSilence() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("empty.wav")
        try WAVFile.write(samples: [], sampleRateHertz: 48_000, to: path)
        for loop in [false, true] {
            let source = WAVFileSource(path: path, loop: loop)
            let endpoint = AudioEndpoint(ringCapacityFrames: 4)
            try source.start(endpoint)
            let captured = captureFrames(from: endpoint, seconds: 10, frameLimit: 2)
            source.stop()
            #expect(captured.samples == Array(repeating: 0, count: 1_920))
            #expect(source.hasReachedEnd == !loop)
        }
    }
}
