import Synchronization
import TetherAudio
import TetherCodec
import TetherCore
import TetherICE
import TetherRTP
import TetherRealtime

/// Something the media loop tells the session. Rare (not per packet).
enum MediaNotification: Sendable {
    /// The first frame from the peer was decoded.
    case firstMediaDecoded
    /// The peer sent an RTCP BYE.
    case byeReceived
}

/// The media loop of one call: it owns Opus, SRTP, RTP/RTCP state and the jitter buffer, and runs
/// on a `MediaWorker` thread shared with other calls' loops.
///
/// It is served when the capture device delivers a frame, the playback device consumed one, or a
/// datagram arrived (all three signal the worker's `Wakeup`), and at RTCP and statistics deadlines.
/// Per packet it never allocates, locks, logs or touches an object it does not own; the only
/// allocations are libsrtp's own (Debian's NSS build), reported apart by the bench.
final class MediaLoop: @unchecked Sendable {
    /// What the loop needs, all created before it starts.
    struct Setup {
        var encoder: OpusEncoder
        var decoder: OpusDecoder
        var outbound: SRTPContext
        var inbound: SRTPContext
        var transport: ICETransport
        var receiveRing: PacketRing
        var captureRing: SPSCRing<Int16>
        var playbackRing: SPSCRing<Int16>
        /// How much the playback device wants queued in `playbackRing` (it says so at start).
        var playbackDemand = PlaybackDemand()
        /// The worker thread that runs the loop; its `wakeup` is what the devices and the
        /// transport signal.
        var worker: MediaWorker
        var payloadType: UInt8
        var cname: String
        var jitterBufferTargetMilliseconds: Int
        var adaptiveJitterBuffer: Bool = true
        var jitterBufferMaximumMilliseconds: Int = 200
        /// Whether we asked for FEC (`useinbandfec=1`): rebuild lost frames from it, and keep a
        /// frame more buffered while packets are lost so the successor is there in time.
        var usesFEC: Bool = true
        /// Whether frames FEC cannot rebuild are concealed (otherwise played as silence).
        var concealsLoss: Bool = true
        var rtcpIntervalSeconds: Double
        /// Whether the negotiated direction lets us send RTP (RTCP flows either way).
        var sendsMedia: Bool = true
        /// Adapts the encoder's expected loss, FEC and bitrate to the peer's reports (random
        /// loss; inside the rate control's budget).
        var lossAdaptation: LossAdaptation
        /// Whether the send rate follows the path's bandwidth (`SendRateController`): false keeps
        /// the loss adaptation's settings whatever the path (measurements, A/B comparisons).
        var rateControl: Bool = true
        /// The longest packet the peer takes (its `maxptime`), in milliseconds; the rate control
        /// lengthens packets up to it on a narrow path.
        var maximumPacketMilliseconds: Int = 60
        /// The peer's `b=AS`/`b=TIAS` cap on what we send, bits per second with headers.
        var peerBandwidthLimitBitsPerSecond: Int? = nil
        /// The header extension ID of the transport-wide sequence number, when transport-cc was
        /// negotiated: our packets carry it and the peer's feedback drives the rate; the peer's
        /// packets' arrivals go back to it as feedback. nil: receiver reports drive the rate.
        var transportWideSequenceID: UInt8? = nil
        /// Both sides take reduced-size RTCP: feedback goes alone, not after a report.
        var reducedSizeRTCP: Bool = false
        /// The negotiated RFC 4733 telephone-event format we send DTMF with, and the ones the peer
        /// may send with (all packed by `packFormats`).
        var telephoneEvent: TelephoneEventFormat? = nil
        var receivableTelephoneEvents: [TelephoneEventFormat] = []
        /// RFC 2198 redundant audio, when negotiated: received from the peer whenever it sends it,
        /// sent while the loss adaptation asks for redundancy (each packet also carries the
        /// frame or two frames before it).
        var redundantAudio: RedundantAudioFormat? = nil
        /// The peer asked for RTCP XR Loss RLE blocks (`a=rtcp-xr:pkt-loss-rle`): each of our
        /// reports carries one about its packets since the last (at most 128).
        var sendsLossRunLength: Bool = false
        /// Echo cancellation, noise suppression, gain control on the captured frames, with what
        /// is played as the echo reference (nil: none). Used on the media thread only.
        var voiceProcessor: VoiceProcessor? = nil
        var notify: @Sendable (MediaNotification) -> Void
    }

