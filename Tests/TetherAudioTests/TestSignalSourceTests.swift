import Glibc
import Testing
import TetherAudio
import TetherRealtime

@Suite("TestSignalSource")
struct TestSignalSourceTests {
    @Test("captured tone has the requested frequency and level, with continuous phase across frames")
    func capturedToneMatchesRequest() throws {
        let source = TestSignalSource(frequencyHertz: 440, levelDBFS: -12)
        let endpoint = AudioEndpoint(ringCapacityFrames: 64)
        try source.start(endpoint)
        let captured = captureFrames(from: endpoint, seconds: 10, frameLimit: 25)
        source.stop()

        #expect(captured.frames == 25)
        #expect(source.statistics.overruns == 0)
        let samples = captured.samples
        try #require(samples.count == 25 * 960)

        let frequencyHertz = try #require(ToneAnalysis.dominantFrequencyHertz(samples, sampleRateHertz: 48_000))
        #expect(abs(frequencyHertz - 440) <= 2)
        #expect(abs(ToneAnalysis.rmsDBFS(samples) - -12) <= 0.5)

        // No step anywhere (in particular at frame boundaries) beyond the sine's largest slope.
        let amplitude = 32_767 * pow(10, -12.0 / 20)
        let largestStep = amplitude * 2 * Double.pi * 440 / 48_000 + 2
        let steps = zip(samples, samples.dropFirst()).map { abs(Double($1) - Double($0)) }
        #expect(steps.max()! <= largestStep)
        // Stronger: the whole capture is one ideal sine starting at phase zero (no frame lost,
        // repeated or shifted).
        let ideal = sine(frequencyHertz: 440, amplitude: amplitude, sampleRateHertz: 48_000, range: 0..<samples.count)
        let worstError = zip(samples, ideal).map { abs(Int($0) - Int($1)) }.max()!
        #expect(worstError <= 1)
    }

    @Test("bursts: the tone sounds sample-exactly in the first on-milliseconds of every period, silence between")
    func burstsAreSampleExact() throws {
        let source = TestSignalSource(
            frequencyHertz: 1_000, levelDBFS: -6, bursts: TestSignalSource.Bursts(onMilliseconds: 50, everyMilliseconds: 200))
        let endpoint = AudioEndpoint(ringCapacityFrames: 64)
        try source.start(endpoint)
        let captured = captureFrames(from: endpoint, seconds: 10, frameLimit: 20)  // 400 ms: two bursts
        source.stop()
        try #require(captured.samples.count == 20 * 960)
        let amplitude = 32_767 * pow(10, -6.0 / 20)
        let ideal = sine(frequencyHertz: 1_000, amplitude: amplitude, sampleRateHertz: 48_000, range: 0..<captured.samples.count)
        for (n, sample) in captured.samples.enumerated() {
            let sounding = n % 9_600 < 2_400
            let expected = sounding ? Int(ideal[n]) : 0
            if abs(Int(sample) - expected) > 1 {
                Issue.record("sample \(n) is \(sample), expected \(expected)")
                break
            }
        }
        #expect(source.name.contains("50 ms bursts every 200 ms"))
    }

    @Test("other frequencies, levels and formats are honoured", arguments: [
        (1_000.0, -20.0, 16_000, 10),
        (3_150.5, -6.0, 48_000, 40),
    ])
    func honoursFrequencyLevelAndFormat(frequencyHertz: Double, levelDBFS: Double, rateHertz: Int, frameMilliseconds: Int)
        throws
    {
        let format = AudioFormat(sampleRateHertz: rateHertz, frameDurationMilliseconds: frameMilliseconds)
        let source = TestSignalSource(frequencyHertz: frequencyHertz, levelDBFS: levelDBFS)
        let endpoint = AudioEndpoint(format: format, ringCapacityFrames: 64)
        try source.start(endpoint)
        let frameLimit = 400 / frameMilliseconds  // 0.4 s of audio
        let captured = captureFrames(from: endpoint, seconds: 10, frameLimit: frameLimit)
        source.stop()

        try #require(captured.frames == frameLimit)
        #expect(captured.samples.count == frameLimit * format.samplesPerFrame)
        let measuredHertz = try #require(ToneAnalysis.dominantFrequencyHertz(captured.samples, sampleRateHertz: rateHertz))
        #expect(abs(measuredHertz - frequencyHertz) <= 2)
        #expect(abs(ToneAnalysis.rmsDBFS(captured.samples) - levelDBFS) <= 0.5)
    }

