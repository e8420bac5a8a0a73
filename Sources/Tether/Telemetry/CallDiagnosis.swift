import Foundation
import Logging
import Synchronization
import TetherRealtime

/// A problem with a call, in the categories mobile voice SDKs use for user feedback: what the
/// report's diagnosis finds (`CallReport.findings`) and what the user says
/// (`CallSession.submitFeedback`).
public enum CallIssue: String, Codable, Sendable, CaseIterable {
    /// Nothing was heard (or the call never carried media).
    case noAudio = "no-audio"
    /// One side heard the other but not the reverse.
    case oneWayAudio = "one-way-audio"
    /// Audio broke up: lost or concealed frames, gaps, device underruns.
    case choppyAudio = "choppy-audio"
    /// A long delay between speaking and being heard.
    case highLatency = "high-latency"
    /// Someone heard themselves. The report sees the echo this side sends: its canceller heard
    /// the peer's voice come back through the speaker and microphone and removed little of it
    /// (the peer hears itself). Echo this side's user hears comes from the peer's device: only
    /// the user (or the peer's report) can tell it.
    case echo
    /// Noise behind the speech. Not diagnosed yet (no noise level is measured); user-reported.
    case backgroundNoise = "background-noise"
    /// The path could not carry speech: the bandwidth it gave was too small, or it was
    /// congested (loss with a growing queue) for a good part of the call.
    case pathTooNarrow = "path-too-narrow"
}

extension CallReport {
    /// A problem the report can see, with the figures that show it.
    public struct Finding: Codable, Sendable, Equatable {
        public var issue: CallIssue
        /// What shows it, in words and numbers (for a support engineer, not for the user).
        public var evidence: String
    }

    /// What the user said after the call (`CallSession.submitFeedback`).
    public struct Feedback: Codable, Sendable, Equatable {
        /// 1 (bad) … 5 (excellent).
        public var rating: Int
        /// The problems the user chose (empty: "no issue").
        public var issues: [CallIssue]
        /// The user's words, if any (at most 2000 characters).
        public var comment: String?
        /// When the feedback was given (wall clock).
        public var submittedAt: Date
    }

    /// One of the call's last log messages (`CallSession.report(logRecords:)`).
    public struct LogRecord: Codable, Sendable, Equatable {
        /// Seconds since the session was created.
        public var atSeconds: Double
        /// swift-log's level name (`info`, `warning`, …).
        public var level: String
        /// The message (cut at 1000 characters) and its metadata (the call id left out: it is the report's).
        public var message: String
        public var metadata: [String: String]
    }
}

/// The thresholds of the diagnosis, and the diagnosis itself (sans-IO: a function of the report).
enum CallDiagnosis {
    /// Heard loss (lost and not rebuilt) from which audio counts as choppy, in percent: about
    /// where Opus's concealment stops hiding it (E-model's Bpl for Opus puts 3 % near R − 10).
    static let choppyHeardLossPercent = 3.0
    /// Share of played frames concealed from which audio counts as choppy, in percent.
    static let choppyConcealedPercent = 5.0
    /// Seconds of disruption in all from which the call counts as choppy.
    static let choppyDisruptedSeconds = 2.0
    /// Playback underruns from which audio counts as choppy (each is an audible gap).
    static let choppyUnderruns = 3
    /// Mouth-to-ear (95th percentile) from which the delay counts as high, in ms (ITU-T G.114:
    /// up to 150 ms unnoticed, up to 400 ms acceptable, interactivity suffers from about 300).
    static let highMouthToEarMilliseconds = 300.0
    /// Round-trip time (95th percentile) from which the delay counts as high when no
    /// mouth-to-ear figure exists (no playout), in ms.
    static let highRoundTripMilliseconds = 600.0

    /// Echo: at least this many one-second samples in which the canceller heard echo…
    static let echoSamples = 10
    /// …with a median echo return loss enhancement under this (dB): what was removed, while a
    /// converged canceller removes 30–50 dB (the echo device test).
    static let echoResidualDecibels = 10.0

    /// The bandwidth (kb/s, headers included) under which speech does not fit well: 60 ms
    /// packets (8 kb/s of headers) and 12 kb/s of Opus.
    static let speechFloorKilobitsPerSecond = 20.0
    /// Share of the rate control's samples (at least `narrowPathSamples`) under the floor, or
    /// with congestion loss, from which the path counts as too narrow.
    static let narrowPathShare = 0.2
    static let narrowPathSamples = 10