    let counters = SeqlockCell(MediaCounters())
    /// What the loop has to say, as fixed-size records (`MediaLogEvent`) the session turns into
    /// log messages: the media thread posts, the session drains.
    let log = RealtimeLog(capacity: 256)
    private var dropReporting = DropReporting()
    /// Whether the negotiated direction lets us send RTP; changed by re-offers (hold/resume).
    /// Relaxed: a flag read once per frame, it guards no other data.
    let sendsMedia: Atomic<Bool>
    /// Whether the microphone is muted (silence is sent instead). Relaxed, as above.
    let muted = Atomic<Bool>(false)
    /// Whether a capture device feeds the capture ring. When false (muted with the microphone
    /// released, capture device lost) the loop sends silence on its own clock. Release/acquire:
    /// the session changes devices around it.
    let captureActive = Atomic<Bool>(true)
    /// Next instant a silence frame is due while no capture device runs (0: not running).
    var syntheticFrameAt: UInt64 = 0
    /// Our SSRC (random).
    let localSSRC: UInt32

    /// DTMF tones queued by the session (control thread, the one producer) for the media thread,
    /// packed by `packTone`; and digits the media thread received (`unpackReceived`), taken by
    /// the session (the one consumer). Lock-free rings: the media thread neither allocates nor
    /// waits for them.
    let dtmfToSend = SPSCRing<UInt64>(capacity: 64)
    let dtmfReceived = SPSCRing<UInt64>(capacity: 64)
    /// The negotiated telephone-event formats, packed (`packFormats`; 0: none); changed by a
    /// renegotiation. Relaxed: one word, read once per pass.
    let telephoneEventSetting: Atomic<UInt64>
    /// The formats in use on the media thread: the sender's, and a receiver for each payload type
    /// the peer may send events on (two rates can be negotiated).
    var telephoneEventInUse: UInt64 = 0
    var telephoneEventPayloadType: UInt8 = 0
    var dtmfSender: DTMFSender?
    var dtmfReceiver: DTMFReceiver?
    var alternateEventPayloadType: UInt8 = 0
    var alternateDTMFReceiver: DTMFReceiver?