    @Test("frames arrive at real-time pace", arguments: [10, 20, 40])
    func framesArriveAtRealTimePace(frameMilliseconds: Int) throws {
        let format = AudioFormat(frameDurationMilliseconds: frameMilliseconds)
        let source = TestSignalSource()
        let endpoint = AudioEndpoint(format: format, ringCapacityFrames: 64)
        try source.start(endpoint)
        let captured = captureFrames(from: endpoint, seconds: 0.5)
        source.stop()

        // 0.5 s holds 500 / frameMilliseconds frames; the first arrives one frame duration after
        // start. Margins are generous for a loaded machine, but a free-running or stalled clock fails.
        let expected = 500.0 / Double(frameMilliseconds)
        #expect(Double(captured.frames) >= expected * 0.5)
        #expect(Double(captured.frames) <= expected * 1.3 + 1)
        let statistics = source.statistics
        #expect(statistics.framesTransferred >= captured.frames)
        #expect(statistics.scheduling != .notStarted)
    }

    @Test("a full ring drops whole frames and counts overruns")
    func fullRingCountsOverruns() throws {
        let source = TestSignalSource()
        let endpoint = AudioEndpoint(ringCapacityFrames: 1)  // 1 024 samples: one 960-sample frame fits
        try source.start(endpoint)
        #expect(waitForSignals(endpoint, count: 4))
        let statistics = source.statistics
        source.stop()

        #expect(statistics.framesTransferred == 1)
        #expect(statistics.overruns >= 3)
        #expect(endpoint.ring.availableToRead == 960)
    }

    @Test("start is refused while running; a stopped source restarts with fresh statistics")
    func startStopLifecycle() throws {
        let source = TestSignalSource()
        let endpoint = AudioEndpoint(ringCapacityFrames: 1)
        try source.start(endpoint)
        #expect(throws: AudioDeviceError.alreadyStarted(name: source.name)) { try source.start(endpoint) }
        #expect(waitForSignals(endpoint, count: 3))
        source.stop()
        source.stop()  // idempotent
        #expect(source.statistics.overruns >= 2)

        let fresh = AudioEndpoint(ringCapacityFrames: 8)
        try source.start(fresh)
        #expect(source.statistics.overruns == 0)
        #expect(waitForSignals(fresh, count: 1))
        source.stop()
        #expect(source.statistics.framesTransferred >= 1)
        #expect(source.statistics.overruns == 0)
    }

    @Test("unsuitable endpoints are refused with typed errors")
    func unsuitableEndpointsAreRefused() {
        #expect(throws: AudioDeviceError.self) {
            try TestSignalSource(frequencyHertz: 30_000).start(AudioEndpoint())
        }
        do throws(AudioDeviceError) {
            try TestSignalSource(frequencyHertz: 5_000).start(AudioEndpoint(format: AudioFormat(sampleRateHertz: 8_000)))
            Issue.record("a tone above the Nyquist frequency was accepted")
        } catch {
            guard case .unsupportedFormat = error else { Issue.record("unexpected \(error)"); return }
        }
        #expect(throws: AudioDeviceError.ringTooSmall(capacitySamples: 512, samplesPerFrame: 960)) {
            try TestSignalSource().start(AudioEndpoint(format: AudioFormat(), ring: SPSCRing(capacity: 512), wakeup: EventCount()))
        }
        #expect {
            try TestSignalSource().start(AudioEndpoint(format: AudioFormat(channelCount: 2)))
        } throws: { error in
            guard case .unsupportedFormat(let reason) = error as? AudioDeviceError else { return false }
            return reason.contains("mono")
        }
    }
}
