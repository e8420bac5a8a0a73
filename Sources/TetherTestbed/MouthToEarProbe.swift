import Glibc
import Synchronization
import Tether
import TetherAudio
import TetherRealtime

/// Measures mouth-to-ear latency through real audio devices: tone bursts are "spoken" into a
/// capture device, travel a call between two sessions (Opus, SRTP, ICE on loopback, jitter
/// buffer) and come out of the peer's playback device; the onsets at the microphone and at the
/// speaker are compared.
///
/// With the private daemon of scripts/with-test-audio.sh the "air" is a pair of null sinks: the
/// bursts are played into the sink `mic`, whose monitor is session A's microphone, and session B
/// plays into `spk`, whose monitor is the ear. Both monitors are recorded at once; each
/// recording is placed on the monotonic clock from the arrival times of its frames (sample `k` of
/// a recording is at `start + k / rate`, `start` being the least-delayed arrival of a frame less
/// its position, over the next second of frames), so the two recordings share one time axis even
/// when the server dropped samples of one of them. A calibration run records the
/// same monitor twice and reports the method's own offset, which is subtracted.
public struct MouthToEarProbe: Sendable {
    public enum Backend: String, Sendable, CaseIterable {
        case pulse, alsa
    }

    public struct Result: Sendable {
        public var backend: Backend
        public var periodMilliseconds: Int
        /// One latency per burst heard, in milliseconds, calibration subtracted.
        public var latenciesMilliseconds: [Double]
        /// What the calibration (one monitor recorded twice) measured and was subtracted.
        public var calibrationMilliseconds: Double
        /// Bursts spoken during the measured part.
        public var burstsSpoken: Int
        /// The call's statistics on each side at the end (underruns, overruns, scheduling).
        public var speaker: CallStatistics
        public var listener: CallStatistics
        /// Where the time goes, each part the mean of the figures the two sessions reported once a
        /// second while the bursts were spoken.
        public var parts: [Part]

        /// One part of the delay and what measured it.
        public struct Part: Sendable {
            public var name: String
            public var milliseconds: Double
            public var source: String
        }

        /// The parts added up.
        public var partsMilliseconds: Double { parts.reduce(0) { $0 + $1.milliseconds } }
        /// CPU the whole process used while the bursts were spoken, in percent of one core (both
        /// sessions, their devices, and the probe's own player and recorders).
        public var processCPUPercent: Double
        /// What the speaker sent while the bursts were spoken: packets per second and payload bits
        /// per second (RTP payload, without headers).
        public var packetsPerSecond: Double
        public var payloadBitsPerSecond: Double
        /// The speaker's send rate on the wire over IPv4: payload plus 50 bytes a packet (IPv4 20,
        /// UDP 8, RTP 12, SRTP tag 10).
        public var wireBitsPerSecond: Double { payloadBitsPerSecond + packetsPerSecond * 50 * 8 }

        public var medianMilliseconds: Double { Self.percentile(latenciesMilliseconds, 0.5) }
        public var minimumMilliseconds: Double { latenciesMilliseconds.min() ?? .nan }
        public var maximumMilliseconds: Double { latenciesMilliseconds.max() ?? .nan }

        static func percentile(_ values: [Double], _ p: Double) -> Double {
            guard !values.isEmpty else { return .nan }
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
        }
    }

    public enum ProbeError: Error, CustomStringConvertible {
        /// What each side had reached (state, packets received and decoded frames, and the
        /// playback device's frames) when the probe gave up.
        case callNotEstablished(speaker: String, listener: String)
        case noBurstsHeard(spoken: Int)
        public var description: String {
            switch self {
            case .callNotEstablished(let speaker, let listener):
                "the call did not reach established within 10 s (speaker: \(speaker); listener: \(listener))"
            case .noBurstsHeard(let spoken): "none of the \(spoken) bursts spoken was heard at the speaker"
            }
        }
    }

    public var backend: Backend
    public var periodMilliseconds: Int
    /// Opus frame duration of both sessions (10, 20, 40 or 60 ms).
    public var frameMilliseconds = 20
    /// Seconds of call measured (after one second of settling).
    public var seconds: Double
    /// PulseAudio names of the air: where bursts are spoken, the microphone, the speaker, the ear.
    public var mouthSink = "mic"
    public var microphoneSource = "mic.monitor"
    public var speakerSink = "spk"
    public var earSource = "spk.monitor"
    /// ALSA PCMs that reach the same microphone and speaker through the pulse plugin.
    public var alsaMicrophone = "tether_mic"
    public var alsaSpeaker = "tether_spk"