    let setup: Setup
    /// SRTP both ways: the setup's contexts, replaced between passes when the session re-keys
    /// (a new DTLS association after the peer's certificate changed, new SDES keys). Owns the
    /// contexts in use (changed only at a re-key, off the per-packet path).
    var keys: SRTPContextPair
    /// The same contexts, read per packet without reference counting: `keys` keeps them alive.
    unowned(unsafe) var outbound: SRTPContext
    unowned(unsafe) var inbound: SRTPContext
    /// Contexts handed over by `replaceKeys` for the next pass: a retained `SRTPContextPair`, or
    /// nil. Acquire/release: they are built on the control thread and used on the media thread.
    let pendingKeys = Atomic<UnsafeMutableRawPointer?>(nil)
    /// After a re-key, the first packet that decrypts may come from another source (media thread).
    var acceptsNewSource = false
    /// Packets lost from sources before the current one (media thread).
    var lostBeforeSourceChange = 0
    /// The loop's slot on its worker while it runs (control thread only).
    private var slot: Int?
    let frameSamples: Int
    /// Opus's RTP clock (RFC 7587 §4.1: 48 kHz whatever the audio's bandwidth), which is also the
    /// rate Tether codes and plays at: one rate for the jitter buffer, the reception statistics,
    /// the sender reports and the playback queue.
    static let clockRateHertz = OpusConfiguration.sampleRateHertz
    static let samplesPerMillisecond = clockRateHertz / 1000
    let frameNanoseconds: UInt64
    let pcm: UnsafeMutableBufferPointer<Int16>
    let silence: UnsafeMutableBufferPointer<Int16>
    let packet: UnsafeMutableRawBufferPointer
    /// While RED is sent: the last frames' Opus packets with their lengths and RTP timestamps, a
    /// ring of `historySlots`. Each frame is encoded straight into the slot after the newest
    /// (whose frame is too old to carry by then) and the RED payload is written from the slots
    /// before it: nothing is copied to remember a frame.
    let history: UnsafeMutableRawBufferPointer
    var historyLengths = InlineArray<5, Int>(repeating: 0)
    var historyTimestamps = InlineArray<5, UInt32>(repeating: 0)
    var newestHistorySlot = 0
    /// The frame being sent and the deepest RED `LossAdaptation` asks for.
    static let historySlots = 5
    let redundantBlock: UnsafeMutableBufferPointer<RedundantAudioPayload.Source>
    /// The RED format while packets also carry earlier frames (the negotiated one, while the loss
    /// adaptation asks for redundancy), else nil; how many earlier frames (1 to 4).
    var redundancyInUse: RedundantAudioFormat?
    var redundantFramesInUse = 0
    let rtcpBuffer: UnsafeMutableRawBufferPointer
    let rtcpWriter: RTCPCompoundWriter
    let reportBlock: UnsafeMutableBufferPointer<RTCPReportBlock>
    let jitterBuffer: JitterBuffer
    var reception = ReceptionStatistics()
    var stats = MediaCounters()
    private var random = SystemRandomNumberGenerator()
    /// Packets we could not protect (the transport counts the sends that failed).
    var localSendFailures = 0
    /// What the kernel took from our direct sends (what libnice sent from the queue, the
    /// transport counts; `refreshSentCounts()` adds the two into `stats`).
    var directRTPPackets = 0
    var directRTPPayloadBytes = 0
    var directRTCPPackets = 0
    /// The window `updateBitrates(now:)` measures over: when it started, and the byte counts then.
    var bitrateWindowStart: UInt64 = 0
    var bytesSentAtWindowStart = 0
    var bytesReceivedAtWindowStart = 0

    // RTP sender state.
    var sequenceNumber: UInt16
    var rtpTimestamp: UInt32
    var lastSentRTPTimestamp: UInt32 = 0
    var lastSentAtNanoseconds: UInt64 = 0
    var sentAnything = false
    var lastFrameWasDTX = true

    // RTP receiver state.
    var remoteSSRC: UInt32?
    /// What the peer's RTCP said (its sender reports, its reports and loss runs about us).
    var peerReports: PeerReports
    var announcedFirstMedia = false
    var byeAnnounced = false
    /// What we send inside the path's bandwidth: bitrate, packet duration, FEC and RED.
    var rateController: SendRateController
    /// The encoder settings last applied (a decision that changes only the packet duration
    /// leaves the encoder alone).
    var lastAppliedSettings: LossAdaptation.Settings?
    /// When each of our packets left, by transport-wide sequence number (transport-cc).
    let sendHistory = TransportSendHistory()
    /// When each of the peer's packets arrived, for the feedback we send it (transport-cc).
    let feedbackRecorder: TransportFeedbackRecorder?
    /// When our transport-cc feedback is due.
    var feedbackSchedule = TransportFeedbackSchedule()
    /// Frames (of `frameSamples`) per packet now, and from the next packet on.
    var framesPerPacket = 1
    var nextFramesPerPacket = 1
    /// The frames of the packet being gathered (up to `maximumFramesPerPacket`: 120 ms), how
    /// many are in, and the RTP timestamp of its first.
    let packetPCM: UnsafeMutableBufferPointer<Int16>
    let maximumFramesPerPacket: Int
    var framesGathered = 0
    var packetTimestamp: UInt32 = 0
    /// Audio decoded ahead of playout (a packet of 40, 60 or 120 ms decodes to several frames):
    /// played a frame at a time before the jitter buffer is asked again. It holds Opus's longest
    /// packet, 120 ms, whatever our frame duration.
    let decoded: UnsafeMutableBufferPointer<Int16>
    var decodedOffset = 0
    var decodedCount = 0
    /// Long concealment runs (loss, DTX pauses) fade into comfort noise.
    var concealmentFade = ConcealmentFade()
    /// The playback queue: milliseconds of audio ahead of each frame appended to the ring, a
    /// moving average (each frame weighs 1/16; −1 before the first).
    var playbackQueueMilliseconds = -1.0
    /// Whether the last frame handed to playback was quiet: the adaptive jitter buffer inserts
    /// or drops frames only then (a pause in speech).
    var lastFrameQuiet = true
    /// Set by `stop(sendBye:)` before the thread is told to stop; read by the thread as it exits.
    private let stopWithBye = Atomic<Bool>(false)
    /// The session asks for an RTCP report at the next pass (media stopped or came back), so the
    /// peer learns it within a round trip rather than a report interval. Relaxed: a request
    /// flag, it guards no data.
    let reportSoon = Atomic<Bool>(false)
    /// When the last RTCP report went out (media thread).
    var lastReportAtNanoseconds: UInt64 = 0
    /// The packets we sent lately: send instant and sequence number, a ring of
    /// `sentHistoryCapacity` (about 5 s at 20 ms), to tell from one report whether the peer
    /// missed what we sent well before it (media thread).
    let sentHistory: UnsafeMutablePointer<(at: UInt64, sequence: UInt16)>
    static let sentHistoryCapacity = 256
    var sentHistoryCount = 0

