import Glibc
import Synchronization
import Testing
import TetherAudio
import TetherRealtime

/// True when `scripts/with-test-audio.sh` provides the private sound server and the
/// `tether_*` ALSA PCMs.
private let testAudioAvailable = getenv("TETHER_TEST_AUDIO").map { String(cString: $0) } == "1"

/// Keeps a playback ring topped up with a continuous sine (phase carried across frames), woken by
/// the playback device's wake-up as the media loop would be.
private final class ToneFeeder: Sendable {
    private let thread = RealtimeThread(name: "test-feeder", realtimePriority: 0)

    init(_ endpoint: AudioEndpoint, frequencyHertz: Double, levelDBFS: Double) throws {
        let format = endpoint.format
        let amplitude = 32_767 * pow(10, levelDBFS / 20)
        let samplesPerFrame = format.samplesPerFrame
        let topUp: @Sendable (inout Int) -> Void = { next in
            while endpoint.ring.availableToWrite >= samplesPerFrame {
                let frame = sine(
                    frequencyHertz: frequencyHertz, amplitude: amplitude, sampleRateHertz: format.sampleRateHertz,
                    range: next..<(next + samplesPerFrame))
                guard push(frame, into: endpoint.ring) else { return }
                next += samplesPerFrame
            }
        }
        try thread.start { thread in
            var next = 0
            topUp(&next)
            while !thread.isStopRequested {
                _ = endpoint.wakeup.waitForNextSignal(untilMonotonicNanoseconds: deadline(afterSeconds: 0.1))
                topUp(&next)
            }
        }
    }

    func stop() { thread.stop() }
}

@Suite("ALSA devices", .serialized)
struct ALSADeviceTests {
    @Test("enumeration lists the test PCMs, for capture and playback", .enabled(if: testAudioAvailable))
    func enumerationListsTestPCMs() throws {
        let devices = ALSADevices.list()
        let names = Set(devices.map(\.name))
        for expected in ["tether_spk", "tether_spk2", "tether_spk_monitor", "tether_mic", "tether_mic_feed", "default"] {
            #expect(names.contains(expected), "\(expected) missing from \(names.sorted())")
        }
        let speaker = try #require(devices.first { $0.name == "tether_spk" })
        #expect(speaker.supportsPlayback)
        #expect(speaker.supportsCapture)  // no IOID hint: ALSA allows both directions
        #expect(!speaker.description.isEmpty)
    }