    /// Whether a PulseAudio server with the null sinks `mic` and `spk` answers (as
    /// scripts/with-test-audio.sh provides).
    public static func devicesAvailable() -> Bool {
        let sinks = ChildProcess.run(["pactl", "list", "short", "sinks"])
        guard sinks.status == 0 else { return false }
        let names = Set(sinks.output.split(separator: "\n").compactMap { $0.split(separator: "\t").dropFirst().first.map(String.init) })
        return names.contains("mic") && names.contains("spk")
    }

    public init(backend: Backend, periodMilliseconds: Int, seconds: Double = 10) {
        self.backend = backend
        self.periodMilliseconds = periodMilliseconds
        self.seconds = seconds
    }

    static let burstOnMilliseconds = 100
    static let burstEveryMilliseconds = 1000

    /// Runs the calibration and the call; `progress` gets a line now and then.
    public func run(progress: @Sendable (String) -> Void = { _ in }) async throws -> Result {
        let calibration = try await calibrate()
        progress(String(format: "calibration: the two recordings differ by %.2f ms on one monitor", calibration))

        let microphone: any AudioSource =
            backend == .pulse
            ? PulseAudioCapture(deviceName: microphoneSource, periodMilliseconds: periodMilliseconds)
            : ALSACapture(pcmName: alsaMicrophone, periodMilliseconds: periodMilliseconds)
        let speaker: any AudioSink =
            backend == .pulse
            ? PulseAudioPlayback(deviceName: speakerSink, periodMilliseconds: periodMilliseconds)
            : ALSAPlayback(pcmName: alsaSpeaker, periodMilliseconds: periodMilliseconds)
        // Voice processing off: it works in place on each frame (no delay of its own), and its
        // noise suppression and gain control would reshape the bursts whose onsets are timed.
        var aConfiguration = CallConfiguration(
            audioSource: microphone, audioSink: DiscardSink(), localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        aConfiguration.voiceProcessing = .off
        aConfiguration.opus.frameDurationMilliseconds = frameMilliseconds
        let a = try CallSession(configuration: aConfiguration)
        var bConfiguration = CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: 0, levelDBFS: -.infinity), audioSink: speaker,
            localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        bConfiguration.opus.frameDurationMilliseconds = frameMilliseconds
        let b = try CallSession(configuration: bConfiguration)
        let signaling = InProcessSignaling(a: a, b: b)
        try await a.start()
        try await b.start()
        try await signaling.connect()
        var waited = 0
        while a.state != .established || b.state != .established {
            if waited >= 1000 {
                func summary(_ session: CallSession) -> String {
                    let s = session.statistics()
                    return "\(session.state), \(s.packetsReceived) packets in, \(s.framesDecoded) decoded, "
                        + "\(s.playbackDevice) \(s.playbackUnderruns) underruns"
                }
                let error = ProbeError.callNotEstablished(speaker: summary(a), listener: summary(b))
                await a.hangUp()
                await b.hangUp()
                throw error
            }
            try await Task.sleep(for: .milliseconds(10))
            waited += 10
        }
        progress("call established; speaking \(Self.burstOnMilliseconds) ms bursts every \(Self.burstEveryMilliseconds) ms")
        try await Task.sleep(for: .seconds(1))

        let mouthRecorder = try TimedRecorder(source: microphoneSource)
        let earRecorder = try TimedRecorder(source: earSource)
        let mouth = try speak()
        var samples: [(speaker: CallStatistics, listener: CallStatistics)] = []
        let cpuBefore = Self.processCPUSeconds()
        let sentBefore = a.statistics()
        // One reading a second; the rates are over the time to the last reading.
        let started = MonotonicClock.nanoseconds()
        let end = started + UInt64(seconds * 1e9)
        var sampledAt = started
        while sampledAt < end {
            try await Task.sleep(nanoseconds: min(1_000_000_000, end - sampledAt))
            samples.append((a.statistics(), b.statistics()))
            sampledAt = MonotonicClock.nanoseconds()
        }
        let elapsed = Double(sampledAt - started) / 1e9
        let cpuPercent = (Self.processCPUSeconds() - cpuBefore) / elapsed * 100
        let sentAfter = samples.last?.speaker ?? sentBefore
        let packetsPerSecond = Double(sentAfter.packetsSent - sentBefore.packetsSent) / elapsed
        let payloadBitsPerSecond = Double(sentAfter.bytesSent - sentBefore.bytesSent) * 8 / elapsed
        mouth.stop()
        try await Task.sleep(for: .milliseconds(600))  // the last burst's way through
        let spoken = mouthRecorder.finish()
        let heard = earRecorder.finish()
        let speakerStatistics = a.statistics()
        let listenerStatistics = b.statistics()
        await a.hangUp()
        await b.hangUp()

        let mouthOnsets = Self.onsets(spoken)
        let earOnsets = Self.onsets(heard)
        var latencies: [Double] = []
        for m in mouthOnsets {
            if let e = earOnsets.first(where: { $0 > m && $0 < m + 0.6 }) {
                latencies.append((e - m) * 1000 - calibration)
            }
        }
        guard !latencies.isEmpty else { throw ProbeError.noBurstsHeard(spoken: mouthOnsets.count) }
        return Result(
            backend: backend, periodMilliseconds: periodMilliseconds, latenciesMilliseconds: latencies,
            calibrationMilliseconds: calibration, burstsSpoken: mouthOnsets.count, speaker: speakerStatistics,
            listener: listenerStatistics, parts: Self.parts(samples), processCPUPercent: cpuPercent,
            packetsPerSecond: packetsPerSecond, payloadBitsPerSecond: payloadBitsPerSecond)
    }

