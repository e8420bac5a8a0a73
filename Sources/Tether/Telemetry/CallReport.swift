import Foundation

/// What happened on a call, in one document: for a call detail record, a support ticket, or an
/// upload after the call (`CallSession.report()`, and `tether call`'s `{"type":"report"}` line
/// when a call ends). Codable; JSON keys are the property names. `version` says which fields
/// exist: a reader keeps working on documents of a later version by ignoring what it does not
/// know (fields are only ever added within a major version).
///
/// Times are seconds since the session was created (`startedAt`) unless named otherwise.
public struct CallReport: Codable, Sendable, Equatable {
    /// The version of this document's format (1: this one).
    public static let formatVersion = 1

    /// The format version this document follows (`formatVersion` when it was made).
    public var version: Int
    /// The call's identifier (`CallConfiguration.callId`, or the random UUID the session chose).
    public var callId: String
    /// Wall-clock time the session was created.
    public var startedAt: Date
    /// Wall-clock time the call ended; nil while it runs (a report made mid-call).
    public var endedAt: Date?
    /// The call's state when the report was made (`CallState.name`: `ended` once it ended).
    public var state: String
    /// Seconds from the session's creation to the first `established` (set-up time: signaling,
    /// ICE, keying and the first decoded frame); nil if the call was never established.
    public var setUpSeconds: Double?
    /// Seconds from the session's creation to the end (or to when the report was made).
    public var durationSeconds: Double
    /// Seconds from the first `established` to the end (or now): the time the call was up,
    /// disruptions included; nil if never established.
    public var connectedSeconds: Double?
    /// How the call ended; nil while it runs.
    public var end: End?
    /// Every time media stopped (inbound silence, a local network change, the peer not receiving
    /// us, no path to send on): when, why, the ICE restarts tried and what became of it.
    public var disruptions: [Disruption]
    /// Seconds the call spent disrupted, all disruptions together.
    public var totalDisruptedSeconds: Double
    /// ICE restarts this side offered, and the peer's it answered.
    public var iceRestarts: ICERestarts
    /// Each candidate pair media went on, in order (the first is the set-up's; each further one
    /// a path change: an ICE restart, a network change, libnice's own re-selection).
    public var paths: [Path]
    /// Capture and playback device failures, recoveries and moves, in order.
    public var deviceChanges: [DeviceChange]
    /// The negotiated media.
    public var media: Media
    /// What the listener on this side got.
    public var quality: Quality
    /// What the rate control saw of the path and did about it (one sample a second while
    /// established); nil when rate control was off.
    public var rateControl: RateControl? = nil
    /// The problems the report can see (`CallIssue` categories), each with its evidence.
    /// Thresholds: heard loss ≥ 3 %, concealed ≥ 5 % of frames, ≥ 2 s disrupted or ≥ 3 playback
    /// underruns: choppy; mouth-to-ear p95 ≥ 300 ms (or RTT p95 ≥ 600 ms without playout): high
    /// latency; the peer not receiving us, or a device failing: one-way; nothing received, or
    /// never established: no audio; our canceller hearing echo and removing < 10 dB: echo; the
    /// bandwidth estimate under 20 kb/s, or loss that came with a queue, in ≥ 20 % of the samples
    /// (at least 10): a path too narrow for speech. Background noise is left to the user's feedback.
    public var findings: [Finding]
    /// What the user said (`CallSession.submitFeedback`); nil until then.
    public var feedback: Feedback?
    /// The call's last log messages (info and above, whatever the logger's level), when asked
    /// for (`CallSession.report(logRecords:)`); nil otherwise.
    public var log: [LogRecord]?

    /// How the call ended.
    public struct End: Codable, Sendable, Equatable {
        /// `CallTerminationReason.Cause`'s description: `local hang-up`, `remote hang-up`,
        /// `connection failed`, `connection timeout`, `media timeout`, `error`.
        public var cause: String
        /// The cause's number (`CallTerminationReason.causeCode`: 0 local hang-up … 5 error).
        public var causeCode: Int
        /// The SIP status the embedder gave with the hang-up (`hangUp(sipCode:)`), and its phrase.
        public var sipCode: Int?
        public var sipPhrase: String?
        /// The error that ended the call (`TetherError.code`), its message, and whether a new
        /// attempt may work (`canRetry`).
        public var errorCode: Int?
        public var errorMessage: String?
        public var retryable: Bool?
    }

