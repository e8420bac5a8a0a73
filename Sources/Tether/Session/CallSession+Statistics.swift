import CoreMetrics
import Foundation
import Logging
import Synchronization
import TetherAudio
import TetherCodec
import TetherCore
import TetherDTLS
import TetherICE
import TetherNetworkMonitor
import TetherRTP
import TetherRealtime

/// Statistics and the call report: one snapshot from the media loop's counters and the
/// session's context, the recovery timeline, and the periodic `.statistics` event.
extension CallSession {
    /// The call's report (callable from any thread, during the call or after it): how it went,
    /// from set-up to end, with every disruption, path and device change, and a quality summary.
    /// `tether call` prints it as a `{"type":"report"}` line when the call ends.
    ///
    /// - Parameter logRecords: how many of the call's last log messages to attach (info and
    ///   above, whatever the logger's level; at most 200 are kept; 0: none, `log` is nil). No
    ///   message carries key material (descriptions are never logged).
    public nonisolated func report(logRecords: Int = 0) -> CallReport {
        let s = statistics()
        let current = state
        let log = logRecords > 0 ? recentLog.last(logRecords) : nil
        return reportRecorder.state.withLock { $0.report(s, state: current, log: log) }
    }

    /// Stores the user's verdict on the call beside the report's own findings, so the embedder
    /// uploads one document (`report()`). Usually after the call ends; any time is accepted,
    /// and a later call replaces the earlier feedback.
    /// - Parameters:
    ///   - rating: 1 (bad) … 5 (excellent).
    ///   - issues: the problems the user chose (empty: no issue).
    ///   - comment: the user's words (at most 2000 characters).
    /// - Throws: 5005 (`invalidFeedback`) for a rating outside 1…5 or a longer comment.
    public nonisolated func submitFeedback(rating: Int, issues: Set<CallIssue> = [], comment: String? = nil) throws(TetherError) {
        guard (1...5).contains(rating) else {
            throw TetherError(code: .invalidFeedback, isTerminal: false, canRetry: false, message: "rating \(rating) is not in 1…5")
        }
        if let comment, comment.count > 2000 {
            throw TetherError(
                code: .invalidFeedback, isTerminal: false, canRetry: false, message: "comment of \(comment.count) characters (at most 2000)")
        }
        let feedback = CallReport.Feedback(
            rating: rating, issues: CallIssue.allCases.filter(issues.contains), comment: comment, submittedAt: Date())
        reportRecorder.state.withLock { $0.recordFeedback(feedback) }
        logger.info("user feedback", metadata: ["rating": "\(rating)", "issues": "\(feedback.issues.map(\.rawValue))"])
    }

    /// A snapshot of the call's statistics (callable from any thread).
    public nonisolated func statistics() -> CallStatistics {
        let context = statisticsContext.withLock { $0 }
        let c = context.media?.counters.read() ?? MediaCounters()
        let source = context.source?.statistics ?? AudioDeviceStatistics()
        let sink = context.sink?.statistics ?? AudioDeviceStatistics()
        var statistics = CallStatistics(
            codec: context.codec, payloadType: context.payloadType, packetTimeMilliseconds: context.packetTimeMilliseconds,
            targetBitrateBitsPerSecond: context.media == nil ? context.bitrate : c.encoderBitrateBitsPerSecond,
            srtpSuite: context.suite,
            packetsSent: c.packetsSent, bytesSent: c.bytesSent, rtcpPacketsSent: c.rtcpPacketsSent, sendFailures: c.sendFailures,
            packetsReceived: c.packetsReceived, bytesReceived: c.bytesReceived, packetsLost: c.packetsLost,
            fractionLost: c.fractionLost, jitterMilliseconds: c.jitterMilliseconds, rtcpPacketsReceived: c.rtcpPacketsReceived,
            duplicatePackets: c.duplicatePackets, remotePacketsLost: c.remotePacketsLost,
            remoteFractionLost: c.remoteFractionLost, remoteJitterMilliseconds: c.remoteJitterMilliseconds,
            roundTripTimeMilliseconds: c.roundTripTimeMilliseconds >= 0 ? c.roundTripTimeMilliseconds : nil,
            srtpAuthenticationFailures: c.srtpAuthenticationFailures, srtpReplayFailures: c.srtpReplayFailures,
            malformedPackets: c.malformedPackets, receiveQueueDrops: c.receiveQueueDrops,
            jitterBufferDelayMilliseconds: c.jitterBufferDelayMilliseconds,
            jitterBufferTargetMilliseconds: context.media == nil
                ? Double(configuration.jitterBufferTargetMilliseconds) : c.jitterBufferTargetMilliseconds,
            framesInsertedForDelay: c.framesInsertedForDelay, framesDroppedForDelay: c.framesDroppedForDelay,
            framesDecoded: c.framesDecoded, framesConcealed: c.framesConcealed, framesRecoveredByFEC: c.framesRecoveredByFEC,
            framesRecoveredByRedundancy: c.framesRecoveredByRedundancy, redundantAudioPacketsReceived: c.redundantAudioPacketsReceived,
            latePackets: c.latePackets, captureOverruns: source.overruns, playbackUnderruns: sink.underruns,
            encoderExpectedLossPercent: c.encoderExpectedLossPercent, encoderInBandFEC: c.encoderInBandFEC,
            encoderAdaptations: c.encoderAdaptations,
            redundantFramesSent: c.redundantFramesSent, redundantFramesPerPacket: c.encoderRedundantFrames,
            sendBitrateBitsPerSecond: c.sendBitrateBitsPerSecond, receiveBitrateBitsPerSecond: c.receiveBitrateBitsPerSecond,
            mediaThreadScheduling: context.media?.scheduling.rawValue ?? ThreadScheduling.notStarted.rawValue,
            captureDevice: context.source?.name ?? "", captureThreadScheduling: source.scheduling.rawValue,
            playbackDevice: context.sink?.name ?? "", playbackThreadScheduling: sink.scheduling.rawValue,
            localAddress: context.localAddress, remoteAddress: context.remoteAddress,
            durationSeconds: Double(MonotonicClock.nanoseconds() - createdAtNanoseconds) / 1e9, recovery: context.recovery)
        statistics.encoderLookaheadMilliseconds = context.encoderLookaheadMilliseconds
        statistics.redundantCopiesTooLate = c.redundantCopiesTooLate
        statistics.framesInSilenceGaps = c.silenceGapFrames
        statistics.remoteMeanLossRunPackets = c.remoteMeanLossRunPackets >= 0 ? c.remoteMeanLossRunPackets : nil
        statistics.encoderMaximumBandwidth = context.encoderMaximumBandwidth
        statistics.playbackQueueMilliseconds = c.playbackQueueMilliseconds
        statistics.captureDeviceLatencyMilliseconds = source.latencyMilliseconds
        statistics.playbackDeviceLatencyMilliseconds = sink.latencyMilliseconds
        statistics.srtpKeying = context.keying
        statistics.direction = context.direction
        statistics.voiceProcessing = context.voiceProcessing
        statistics.voiceProcessingFigures = c.voice
        let hold = holdState
        statistics.localHold = hold.local
        statistics.remoteHold = hold.remote
        statistics.dtmfDigitsSent = c.dtmfDigitsSent
        statistics.dtmfDigitsReceived = c.dtmfDigitsReceived
        statistics.dtmfPacketsSent = c.dtmfPacketsSent
        statistics.dtmfPacketsReceived = c.dtmfPacketsReceived
        statistics.paddingPacketsReceived = c.paddingPacketsReceived
        statistics.dtlsHandshakeDatagramsAfterSetUp = context.dtls?.handshakeDatagramsAfterConnected ?? 0
        if context.media != nil {
            statistics.estimatedBandwidthBitsPerSecond = c.estimatedBandwidthBitsPerSecond > 0 ? c.estimatedBandwidthBitsPerSecond : nil
            statistics.sentPacketMilliseconds = c.packetMilliseconds
            statistics.pathUse = c.pathUse
            statistics.queueingDelayMilliseconds = c.estimatedBandwidthBitsPerSecond > 0 ? c.queueDelayMilliseconds : nil
            statistics.lossIsCongestion = c.congestionLoss
            statistics.transportFeedbackReceived = c.transportFeedbackReceived
            statistics.transportFeedbackSent = c.transportFeedbackSent
        }
        return statistics
    }