    /// User and system CPU time of the whole process so far, in seconds.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// The parts of the delay from the sessions' own figures: the speaker's capture device, frame
    /// and look-ahead, the listener's network and jitter buffer, playback queue and playback
    /// device. A part a device does not report is left out.
    static func parts(_ samples: [(speaker: CallStatistics, listener: CallStatistics)]) -> [Result.Part] {
        func mean(_ values: [Double?]) -> Double? {
            let known = values.compactMap { $0 }
            return known.isEmpty ? nil : known.reduce(0, +) / Double(known.count)
        }
        let rows: [(String, Double?, String)] = [
            ("capture device", mean(samples.map(\.speaker.captureDeviceLatencyMilliseconds)), "speaker's device latency"),
            ("frame", mean(samples.map { Double($0.speaker.packetTimeMilliseconds) }), "the Opus frame, filled before it is encoded"),
            ("look-ahead", mean(samples.map(\.speaker.encoderLookaheadMilliseconds)), "libopus OPUS_GET_LOOKAHEAD"),
            ("network", mean(samples.map { $0.listener.roundTripTimeMilliseconds.map { $0 / 2 } }), "half the RTCP round trip"),
            ("jitter buffer", mean(samples.map(\.listener.jitterBufferDelayMilliseconds)), "listener's playout delay"),
            ("playback queue", mean(samples.map(\.listener.playbackQueueMilliseconds)), "listener's ring ahead of each frame"),
            ("playback device", mean(samples.map(\.listener.playbackDeviceLatencyMilliseconds)), "listener's device latency"),
        ]
        return rows.compactMap { name, value, source in value.map { Result.Part(name: name, milliseconds: $0, source: source) } }
    }

    /// 1 kHz bursts spoken into the mouth sink.
    func speak() throws -> SinkPlayer {
        try SinkPlayer(
            sink: mouthSink, frequencyHertz: 1000,
            bursts: TestSignalSource.Bursts(onMilliseconds: Self.burstOnMilliseconds, everyMilliseconds: Self.burstEveryMilliseconds),
            periodMilliseconds: 10)
    }

    /// Records the microphone twice while bursts are spoken: the median onset difference is the
    /// method's own error (two capture streams started at different moments).
    func calibrate() async throws -> Double {
        let first = try TimedRecorder(source: microphoneSource)
        let second = try TimedRecorder(source: microphoneSource)
        let mouth = try speak()
        try await Task.sleep(for: .seconds(3.5))
        mouth.stop()
        let one = Self.onsets(first.finish())
        let two = Self.onsets(second.finish())
        let differences = one.compactMap { t in two.first(where: { abs($0 - t) < 0.3 }).map { ($0 - t) * 1000 } }
        return differences.isEmpty ? 0 : Result.percentile(differences, 0.5)
    }

    /// Onset times (seconds, monotonic) of bursts: the first sample above a third of the
    /// recording's peak after at least 300 ms below it.
    static func onsets(_ recording: TimedRecorder.Recording) -> [Double] {
        let peak = recording.samples.lazy.map { abs(Int($0)) }.max() ?? 0
        guard peak > 1000 else { return [] }
        let threshold = peak / 3
        let quietSamples = recording.sampleRateHertz * 3 / 10
        var result: [Double] = []
        var lastLoud = -quietSamples
        for (k, sample) in recording.samples.enumerated() where abs(Int(sample)) > threshold {
            if k - lastLoud >= quietSamples {
                result.append(recording.secondsOfSample(k))
            }
            lastLoud = k
        }
        return result
    }
}

/// Plays a source into a PulseAudio sink: "speaking" into a null sink whose monitor is a
/// microphone (a tone or tone bursts in the device tests and the latency probe, speech in the
/// echo tests and bench).
public final class SinkPlayer: Sendable {
    let source: any AudioSource
    let sink: PulseAudioPlayback