    /// One disruption (`CallRecovery.Disruption`).
    public struct Disruption: Codable, Sendable, Equatable {
        /// When media stopped, and when it came back (nil: it did not).
        public var startSeconds: Double
        public var endSeconds: Double?
        /// Why: `media silence`, `local network change`, `peer stopped receiving`, `no path to send on`.
        public var cause: String
        /// ICE restarts tried during it.
        public var attempts: Int
        /// What became of it: `media resumed`, `renewed after N attempts`, `gave up`, `hung up`; nil while it lasts.
        public var outcome: String?
    }

    public struct ICERestarts: Codable, Sendable, Equatable {
        public var offered: Int
        public var answered: Int
    }

    /// A candidate pair media went on.
    public struct Path: Codable, Sendable, Equatable {
        /// When ICE selected it.
        public var atSeconds: Double
        /// Local and remote `address:port`.
        public var local: String
        public var remote: String
        /// Candidate types (RFC 8445): `host`, `srflx`, `prflx`, `relay`.
        public var localType: String
        public var remoteType: String
    }

    /// A device event (`CallEvent.audioDevice`).
    public struct DeviceChange: Codable, Sendable, Equatable {
        public var atSeconds: Double
        /// `capture` or `playback`.
        public var direction: String
        /// `failed`, `recovered` or `moved`.
        public var event: String
        /// The device it runs on now (recovered, moved); nil for a failure.
        public var device: String?
        /// What failed (for a failure).
        public var message: String?

        /// The change a `CallEvent.audioDevice` reports (`tether call`'s `device` line has the same fields).
        public init(atSeconds: Double, direction: AudioDirection, event: AudioDeviceEvent) {
            self.atSeconds = atSeconds
            self.direction = direction.rawValue
            switch event {
            case .failed(let error): (self.event, message) = ("failed", "\(error)")
            case .recovered(let name): (self.event, device) = ("recovered", name)
            case .moved(let name): (self.event, device) = ("moved", name)
            }
        }
    }

    /// The negotiated media (as `CallStatistics` gives it at the end).
    public struct Media: Codable, Sendable, Equatable {
        /// `opus/48000/2`, its payload type, and the packet time (ms).
        public var codec: String
        public var payloadType: Int
        public var packetTimeMilliseconds: Int
        /// The SRTP suite and how it was keyed (`sdes` or `dtls`).
        public var srtpSuite: String
        public var srtpKeying: String
        /// Voice processing on the capture path (`off`, or the engine and what runs).
        public var voiceProcessing: String
    }

    /// What the listener on this side got. Percentiles are over one sample a second while the
    /// call was `established` (none while disrupted or before media); nil when there was none.
    public struct Quality: Codable, Sendable, Equatable {
        /// Estimated MOS (1…4.5, `CallStatistics.meanOpinionScore`): mean and lowest of the samples.
        public var meanOpinionScoreMean: Double?
        public var meanOpinionScoreMin: Double?
        /// Packets sent and received, and the peer's packets lost on the way to us.
        public var packetsSent: Int
        public var packetsReceived: Int
        public var packetsLost: Int
        /// Packets lost over packets expected, in percent (before any recovery).
        public var lossPercent: Double
        /// Loss the listener heard, in percent: lost and not rebuilt (`CallStatistics.heardLossPercent`).
        public var heardLossPercent: Double
        /// Frames played: decoded from packets (RED's copies included), rebuilt from FEC, concealed
        /// (not counting pauses of the peer's stream: DTX, hold).
        public var framesPlayed: Int
        /// Of the frames played, the share rebuilt from in-band FEC or a RED copy, in percent.
        public var rebuiltPercent: Double
        /// Of the frames played, the share concealed (Opus PLC for lost frames, and while nothing
        /// came in a disruption; a pause of the peer's stream with nothing lost is not counted), in percent.
        public var concealedPercent: Double
        /// RFC 3550 interarrival jitter (ms): median and 95th percentile of the samples.
        public var jitterMilliseconds: Percentiles?
        /// Round-trip time from RTCP (ms).
        public var roundTripTimeMilliseconds: Percentiles?
        /// The jitter buffer's playout delay (ms).
        public var jitterBufferDelayMilliseconds: Percentiles?
        /// Estimated mouth-to-ear delay of what this side heard (ms, `CallStatistics.estimatedMouthToEarMilliseconds`).
        public var mouthToEarMilliseconds: Percentiles?
        /// How much echo our canceller removed (ERLE, dB) in the samples when it heard echo in
        /// what we captured (the peer's voice coming back through our speaker and microphone);
        /// nil when it never did (or no canceller runs).
        public var echoReturnLossEnhancementDecibels: Percentiles?
        /// Playback underruns and capture overruns of the devices (the last devices' counts).
        public var playbackUnderruns: Int
        public var captureOverruns: Int
        /// Packets dropped as malformed or failing SRTP authentication.
        public var malformedPackets: Int
        public var srtpAuthenticationFailures: Int
    }