    /// The largest Opus packet (RFC 6716 §3.2.1).
    static let maximumOpusPacketBytes = 1275

    init(_ setup: Setup) {
        self.setup = setup
        keys = SRTPContextPair(outbound: setup.outbound, inbound: setup.inbound)
        outbound = setup.outbound
        inbound = setup.inbound
        sendsMedia = Atomic(setup.sendsMedia)
        telephoneEventSetting = Atomic(Self.packFormats(send: setup.telephoneEvent, receivable: setup.receivableTelephoneEvents))
        // Every packet's bytes besides the payload: a link-layer header, IPv4 and UDP, RTP, the
        // transport-wide sequence extension, the SRTP tag.
        let headerBytes = 14 + 28 + RTPHeader.fixedHeaderLength + (setup.transportWideSequenceID != nil ? TransportWideSequence.headerBytes : 0)
            + setup.outbound.suite.rtpOverheadBytes
        rateController = SendRateController(
            lossAdaptation: setup.lossAdaptation, usesTransportFeedback: setup.transportWideSequenceID != nil, headerBytes: headerBytes,
            maximumFrameMilliseconds: setup.rateControl ? setup.maximumPacketMilliseconds : 20,
            peerCapBitsPerSecond: setup.peerBandwidthLimitBitsPerSecond, controlsRate: setup.rateControl)
        feedbackRecorder = setup.transportWideSequenceID != nil ? TransportFeedbackRecorder() : nil
        let start = rateController.decision
        var encoderConfiguration = setup.encoder.configuration
        encoderConfiguration.bitrateBitsPerSecond = start.settings.bitrateBitsPerSecond
        encoderConfiguration.inBandFEC = start.settings.inBandFEC
        encoderConfiguration.expectedLossPercent = start.settings.expectedLossPercent
        try? setup.encoder.apply(encoderConfiguration)
        stats.encoderExpectedLossPercent = start.settings.expectedLossPercent
        stats.encoderInBandFEC = start.settings.inBandFEC
        stats.encoderBitrateBitsPerSecond = setup.encoder.configuration.bitrateBitsPerSecond
        stats.estimatedBandwidthBitsPerSecond = setup.rateControl ? Int(rateController.estimator.estimateBitsPerSecond) : 0
        stats.packetMilliseconds = start.frameMilliseconds
        counters.write(stats)  // readers see the encoder's settings before the first publish
        frameSamples = setup.encoder.configuration.samplesPerFrame
        frameNanoseconds = UInt64(setup.encoder.configuration.frameDurationMilliseconds) * 1_000_000
        pcm = .allocate(capacity: frameSamples)
        pcm.initialize(repeating: 0)
        // The longest packet the rate control may choose, in our frames (12 of 10 ms at 120 ms).
        maximumFramesPerPacket = max(1, rateController.maximumFrameMilliseconds / setup.encoder.configuration.frameDurationMilliseconds)
        packetPCM = .allocate(capacity: maximumFramesPerPacket * frameSamples)
        packetPCM.initialize(repeating: 0)
        decoded = .allocate(capacity: max(6 * frameSamples, OpusDecoder.maximumPacketSamples))
        decoded.initialize(repeating: 0)
        silence = .allocate(capacity: frameSamples)
        silence.initialize(repeating: 0)
        packet = .allocate(byteCount: 1500 + SRTPContext.maximumRTPTrailerBytes, alignment: 16)
        precondition(LossAdaptation.maximumRedundantFrames < MediaLoop.historySlots, "the RED history holds the frame and the ones it carries")
        history = .allocate(byteCount: MediaLoop.historySlots * MediaLoop.maximumOpusPacketBytes, alignment: 16)
        redundantBlock = .allocate(capacity: LossAdaptation.maximumRedundantFrames)
        redundancyInUse = start.settings.redundancy ? setup.redundantAudio : nil
        redundantFramesInUse = start.settings.redundantFrames
        framesPerPacket = Self.frames(
            inPacketOf: start.frameMilliseconds, frameMilliseconds: setup.encoder.configuration.frameDurationMilliseconds, maximum: maximumFramesPerPacket)
        nextFramesPerPacket = framesPerPacket
        stats.encoderRedundantFrames = redundancyInUse != nil ? redundantFramesInUse : 0
        rtcpBuffer = .allocate(byteCount: 1500, alignment: 16)
        sentHistory = .allocate(capacity: Self.sentHistoryCapacity)
        sentHistory.initialize(repeating: (0, 0), count: Self.sentHistoryCapacity)
        reportBlock = .allocate(capacity: 1)
        reportBlock.initialize(repeating: RTCPReportBlock(ssrc: 0, fractionLost: 0, cumulativeLost: 0, extendedHighestSequence: 0, interarrivalJitter: 0, lastSenderReport: 0, delaySinceLastSenderReport: 0))
        rtcpWriter = RTCPCompoundWriter(cname: Array(setup.cname.utf8.prefix(255)))!
        var jitterConfiguration = JitterBuffer.Configuration(
            clockRateHertz: Self.clockRateHertz, frameSamples: frameSamples, targetDelayMilliseconds: setup.jitterBufferTargetMilliseconds)
        jitterConfiguration.adaptiveTarget = setup.adaptiveJitterBuffer
        jitterConfiguration.maximumDelayMilliseconds = setup.jitterBufferMaximumMilliseconds
        jitterConfiguration.lossLookahead = setup.usesFEC
        jitterBuffer = JitterBuffer(configuration: jitterConfiguration)
        var g = SystemRandomNumberGenerator()
        localSSRC = UInt32.random(in: 1...UInt32.max, using: &g)
        peerReports = PeerReports(localSSRC: localSSRC)
        sequenceNumber = UInt16.random(in: 0...UInt16.max, using: &g)
        rtpTimestamp = UInt32.random(in: 0...UInt32.max, using: &g)
        stats.jitterBufferTargetMilliseconds = Double(setup.jitterBufferTargetMilliseconds)
    }

