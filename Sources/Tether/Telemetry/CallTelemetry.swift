import CoreMetrics
import Foundation
import Logging
import Synchronization
import TetherAudio
import TetherDTLS
import TetherRealtime

/// The call's telemetry, readable from any thread: its logger, the report's recorder and recent
/// log, the swift-metrics instruments, and what `CallSession.statistics()` reads besides the
/// media loop's counters: one `Snapshot` of the session's parts, built in one place
/// (`CallSession.publishTelemetry()`) and replaced whole, never written field by field.
final class CallTelemetry: Sendable {
    /// What the statistics say of the call besides the media counters, as the session's parts
    /// have it now.
    struct Snapshot {
        var codec = "opus/48000/2"
        var payloadType: Int
        var packetTimeMilliseconds: Int
        var bitrate: Int
        var configuredJitterBufferTargetMilliseconds: Double
        /// The SRTP suite media is protected with ("" until keys are in force).
        var suite = ""
        var keying = ""
        var dtls: DTLSConnection?
        var media: MediaLoop?
        var localAddress = ""
        var remoteAddress = ""
        var recovery = CallRecovery()
        var direction = "sendrecv"
        var hold = HoldState()
        var voiceProcessing = "off"
        var encoderLookaheadMilliseconds = 0.0
        var encoderMaximumBandwidth = ""
        var source: (any AudioSource)?
        var sink: (any AudioSink)?
    }

    /// The call's logger: the configuration's, with `call-id`, and the report's recent log.
    let logger: Logger
    /// What the call report needs, gathered as the call goes.
    let recorder: Mutex<CallReportRecorder>
    /// The call's last log messages, for the report.
    let recentLog: RecentLog
    /// The call's counters and gauges (swift-metrics).
    let metrics: CallMetrics
    let createdAtNanoseconds: UInt64
    private let published: Mutex<Snapshot>
    /// When the report last got a statistics sample (monotonic ns).
    private let lastSample = Mutex<UInt64>(0)

    init(configuration: CallConfiguration, callId: String, createdAtNanoseconds: UInt64, initial: Snapshot) {
        self.createdAtNanoseconds = createdAtNanoseconds
        // The embedder's handler (at its level) and the report's recent log (at info).
        let recent = RecentLog(createdAtNanoseconds: createdAtNanoseconds)
        recentLog = recent
        let embedders = configuration.logger.handler
        var logger = Logger(label: configuration.logger.label) { _ in
            MultiplexLogHandler([embedders, RecentLogHandler(log: recent)])
        }
        logger[metadataKey: "call-id"] = "\(callId)"
        self.logger = logger
        recorder = Mutex(CallReportRecorder(callId: callId, startedAt: Date()))
        metrics = CallMetrics(factory: configuration.metricsFactory ?? MetricsSystem.factory, dimensions: configuration.metricsDimensions)
        published = Mutex(initial)
    }

    /// Replaces what the statistics read besides the media counters.
    func publish(_ snapshot: Snapshot) {
        published.withLock { $0 = snapshot }
    }

    /// The hold in force, as last published.
    var hold: HoldState { published.withLock { $0.hold } }

    /// An event of the call, for the report's timeline and the metrics.
    func observe(_ event: CallEvent) {
        let seconds = Double(MonotonicClock.nanoseconds() - createdAtNanoseconds) / 1e9
        recorder.withLock { $0.record(event, atSeconds: seconds, wallClock: Date()) }
        metrics.observe(event)
    }

    /// Once a second of an established call: a statistics sample for the report and the metrics.
    func sampleIfDue(now: UInt64) {
        let due = lastSample.withLock { last in
            guard now &- last >= 1_000_000_000 else { return false }
            last = now
            return true
        }
        guard due else { return }
        let s = statistics()
        recorder.withLock { $0.sample(s) }
        metrics.update(s)
    }

    func report(state: CallState, logRecords: Int) -> CallReport {
        let s = statistics()
        let log = logRecords > 0 ? recentLog.last(logRecords) : nil
        return recorder.withLock { $0.report(s, state: state, log: log) }
    }

    /// The call's end: the report's figures to the metrics.
    func recordEnd(state: CallState) {
        metrics.recordEnd(report(state: state, logRecords: 0))
    }

    /// The statistics now: the media loop's counters and devices, read at this instant, with
    /// the published snapshot.
    func statistics() -> CallStatistics {
        let context = published.withLock { $0 }
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
                ? context.configuredJitterBufferTargetMilliseconds : c.jitterBufferTargetMilliseconds,
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
        statistics.localHold = context.hold.local
        statistics.remoteHold = context.hold.remote
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
}
