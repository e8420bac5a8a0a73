extension JitterBuffer {
    /// Fixed parameters of a ``JitterBuffer``, chosen once at `init`.
    public struct Configuration: Sendable, Equatable {
        /// RTP clock rate of the stream in hertz. Opus over RTP always uses 48 000 Hz.
        public var clockRateHertz: Int
        /// Duration of one playout frame in RTP clock samples (960 samples = 20 ms at 48 kHz).
        /// Every packet is expected to carry exactly one frame of this duration, and every
        /// ``JitterBuffer/pull(now:)`` consumes one frame.
        public var frameSamples: Int
        /// Requested playout delay in milliseconds: how long the first packet of a stream waits
        /// before playout starts. Values shorter than one frame are raised to one frame.
        public var targetDelayMilliseconds: Int
        /// Number of packet slots preallocated at `init` (64 slots of 20 ms = 1.28 s of audio).
        public var slotCount: Int
        /// Capacity of each slot in bytes; larger payloads are rejected as ``JitterBuffer/InsertOutcome/tooLarge``.
        public var maximumPayloadBytes: Int
        /// Excess-delay margin in frames: buffered audio above target + margin (for a sustained
        /// period) triggers a drift drop.
        public var driftMarginFrames: Int
        /// How long, in milliseconds, the buffered audio must stay above target + margin before
        /// one frame is dropped.
        public var driftSustainMilliseconds: Int
        /// Distance in milliseconds between a packet's timestamp and the playout point beyond
        /// which the packet is treated as the possible start of a new stream (re-anchor).
        public var reanchorThresholdMilliseconds: Int
        /// When true, the delay follows the arrivals instead of `targetDelayMilliseconds`
        /// (which is then only how long the first packet of a stream waits). The buffer keeps
        /// the playout point just late enough that a packet as late as `delayPercentile` of
        /// the last 250 (relative to the fastest of them, `ArrivalDelayEstimator`) still arrives
        /// `adaptiveGuardMilliseconds` before its frame is pulled, plus one frame while packets
        /// are being lost (`lossLookahead`), and never more than `maximumDelayMilliseconds`
        /// after the fastest packet. It lengthens the delay by inserting a concealment frame
        /// and shortens it by dropping a frame, both at quiet moments (see ``JitterBuffer/pull(now:atQuietMoment:)``).
        public var adaptiveTarget: Bool = false
        /// Share of packets the adaptive delay lets arrive in time: 0.99 (the third-latest of
        /// 250) keeps a late packet, which costs a concealed frame and a shift of the timeline
        /// twice (once late, once when the delay shrinks back), to about one in a hundred.
        public var delayPercentile: Double = 0.99
        /// Upper bound of the adaptive delay (added to the fastest packet), in milliseconds.
        public var maximumDelayMilliseconds: Int = 200
        /// Safety margin of the adaptive delay for the pulls' own timing jitter, in milliseconds.
        public var adaptiveGuardMilliseconds: Int = 4
        /// Adaptive only: while a packet was lost within `lossMemoryMilliseconds`, keep one more
        /// frame buffered, so that the successor of a lost packet has usually arrived when the lost
        /// frame is due and its in-band FEC can rebuild it (``PullResult/fecFromNext(payload:samples:)``).
        public var lossLookahead: Bool = true
        /// How long one loss keeps the lookahead frame, in milliseconds.
        public var lossMemoryMilliseconds: Int = 10_000
        /// Adaptive only: a delay that could be shortened waits this long for a quiet moment
        /// before a frame is dropped anyway (continuous sound has none), in milliseconds.
        public var quietPatienceMilliseconds: Int = 8_000
        /// Adaptive only: after a packet came too late, the delay is not shortened for this
        /// long, in milliseconds (one late packet grows the delay by a frame; dropping that
        /// frame again at once would shift the timeline twice for a single hiccup).
        public var shrinkHoldoffMilliseconds: Int = 5_000

        /// Creates a configuration; every parameter has a default suited to 20 ms Opus frames.
        public init(
            clockRateHertz: Int = 48_000,
            frameSamples: Int = 960,
            targetDelayMilliseconds: Int = 40,
            slotCount: Int = 64,
            maximumPayloadBytes: Int = 1500,
            driftMarginFrames: Int = 3,
            driftSustainMilliseconds: Int = 500,
            reanchorThresholdMilliseconds: Int = 1000
        ) {
            self.clockRateHertz = clockRateHertz
            self.frameSamples = frameSamples
            self.targetDelayMilliseconds = targetDelayMilliseconds
            self.slotCount = slotCount
            self.maximumPayloadBytes = maximumPayloadBytes
            self.driftMarginFrames = driftMarginFrames
            self.driftSustainMilliseconds = driftSustainMilliseconds
            self.reanchorThresholdMilliseconds = reanchorThresholdMilliseconds
        }
    }

    /// What ``JitterBuffer/insert(sequenceNumber:rtpTimestamp:payload:arrivalNanoseconds:)`` did with a packet.
    public enum InsertOutcome: Sendable, Equatable {
        /// The packet was copied into the buffer. Also returned for a packet far from the playout
        /// point that is held aside as the possible first packet of a restarted stream: it is
        /// used if the next packet continues it (re-anchor), and silently discarded otherwise.
        case stored
        /// A packet with the same sequence number is buffered or was already played (or dropped).
        case duplicate
        /// The packet's timestamp is before the playout point: its frame was already played or concealed.
        case late
        /// Every slot was full. The oldest packet among the buffered ones and the new one was
        /// dropped: normally the oldest buffered packet (the new one is then stored and the
        /// playout point moves past the dropped packet), or the new packet itself when it is
        /// older than everything buffered.
        case overflow
        /// The payload is longer than ``Configuration/maximumPayloadBytes``; it was not stored.
        case tooLarge
    }

    /// What the caller should render for one frame period.
    ///
    /// Payload pointers point into the buffer's own storage and stay valid only until the next
    /// mutating call (`insert`, `pull`, `reset`) or the buffer's deinitialisation.
    public enum PullResult {
        /// Playout has not started (no packet yet, or the first packet of the stream, possibly
        /// after a re-anchor, has not yet waited the target delay). Play silence.
        case notStarted
        /// Adaptive only: the buffer lengthens its delay by one frame at a quiet moment and does
        /// not move the playout point. Render one generated frame (Opus PLC).
        case insertedFrame
        /// Decode this packet normally.
        case packet(sequenceNumber: UInt16, payload: UnsafeRawBufferPointer)
        /// The packet for this frame is lost but its successor is buffered: decode the lost frame
        /// from this (the successor's) payload using Opus in-band FEC. The successor itself is
        /// returned as ``packet(sequenceNumber:payload:)`` by the next pull. `samples`: what the
        /// lost packet stood for, in clock samples (a frame, or more for 40/60 ms packets: FEC
        /// rebuilds all of it).
        case fecFromNext(payload: UnsafeRawBufferPointer, samples: Int)
        /// No audio is available for this frame: run Opus packet-loss concealment. Returned both
        /// for packets known lost (sequence gap) and when the buffer has run dry (underflow).
        case conceal
        /// No packet is missing by sequence number, but none covers this timestamp (a DTX pause).
        /// Run PLC or comfort noise.
        case silenceGap
    }
}