    /// What the rate control saw and did: its bandwidth estimate, how often the path's queue grew
    /// and how often loss came with it, and the packet durations it chose.
    public struct RateControl: Codable, Sendable, Equatable {
        /// Whether transport-wide congestion control feedback drove it (else receiver reports).
        public var transportFeedback: Bool
        /// The bandwidth estimate, kb/s with every header: median, and the lowest tenth's bound
        /// (10th percentile); nil before any sample.
        public var estimatedBandwidthKilobitsPerSecondMedian: Double?
        public var estimatedBandwidthKilobitsPerSecondLowTenth: Double?
        /// Samples (seconds) in which the queue grew (the rate dropped), and in which the loss
        /// came with a queue (congestion: answered by sending less).
        public var overusingSeconds: Int
        public var congestionLossSeconds: Int
        /// Samples (seconds) with the estimate under what speech needs (20 kb/s with headers:
        /// 60 ms packets and 12 kb/s of Opus).
        public var secondsUnderSpeechFloor: Int
        /// Samples (seconds) sent in packets of 20, 40 and 60 ms.
        public var secondsAt20Milliseconds: Int
        public var secondsAt40Milliseconds: Int
        public var secondsAt60Milliseconds: Int
        /// Samples taken.
        public var samples: Int
    }

    /// The median and 95th percentile of a figure's samples, to the millisecond.
    public struct Percentiles: Codable, Sendable, Equatable {
        public var p50: Double
        public var p95: Double
        /// How many samples they are of.
        public var samples: Int
    }
}

/// Millisecond histogram (0…2000 ms; longer counts as 2000): exact percentiles to the
/// millisecond for a call of any length in fixed memory.
struct MillisecondHistogram: Sendable {
    private var bins = [Int](repeating: 0, count: 2001)
    private(set) var count = 0

    mutating func add(_ milliseconds: Double) {
        guard milliseconds.isFinite else { return }
        bins[Int(min(2000, max(0, milliseconds.rounded())))] += 1
        count += 1
    }

    /// The smallest value with at least `fraction` of the samples at or under it.
    func percentile(_ fraction: Double) -> Double? {
        guard count > 0 else { return nil }
        let wanted = max(1, Int((fraction * Double(count)).rounded(.up)))
        var seen = 0
        for (value, n) in bins.enumerated() {
            seen += n
            if seen >= wanted { return Double(value) }
        }
        return 2000
    }

    var percentiles: CallReport.Percentiles? {
        guard let p50 = percentile(0.5), let p95 = percentile(0.95) else { return nil }
        return CallReport.Percentiles(p50: p50, p95: p95, samples: count)
    }
}