    public init(source: any AudioSource, sink name: String, periodMilliseconds: Int = 20) throws {
        self.source = source
        sink = PulseAudioPlayback(deviceName: name, periodMilliseconds: periodMilliseconds)
        let endpoint = AudioEndpoint(ringCapacityFrames: 16)
        try sink.start(endpoint)
        try source.start(endpoint)
    }

    /// A tone, or tone bursts.
    public convenience init(
        sink name: String, frequencyHertz: Double, levelDBFS: Double = -12, bursts: TestSignalSource.Bursts? = nil,
        periodMilliseconds: Int = 20
    ) throws {
        try self.init(
            source: TestSignalSource(frequencyHertz: frequencyHertz, levelDBFS: levelDBFS, bursts: bursts), sink: name,
            periodMilliseconds: periodMilliseconds)
    }

    public func stop() {
        source.stop()
        sink.stop()
    }
}

/// Records a PulseAudio source and places every sample on the monotonic clock.
final class TimedRecorder: Sendable {
    struct Recording: Sendable {
        var samples: [Int16]
        var sampleRateHertz: Int
        /// Samples per frame as the frames arrived.
        var samplesPerFrame: Int
        /// For every frame, its arrival (monotonic nanoseconds) less its position in the recording.
        var frameOffsetsNanoseconds: [Int64]

        /// A recording that arrived without jitter or loss: sample 0 at `startSeconds`.
        init(samples: [Int16], sampleRateHertz: Int, startSeconds: Double) {
            self.samples = samples
            self.sampleRateHertz = sampleRateHertz
            samplesPerFrame = samples.count
            frameOffsetsNanoseconds = [Int64(startSeconds * 1e9)]
        }

        init(samples: [Int16], sampleRateHertz: Int, samplesPerFrame: Int, frameOffsetsNanoseconds: [Int64]) {
            self.samples = samples
            self.sampleRateHertz = sampleRateHertz
            self.samplesPerFrame = samplesPerFrame
            self.frameOffsetsNanoseconds = frameOffsetsNanoseconds
        }

        /// Monotonic time of sample `k`, in seconds: its position plus the least-delayed frame
        /// offset over the next second of frames. Looking only ahead keeps the estimate right
        /// when the server dropped samples (an overrun shifts every later offset up; the minimum
        /// over frames after `k` still sees only offsets from after the drop, or from before it,
        /// which are smaller and equally right for `k` before the drop).
        func secondsOfSample(_ k: Int) -> Double {
            let frame = min(k / max(1, samplesPerFrame), frameOffsetsNanoseconds.count - 1)
            let window = max(1, sampleRateHertz / max(1, samplesPerFrame))
            let offset = frameOffsetsNanoseconds[frame..<min(frameOffsetsNanoseconds.count, frame + window)].min()!
            return (Double(offset) + Double(k) * 1e9 / Double(sampleRateHertz)) / 1e9
        }
    }

    private struct State {
        var samples: [Int16] = []
        var frameOffsets: [Int64] = []
    }

    private let capture: PulseAudioCapture
    private let endpoint = AudioEndpoint(format: AudioFormat(frameDurationMilliseconds: 10), ringCapacityFrames: 128)
    private let thread = RealtimeThread(name: "tether-probe")
    private let state = Mutex(State())

    init(source name: String) throws {
        capture = PulseAudioCapture(deviceName: name, periodMilliseconds: 10)
        try capture.start(endpoint)
        let endpoint = endpoint
        try thread.start { [self] thread in
            let format = endpoint.format
            let frameNanoseconds = Int64(format.frameDurationMilliseconds) * 1_000_000
            var frame = [Int16](repeating: 0, count: format.samplesPerFrame)
            var framesRead: Int64 = 0
            while !thread.isStopRequested {
                let ticket = endpoint.wakeup.prepareToWait()
                while frame.withUnsafeMutableBufferPointer({ endpoint.ring.readAll(into: $0) }) {
                    let arrival = Int64(MonotonicClock.nanoseconds())
                    let position = framesRead * frameNanoseconds
                    state.withLock {
                        $0.samples += frame
                        $0.frameOffsets.append(arrival - position)
                    }
                    framesRead += 1
                }
                endpoint.wakeup.wait(ticket, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 5_000_000)
            }
        }
    }

    func finish() -> Recording {
        thread.stop()
        capture.stop()
        return state.withLock {
            Recording(
                samples: $0.samples, sampleRateHertz: endpoint.format.sampleRateHertz,
                samplesPerFrame: endpoint.format.samplesPerFrame,
                frameOffsetsNanoseconds: $0.frameOffsets.isEmpty ? [0] : $0.frameOffsets)
        }
    }
}