    @Test("opening a PCM that does not exist throws deviceUnavailable")
    func nonexistentPCMThrows() {
        let endpoint = AudioEndpoint(ringCapacityFrames: 8)
        let capture = ALSACapture(pcmName: "tether_no_such_pcm")
        #expect {
            try capture.start(endpoint)
        } throws: { error in
            guard case .deviceUnavailable(let name, let reason) = error as? AudioDeviceError else { return false }
            return name == "tether_no_such_pcm" && !reason.isEmpty
        }
        let playback = ALSAPlayback(pcmName: "tether_no_such_pcm")
        #expect(throws: AudioDeviceError.self) { try playback.start(endpoint) }
        capture.stop()  // stopping a device that never started is harmless
        playback.stop()
    }

    @Test(
        "a 1 kHz tone played on tether_spk is captured from its monitor at the same frequency and level",
        .enabled(if: testAudioAvailable), .timeLimit(.minutes(1)),
        arguments: [(10, 10), (20, 20), (10, 20)])
    func toneLoopback(periodMilliseconds: Int, frameMilliseconds: Int) throws {
        let format = AudioFormat(frameDurationMilliseconds: frameMilliseconds)
        let playbackEndpoint = AudioEndpoint(format: format, ringCapacityFrames: 200 / frameMilliseconds)
        let captureEndpoint = AudioEndpoint(format: format, ringCapacityFrames: 2_000 / frameMilliseconds)
        let playback = ALSAPlayback(pcmName: "tether_spk", periodMilliseconds: periodMilliseconds, periodCount: 3)
        let capture = ALSACapture(
            pcmName: "tether_spk_monitor", periodMilliseconds: periodMilliseconds, periodCount: 3)
        let events = Mutex<[AudioDeviceEvent]>([])
        playback.setEventHandler { event in events.withLock { $0.append(event) } }
        capture.setEventHandler { event in events.withLock { $0.append(event) } }

        let feeder = try ToneFeeder(playbackEndpoint, frequencyHertz: 1_000, levelDBFS: -12)
        try playback.start(playbackEndpoint)
        try capture.start(captureEndpoint)
        let framesWanted = 1_800 / frameMilliseconds  // 0.3 s skipped + 1.5 s analysed
        let captured = captureFrames(from: captureEndpoint, seconds: 20, frameLimit: framesWanted)
        let captureStatistics = capture.statistics
        let playbackStatistics = playback.statistics
        capture.stop()
        playback.stop()
        feeder.stop()

        try #require(captured.frames == framesWanted, "captured \(captured.frames) of \(framesWanted) frames")
        let skipped = 300 * format.sampleRateHertz / 1_000
        let analysed = Array(captured.samples.dropFirst(skipped))
        let frequencyHertz = try #require(ToneAnalysis.dominantFrequencyHertz(analysed, sampleRateHertz: 48_000))
        #expect(abs(frequencyHertz - 1_000) <= 2, "dominant \(frequencyHertz) Hz")
        let levelDBFS = ToneAnalysis.rmsDBFS(analysed)
        #expect(abs(levelDBFS - -12) <= 1.5, "level \(levelDBFS) dBFS")

        #expect(captureStatistics.framesTransferred >= framesWanted)
        #expect(captureStatistics.overruns == 0)
        #expect(playbackStatistics.framesTransferred > 0)
        #expect(captureStatistics.scheduling != .notStarted)
        #expect(playbackStatistics.scheduling != .notStarted)
        #expect(events.withLock { $0 }.isEmpty)
    }

    @Test(
        "statistics count frames at the device's pace; stop is idempotent and a restart works",
        .enabled(if: testAudioAvailable), .timeLimit(.minutes(1)))
    func statisticsAndRestart() throws {
        let capture = ALSACapture(pcmName: "tether_mic", periodMilliseconds: 20)
        #expect(capture.statistics.scheduling == .notStarted)
        for run in 0..<2 {
            let endpoint = AudioEndpoint(ringCapacityFrames: 64)
            try capture.start(endpoint)
            #expect(throws: AudioDeviceError.alreadyStarted(name: capture.name)) { try capture.start(endpoint) }
            #expect(capture.grantedGeometry.periodFrames > 0)
            let captured = captureFrames(from: endpoint, seconds: 20, frameLimit: 25)
            let statistics = capture.statistics
            capture.stop()
            capture.stop()
            #expect(captured.frames == 25, "run \(run)")
            #expect(statistics.framesTransferred >= 25, "run \(run)")
            #expect(statistics.scheduling != .notStarted)
            // 25 frames of 20 ms arrive at device pace: not in a burst (allowing for the buffer).
            #expect(captured.elapsedSeconds >= 0.3, "run \(run): \(captured.elapsedSeconds) s")
            #expect(capture.grantedGeometry.periodFrames == 0)
        }

        let playback = ALSAPlayback(pcmName: "tether_spk2", periodMilliseconds: 20)
        for _ in 0..<2 {
            let endpoint = AudioEndpoint(ringCapacityFrames: 16)
            try playback.start(endpoint)
            // Nothing feeds the ring: the sink plays silence, counting underruns, and signals. It
            // asks the media loop to keep one period queued, and reports its delay.
            #expect(waitForSignals(endpoint, count: 10, timeoutSeconds: 20))
            let statistics = playback.statistics
            let period = playback.grantedGeometry.periodFrames
            #expect(period > 0 && endpoint.demand.queuedSamples == period, "demand \(endpoint.demand.queuedSamples), period \(period)")
            playback.stop()
            playback.stop()
            #expect(statistics.underruns >= 10)
            #expect(statistics.framesTransferred == 0)
            #expect(endpoint.demand.silenceSamples >= 10 * 48, "\(endpoint.demand.silenceSamples) samples of silence counted")
            #expect(statistics.scheduling != .notStarted)
            #expect(statistics.latencyMilliseconds != nil)
            #expect(endpoint.demand.queuedSamples == 0)
        }
    }

    @Test(
        "a capture stream killed by the server is reported failed, then reopened and recovered",
        .enabled(if: testAudioAvailable), .timeLimit(.minutes(1)))
    func lostStreamRecovers() throws {
        let capture = ALSACapture(pcmName: "tether_spk2_monitor", periodMilliseconds: 20)
        let events = Mutex<[AudioDeviceEvent]>([])
        let eventWakeup = Wakeup()
        capture.setEventHandler { event in
            events.withLock { $0.append(event) }
            eventWakeup.signal()
        }
        let endpoint = AudioEndpoint(ringCapacityFrames: 64)
        try capture.start(endpoint)
        defer { capture.stop() }
        #expect(captureFrames(from: endpoint, seconds: 20, frameLimit: 5).frames == 5)

        let indexes = PulseControl.ownStreamIndexes(.sourceOutputs)
        try #require(indexes.count == 1, "own source outputs: \(indexes)")
        // The server ends the stream, through scripts/with-test-audio.sh's control script.
        let control = try #require(PulseTestEnvironment.control)
        try #require(PulseControl.run("'\(control)' kill-source-output \(indexes[0])").status == 0)

        let limit = deadline(afterSeconds: 20)
        while events.withLock({ $0.count }) < 2 && eventWakeup.wait(untilMonotonicNanoseconds: limit) {}
        let seen = events.withLock { $0 }
        try #require(seen.count >= 2, "events: \(seen)")
        guard case .failed(.deviceUnavailable(let name, _)) = seen[0] else {
            Issue.record("first event is \(seen[0])")
            return
        }
        #expect(name == "tether_spk2_monitor")
        #expect(seen[1] == .recovered(deviceName: "tether_spk2_monitor"))
        // Frames flow again after the recovery.
        _ = endpoint.ring.discard(endpoint.ring.availableToRead)
        #expect(captureFrames(from: endpoint, seconds: 20, frameLimit: 5).frames == 5)
    }
}