/// Gathers what the report needs as the call goes (sans-IO: every input carries its time, in
/// seconds since the session's creation). The session feeds it events and one statistics
/// sample a second, and asks it for the report.
struct CallReportRecorder: Sendable {
    let callId: String
    let startedAt: Date
    private(set) var establishedAtSeconds: Double?
    private(set) var endedAtSeconds: Double?
    private(set) var endedAt: Date?
    private(set) var end: CallReport.End?
    private(set) var paths: [CallReport.Path] = []
    private(set) var deviceChanges: [CallReport.DeviceChange] = []
    private var jitter = MillisecondHistogram()
    private var roundTrip = MillisecondHistogram()
    private var jitterBuffer = MillisecondHistogram()
    private var mouthToEar = MillisecondHistogram()
    private var echoReduction = MillisecondHistogram()
    private var scoreSum = 0.0
    private var scoreCount = 0
    private var scoreMin: Double?
    /// The rate control's samples: its estimate (kb/s), overuse and congestion loss, durations.
    private var bandwidth = MillisecondHistogram()
    private var rateSamples = 0
    private var overusingSeconds = 0
    private var congestionLossSeconds = 0
    private var secondsUnderSpeechFloor = 0
    private var secondsAtDuration = (twenty: 0, forty: 0, sixty: 0)
    private var transportFeedback = false
    private(set) var feedback: CallReport.Feedback?
    /// At most this many path and device entries are kept each (a flapping network or device
    /// must not grow the report without bound); the counts beyond are dropped.
    static let maximumEntries = 200

    init(callId: String, startedAt: Date) {
        self.callId = callId
        self.startedAt = startedAt
    }

    /// A call event, `atSeconds` after creation (state changes carry their own time).
    mutating func record(_ event: CallEvent, atSeconds unrounded: Double, wallClock: Date) {
        let atSeconds = milliseconds(unrounded)
        switch event {
        case .stateChanged(_, let to, let seconds):
            if to == .established, establishedAtSeconds == nil { establishedAtSeconds = milliseconds(seconds) }
            if case .ended(let reason) = to {
                endedAtSeconds = milliseconds(seconds)
                endedAt = wallClock
                end = CallReport.End(
                    cause: reason.cause.description, causeCode: reason.causeCode, sipCode: reason.sipCode, sipPhrase: reason.sipPhrase,
                    errorCode: reason.error?.code.rawValue, errorMessage: reason.error?.message, retryable: reason.error?.canRetry)
            }
        case .candidatePairSelected(let local, let remote, let localType, let remoteType):
            guard paths.count < Self.maximumEntries else { return }
            paths.append(CallReport.Path(atSeconds: atSeconds, local: local, remote: remote, localType: localType, remoteType: remoteType))
        case .audioDevice(let direction, let deviceEvent):
            guard deviceChanges.count < Self.maximumEntries else { return }
            deviceChanges.append(CallReport.DeviceChange(atSeconds: atSeconds, direction: direction, event: deviceEvent))
        default:
            break
        }
    }

    /// The user's feedback (the last given replaces an earlier one).
    mutating func recordFeedback(_ feedback: CallReport.Feedback) {
        self.feedback = feedback
    }

    /// One statistics sample, taken while the call is `established` (the session's driver, once
    /// a second). Figures the statistics do not have yet (no RTT before the first report, no
    /// jitter-buffer delay before playout, no score while nothing is heard) are skipped.
    mutating func sample(_ s: CallStatistics) {
        if s.packetsReceived > 0 { jitter.add(s.jitterMilliseconds) }
        if let rtt = s.roundTripTimeMilliseconds { roundTrip.add(rtt) }
        if let delay = s.jitterBufferDelayMilliseconds { jitterBuffer.add(delay) }
        if let m2e = s.estimatedMouthToEarMilliseconds { mouthToEar.add(m2e) }
        let voice = s.voiceProcessingFigures
        if voice.echoPresent, let erle = voice.echoReturnLossEnhancementDecibels { echoReduction.add(erle) }
        if let mos = s.meanOpinionScore {
            scoreSum += mos
            scoreCount += 1
            scoreMin = min(scoreMin ?? mos, mos)
        }
        if let estimate = s.estimatedBandwidthBitsPerSecond {
            rateSamples += 1
            bandwidth.add(Double(estimate) / 1000)
            if s.pathUse == .overusing { overusingSeconds += 1 }
            if s.lossIsCongestion { congestionLossSeconds += 1 }
            if Double(estimate) / 1000 < CallDiagnosis.speechFloorKilobitsPerSecond { secondsUnderSpeechFloor += 1 }
            switch s.sentPacketMilliseconds {
            case ..<40: secondsAtDuration.twenty += 1
            case 40..<60: secondsAtDuration.forty += 1
            default: secondsAtDuration.sixty += 1
            }
            if s.transportFeedbackReceived > 0 { transportFeedback = true }
        }
    }

