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

/// Statistics and the call report: the telemetry snapshot built from the session's parts, the
/// recovery timeline, and the periodic `.statistics` event.
extension CallSession {
    /// The call's report (callable from any thread, during the call or after it): how it went,
    /// from set-up to end, with every disruption, path and device change, and a quality summary.
    /// `tether call` prints it as a `{"type":"report"}` line when the call ends.
    ///
    /// - Parameter logRecords: how many of the call's last log messages to attach (info and
    ///   above, whatever the logger's level; at most 200 are kept; 0: none, `log` is nil). No
    ///   message carries key material (descriptions are never logged).
    public nonisolated func report(logRecords: Int = 0) -> CallReport {
        telemetry.report(state: state, logRecords: logRecords)
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
        telemetry.recorder.withLock { $0.recordFeedback(feedback) }
        logger.info("user feedback", metadata: ["rating": "\(rating)", "issues": "\(feedback.issues.map(\.rawValue))"])
    }

    /// A snapshot of the call's statistics (callable from any thread).
    public nonisolated func statistics() -> CallStatistics {
        telemetry.statistics()
    }

    /// What the statistics read besides the media counters, from the session's parts as they are
    /// now: the one place it is built. Published after every change to it and on every pass.
    func publishTelemetry() {
        let keys = negotiated?.keying
        var snapshot = CallTelemetry.Snapshot(
            payloadType: negotiated.map { Int($0.opusPayloadType) } ?? 111,
            packetTimeMilliseconds: configuration.opus.frameDurationMilliseconds,
            bitrate: mediaSummary?.bitrate ?? configuration.opus.bitrateBitsPerSecond,
            configuredJitterBufferTargetMilliseconds: Double(configuration.jitterBufferTargetMilliseconds))
        snapshot.suite = srtpSuiteInUse
        switch keys {
        case .sdes: snapshot.keying = "SDES"
        case .dtls: snapshot.keying = "DTLS-SRTP"
        case nil: snapshot.keying = ""
        }
        snapshot.dtls = dtls?.connection
        snapshot.media = media
        snapshot.localAddress = selectedPair?.local ?? ""
        snapshot.remoteAddress = selectedPair?.remote ?? ""
        snapshot.recovery = recoveryFigures()
        snapshot.direction = negotiated?.direction.rawValue ?? "sendrecv"
        snapshot.hold = HoldState(local: negotiation.holdInForce, remote: negotiation.remoteHold)
        if let m = mediaSummary {
            snapshot.voiceProcessing = m.voiceProcessing
            snapshot.encoderLookaheadMilliseconds = m.encoderLookaheadMilliseconds
            snapshot.encoderMaximumBandwidth = m.encoderMaximumBandwidth
        }
        snapshot.source = devices.source
        snapshot.sink = devices.sink
        telemetry.publish(snapshot)
    }

    /// The recovery figures: the machine's timeline (seconds since creation), restarts and
    /// outbound disruptions.
    func recoveryFigures() -> CallRecovery {
        var figures = CallRecovery()
        figures.restartsOffered = restartsOffered
        figures.restartsAnswered = restartsAnswered
        figures.outboundDisrupted = outboundDisrupted
        figures.outboundDisruptions = outboundDisruptions
        guard let m = machine else { return figures }
        let origin = createdAtNanoseconds
        func seconds(_ i: MonotonicInstant) -> Double { (Double(i.nanoseconds) - Double(origin)) / 1e9 }
        figures.disruptions = m.timeline.records.map { r in
            CallRecovery.Disruption(
                startSeconds: seconds(r.start), endSeconds: r.end.map(seconds), cause: Self.describe(r.cause),
                attempts: r.attempts, outcome: r.outcome.map(Self.describe))
        }
        figures.totalDisruptedSeconds = m.timeline.totalDisruptedSeconds(now: MonotonicInstant(nanoseconds: MonotonicClock.nanoseconds()))
        return figures
    }

    static func describe(_ c: RecoveryTimeline.Cause) -> String {
        switch c {
        case .inboundSilence: "media silence"
        case .localNetworkChange: "local network change"
        case .outboundStall: "peer stopped receiving"
        case .noSendPath: "no path to send on"
        case .consentLost: "peer withdrew consent"
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