    /// Copies the machine's recovery timeline into the statistics (seconds since creation).
    func publishRecovery() {
        guard let m = machine else { return }
        let origin = createdAtNanoseconds
        func seconds(_ i: MonotonicInstant) -> Double { (Double(i.nanoseconds) - Double(origin)) / 1e9 }
        let disruptions = m.timeline.records.map { r in
            CallRecovery.Disruption(
                startSeconds: seconds(r.start), endSeconds: r.end.map(seconds), cause: Self.describe(r.cause),
                attempts: r.attempts, outcome: r.outcome.map(Self.describe))
        }
        let total = m.timeline.totalDisruptedSeconds(now: MonotonicInstant(nanoseconds: MonotonicClock.nanoseconds()))
        let offered = restartsOffered
        let answered = restartsAnswered
        statisticsContext.withLock {
            $0.recovery.disruptions = disruptions
            $0.recovery.totalDisruptedSeconds = total
            $0.recovery.restartsOffered = offered
            $0.recovery.restartsAnswered = answered
        }
    }

    static func describe(_ c: RecoveryTimeline.Cause) -> String {
        switch c {
        case .inboundSilence: "media silence"
        case .localNetworkChange: "local network change"
        case .outboundStall: "peer stopped receiving"
        case .noSendPath: "no path to send on"
        }
    }

    static func describe(_ o: RecoveryTimeline.Outcome) -> String {
        switch o {
        case .mediaResumedWithoutRenewal: "media resumed"
        case .renewed(let n): "renewed after \(n) attempt\(n == 1 ? "" : "s")"
        case .gaveUp: "gave up"
        case .hungUpDuring: "hung up"
        }
    }

    /// Turns what the media loop posted since the last call into log messages (the driver's
    /// pass, every 20 ms at most, and the call's end).
    func drainMediaLog() {
        guard let media else { return }
        let lost = media.log.drain { MediaLogEvent.emit($0, to: logger) }
        if lost > 0 { logger.warning("media: \(lost) log record\(lost == 1 ? "" : "s") lost on a full ring") }
    }

    func emitStatistics() {
        guard !state.isEnded else { return }
        eventSink.yield(.statistics(statistics()))
    }
}

/// The report recorder, shared by the session and its event broadcaster.
final class ReportRecorderBox: Sendable {
    let state: Mutex<CallReportRecorder>
    init(_ recorder: CallReportRecorder) { state = Mutex(recorder) }
}

/// What `statistics()` needs besides the media counters.
struct StatisticsContext {
    var codec: String
    var payloadType: Int
    var packetTimeMilliseconds: Int
    var bitrate: Int
    var suite: String
    var keying = ""
    var dtls: DTLSConnection?
    var media: MediaLoop?
    var localAddress = ""
    var remoteAddress = ""
    var recovery = CallRecovery()
    var direction = "sendrecv"
    var voiceProcessing = "off"
    var encoderLookaheadMilliseconds = 0.0
    var encoderMaximumBandwidth = ""
    var source: (any AudioSource)?
    var sink: (any AudioSink)?
}