    /// The report, from what was recorded and the statistics now (`s.durationSeconds` is now).
    func report(_ s: CallStatistics, state: CallState, log: [CallReport.LogRecord]? = nil) -> CallReport {
        let endSeconds = endedAtSeconds ?? s.durationSeconds
        let expected = s.packetsReceived + max(0, s.packetsLost)
        // A pause of the peer's stream (DTX, hold) is no loss: its frames count neither as
        // concealed nor as played.
        let concealed = max(0, s.framesConcealed - s.framesInSilenceGaps)
        let played = s.framesDecoded + s.framesRecoveredByFEC + concealed
        func percent(_ part: Int, of whole: Int) -> Double { whole > 0 ? hundredths(100 * Double(part) / Double(whole)) : 0 }
        let quality = CallReport.Quality(
            meanOpinionScoreMean: scoreCount > 0 ? hundredths(scoreSum / Double(scoreCount)) : nil,
            meanOpinionScoreMin: scoreMin.map(hundredths),
            packetsSent: s.packetsSent, packetsReceived: s.packetsReceived, packetsLost: max(0, s.packetsLost),
            lossPercent: percent(max(0, s.packetsLost), of: expected), heardLossPercent: hundredths(s.heardLossPercent),
            framesPlayed: played, rebuiltPercent: percent(s.framesRecoveredByFEC + s.framesRecoveredByRedundancy, of: played),
            concealedPercent: percent(concealed, of: played),
            jitterMilliseconds: jitter.percentiles, roundTripTimeMilliseconds: roundTrip.percentiles,
            jitterBufferDelayMilliseconds: jitterBuffer.percentiles, mouthToEarMilliseconds: mouthToEar.percentiles,
            echoReturnLossEnhancementDecibels: echoReduction.percentiles,
            playbackUnderruns: s.playbackUnderruns, captureOverruns: s.captureOverruns, malformedPackets: s.malformedPackets,
            srtpAuthenticationFailures: s.srtpAuthenticationFailures)
        var report = CallReport(
            version: CallReport.formatVersion, callId: callId, startedAt: startedAt, endedAt: endedAt, state: state.name,
            setUpSeconds: establishedAtSeconds, durationSeconds: milliseconds(endSeconds),
            connectedSeconds: establishedAtSeconds.map { milliseconds(endSeconds - $0) }, end: end,
            disruptions: s.recovery.disruptions.map {
                CallReport.Disruption(
                    startSeconds: milliseconds($0.startSeconds), endSeconds: $0.endSeconds.map(milliseconds), cause: $0.cause,
                    attempts: $0.attempts, outcome: $0.outcome)
            },
            totalDisruptedSeconds: milliseconds(s.recovery.totalDisruptedSeconds),
            iceRestarts: CallReport.ICERestarts(offered: s.recovery.restartsOffered, answered: s.recovery.restartsAnswered),
            paths: paths, deviceChanges: deviceChanges,
            media: CallReport.Media(
                codec: s.codec, payloadType: s.payloadType, packetTimeMilliseconds: s.packetTimeMilliseconds, srtpSuite: s.srtpSuite,
                srtpKeying: s.srtpKeying, voiceProcessing: s.voiceProcessing),
            quality: quality, findings: [], feedback: feedback, log: log)
        if rateSamples > 0 {
            report.rateControl = CallReport.RateControl(
                transportFeedback: transportFeedback, estimatedBandwidthKilobitsPerSecondMedian: bandwidth.percentile(0.5),
                estimatedBandwidthKilobitsPerSecondLowTenth: bandwidth.percentile(0.1), overusingSeconds: overusingSeconds,
                congestionLossSeconds: congestionLossSeconds, secondsUnderSpeechFloor: secondsUnderSpeechFloor,
                secondsAt20Milliseconds: secondsAtDuration.twenty,
                secondsAt40Milliseconds: secondsAtDuration.forty, secondsAt60Milliseconds: secondsAtDuration.sixty, samples: rateSamples)
        }
        report.findings = CallDiagnosis.findings(report, outboundDisruptions: s.recovery.outboundDisruptions)
        return report
    }
}

/// Seconds rounded to the millisecond (a report reads better without nanoseconds).
func milliseconds(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
/// Percentages and scores to two decimals.
private func hundredths(_ value: Double) -> Double { (value * 100).rounded() / 100 }