/// Counters and gauges of a ``JitterBuffer``. Counters only grow until ``JitterBuffer/reset()``.
public struct JitterBufferStatistics: Sendable, Equatable {
    /// Calls to `insert`, whatever their outcome, in packets.
    public var packetsInserted: Int = 0
    /// Packets rejected as ``JitterBuffer/InsertOutcome/duplicate``.
    public var duplicatePackets: Int = 0
    /// Packets rejected as ``JitterBuffer/InsertOutcome/late``.
    public var latePackets: Int = 0
    /// Packets rejected as ``JitterBuffer/InsertOutcome/tooLarge``.
    public var tooLargePackets: Int = 0
    /// Packets dropped because every slot was full, in packets.
    public var overflowDrops: Int = 0
    /// Buffered frames dropped to shorten the delay (excess over target + margin with a fixed
    /// target, or over the adaptive target), in frames.
    public var driftDrops: Int = 0
    /// Frames inserted (``JitterBuffer/PullResult/insertedFrame``) to lengthen an adaptive delay.
    public var insertedFrames: Int = 0
    /// Frames returned as ``JitterBuffer/PullResult/packet(sequenceNumber:payload:)``.
    public var framesPlayed: Int = 0
    /// Frames returned as ``JitterBuffer/PullResult/fecFromNext(payload:samples:)``.
    public var fecRecoveries: Int = 0
    /// Lost frames filled in from a redundant copy in a later packet (RFC 2198 RED), stored by
    /// ``JitterBuffer/insertRedundant(sequenceNumber:rtpTimestamp:payload:arrivalNanoseconds:)``.
    public var redundantRecoveries: Int = 0
    /// Redundant copies that came after the frame they copy was due and had not arrived (it
    /// was concealed, or rebuilt from FEC): copies a longer hold would have used, in copies (a
    /// frame can count twice, once for each copy).
    public var redundantCopiesTooLate: Int = 0
    /// Frames concealed because audio was lost or arrived too late (underflow), in frames.
    /// Underflow frames later shown to have been a DTX pause are moved to ``silenceGapFrames``.
    public var concealedFrames: Int = 0
    /// Frames of DTX pause (no packet missing by sequence number), in frames.
    public var silenceGapFrames: Int = 0
    /// Times playout was re-anchored to a restarted or far-jumped stream.
    public var reanchors: Int = 0
    /// Packets currently held in slots.
    public var bufferedPackets: Int = 0
    /// Audio currently buffered, in milliseconds: from the playout point (or the oldest packet
    /// before playout starts) to the end of the newest buffered packet.
    public var bufferedDelayMilliseconds: Int = 0
    /// Effective target delay in milliseconds: the configured value (at least one frame) with a
    /// fixed target; with an adaptive one, the delay it aims to add to the fastest packets.
    public var targetDelayMilliseconds: Int = 0
    /// The delay playout currently adds to the fastest recent packets, in milliseconds: how long
    /// after its arrival such a packet is pulled (later packets wait less). Measured at pulls that
    /// find packets buffered; while the buffer is briefly empty it keeps the last figure.
    /// `nil` before playout and once nothing has been buffered for `JitterBuffer.silentAfterNanoseconds`
    /// (the peer is silent: an outage, hold): there is no packet whose delay it could be.
    public var playoutDelayMilliseconds: Int?
    /// Mean time the played packets waited in the buffer, from arrival to pull, over the
    /// stream so far, in milliseconds (WebRTC's jitterBufferDelay / emitted count).
    public var meanWaitMilliseconds: Double = 0

    /// Creates all-zero statistics.
    public init() {}
}