    static func findings(_ r: CallReport, outboundDisruptions: Int) -> [CallReport.Finding] {
        var out: [CallReport.Finding] = []
        let q = r.quality
        if r.setUpSeconds == nil {
            out.append(.init(issue: .noAudio, evidence: "the call never carried media (\(r.end.map { "ended: \($0.cause)" } ?? "not established"))"))
        } else if q.packetsReceived == 0 {
            out.append(.init(issue: .noAudio, evidence: "no packet received in \(r.connectedSeconds ?? 0) s connected"))
        }
        var oneWay: [String] = []
        if outboundDisruptions > 0 {
            oneWay.append("the peer stopped receiving our media \(outboundDisruptions) time\(outboundDisruptions == 1 ? "" : "s") (its RTCP reports)")
        }
        if let failed = r.deviceChanges.first(where: { $0.direction == "capture" && $0.event == "failed" }) {
            oneWay.append("the capture device failed at \(failed.atSeconds) s (\(failed.message ?? "")): the peer heard silence until it recovered")
        }
        if let failed = r.deviceChanges.first(where: { $0.direction == "playback" && $0.event == "failed" }) {
            oneWay.append("the playback device failed at \(failed.atSeconds) s (\(failed.message ?? ""))")
        }
        if !oneWay.isEmpty { out.append(.init(issue: .oneWayAudio, evidence: oneWay.joined(separator: "; "))) }
        var choppy: [String] = []
        if q.heardLossPercent >= choppyHeardLossPercent { choppy.append("\(q.heardLossPercent) % of packets lost and not rebuilt") }
        if q.concealedPercent >= choppyConcealedPercent { choppy.append("\(q.concealedPercent) % of played frames concealed") }
        if r.totalDisruptedSeconds >= choppyDisruptedSeconds {
            choppy.append("\(r.totalDisruptedSeconds) s without media in \(r.disruptions.count) disruption\(r.disruptions.count == 1 ? "" : "s")")
        }
        if q.playbackUnderruns >= choppyUnderruns { choppy.append("\(q.playbackUnderruns) playback underruns") }
        if !choppy.isEmpty { out.append(.init(issue: .choppyAudio, evidence: choppy.joined(separator: "; "))) }
        if let m2e = q.mouthToEarMilliseconds, m2e.p95 >= highMouthToEarMilliseconds {
            out.append(.init(issue: .highLatency, evidence: "estimated mouth-to-ear \(m2e.p95) ms at the 95th percentile (median \(m2e.p50) ms)"))
        } else if q.mouthToEarMilliseconds == nil, let rtt = q.roundTripTimeMilliseconds, rtt.p95 >= highRoundTripMilliseconds {
            out.append(.init(issue: .highLatency, evidence: "round-trip time \(rtt.p95) ms at the 95th percentile"))
        }
        if let rate = r.rateControl, rate.samples >= narrowPathSamples {
            var narrow: [String] = []
            if Double(rate.secondsUnderSpeechFloor) >= narrowPathShare * Double(rate.samples) {
                narrow.append(
                    "the bandwidth estimate was under \(Int(speechFloorKilobitsPerSecond)) kb/s in \(rate.secondsUnderSpeechFloor) of \(rate.samples) seconds (median \(rate.estimatedBandwidthKilobitsPerSecondMedian ?? 0) kb/s)")
            }
            if Double(rate.congestionLossSeconds) >= narrowPathShare * Double(rate.samples) {
                narrow.append("loss came with a growing queue (congestion) in \(rate.congestionLossSeconds) of \(rate.samples) seconds")
            }
            if !narrow.isEmpty { out.append(.init(issue: .pathTooNarrow, evidence: narrow.joined(separator: "; "))) }
        }
        if let erle = q.echoReturnLossEnhancementDecibels, erle.samples >= echoSamples, erle.p50 < echoResidualDecibels {
            out.append(
                .init(
                    issue: .echo,
                    evidence: "our canceller heard the peer's voice come back in \(erle.samples) one-second samples and removed a median of \(erle.p50) dB: the peer likely hears itself"))
        }
        return out
    }
}

/// The call's last log messages, kept for the report: a log handler beside the embedder's, at
/// `info` whatever the embedder's level, holding at most `capacity` records.
final class RecentLog: Sendable {
    static let capacity = 200
    private struct Ring {
        var records: [CallReport.LogRecord] = []
        var next = 0
    }
    private let ring = Mutex(Ring())
    let createdAtNanoseconds: UInt64

    init(createdAtNanoseconds: UInt64) {
        self.createdAtNanoseconds = createdAtNanoseconds
    }

    func add(_ record: CallReport.LogRecord) {
        ring.withLock { r in
            if r.records.count < Self.capacity {
                r.records.append(record)
            } else {
                r.records[r.next] = record
                r.next = (r.next + 1) % Self.capacity
            }
        }
    }

    /// The last `count` records, oldest first.
    func last(_ count: Int) -> [CallReport.LogRecord] {
        ring.withLock { r in
            let ordered = Array(r.records[r.next...] + r.records[..<r.next])
            return Array(ordered.suffix(max(0, count)))
        }
    }
}

/// Feeds `RecentLog` (the session multiplexes it with the embedder's handler).
struct RecentLogHandler: LogHandler {
    let log: RecentLog
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        merged["call-id"] = nil
        let seconds = Double(MonotonicClock.nanoseconds() &- log.createdAtNanoseconds) / 1e9
        let message = "\(event.message)"
        log.add(
            CallReport.LogRecord(
                atSeconds: milliseconds(seconds), level: event.level.rawValue,
                message: message.count > 1000 ? String(message.prefix(1000)) + "…" : message,
                metadata: merged.mapValues { "\($0)" }))
    }
}