    deinit {
        if let slot { setup.worker.unregister(slot: slot) }
        if let box = pendingKeys.exchange(nil, ordering: .acquiring) { Unmanaged<SRTPContextPair>.fromOpaque(box).release() }
        pcm.deallocate()
        packetPCM.deallocate()
        decoded.deallocate()
        silence.deallocate()
        packet.deallocate()
        history.deallocate()
        redundantBlock.deallocate()
        rtcpBuffer.deallocate()
        reportBlock.deallocate()
        sentHistory.deallocate()
    }

    /// The scheduling the media thread (the loop's worker) got.
    var scheduling: ThreadScheduling { setup.worker.scheduling }

    /// Starts running the loop on its worker. Control thread; not after `stop`.
    func start() throws(MediaWorker.StartError) {
        guard slot == nil else { return }
        slot = try setup.worker.register(self)
    }

    /// Stops the loop; with `sendBye` it sends a final RTCP report with BYE first. On return the
    /// worker no longer runs it. Control thread.
    func stop(sendBye: Bool) {
        guard let slot else { return }
        // Release: the worker's acquiring load in its last pass observes this value (the slot's
        // own hand-off orders it too; the explicit ordering documents it).
        stopWithBye.store(sendBye, ordering: .releasing)
        setup.worker.unregister(slot: slot)
        self.slot = nil
    }

