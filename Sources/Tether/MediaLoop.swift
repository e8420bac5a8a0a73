import Glibc
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
    private var syntheticFrameAt: UInt64 = 0
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
    private let telephoneEventSetting: Atomic<UInt64>
    /// The formats in use on the media thread: the sender's, and a receiver for each payload type
    /// the peer may send events on (two rates can be negotiated).
    private var telephoneEventInUse: UInt64 = 0
    private var telephoneEventPayloadType: UInt8 = 0
    private var dtmfSender: DTMFSender?
    private var dtmfReceiver: DTMFReceiver?
    private var alternateEventPayloadType: UInt8 = 0
    private var alternateDTMFReceiver: DTMFReceiver?

    private let setup: Setup
    /// SRTP both ways: the setup's contexts, replaced between passes when the session re-keys
    /// (a new DTLS association after the peer's certificate changed, new SDES keys). Owns the
    /// contexts in use (changed only at a re-key, off the per-packet path).
    private var keys: SRTPContextPair
    /// The same contexts, read per packet without reference counting: `keys` keeps them alive.
    private unowned(unsafe) var outbound: SRTPContext
    private unowned(unsafe) var inbound: SRTPContext
    /// Contexts handed over by `replaceKeys` for the next pass: a retained `SRTPContextPair`, or
    /// nil. Acquire/release: they are built on the control thread and used on the media thread.
    private let pendingKeys = Atomic<UnsafeMutableRawPointer?>(nil)
    /// After a re-key, the first packet that decrypts may come from another source (media thread).
    private var acceptsNewSource = false
    /// Packets lost from sources before the current one (media thread).
    private var lostBeforeSourceChange = 0
    /// The loop's slot on its worker while it runs (control thread only).
    private var slot: Int?
    private let frameSamples: Int
    /// Opus's RTP clock (RFC 7587 §4.1: 48 kHz whatever the audio's bandwidth), which is also the
    /// rate Tether codes and plays at: one rate for the jitter buffer, the reception statistics,
    /// the sender reports and the playback queue.
    static let clockRateHertz = OpusConfiguration.sampleRateHertz
    static let samplesPerMillisecond = clockRateHertz / 1000
    private let frameNanoseconds: UInt64
    private let pcm: UnsafeMutableBufferPointer<Int16>
    private let silence: UnsafeMutableBufferPointer<Int16>
    private let packet: UnsafeMutableRawBufferPointer
    /// While RED is sent: the last frames' Opus packets with their lengths and RTP timestamps, a
    /// ring of `historySlots`. Each frame is encoded straight into the slot after the newest
    /// (whose frame is too old to carry by then) and the RED payload is written from the slots
    /// before it: nothing is copied to remember a frame.
    private let history: UnsafeMutableRawBufferPointer
    private var historyLengths = InlineArray<5, Int>(repeating: 0)
    private var historyTimestamps = InlineArray<5, UInt32>(repeating: 0)
    private var newestHistorySlot = 0
    /// The frame being sent and the deepest RED `LossAdaptation` asks for.
    static let historySlots = 5
    private let redundantBlock: UnsafeMutableBufferPointer<RedundantAudioPayload.Source>
    /// The RED format while packets also carry earlier frames (the negotiated one, while the loss
    /// adaptation asks for redundancy), else nil; how many earlier frames (1 to 4).
    private var redundancyInUse: RedundantAudioFormat?
    private var redundantFramesInUse = 0
    private let rtcpBuffer: UnsafeMutableRawBufferPointer
    private let rtcpWriter: RTCPCompoundWriter
    private let reportBlock: UnsafeMutableBufferPointer<RTCPReportBlock>
    private let jitterBuffer: JitterBuffer
    private var reception = ReceptionStatistics()
    private var stats = MediaCounters()
    private var random = SystemRandomNumberGenerator()
    /// Packets we could not protect (the transport counts the sends that failed).
    private var localSendFailures = 0
    /// What the kernel took from our direct sends (what libnice sent from the queue, the
    /// transport counts; `refreshSentCounts()` adds the two into `stats`).
    private var directRTPPackets = 0
    private var directRTPPayloadBytes = 0
    private var directRTCPPackets = 0

    // RTP sender state.
    private var sequenceNumber: UInt16
    private var rtpTimestamp: UInt32
    private var lastSentRTPTimestamp: UInt32 = 0
    private var lastSentAtNanoseconds: UInt64 = 0
    private var sentAnything = false
    private var lastFrameWasDTX = true

    // RTP receiver state.
    private var remoteSSRC: UInt32?
    /// What the peer's RTCP said (its sender reports, its reports and loss runs about us).
    private var peerReports: PeerReports
    private var announcedFirstMedia = false
    private var byeAnnounced = false
    /// What we send inside the path's bandwidth: bitrate, packet duration, FEC and RED.
    private var rateController: SendRateController
    /// When each of our packets left, by transport-wide sequence number (transport-cc).
    private let sendHistory = TransportSendHistory()
    /// When each of the peer's packets arrived, for the feedback we send it (transport-cc).
    private let feedbackRecorder: TransportFeedbackRecorder?
    /// When our transport-cc feedback is due.
    private var feedbackSchedule = TransportFeedbackSchedule()
    /// Frames (of `frameSamples`) per packet now, and from the next packet on.
    private var framesPerPacket = 1
    private var nextFramesPerPacket = 1
    /// The frames of the packet being gathered (up to `maximumFramesPerPacket`: 120 ms), how
    /// many are in, and the RTP timestamp of its first.
    private let packetPCM: UnsafeMutableBufferPointer<Int16>
    private let maximumFramesPerPacket: Int
    private var framesGathered = 0
    private var packetTimestamp: UInt32 = 0
    /// Audio decoded ahead of playout (a packet of 40, 60 or 120 ms decodes to several frames):
    /// played a frame at a time before the jitter buffer is asked again. It holds Opus's longest
    /// packet, 120 ms, whatever our frame duration.
    private let decoded: UnsafeMutableBufferPointer<Int16>
    private var decodedOffset = 0
    private var decodedCount = 0
    /// Long concealment runs (loss, DTX pauses) fade into comfort noise.
    private var concealmentFade = ConcealmentFade()
    /// Set by `stop(sendBye:)` before the thread is told to stop; read by the thread as it exits.
    private let stopWithBye = Atomic<Bool>(false)
    /// The session asks for an RTCP report at the next pass (media stopped or came back), so the
    /// peer learns it within a round trip rather than a report interval. Relaxed: a request
    /// flag, it guards no data.
    let reportSoon = Atomic<Bool>(false)
    /// When the last RTCP report went out (media thread).
    private var lastReportAtNanoseconds: UInt64 = 0
    /// The packets we sent lately: send instant and sequence number, a ring of
    /// `sentHistoryCapacity` (about 5 s at 20 ms), to tell from one report whether the peer
    /// missed what we sent well before it (media thread).
    private let sentHistory: UnsafeMutablePointer<(at: UInt64, sequence: UInt16)>
    private static let sentHistoryCapacity = 256
    private var sentHistoryCount = 0

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

    // MARK: DTMF (RFC 4733)

    /// A `telephone-event` format as one word: 1 << 24 | clock rate in kHz << 8 | payload type.
    static func packFormat(_ format: TelephoneEventFormat?) -> UInt32 {
        guard let format else { return 0 }
        return 1 << 24 | (format.clockRateHz / 1000) << 8 | UInt32(format.payloadType)
    }

    /// The formats as one word: the one we send with (low half), another the peer may send with
    /// (high half); 0 for none.
    static func packFormats(send: TelephoneEventFormat?, receivable: [TelephoneEventFormat]) -> UInt64 {
        guard let send else { return 0 }
        let other = receivable.first { $0.payloadType != send.payloadType }
        return UInt64(packFormat(send)) | UInt64(packFormat(other)) << 32
    }

    /// A tone for `dtmfToSend`: event | duration ms << 8 | gap ms << 24 (each duration ≤ 65535).
    static func packTone(_ tone: DTMFTone) -> UInt64 {
        UInt64(tone.digit.event) | UInt64(UInt16(clamping: tone.durationMilliseconds)) << 8
            | UInt64(UInt16(clamping: tone.gapMilliseconds)) << 24
    }

    /// A digit from `dtmfReceived`.
    static func unpackReceived(_ word: UInt64) -> DTMFReceived? {
        guard let digit = DTMFDigit(event: UInt8(truncatingIfNeeded: word)) else { return nil }
        return DTMFReceived(
            digit: digit, durationMilliseconds: Int(word >> 16 & 0xFFFF_FFFF), endSeen: word & 0x100 != 0, lengthCapped: word & 0x200 != 0)
    }

    /// Takes the telephone-event formats a negotiation or renegotiation set.
    /// Control thread.
    func setTelephoneEvents(send: TelephoneEventFormat?, receivable: [TelephoneEventFormat]) {
        telephoneEventSetting.store(Self.packFormats(send: send, receivable: receivable), ordering: .relaxed)
    }

    /// Rebuilds the DTMF sender and receiver when the format changed (a few words, no allocation).
    @inline(__always)
    private func adoptTelephoneEvent() {
        let setting = telephoneEventSetting.load(ordering: .relaxed)
        guard setting != telephoneEventInUse else { return }
        telephoneEventInUse = setting
        dtmfSender = nil
        dtmfReceiver = nil
        alternateDTMFReceiver = nil
        guard setting != 0 else { return }
        let rate = UInt32(setting >> 8 & 0xFFFF) * 1000
        telephoneEventPayloadType = UInt8(truncatingIfNeeded: setting)
        dtmfSender = DTMFSender(eventClockRateHz: rate, frameMilliseconds: setup.encoder.configuration.frameDurationMilliseconds)
        dtmfReceiver = DTMFReceiver(eventClockRateHz: rate)
        let other = setting >> 32
        if other != 0 {
            alternateEventPayloadType = UInt8(truncatingIfNeeded: other)
            alternateDTMFReceiver = DTMFReceiver(eventClockRateHz: UInt32(other >> 8 & 0xFFFF) * 1000)
        }
    }

    /// Moves the digits the receiver completed into `dtmfReceived` (dropped if the session let
    /// 64 pile up).
    private func forwardReceivedDigits() {
        while true {
            var digit = dtmfReceiver?.takeReceived()
            if digit == nil { digit = alternateDTMFReceiver?.takeReceived() }
            guard let digit else { return }
            stats.dtmfDigitsReceived += 1
            var word = UInt64(digit.digit.event) | (digit.endSeen ? 0x100 : 0) | (digit.lengthCapped ? 0x200 : 0)
                | UInt64(UInt32(clamping: digit.durationMilliseconds)) << 16
            _ = withUnsafePointer(to: &word) { dtmfReceived.write(UnsafeBufferPointer(start: $0, count: 1)) }
        }
    }

    /// The telephone-event packet to send instead of this frame's audio, starting the next
    /// queued tone when the sender is ready; nil to send audio.
    private func nextTelephoneEvent() -> TelephoneEventPacket? {
        guard var sender = dtmfSender else { return nil }
        if sender.isReady(at: rtpTimestamp) && dtmfToSend.availableToRead > 0 {
            var word: UInt64 = 0
            let read = withUnsafeMutablePointer(to: &word) { dtmfToSend.read(into: UnsafeMutableBufferPointer(start: $0, count: 1)) }
            if read == 1, let digit = DTMFDigit(event: UInt8(truncatingIfNeeded: word)) {
                sender.start(
                    DTMFTone(digit: digit, durationMilliseconds: Int(word >> 8 & 0xFFFF), gapMilliseconds: Int(word >> 24 & 0xFFFF)))
                stats.dtmfDigitsSent += 1
            }
        }
        let packet = sender.nextFrame(streamTimestamp: rtpTimestamp)
        dtmfSender = sender
        return packet
    }

    /// The call stopped sending (hold, inactive): the tone in progress and the queued ones are
    /// dropped rather than sent when it resumes.
    private func dropDTMF() {
        guard dtmfSender.map({ !$0.isIdle }) == true || dtmfToSend.availableToRead > 0 else { return }
        dtmfSender?.cancel()
        _ = dtmfToSend.discard(dtmfToSend.availableToRead)
    }

    /// Sends one telephone-event packet on the stream's SSRC and sequence numbers.
    private func sendTelephoneEvent(_ event: TelephoneEventPacket, now: UInt64) {
        let header = RTPHeader(
            marker: event.marker, payloadType: telephoneEventPayloadType, sequenceNumber: sequenceNumber,
            timestamp: event.timestamp, ssrc: localSSRC)
        let headerBytes = writeHeader(header, payloadBytes: TelephoneEventPayload.length, now: now)
        event.payload.write(to: UnsafeMutableRawBufferPointer(rebasing: packet[headerBytes...]))
        var length = headerBytes + TelephoneEventPayload.length
        do throws(SRTPError) {
            length = try outbound.protectRTP(packet, length: length)
        } catch {
            localSendFailures += 1
            return
        }
        if transmit(length: length, payloadBytes: TelephoneEventPayload.length, timestamp: rtpTimestamp, now: now) { stats.dtmfPacketsSent += 1 }
    }

    // MARK: Receive

    private func drainReceived() {
        while let _ = setup.receiveRing.pop({ buffer, arrival in handleDatagram(buffer, arrivalNanoseconds: arrival) }) {}
        stats.receiveQueueDrops = setup.receiveRing.droppedBecauseFull + setup.receiveRing.droppedBecauseOversize
    }

    /// Replaces SRTP in both directions from the next pass on (the session re-keyed).
    /// - Note: Control thread. The media thread takes the contexts over (one retain and release
    ///   per re-key, never per packet); contexts handed over twice before a pass: the newer wins.
    func replaceKeys(_ keys: SRTPContextPair) {
        let box = Unmanaged.passRetained(keys).toOpaque()
        if let older = pendingKeys.exchange(box, ordering: .acquiringAndReleasing) {
            Unmanaged<SRTPContextPair>.fromOpaque(older).release()
        }
    }

    /// Takes over contexts `replaceKeys` handed over. A relaxed load per pass while none wait;
    /// the reference counting happens here, once per re-key.
    /// - Note: Media thread only.
    @inline(__always)
    private func adoptPendingKeys() {
        guard pendingKeys.load(ordering: .relaxed) != nil,
            let box = pendingKeys.exchange(nil, ordering: .acquiringAndReleasing)
        else { return }
        let pair = Unmanaged<SRTPContextPair>.fromOpaque(box).takeRetainedValue()
        keys = pair
        outbound = pair.outbound
        inbound = pair.inbound
        acceptsNewSource = true
        log.post(RealtimeLogRecord(event: MediaLogEvent.keysReplaced.rawValue, nanoseconds: MonotonicClock.nanoseconds()))
    }

    /// The first packet of another source after a re-key (the call moved to another device):
    /// reception and playout start over for it; loss counted so far is kept.
    private func switchSource(to ssrc: UInt32, now: UInt64) {
        log.post(
            RealtimeLogRecord(
                event: MediaLogEvent.sourceSwitched.rawValue, nanoseconds: now, a: Int64(remoteSSRC ?? 0), b: Int64(ssrc)))
        lostBeforeSourceChange += Int(reception.cumulativeLost)
        reception = ReceptionStatistics()
        jitterBuffer.restartStream()
        decodedCount = 0
        dtmfReceiver?.reset()
        alternateDTMFReceiver?.reset()
        remoteSSRC = ssrc
        peerReports.peerSourceChanged()
        // The new source's transport-wide sequence starts wherever its sender's does.
        feedbackRecorder?.reset()
    }

    private func handleDatagram(_ buffer: UnsafeMutableRawBufferPointer, arrivalNanoseconds: UInt64) {
        switch RTPPacketClassifier.classify(UnsafeRawBufferPointer(buffer)) {
        case .rtp: handleRTP(buffer, arrivalNanoseconds: arrivalNanoseconds)
        case .rtcp: handleRTCP(buffer, arrivalNanoseconds: arrivalNanoseconds)
        case .invalid: stats.malformedPackets += 1
        }
    }

    private func countSRTPFailure(_ error: SRTPError) {
        switch error {
        case .authenticationFailed: stats.srtpAuthenticationFailures += 1
        case .replayed: stats.srtpReplayFailures += 1
        default: stats.malformedPackets += 1
        }
    }

    private func handleRTP(_ buffer: UnsafeMutableRawBufferPointer, arrivalNanoseconds: UInt64) {
        // A datagram too short for an RTP header is not worth libsrtp's time.
        guard buffer.count >= RTPHeader.fixedHeaderLength else {
            stats.malformedPackets += 1
            return
        }
        // A packet already received (the peer's redundant copy, or a network duplicate) is
        // dropped before SRTP, whose replay check would refuse it anyway (the header is clear).
        let clearSequence = UInt16(buffer[2]) << 8 | UInt16(buffer[3])
        let clearSSRC = UInt32(buffer[8]) << 24 | UInt32(buffer[9]) << 16 | UInt32(buffer[10]) << 8 | UInt32(buffer[11])
        if clearSSRC == remoteSSRC && reception.hasReceived(sequenceNumber: clearSequence) {
            stats.duplicatePackets += 1
            return
        }
        // Another source than the peer's is dropped unread (it would fail the SSRC check after
        // SRTP anyway), unless a re-key made room for a new one: libsrtp would keep a stream
        // for every SSRC a peer invents.
        if let remoteSSRC, clearSSRC != remoteSSRC, !acceptsNewSource {
            stats.malformedPackets += 1
            return
        }
        let length: Int
        do throws(SRTPError) {
            length = try inbound.unprotectRTP(buffer, length: buffer.count)
        } catch {
            countSRTPFailure(error)
            return
        }
        let plain = UnsafeRawBufferPointer(rebasing: buffer[0..<length])
        let header: RTPHeader
        var isEvent = false
        var isRedundant = false
        do throws(RTPParseError) {
            header = try RTPHeader.parse(plain)
            if acceptsNewSource {
                acceptsNewSource = false
                if let current = remoteSSRC, header.ssrc != current { switchSource(to: header.ssrc, now: arrivalNanoseconds) }
            }
            isEvent = dtmfReceiver != nil
                && (header.payloadType == telephoneEventPayloadType || (alternateDTMFReceiver != nil && header.payloadType == alternateEventPayloadType))
            isRedundant = !isEvent && setup.redundantAudio?.payloadType == header.payloadType
            try header.validate(expectedPayloadType: isEvent || isRedundant ? header.payloadType : setup.payloadType, expectedSSRC: remoteSSRC)
        } catch {
            stats.malformedPackets += 1
            return
        }
        if remoteSSRC == nil {
            remoteSSRC = header.ssrc
            log.post(RealtimeLogRecord(event: MediaLogEvent.firstMediaReceived.rawValue, nanoseconds: arrivalNanoseconds, a: Int64(header.ssrc)))
        }
        // Transport-cc: every packet's arrival, for the feedback the peer's sender adapts to.
        if let recorder = feedbackRecorder, let id = setup.transportWideSequenceID,
            let transportSequence = TransportWideSequence.read(from: plain, header: header, id: id)
        {
            recorder.record(sequence: transportSequence, arrivalNanoseconds: arrivalNanoseconds)
        }
        // Arrival in RTP units: nanoseconds × samples per millisecond / 1 000 000, mod 2^32.
        let perMillisecond = UInt64(Self.samplesPerMillisecond)
        let arrivalUnits = UInt32(
            truncatingIfNeeded: arrivalNanoseconds / 1_000_000 &* perMillisecond &+ (arrivalNanoseconds % 1_000_000) &* perMillisecond / 1_000_000)
        // An event update carries its event's start, not its sampling instant, and a padding
        // packet the last frame's: no jitter sample from either.
        let kind = reception.packetReceived(
            sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrivalRTPUnits: arrivalUnits,
            updatesJitter: !isEvent && header.payloadLength > 0)
        stats.lastMediaArrivalNanoseconds = arrivalNanoseconds
        if kind == .duplicate {
            stats.duplicatePackets += 1
            return
        }
        stats.packetsReceived += 1
        stats.bytesReceived += header.payloadLength
        let payload = UnsafeRawBufferPointer(rebasing: plain[header.payloadOffset..<(header.payloadOffset + header.payloadLength)])
        if payload.isEmpty {
            // Padding only (a sender probing the path's bandwidth: Chromium does, once
            // transport-cc is negotiated): its arrival went to the feedback above, and its
            // sequence number is no lost frame.
            stats.paddingPacketsReceived += 1
            jitterBuffer.noteNonAudioPacket(sequenceNumber: header.sequenceNumber)
            return
        }
        if isEvent {
            // DTMF: to the receiver; the jitter buffer only learns that this sequence number was
            // no audio, so the frames the event replaced play as a gap, not as loss.
            guard let event = TelephoneEventPayload(parsing: payload) else {
                stats.malformedPackets += 1
                return
            }
            stats.dtmfPacketsReceived += 1
            jitterBuffer.noteNonAudioPacket(sequenceNumber: header.sequenceNumber)
            if header.payloadType == telephoneEventPayloadType {
                dtmfReceiver?.receive(event, timestamp: header.timestamp, now: arrivalNanoseconds)
            } else {
                alternateDTMFReceiver?.receive(event, timestamp: header.timestamp, now: arrivalNanoseconds)
            }
            forwardReceivedDigits()
            return
        }
        if isRedundant {
            insertRedundantAudio(payload, header: header, arrivalNanoseconds: arrivalNanoseconds)
            return
        }
        let outcome = jitterBuffer.insert(
            sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, payload: payload,
            arrivalNanoseconds: arrivalNanoseconds, durationSamples: OpusPacket.sampleCount(of: payload))
        if outcome == .late { stats.latePackets += 1 }
    }

    /// An RFC 2198 RED payload: its primary goes to the jitter buffer as the packet's own frame,
    /// then each redundant Opus block fills the hole of the frame it copies, if there is one. A
    /// block's sequence number is the packet's minus the frames between them (its timestamp
    /// offset over its own duration: one packet per frame, as RED senders send). A payload that is
    /// not RED, or whose primary is not our Opus, is malformed and dropped whole; blocks of
    /// another payload type, or whose offset is not a whole number of their frames, are skipped.
    private func insertRedundantAudio(_ payload: UnsafeRawBufferPointer, header: RTPHeader, arrivalNanoseconds: UInt64) {
        let red: RedundantAudioPayload
        do throws(RedundantAudioPayload.ParseError) {
            red = try RedundantAudioPayload(parsing: payload)
        } catch {
            stats.malformedPackets += 1
            return
        }
        guard red.primary.payloadType == setup.payloadType else {
            stats.malformedPackets += 1
            return
        }
        stats.redundantAudioPacketsReceived += 1
        if !red.primary.range.isEmpty {
            let primary = UnsafeRawBufferPointer(rebasing: payload[red.primary.range])
            let outcome = jitterBuffer.insert(
                sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp,
                payload: primary, arrivalNanoseconds: arrivalNanoseconds, durationSamples: OpusPacket.sampleCount(of: primary))
            if outcome == .late { stats.latePackets += 1 }
        }
        var deepest = 0
        var deepestCarriesFEC = false
        for index in 0..<red.redundantCount {
            let block = red.redundant(index)
            let bytes = UnsafeRawBufferPointer(rebasing: payload[block.range])
            guard block.payloadType == setup.payloadType, block.timestampOffset > 0,
                let samples = OpusPacket.sampleCount(of: bytes), Int(block.timestampOffset) % samples == 0
            else { continue }
            // At most 16383 / 120 frames back: the jitter buffer refuses what is too far behind.
            let back = UInt16(Int(block.timestampOffset) / samples)
            if Int(back) > deepest {
                deepest = Int(back)
                deepestCarriesFEC = OpusPacket.hasLBRR(bytes)
            }
            if jitterBuffer.insertRedundant(
                sequenceNumber: header.sequenceNumber &- back, rtpTimestamp: header.timestamp &- block.timestampOffset,
                payload: bytes, arrivalNanoseconds: arrivalNanoseconds)
            {
                stats.framesRecoveredByRedundancy += 1
            }
        }
        jitterBuffer.noteRedundancy(framesBack: deepest, oldestCarriesFEC: deepestCarriesFEC, now: arrivalNanoseconds)
    }

    private func handleRTCP(_ buffer: UnsafeMutableRawBufferPointer, arrivalNanoseconds: UInt64) {
        let length: Int
        do throws(SRTPError) {
            length = try inbound.unprotectRTCP(buffer, length: buffer.count)
        } catch {
            countSRTPFailure(error)
            return
        }
        let compound: RTCPCompoundParser
        do throws(RTPParseError) {
            // Reduced-size RTCP (RFC 5506: feedback alone) is taken from any peer.
            compound = try RTCPCompoundParser(UnsafeRawBufferPointer(rebasing: buffer[0..<length]), allowReducedSize: true)
        } catch {
            stats.malformedPackets += 1
            return
        }
        stats.rtcpPacketsReceived += 1
        stats.lastMediaArrivalNanoseconds = arrivalNanoseconds
        let arrivalNTP = NTPTimestamp(unixNanoseconds: Int64(MonotonicClock.realtimeNanoseconds())).middle32
        // The report's loss and, from an XR Loss RLE block in the same compound (after it), its
        // runs: the loss adaptation takes both at once.
        let reading = peerReports.read(compound, arrivalNanoseconds: arrivalNanoseconds, arrivalNTPMiddle32: arrivalNTP)
        if reading.bye && !byeAnnounced {
            byeAnnounced = true
            setup.notify(.byeReceived)
        }
        if let block = reading.block {
            stats.peerReportedHighestSequence = block.extendedHighestSequence
            stats.peerReportArrivalNanoseconds = arrivalNanoseconds
            stats.peerReportMissesRecentPackets = missesRecentPackets(
                reportedHighest: UInt16(truncatingIfNeeded: block.extendedHighestSequence), arrivalNanoseconds: arrivalNanoseconds)
            stats.remotePacketsLost = Int(block.cumulativeLost)
            stats.remoteFractionLost = Double(block.fractionLost) / 256
            stats.remoteJitterMilliseconds = Double(block.interarrivalJitter) / Double(Self.samplesPerMillisecond)
            if let rtt = reading.roundTripSeconds { stats.roundTripTimeMilliseconds = rtt * 1000 }
        }
        stats.lossRunReportsReceived = peerReports.lossRunReports
        if let mean = peerReports.meanLossRunPackets { stats.remoteMeanLossRunPackets = mean }
        // Transport-cc feedback about our packets: each packet's arrival (or loss) to the rate
        // control, then its decision.
        if let body = reading.transportFeedback, setup.transportWideSequenceID != nil {
            stats.transportFeedbackReceived += 1
            sendHistory.readFeedback(body: body) { result in
                rateController.packetReported(
                    sentNanoseconds: result.sentNanoseconds, bytes: result.bytes, arrivalMicroseconds: result.arrivalMicroseconds)
            }
            if let decision = rateController.feedbackEnded(now: arrivalNanoseconds) { apply(decision, now: arrivalNanoseconds) }
        }
        if let fractionLost = reading.fractionLost,
            let decision = rateController.reportReceived(
                fractionLost: fractionLost, lossRuns: reading.lossRuns.map { ($0.lost, $0.lossRuns) },
                roundTripSeconds: reading.roundTripSeconds, now: arrivalNanoseconds)
        {
            apply(decision, now: arrivalNanoseconds)
        }
        noteRateState(now: arrivalNanoseconds)
    }

    /// Frames of `frameMilliseconds` in a packet of `milliseconds`, one to `maximum` (what the
    /// gathering buffer holds).
    private static func frames(inPacketOf milliseconds: Int, frameMilliseconds: Int, maximum: Int) -> Int {
        min(maximum, max(1, milliseconds / frameMilliseconds))
    }

    /// Takes a rate-control decision: the encoder's settings, RED, and the packet duration
    /// (from the next packet on).
    private func apply(_ decision: SendRateController.Decision, now: UInt64) {
        let frames = Self.frames(
            inPacketOf: decision.frameMilliseconds, frameMilliseconds: Int(frameNanoseconds / 1_000_000), maximum: maximumFramesPerPacket)
        if frames != nextFramesPerPacket {
            nextFramesPerPacket = frames
            stats.packetMilliseconds = decision.frameMilliseconds
            log.post(
                RealtimeLogRecord(
                    event: MediaLogEvent.packetDurationChanged.rawValue, nanoseconds: now, a: Int64(decision.frameMilliseconds),
                    b: Int64(decision.budgetBitsPerSecond), c: Int64(decision.sendBitsPerSecond)))
        }
        if decision.settings != lastAppliedSettings { applyEncoderSettings(decision.settings) }
    }

    /// The rate control's view into the statistics (and a log record when its state changes).
    /// (Read in place: the estimator is a value of a few kilobytes, not copied per packet.)
    private func noteRateState(now: UInt64) {
        guard setup.rateControl else { return }
        stats.estimatedBandwidthBitsPerSecond = Int(rateController.estimator.estimateBitsPerSecond)
        stats.queueDelayMilliseconds = rateController.estimator.queueMilliseconds
        stats.congestionLoss = rateController.estimator.lossIsCongestion
        let (use, code): (CallStatistics.PathUse, Int64) = switch rateController.estimator.usage {
        case .normal: (.normal, 0)
        case .overusing: (.overusing, 1)
        case .underusing: (.underusing, 2)
        }
        if use != stats.pathUse {
            stats.pathUse = use
            log.post(
                RealtimeLogRecord(
                    event: MediaLogEvent.congestionChanged.rawValue, nanoseconds: now, a: code,
                    b: Int64(rateController.budgetBitsPerSecond), c: Int64(rateController.estimator.queueMilliseconds)))
        }
    }

    /// The encoder settings last applied (a decision that changes only the packet duration
    /// leaves the encoder alone).
    private var lastAppliedSettings: LossAdaptation.Settings?

    /// Reconfigures the encoder for the loss the peer reports (a few opus_encoder_ctl calls).
    private func applyEncoderSettings(_ settings: LossAdaptation.Settings) {
        lastAppliedSettings = settings
        var c = setup.encoder.configuration
        c.expectedLossPercent = settings.expectedLossPercent
        c.inBandFEC = settings.inBandFEC
        c.bitrateBitsPerSecond = settings.bitrateBitsPerSecond
        do throws(OpusCodecError) {
            try setup.encoder.apply(c)
        } catch {
            return
        }
        stats.encoderExpectedLossPercent = settings.expectedLossPercent
        let framesBefore = redundancyInUse != nil ? redundantFramesInUse : 0
        let fecBefore = stats.encoderInBandFEC
        redundancyInUse = settings.redundancy ? setup.redundantAudio : nil
        redundantFramesInUse = settings.redundantFrames
        let now = MonotonicClock.nanoseconds()
        log.post(
            RealtimeLogRecord(
                event: MediaLogEvent.encoderAdapted.rawValue, nanoseconds: now, a: Int64(rateController.lossAdaptation.estimatedLossPercent),
                b: Int64(settings.expectedLossPercent), c: Int64(settings.bitrateBitsPerSecond)))
        let framesNow = redundancyInUse != nil ? redundantFramesInUse : 0
        if framesNow != framesBefore || settings.inBandFEC != fecBefore {
            log.post(
                RealtimeLogRecord(
                    event: MediaLogEvent.redundancyChanged.rawValue, nanoseconds: now, a: Int64(framesNow), b: settings.inBandFEC ? 1 : 0))
        }
        stats.encoderRedundantFrames = redundancyInUse != nil ? redundantFramesInUse : 0
        stats.encoderInBandFEC = settings.inBandFEC
        stats.encoderBitrateBitsPerSecond = settings.bitrateBitsPerSecond
        stats.encoderAdaptations += 1
    }

    /// Whether a report that arrived at `arrivalNanoseconds` shows the peer missing every packet
    /// we sent more than a round trip plus 300 ms before (its highest sequence received is older
    /// than the newest such packet). Fifteen packets in a row lost by chance is vanishingly
    /// unlikely even at 20 % loss, so one such report means the peer does not receive us.
    /// - Note: Media thread; no allocation.
    private func missesRecentPackets(reportedHighest: UInt16, arrivalNanoseconds: UInt64) -> Bool {
        let rtt = stats.roundTripTimeMilliseconds > 0 ? UInt64(stats.roundTripTimeMilliseconds * 1_000_000) : 200_000_000
        let margin = rtt + 300_000_000
        guard arrivalNanoseconds > margin else { return false }
        let cutoff = arrivalNanoseconds - margin
        // The newest packet sent at or before the cutoff.
        let stored = min(sentHistoryCount, Self.sentHistoryCapacity)
        var index = 0
        while index < stored {
            let entry = sentHistory[(sentHistoryCount - 1 - index) % Self.sentHistoryCapacity]
            if entry.at <= cutoff {
                return Int16(bitPattern: entry.sequence &- reportedHighest) > 0
            }
            index += 1
        }
        return false
    }

    // MARK: Send

    private func sendCaptured(now: UInt64) {
        if captureActive.load(ordering: .acquiring) {
            syntheticFrameAt = 0
            while setup.captureRing.readAll(into: pcm) {
                // Voice processing on what the microphone gave (echo cancelled against what was
                // played), before mute or hold replace it. The rings' fill levels place this
                // frame against what is played; until the echo delay is measured, a device
                // period each way is assumed.
                if let processor = setup.voiceProcessor {
                    processor.processCapture(
                        pcm,
                        timing: CaptureTiming(
                            playbackQueuedSamples: setup.playbackRing.availableToRead,
                            captureQueuedSamples: setup.captureRing.availableToRead,
                            expectedEchoDelayMilliseconds: 2 * Int(frameNanoseconds / 1_000_000)))
                }
                sendFrame(now: now)
            }
            return
        }
        // No capture device (muted, listen-only): keep sending silence on our own clock, so the
        // peer's media-loss detector stays quiet and the RTP clock keeps running.
        if syntheticFrameAt == 0 || now > syntheticFrameAt + 10 * frameNanoseconds {
            _ = setup.captureRing.discard(setup.captureRing.availableToRead)
            syntheticFrameAt = now
        }
        while now >= syntheticFrameAt {
            pcm.update(repeating: 0)
            sendFrame(now: now)
            syntheticFrameAt += frameNanoseconds
        }
    }

    /// Sends the frame in `pcm`: encoded, packetized, protected and queued — alone, or gathered
    /// with the next ones into a longer packet when the rate control asks for one.
    private func sendFrame(now: UInt64) {
        // On hold (sendonly from the peer's side / inactive): keep the clock, send nothing.
        // Muted: the microphone's frame is replaced by silence, so packets (and the peer's
        // liveness view of us) keep flowing.
        if muted.load(ordering: .relaxed) { pcm.update(repeating: 0) }
        // No candidate pair yet (or the stream is being replaced): nothing could leave, so nothing
        // is encoded, protected or counted; the clock runs on, and the next packet that goes
        // carries the marker, as after a DTX pause.
        let sending = sendsMedia.load(ordering: .relaxed)
        guard sending, setup.transport.hasPath else {
            if !sending { dropDTMF() }
            framesGathered = 0
            rtpTimestamp &+= UInt32(frameSamples)
            lastFrameWasDTX = true
            return
        }
        // A DTMF event replaces this frame's audio (and the frames gathered for a longer packet);
        // the audio clock runs on beneath it, and the audio that follows starts a talkspurt
        // (marker), as after a DTX pause.
        if let event = nextTelephoneEvent() {
            framesGathered = 0
            sendTelephoneEvent(event, now: now)
            rtpTimestamp &+= UInt32(frameSamples)
            lastFrameWasDTX = true
            return
        }
        // The packet's duration changes only between packets; RED packets are one frame long.
        if framesGathered == 0 {
            framesPerPacket = nextFramesPerPacket
            packetTimestamp = rtpTimestamp
        }
        let frames = redundancyInUse == nil ? framesPerPacket : 1
        guard frames > 1 else {
            sendPacket(pcm.baseAddress!, frames: 1, timestamp: rtpTimestamp, now: now)
            rtpTimestamp &+= UInt32(frameSamples)
            return
        }
        (packetPCM.baseAddress! + framesGathered * frameSamples).update(from: pcm.baseAddress!, count: frameSamples)
        framesGathered += 1
        rtpTimestamp &+= UInt32(frameSamples)
        guard framesGathered == frames else { return }
        framesGathered = 0
        sendPacket(packetPCM.baseAddress!, frames: frames, timestamp: packetTimestamp, now: now)
    }

    /// Bytes of RTP header our packets carry: 12, and 8 more with the transport-wide sequence.
    private var headerLength: Int {
        RTPHeader.fixedHeaderLength + (setup.transportWideSequenceID != nil ? TransportWideSequence.headerBytes : 0)
    }

    /// Writes `header` at the start of `packet`, with the transport-wide sequence extension when
    /// negotiated (stamped in the send history with the packet's size on the wire above UDP:
    /// `payloadBytes` after the header, and the SRTP tag). Returns the header's length.
    private func writeHeader(_ header: RTPHeader, payloadBytes: Int, now: UInt64) -> Int {
        _ = header.write(to: packet)
        guard let id = setup.transportWideSequenceID else { return RTPHeader.fixedHeaderLength }
        let length = headerLength
        let sequence = sendHistory.stamp(bytes: length + payloadBytes + outbound.suite.rtpOverheadBytes, sentNanoseconds: now)
        TransportWideSequence.setExtensionBit(in: packet)
        TransportWideSequence.write(sequence, id: id, into: packet, at: RTPHeader.fixedHeaderLength)
        return length
    }

    /// Encodes `frames` frames at `samples`, packetizes (with RED's earlier frames when it is on:
    /// one-frame packets only), protects and queues the packet with RTP timestamp `timestamp`.
    private func sendPacket(_ samples: UnsafePointer<Int16>, frames: Int, timestamp: UInt32, now: UInt64) {
        let header = headerLength
        // With RED the frame is encoded into the history and the payload built around it;
        // otherwise straight into the packet.
        let red = frames == 1 ? redundancyInUse : nil
        let frameSlot = (newestHistorySlot + 1) % Self.historySlots
        let encodeInto: UnsafeMutableRawBufferPointer
        if red == nil {
            encodeInto = UnsafeMutableRawBufferPointer(rebasing: packet[header..<(header + Self.maximumOpusPacketBytes)])
        } else {
            historyLengths[frameSlot] = 0  // its old frame is being overwritten
            encodeInto = historySlot(frameSlot, length: Self.maximumOpusPacketBytes)
        }
        let opusBytes: Int
        do throws(OpusCodecError) {
            opusBytes = try setup.encoder.encode(samples, samples: frames * frameSamples, into: encodeInto)
        } catch {
            return
        }
        // A 1–2 byte Opus packet is a DTX frame: nothing to send this period.
        if opusBytes <= 2 && setup.encoder.configuration.discontinuousTransmission {
            lastFrameWasDTX = true
            return
        }
        var payloadType = setup.payloadType
        var payloadBytes = opusBytes
        if let red {
            payloadBytes = redundantPayload(red, frameSlot: frameSlot, opusBytes: opusBytes, into: UnsafeMutableRawBufferPointer(rebasing: packet[header..<1500]))
            payloadType = red.payloadType
        }
        let h = RTPHeader(
            marker: lastFrameWasDTX, payloadType: payloadType, sequenceNumber: sequenceNumber,
            timestamp: timestamp, ssrc: localSSRC)
        _ = writeHeader(h, payloadBytes: payloadBytes, now: now)
        lastFrameWasDTX = false
        var length = header + payloadBytes
        do throws(SRTPError) {
            length = try outbound.protectRTP(packet, length: length)
        } catch {
            localSendFailures += 1
            return
        }
        _ = transmit(length: length, payloadBytes: payloadBytes, timestamp: timestamp, now: now)
    }

    /// Writes the RED payload for the frame in history slot `frameSlot` into `out`: the earlier frames as
    /// redundant blocks, oldest first (up to `redundantFramesInUse`; each only when it was the
    /// frame that many periods before this one: not across a DTX pause, an event or a gap), then
    /// this one; remembers this frame for the next packets. Returns the payload's length (fewer
    /// blocks, down to this frame alone, when they cannot be described or do not fit).
    private func redundantPayload(_ red: RedundantAudioFormat, frameSlot: Int, opusBytes: Int, into out: UnsafeMutableRawBufferPointer) -> Int {
        let primary = UnsafeRawBufferPointer(historySlot(frameSlot, length: opusBytes))
        var blocks = 0
        var back = min(LossAdaptation.maximumRedundantFrames, redundantFramesInUse)
        while back >= 1 {
            let earlier = (frameSlot + Self.historySlots - back) % Self.historySlots
            let length = historyLengths[earlier]
            if length > 0, rtpTimestamp &- historyTimestamps[earlier] == UInt32(back * frameSamples) {
                redundantBlock[blocks] = RedundantAudioPayload.Source(
                    payloadType: red.blockPayloadType, timestampOffset: UInt32(back * frameSamples),
                    bytes: UnsafeRawBufferPointer(historySlot(earlier, length: length)))
                blocks += 1
            }
            back -= 1
        }
        // The newest blocks are kept when not all fit: drop from the oldest, down to the primary
        // alone (which always fits).
        // (No local function here: one capturing `blocks`, a var, allocates a box per packet in
        // a debug build — the allocation test caught it.)
        var first = 0
        var written: Int?
        while true {
            written = RedundantAudioPayload.write(
                primaryPayloadType: red.blockPayloadType, primary: primary,
                redundant: UnsafeBufferPointer(rebasing: redundantBlock[first..<blocks]), into: out)
            if written != nil || first == blocks { break }
            first += 1
        }
        if written != nil { stats.redundantFramesSent += blocks - first }
        historyLengths[frameSlot] = opusBytes
        historyTimestamps[frameSlot] = rtpTimestamp
        newestHistorySlot = frameSlot
        return written ?? 0
    }

    /// The first `length` bytes of RED history slot `index`.
    private func historySlot(_ index: Int, length: Int) -> UnsafeMutableRawBufferPointer {
        let start = index * Self.maximumOpusPacketBytes
        return UnsafeMutableRawBufferPointer(rebasing: history[start..<(start + length)])
    }

    /// Hands the protected RTP packet in `packet` to the transport and moves the sender state on
    /// (history, sequence number, the RTP time of `now` for sender reports). Returns whether it left.
    private func transmit(length: Int, payloadBytes: Int, timestamp: UInt32, now: UInt64) -> Bool {
        // Counted as sent when the kernel took it, or (through libnice) when libnice does; a
        // refusal is counted by the transport, and a send with no path (the pair withdrawn since
        // `hasPath`) is a lost packet, not a failure.
        var left = false
        switch setup.transport.send(UnsafeRawBufferPointer(rebasing: packet[0..<length]), kind: .rtp(payloadBytes: payloadBytes)) {
        case .sent:
            directRTPPackets += 1
            directRTPPayloadBytes += payloadBytes
            sentAnything = true
            left = true
        case .queued:
            sentAnything = true
            left = true
        case .queueFull, .noPath, .failed:
            break
        }
        sentHistory[sentHistoryCount % Self.sentHistoryCapacity] = (now, sequenceNumber)
        sentHistoryCount &+= 1
        lastSentRTPTimestamp = timestamp
        lastSentAtNanoseconds = now
        sequenceNumber &+= 1
        return left
    }

    /// Sends transport-cc feedback about the peer's packets since the last: alone when the peer
    /// takes reduced-size RTCP, else after a receiver report and our CNAME.
    private func sendTransportFeedback(_ recorder: TransportFeedbackRecorder, now: UInt64) {
        guard setup.transport.hasPath, let remoteSSRC else { return }
        var length = 0
        if !setup.reducedSizeRTCP {
            do throws(RTCPWriteError) {
                length = try rtcpWriter.write(
                    into: rtcpBuffer, ssrc: localSSRC, senderInfo: nil,
                    reportBlocks: UnsafeBufferPointer(rebasing: reportBlock[0..<0]), bye: .omitted)
            } catch {
                return
            }
        }
        guard let written = recorder.writeFeedback(into: rtcpBuffer, at: length, senderSSRC: localSSRC, mediaSSRC: remoteSSRC) else { return }
        length += written
        do throws(SRTPError) {
            let protected = try outbound.protectRTCP(rtcpBuffer, length: length)
            if setup.transport.send(UnsafeRawBufferPointer(rebasing: rtcpBuffer[0..<protected]), kind: .rtcp) == .sent {
                directRTCPPackets += 1
            }
            stats.transportFeedbackSent += 1
        } catch {
            localSendFailures += 1
        }
    }

    /// When our next transport-cc feedback is due (nil: none to send).
    private func feedbackDue() -> UInt64? {
        guard let recorder = feedbackRecorder else { return nil }
        return feedbackSchedule.due(
            unreported: recorder.unreportedPackets,
            interval: TransportFeedbackSchedule.interval(receivingBitsPerSecond: stats.receiveBitrateBitsPerSecond))
    }

    private func sendRTCP(now: UInt64, bye: Bool) {
        // Nowhere to send: no report is made (making one would start a new reporting interval).
        guard setup.transport.hasPath else { return }
        var senderInfo: RTCPSenderInfo?
        refreshSentCounts()
        if sentAnything {
            // The RTP time that corresponds to `now`: the last sent timestamp plus elapsed samples.
            let elapsedSamples = (now &- lastSentAtNanoseconds) &* UInt64(Self.samplesPerMillisecond) / 1_000_000
            senderInfo = RTCPSenderInfo(
                ntpTimestamp: NTPTimestamp(unixNanoseconds: Int64(MonotonicClock.realtimeNanoseconds())).rawValue,
                rtpTimestamp: lastSentRTPTimestamp &+ UInt32(truncatingIfNeeded: elapsedSamples),
                senderPacketCount: UInt32(truncatingIfNeeded: stats.packetsSent),
                senderOctetCount: UInt32(truncatingIfNeeded: stats.bytesSent))
        }
        var block: RTCPReportBlock?
        if let remoteSSRC {
            let dlsr =
                peerReports.lastSenderReportArrivalNanoseconds == 0
                ? 0 : NTPTimestamp.delaySinceLastSenderReport(nanoseconds: Int64(bitPattern: now &- peerReports.lastSenderReportArrivalNanoseconds))
            let b = reception.makeReportBlock(
                ssrc: remoteSSRC, lastSenderReport: peerReports.lastSenderReportMiddle32, delaySinceLastSenderReport: dlsr)
            stats.fractionLost = Double(b.fractionLost) / 256
            block = b
        }
        var blockCount = 0
        if let block {
            reportBlock[0] = block
            blockCount = 1
        }
        var length: Int
        do throws(RTCPWriteError) {
            length = try rtcpWriter.write(
                into: rtcpBuffer, ssrc: localSSRC, senderInfo: senderInfo,
                reportBlocks: UnsafeBufferPointer(rebasing: reportBlock[0..<blockCount]),
                bye: bye ? .included(reason: nil) : .omitted)
        } catch {
            return
        }
        // The peer asked which of its packets arrived: those since the last report (the
        // reception window's 128 at most), after the report in the same compound.
        if setup.sendsLossRunLength, !bye, let remoteSSRC, let packets = reception.packetsSinceLossReport(),
            let written = RTCPExtendedReport.writeLossRunLength(
                into: rtcpBuffer, at: length, reporterSSRC: localSSRC, sourceSSRC: remoteSSRC, packets: packets)
        {
            length += written
            reception.lossReportSent()
        }
        lastReportAtNanoseconds = now
        do throws(SRTPError) {
            let protected = try outbound.protectRTCP(rtcpBuffer, length: length)
            if setup.transport.send(UnsafeRawBufferPointer(rebasing: rtcpBuffer[0..<protected]), kind: .rtcp) == .sent {
                directRTCPPackets += 1
            }
        } catch {
            localSendFailures += 1
        }
    }

    // MARK: Playout

    private func fillPlayback(now: UInt64) {
        // Decode as late as the device allows: keep what it asked to have queued (two requests
        // for PulseAudio, a period for ALSA), or two frames for a device that takes whole frames
        // on its own clock. A frame appended on top of that is what the ring holds at most.
        let asked = setup.playbackDemand.queuedSamples
        let wanted = asked > 0 ? min(asked, setup.playbackRing.capacity - frameSamples) : 2 * frameSamples
        while setup.playbackRing.availableToRead < wanted, setup.playbackRing.availableToWrite >= frameSamples {
            // What a frame's first sample waits behind in the ring (the playback queue).
            let ahead = Double(setup.playbackRing.availableToRead) * 1000 / Double(Self.clockRateHertz)
            playbackQueueMilliseconds = playbackQueueMilliseconds < 0 ? ahead : playbackQueueMilliseconds + (ahead - playbackQueueMilliseconds) / 16
            let frame = decodeNextFrame(now: now)
            // What is played is the echo canceller's reference.
            setup.voiceProcessor?.analyzePlayback(UnsafeBufferPointer(frame))
            _ = setup.playbackRing.writeAll(UnsafeBufferPointer(frame))
        }
    }

    /// The playback queue: milliseconds of audio ahead of each frame appended to the ring, a
    /// moving average (each frame weighs 1/16; −1 before the first).
    private var playbackQueueMilliseconds = -1.0

    /// Whether the last frame handed to playback was quiet: the adaptive jitter buffer inserts
    /// or drops frames only then (a pause in speech).
    private var lastFrameQuiet = true

    private func decodeNextFrame(now: UInt64) -> UnsafeMutableBufferPointer<Int16> {
        let frame = renderNextFrame(now: now)
        lastFrameQuiet = Self.isQuiet(UnsafeBufferPointer(frame))
        return frame
    }

    private func renderNextFrame(now: UInt64) -> UnsafeMutableBufferPointer<Int16> {
        // What a longer packet decoded to beyond its first frame goes first.
        if decodedCount >= frameSamples { return takeDecoded() }
        decodedCount = 0
        switch jitterBuffer.pull(now: now, atQuietMoment: lastFrameQuiet) {
        case .notStarted:
            return silence
        case .packet(_, let payload):
            do throws(OpusCodecError) {
                let samples = try setup.decoder.decodeFrame(payload, into: decoded, frameSamples: frameSamples)
                concealmentFade.decoded()
                stats.framesDecoded += samples / frameSamples
                stats.lastDecodedNanoseconds = now
                if !announcedFirstMedia {
                    announcedFirstMedia = true
                    setup.notify(.firstMediaDecoded)
                }
                decodedOffset = 0
                decodedCount = samples
                return takeDecoded()
            } catch {
                stats.malformedPackets += 1
                return conceal()
            }
        case .fecFromNext(let payload, let lostSamples):
            // Rebuilt only when the next packet really holds LBRR for this frame (a peer whose
            // encoder has FEC off sends none; libopus would conceal, and so do we, counted so).
            // The lost packet may have been longer than a frame: FEC rebuilds all of it.
            guard setup.usesFEC, OpusPacket.hasLBRR(payload) else { return conceal() }
            let samples = min(decoded.count, max(frameSamples, lostSamples / frameSamples * frameSamples))
            do throws(OpusCodecError) {
                _ = try setup.decoder.decodeFEC(from: payload, into: UnsafeMutableBufferPointer(rebasing: decoded[0..<samples]))
                concealmentFade.decoded()
                stats.framesRecoveredByFEC += samples / frameSamples
                decodedOffset = 0
                decodedCount = samples
                return takeDecoded()
            } catch {
                return conceal()
            }
        case .insertedFrame:
            stats.framesInsertedForDelay += 1
            return synthesize()
        case .conceal, .silenceGap:
            return conceal()
        }
    }

    /// The next frame of what was decoded ahead.
    private func takeDecoded() -> UnsafeMutableBufferPointer<Int16> {
        let frame = UnsafeMutableBufferPointer(rebasing: decoded[decodedOffset..<(decodedOffset + frameSamples)])
        decodedOffset += frameSamples
        decodedCount -= frameSamples
        return frame
    }

    /// A lost, missing or malformed frame: concealed (or silence when concealment is off).
    private func conceal() -> UnsafeMutableBufferPointer<Int16> {
        stats.framesConcealed += 1
        return setup.concealsLoss ? synthesize() : silence
    }

    /// One frame of Opus packet-loss concealment, fading into comfort noise over long runs.
    private func synthesize() -> UnsafeMutableBufferPointer<Int16> {
        do throws(OpusCodecError) {
            _ = try setup.decoder.conceal(into: pcm)
            concealmentFade.concealed(pcm)
            return pcm
        } catch {
            return silence
        }
    }

    /// Quiet: RMS below −40 dBFS (speech pauses, comfort noise, silence).
    private static func isQuiet(_ frame: UnsafeBufferPointer<Int16>) -> Bool {
        var energy: Int64 = 0
        for sample in frame {
            energy &+= Int64(sample) * Int64(sample)
        }
        // (32768 × 10^(−40/20))² ≈ 107 374 per sample.
        return energy < 107_374 * Int64(frame.count)
    }

    private var bitrateWindowStart: UInt64 = 0
    private var bytesSentAtWindowStart = 0
    private var bytesReceivedAtWindowStart = 0

    /// Send and receive bitrates of the RTP payload (the encoder's output, as RTCP's octet
    /// counts) over the last whole second, updated once a second.
    private func updateBitrates(now: UInt64) {
        refreshSentCounts()
        if bitrateWindowStart == 0 {
            bitrateWindowStart = now
            bytesSentAtWindowStart = stats.bytesSent
            bytesReceivedAtWindowStart = stats.bytesReceived
            return
        }
        guard now >= bitrateWindowStart, now - bitrateWindowStart >= 1_000_000_000 else { return }
        let elapsed = now - bitrateWindowStart
        let seconds = Double(elapsed) / 1e9
        stats.sendBitrateBitsPerSecond = Int(Double(8 * (stats.bytesSent - bytesSentAtWindowStart)) / seconds)
        stats.receiveBitrateBitsPerSecond = Int(Double(8 * (stats.bytesReceived - bytesReceivedAtWindowStart)) / seconds)
        bitrateWindowStart = now
        bytesSentAtWindowStart = stats.bytesSent
        bytesReceivedAtWindowStart = stats.bytesReceived
    }

    /// Sets the sent counts in `stats`: the direct sends the kernel took and what libnice sent
    /// from the queue.
    private func refreshSentCounts() {
        let queued = setup.transport.libniceSent
        stats.packetsSent = directRTPPackets + queued.rtpPackets
        stats.bytesSent = directRTPPayloadBytes + queued.rtpPayloadBytes
        stats.rtcpPacketsSent = directRTCPPackets + queued.rtcpPackets
    }

    /// Publishes the counters for `statistics()` readers.
    func publish() {
        refreshSentCounts()
        stats.packetsLost = lostBeforeSourceChange + Int(reception.cumulativeLost)
        stats.jitterMilliseconds = Double(reception.interarrivalJitter) / Double(Self.samplesPerMillisecond)
        stats.sendFailures = localSendFailures + setup.transport.sendFailureCount + setup.transport.sendQueueDropCount
        if let processor = setup.voiceProcessor { stats.voice = processor.statistics() }
        let jb = jitterBuffer.statistics
        stats.jitterBufferDelayMilliseconds = jb.playoutDelayMilliseconds.map(Double.init)
        stats.jitterBufferTargetMilliseconds = Double(jb.targetDelayMilliseconds)
        stats.framesDroppedForDelay = jb.driftDrops
        stats.redundantCopiesTooLate = jb.redundantCopiesTooLate
        stats.silenceGapFrames = jb.silenceGapFrames
        stats.playbackQueueMilliseconds = playbackQueueMilliseconds >= 0 ? playbackQueueMilliseconds : nil
        counters.write(stats)
    }
}