    // MARK: The loop

    /// The worker's last pass over the loop before it lets go: the BYE if asked, and the final
    /// counters. Worker thread.
    func finishOnWorker() {
        if stopWithBye.load(ordering: .acquiring) { sendRTCP(now: MonotonicClock.nanoseconds(), bye: true) }
        publish()
        dropReporting.check(stats, now: MonotonicClock.nanoseconds(), into: log, final: true)
    }

    private var nextRTCP: UInt64 = 0
    private var nextPublish: UInt64 = 0

    /// Sets the loop's timers on the media thread's first look at it (its deadline or its first
    /// pass, whichever comes first). The first report goes early (0.25–0.75 s, randomised; RFC
    /// 3550 §6.2 allows half an interval, and a two-party call gains more from it): the peer's
    /// encoder learns of loss, and turns its FEC on, within a second of the call starting, and
    /// the round-trip time shows early. Later reports keep the configured interval.
    @inline(__always)
    private func startTimersIfNeeded(now: UInt64) {
        guard nextRTCP == 0 else { return }
        nextRTCP = now + nanoseconds(seconds: min(0.5, setup.rtcpIntervalSeconds * 0.5) * randomUnit(1))
        nextPublish = now
    }

    /// The instant the loop must run by even without a signal (starting its timers on the first call).
    func nextDeadline(now: UInt64) -> UInt64 {
        startTimersIfNeeded(now: now)
        var deadline = min(nextRTCP, nextPublish, now + frameNanoseconds)
        if syntheticFrameAt != 0 { deadline = min(deadline, syntheticFrameAt) }
        if let due = feedbackDue() { deadline = min(deadline, due) }
        return deadline
    }

    /// One pass of the loop: received datagrams, captured frames, playout, RTCP and statistics.
    /// - Note: Media thread only (tests call it directly on their own thread with the loop stopped).
    func processOnce(now: UInt64) {
        receiveAndPlay(now: now)
        sendAndReport(now: now)
    }

    /// The first half of a pass: received datagrams into the jitter buffer, and frames decoded
    /// for the playback device. A worker runs it for all its loops before any encoding, so a long
    /// run of encodes never leaves a playback device without its next frame.
    func receiveAndPlay(now: UInt64) {
        adoptPendingKeys()
        adoptTelephoneEvent()
        drainReceived()
        if dtmfReceiver != nil {
            dtmfReceiver!.expire(now: now)
            alternateDTMFReceiver?.expire(now: now)
            forwardReceivedDigits()
        }
        fillPlayback(now: now)
    }

    /// The second half of a pass: captured frames encoded and sent, RTCP and statistics.
    func sendAndReport(now: UInt64) {
        adoptPendingKeys()
        startTimersIfNeeded(now: now)
        sendCaptured(now: now)
        // A report the session asked for (at most one per 200 ms), or the regular one.
        let early = reportSoon.load(ordering: .relaxed) && now &- lastReportAtNanoseconds >= 200_000_000
        if now >= nextRTCP || early {
            if early { reportSoon.store(false, ordering: .relaxed) }
            sendRTCP(now: now, bye: false)
            nextRTCP = now + nanoseconds(seconds: setup.rtcpIntervalSeconds * randomUnit(1))
        }
        if let recorder = feedbackRecorder, let due = feedbackDue(), now >= due {
            sendTransportFeedback(recorder, now: now)
            feedbackSchedule.sent(now: now)
        }
        if now >= nextPublish {
            updateBitrates(now: now)
            publish()
            dropReporting.check(stats, now: now, into: log)
            nextPublish = now + 100_000_000
        }
    }

    @inline(__always)
    private func nanoseconds(seconds: Double) -> UInt64 { UInt64(max(0, seconds) * 1e9) }

    /// A uniform draw in [scale − 0.5, scale + 0.5) … used as the RTCP interval factor.
    private func randomUnit(_ scale: Double) -> Double {
        scale - 0.5 + Double(random.next() >> 11) / Double(1 << 53)
    }
}
