/// A sans-IO playout buffer for one incoming Opus RTP stream.
///
/// The buffer never reads a clock: the caller passes a monotonic instant in nanoseconds with
/// every packet (`arrivalNanoseconds`) and every frame request (`now`). The audio sink drives
/// playout by calling ``pull(now:atQuietMoment:)`` once per frame period.
///
/// ## Timeline
/// Playout is timestamp based. The playout point is the RTP timestamp of the next frame to
/// render; a successful pull moves it forward by one frame. Sequence numbers are used only to
/// classify holes: a hole with a missing sequence number is loss (``PullResult/fecFromNext(payload:samples:)``
/// or ``PullResult/conceal``), a hole without one is a DTX pause (``PullResult/silenceGap``).
/// Sequence numbers (16 bit) and timestamps (32 bit) may wrap; they are extended internally
/// with serial-number arithmetic.
///
/// ## Start and re-anchoring
/// Nothing plays until the first packet has waited the target delay (measured from its
/// `arrivalNanoseconds` to the pull's `now`). Playout then starts at the oldest buffered
/// timestamp. A packet whose timestamp is more than ``Configuration/reanchorThresholdMilliseconds``
/// from the playout point, or whose sequence number jumps more than 3000 ahead or 1000 behind,
/// is held aside; if the next packet continues it (sequence + 1, timestamp not behind), the
/// buffer discards what it holds and restarts on the new stream, waiting the target delay again.
///
/// ## Delay adaptation
/// - Underflow: when the buffer holds nothing at all at a pull, the buffer cannot tell a late
///   packet from a DTX pause. It returns ``PullResult/conceal`` and *holds* the playout point,
///   which adds one frame of delay, so a packet that arrives just after its slot is still
///   played rather than rejected as late (a slower sender then underflows once per lost frame
///   of drift, not on every frame). When the next packet arrives, as many held frames as its
///   timestamp is ahead of the playout point are credited back to the timeline (a DTX pause or
///   an outage keeps its original timing); held frames for which no sequence number is
///   missing are moved from ``JitterBufferStatistics/concealedFrames`` to
///   ``JitterBufferStatistics/silenceGapFrames``.
/// - Excess delay, fixed target: when the buffered audio (including the frame about to play)
///   exceeds target + ``Configuration/driftMarginFrames`` on every pull for
///   ``Configuration/driftSustainMilliseconds``, the frame at the playout point is dropped
///   (counted in ``JitterBufferStatistics/driftDrops``) and the next one is returned instead.
/// - Adaptive target (``Configuration/adaptiveTarget``): each pull compares how long after the
///   fastest recent packet's arrival the frame is pulled (the playout delay) with the delay the
///   arrivals call for (the 99th-percentile lateness plus a guard, plus, while packets are lost,
///   as many frames as the stream's RED copies reach back and one for FEC — without RED, or
///   while the oldest copies carry FEC; see ``noteRedundancy(framesBack:oldestCarriesFEC:now:)``
///   — bounded). Too short: at a quiet moment one concealment frame
///   is inserted (``PullResult/insertedFrame``), which holds the playout point. A whole frame
///   too long on every pull for ``Configuration/driftSustainMilliseconds``: the frame at the
///   playout point is dropped at a quiet moment, or after ``Configuration/quietPatienceMilliseconds``
///   without one. Sender clock drift moves the transits, so it is absorbed the same way.
///
/// ## Allocation
/// All storage (slot headers, a duplicate-detection bitmap and one fixed-size payload area per
/// slot) is one block allocated in `init` and freed in `deinit`; `insert` and `pull` never
/// allocate. Work per call is a linear scan of the slots.
///
/// Not thread-safe: use from one isolation domain.
public final class JitterBuffer {
    private struct Slot {
        var occupied: Bool
        var sequence: Int64
        var timestamp: Int64
        /// The packet's duration in clock samples (a frame, or more for longer packets).
        var samples: Int64
        var payloadBytes: Int
        var arrivalNanoseconds: UInt64

        static let empty = Slot(occupied: false, sequence: 0, timestamp: 0, samples: 0, payloadBytes: 0, arrivalNanoseconds: 0)
    }

    /// Result of one pass over the slots, relative to the playout point.
    private struct Scan {
        var count = 0
        var atPlayout = -1
        var hasExpected = false
        var next = -1
        var earliest = -1
        var newestEnd = Int64.min
    }

    /// Sequence numbers remembered for duplicate detection, in packets (power of two).
    private static let seenWindowPackets: Int64 = 1024
    private static let seenWords = 16
    /// RFC 3550-style limits on a plausible sequence jump, in packets.
    private static let maximumSequenceJumpAhead: Int64 = 3000
    private static let maximumSequenceJumpBehind: Int64 = 1000

    /// The configuration this buffer was created with.
    public let configuration: Configuration

    private let clockRateHertz: Int64
    private let frameSamples: Int64
    private let targetDelaySamples: Int64
    private let targetDelayNanoseconds: UInt64
    /// Target + drift margin (fixed target only).
    private var driftThresholdSamples: Int64
    private let driftMarginSamples: Int64
    private let maximumTargetSamples: Int64
    private let estimator: ArrivalDelayEstimator
    private let adaptive: Bool
    private let frameNanoseconds: Int64
    private let guardNanoseconds: Int64
    private let maximumDelayNanoseconds: Int64
    private let lossMemoryNanoseconds: UInt64
    private let quietPatiencePulls: Int
    private let driftSustainPulls: Int
    private let reanchorThresholdSamples: Int64
    private let slotCount: Int
    private let payloadCapacityBytes: Int

    private let storage: UnsafeMutableRawPointer
    /// `slotCount` playout slots followed by one slot for a re-anchor candidate.
    private let slots: UnsafeMutablePointer<Slot>
    private let seenBits: UnsafeMutablePointer<UInt64>
    private let payloadBase: UnsafeMutableRawPointer

    private var hasStream = false
    private var started = false
    private var firstArrivalNanoseconds: UInt64 = 0
    /// Extended timestamp of the stream's first packet; the reference before playout starts.
    private var anchorTimestamp: Int64 = 0
    private var highestSequence: Int64 = 0
    /// Extended RTP timestamp of the next frame to render.
    private var playoutTimestamp: Int64 = 0
    /// Extended sequence number expected to cover the playout point.
    private var expectedSequence: Int64 = 0
    /// Pulls answered while the buffer was empty since the last stored packet, in frames.
    private var stalledFrames: Int64 = 0
    /// The duration of the stream's packets as last played, in clock samples (a frame, or a
    /// multiple for a sender that sends 40 or 60 ms packets): what a lost packet stands for.
    private var packetSamples: Int64
    /// Of a lost packet longer than a frame, the samples concealed so far.
    private var concealedOfLostPacket: Int64 = 0
    /// The last pull that found packets buffered (0: none yet).
    private var lastBufferedPullNanoseconds: UInt64 = 0
    /// An empty buffer for this long means the peer is silent: the playout delay has no figure
    /// (`JitterBufferStatistics.playoutDelayMilliseconds` is nil). Longer than Opus DTX's 400 ms
    /// between packets, shorter than the 1 s disruption threshold.
    public static let silentAfterNanoseconds: UInt64 = 500_000_000
    /// Consecutive pulls with buffered audio above target + margin.
    private var excessPulls = 0
    private var hasCandidate = false
    /// When a packet was last found missing (0: never in this stream).
    private var lastLossNanoseconds: UInt64 = 0
    /// How many frames back the stream's RED packets lately carried copies (0: none), and when
    /// that depth was last seen (see ``noteRedundancy(framesBack:oldestCarriesFEC:now:)``).
    private var redundancyDepthFrames: Int64 = 0
    private var redundancyDepthSeenNanoseconds: UInt64 = 0
    /// When a RED packet's oldest copy last carried in-band FEC for the frame before it (0:
    /// never in this stream).
    private var redundancyFECSeenNanoseconds: UInt64 = 0
    /// How long a RED depth is remembered when later packets carry fewer copies.
    private static let redundancyDepthMemoryNanoseconds: UInt64 = 2_000_000_000
    /// When a packet last came too late for its frame (held playout or rejected; 0: never).
    private var lastLateNanoseconds: UInt64 = 0
    private let shrinkHoldoffNanoseconds: UInt64
    /// Sum of the played packets' waits (arrival to pull), in nanoseconds.
    private var totalWaitNanoseconds: UInt64 = 0
    private var counters = JitterBufferStatistics()
    /// Sequence numbers (extended) of the stream's packets that carried no audio (RFC 4733
    /// events, which replace the audio frames they cover; padding-only bandwidth probes, which
    /// cover none): their holes are gaps, not loss. A ring.
    private let nonAudioSequences: UnsafeMutablePointer<Int64>
    private static let nonAudioCapacity = 128
    private var nonAudioNext = 0

    private var candidateIndex: Int { slotCount }

    /// Creates a buffer and allocates all of its storage.
    ///
    /// - Precondition: clock rate, frame duration, slot count (at least 2) and payload capacity are positive.
    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.clockRateHertz > 0 && configuration.clockRateHertz <= 1_000_000_000, "clock rate must be positive (and at most 1 GHz)")
        precondition(
            configuration.frameSamples > 0 && configuration.frameSamples <= 60 * configuration.clockRateHertz,
            "frame duration must be positive (and at most a minute)")
        precondition(configuration.slotCount >= 2, "at least two slots are needed")
        precondition(configuration.maximumPayloadBytes > 0, "payload capacity must be positive")
        self.configuration = configuration

        // Durations are taken as 0…24 h, so no product of them overflows.
        func milliseconds(_ value: Int) -> Int64 { Int64(min(max(0, value), 86_400_000)) }
        let clock = Int64(configuration.clockRateHertz)
        let frame = Int64(configuration.frameSamples)
        let frameNanoseconds = UInt64(frame) * 1_000_000_000 / UInt64(clock)
        let targetMilliseconds = milliseconds(configuration.targetDelayMilliseconds)
        clockRateHertz = clock
        frameSamples = frame
        packetSamples = frame
        targetDelaySamples = max(targetMilliseconds * clock / 1000, frame)
        targetDelayNanoseconds = max(UInt64(targetMilliseconds) * 1_000_000, frameNanoseconds)
        driftMarginSamples = Int64(min(max(0, configuration.driftMarginFrames), 1_000_000)) * frame
        driftThresholdSamples = targetDelaySamples + driftMarginSamples
        maximumTargetSamples = max(frame, milliseconds(configuration.maximumDelayMilliseconds) * clock / 1000)
        adaptive = configuration.adaptiveTarget
        estimator = ArrivalDelayEstimator(percentile: min(1, max(0.5, configuration.delayPercentile)))
        self.frameNanoseconds = Int64(frameNanoseconds)
        guardNanoseconds = milliseconds(configuration.adaptiveGuardMilliseconds) * 1_000_000
        maximumDelayNanoseconds = max(Int64(frameNanoseconds), milliseconds(configuration.maximumDelayMilliseconds) * 1_000_000)
        lossMemoryNanoseconds = UInt64(milliseconds(configuration.lossMemoryMilliseconds)) * 1_000_000
        shrinkHoldoffNanoseconds = UInt64(milliseconds(configuration.shrinkHoldoffMilliseconds)) * 1_000_000
        quietPatiencePulls = max(1, Int(UInt64(milliseconds(configuration.quietPatienceMilliseconds)) * 1_000_000 / max(1, frameNanoseconds)))
        let sustainNanoseconds = UInt64(milliseconds(configuration.driftSustainMilliseconds)) * 1_000_000
        driftSustainPulls = max(1, Int((sustainNanoseconds + frameNanoseconds - 1) / max(1, frameNanoseconds)))
        reanchorThresholdSamples = max(milliseconds(configuration.reanchorThresholdMilliseconds) * clock / 1000, frame)
        slotCount = configuration.slotCount
        payloadCapacityBytes = configuration.maximumPayloadBytes

        let slotBytes = MemoryLayout<Slot>.stride * (configuration.slotCount + 1)
        let seenBytes = MemoryLayout<UInt64>.stride * Self.seenWords
        let payloadBytes = configuration.maximumPayloadBytes * (configuration.slotCount + 1)
        storage = UnsafeMutableRawPointer.allocate(
            byteCount: slotBytes + seenBytes + payloadBytes,
            alignment: max(MemoryLayout<Slot>.alignment, MemoryLayout<UInt64>.alignment)
        )
        slots = storage.bindMemory(to: Slot.self, capacity: configuration.slotCount + 1)
        slots.initialize(repeating: .empty, count: configuration.slotCount + 1)
        seenBits = (storage + slotBytes).bindMemory(to: UInt64.self, capacity: Self.seenWords)
        seenBits.initialize(repeating: 0, count: Self.seenWords)
        payloadBase = storage + slotBytes + seenBytes
        nonAudioSequences = .allocate(capacity: Self.nonAudioCapacity)
        nonAudioSequences.initialize(repeating: .min, count: Self.nonAudioCapacity)
        counters.targetDelayMilliseconds = Int(targetDelaySamples * 1000 / clock)
    }

    deinit {
        storage.deallocate()
        nonAudioSequences.deallocate()
    }

    /// A packet of this stream that carries no audio arrived (an RFC 4733 telephone event, sent
    /// in place of the audio frames it covers): its sequence number will not be taken for a lost
    /// frame, so the audio it replaced plays as a gap (``PullResult/silenceGap``), not as loss
    /// rebuilt from FEC or concealed. Never allocates.
    public func noteNonAudioPacket(sequenceNumber: UInt16) {
        guard hasStream else { return }
        nonAudioSequences[nonAudioNext % Self.nonAudioCapacity] = extendedSequence(sequenceNumber)
        nonAudioNext &+= 1
    }

    /// How many non-audio packets have sequence numbers from `low` up to (not including) `high`.
    private func nonAudioPackets(from low: Int64, upTo high: Int64) -> Int64 {
        guard nonAudioNext > 0, low < high else { return 0 }
        var count: Int64 = 0
        for index in 0..<min(nonAudioNext, Self.nonAudioCapacity) {
            let sequence = nonAudioSequences[index]
            if sequence >= low && sequence < high { count += 1 }
        }
        return count
    }

    // MARK: - Public API

    /// Counters plus the current buffered delay; computed by a scan of the slots (no allocation).
    public var statistics: JitterBufferStatistics {
        var result = counters
        var count = 0
        var earliest = Int64.max
        var newestEnd = Int64.min
        for index in 0..<slotCount where slots[index].occupied {
            count += 1
            earliest = min(earliest, slots[index].timestamp)
            newestEnd = max(newestEnd, slots[index].timestamp + slots[index].samples)
        }
        result.bufferedPackets = count
        if count > 0 {
            let start = started ? playoutTimestamp : earliest
            result.bufferedDelayMilliseconds = Int(max(0, newestEnd - start) * 1000 / clockRateHertz)
        }
        if counters.framesPlayed > 0 {
            result.meanWaitMilliseconds = Double(totalWaitNanoseconds) / Double(counters.framesPlayed) / 1e6
        }
        return result
    }

    /// Offers one received RTP packet to the buffer; the payload bytes are copied.
    ///
    /// - Parameters:
    ///   - sequenceNumber: RTP sequence number (wraps at 2^16).
    ///   - rtpTimestamp: RTP timestamp in 48 kHz clock samples (wraps at 2^32).
    ///   - payload: Opus payload, at most ``Configuration/maximumPayloadBytes`` bytes.
    ///   - arrivalNanoseconds: monotonic arrival instant in nanoseconds, same clock as `pull(now:)`.
    ///   - durationSamples: the audio the packet holds, in clock samples (Opus: from its TOC
    ///     byte); nil or out of range (under a frame, over six): one frame. A packet of several
    ///     frames plays for all of them: the next pull is due that much later.
    /// - Returns: what happened to the packet; see ``InsertOutcome``.
    public func insert(
        sequenceNumber: UInt16,
        rtpTimestamp: UInt32,
        payload: UnsafeRawBufferPointer,
        arrivalNanoseconds: UInt64,
        durationSamples: Int? = nil
    ) -> InsertOutcome {
        counters.packetsInserted += 1
        if payload.count > payloadCapacityBytes {
            counters.tooLargePackets += 1
            return .tooLarge
        }
        let samples = packetDuration(durationSamples)
        if !hasStream {
            beginStream(sequence: Int64(sequenceNumber), timestamp: Int64(rtpTimestamp), arrivalNanoseconds: arrivalNanoseconds)
            write(slot: 0, sequence: Int64(sequenceNumber), timestamp: Int64(rtpTimestamp), samples: samples, payload: payload, arrivalNanoseconds: arrivalNanoseconds)
            markSeen(Int64(sequenceNumber))
            return .stored
        }

        let sequence = extendedSequence(sequenceNumber)
        let timestamp = extendedTimestamp(rtpTimestamp, near: started ? playoutTimestamp : anchorTimestamp)

        // Frames held during an underflow that this packet shows to have elapsed in the stream.
        var credit: Int64 = 0
        if started && stalledFrames > 0 && timestamp >= playoutTimestamp {
            credit = min(stalledFrames, (timestamp - playoutTimestamp) / frameSamples)
        }
        let reference = started ? playoutTimestamp + credit * frameSamples : anchorTimestamp
        let timestampDistance = timestamp - reference
        let sequenceDistance = sequence - highestSequence
        if timestampDistance > reanchorThresholdSamples || timestampDistance < -reanchorThresholdSamples
            || sequenceDistance > Self.maximumSequenceJumpAhead || sequenceDistance < -Self.maximumSequenceJumpBehind
        {
            return insertFarPacket(
                sequenceNumber: sequenceNumber, rtpTimestamp: rtpTimestamp, samples: samples,
                payload: payload, arrivalNanoseconds: arrivalNanoseconds
            )
        }
        if isSeen(sequence) {
            counters.duplicatePackets += 1
            return .duplicate
        }
        if started && timestamp < playoutTimestamp {
            counters.latePackets += 1
            lastLateNanoseconds = max(arrivalNanoseconds, 1)
            // How late packets come is exactly what the delay estimate must learn.
            estimator.record(arrivalNanoseconds: arrivalNanoseconds, mediaNanoseconds: mediaNanoseconds(timestamp))
            return .late
        }

        hasCandidate = false
        if started && stalledFrames > 0 {
            endStall(credit: credit, sequence: sequence, now: arrivalNanoseconds)
        }

        var outcome = InsertOutcome.stored
        var slot = freeSlot()
        if slot < 0 {
            counters.overflowDrops += 1
            let oldest = oldestSlot()
            if timestamp < slots[oldest].timestamp {
                return .overflow
            }
            dropForOverflow(slot: oldest)
            slot = oldest
            outcome = .overflow
        }
        write(slot: slot, sequence: sequence, timestamp: timestamp, samples: samples, payload: payload, arrivalNanoseconds: arrivalNanoseconds)
        markSeen(sequence)
        return outcome
    }

    /// Offers a frame recovered from a redundant copy (an RFC 2198 RED block) carried by a later
    /// packet, with the sequence number and timestamp it had. It is stored only where it fills a
    /// hole: not before the stream has begun, not for a frame already received or already due,
    /// not across a jump the stream has not followed, not while playout is stalled (the primary
    /// that carried it ends the stall), and not when every slot is taken. Its arrival says
    /// nothing about the path's jitter (it was sent a frame or more late by design), so the
    /// delay estimate does not see it; no counter but ``JitterBufferStatistics/redundantRecoveries``
    /// moves (and ``JitterBufferStatistics/redundantCopiesTooLate`` for a copy of a missing
    /// frame already due). Never allocates.
    /// - Returns: whether the frame was stored.
    @discardableResult
    public func insertRedundant(
        sequenceNumber: UInt16,
        rtpTimestamp: UInt32,
        payload: UnsafeRawBufferPointer,
        arrivalNanoseconds: UInt64
    ) -> Bool {
        guard hasStream, payload.count <= payloadCapacityBytes, !(started && stalledFrames > 0) else { return false }
        let sequence = extendedSequence(sequenceNumber)
        let timestamp = extendedTimestamp(rtpTimestamp, near: started ? playoutTimestamp : anchorTimestamp)
        let reference = started ? playoutTimestamp : anchorTimestamp
        guard abs(timestamp - reference) <= reanchorThresholdSamples, highestSequence - sequence <= Self.maximumSequenceJumpBehind,
            sequence <= highestSequence, !isSeen(sequence)
        else { return false }
        if started && timestamp < playoutTimestamp {
            counters.redundantCopiesTooLate += 1
            return false
        }
        let slot = freeSlot()
        guard slot >= 0 else { return false }
        write(
            slot: slot, sequence: sequence, timestamp: timestamp, samples: frameSamples, payload: payload, arrivalNanoseconds: arrivalNanoseconds,
            recordsTransit: false)
        markSeen(sequence)
        counters.redundantRecoveries += 1
        return true
    }

    /// The stream's packets carry copies of the frames up to `framesBack` before their own (RFC
    /// 2198 RED; the deepest block of a packet). While packets are lost, an adaptive buffer then
    /// keeps that many frames more buffered, so the packet carrying a lost frame's copy has
    /// usually arrived when the frame is due — and one more (with ``Configuration/lossLookahead``)
    /// while the oldest copies carry in-band FEC (`oldestCarriesFEC`; a Tether sender sends none
    /// with RED, Chromium does): the FEC in a copy rebuilds the frame before it. A shallower
    /// packet (after a pause, or the sender carrying fewer copies) lowers the depth only when the
    /// deeper one has not been seen for 2 s. Never allocates.
    public func noteRedundancy(framesBack: Int, oldestCarriesFEC: Bool, now: UInt64) {
        let depth = Int64(min(max(0, framesBack), 8))
        if depth >= redundancyDepthFrames || now &- redundancyDepthSeenNanoseconds >= Self.redundancyDepthMemoryNanoseconds {
            redundancyDepthFrames = depth
            redundancyDepthSeenNanoseconds = now
        }
        if oldestCarriesFEC && depth > 0 { redundancyFECSeenNanoseconds = max(now, 1) }
    }

    /// Produces the decision for the next frame period of the audio sink.
    ///
    /// - Parameters:
    ///   - now: current monotonic instant in nanoseconds (same clock as `arrivalNanoseconds`).
    ///   - atQuietMoment: whether the audio just rendered was quiet (a pause in speech), so a
    ///     frame can be inserted or dropped unheard; only an adaptive buffer uses it. Callers
    ///     that cannot tell pass `true`.
    /// - Returns: what to render; payload pointers stay valid until the next mutating call.
    public func pull(now: UInt64, atQuietMoment: Bool = true) -> PullResult {
        guard hasStream else { return .notStarted }
        if !started {
            guard now >= firstArrivalNanoseconds, now - firstArrivalNanoseconds >= targetDelayNanoseconds else {
                return .notStarted
            }
            guard let first = earliestSlot() else { return .notStarted }
            started = true
            playoutTimestamp = slots[first].timestamp
            expectedSequence = slots[first].sequence
        }

        var scan = scanSlots()
        let adjustment = adaptDelay(now: now, quiet: atQuietMoment, scan: scan)
        if adaptive {
            switch adjustment {
            case .keep:
                break
            case .insert:
                counters.insertedFrames += 1
                return .insertedFrame
            case .drop:
                dropFrame(at: scan.atPlayout)
                scan = scanSlots()
            }
        } else if scan.count > 0 && scan.newestEnd - playoutTimestamp > driftThresholdSamples {
            excessPulls += 1
            if excessPulls >= driftSustainPulls && scan.atPlayout >= 0 {
                dropFrame(at: scan.atPlayout)
                scan = scanSlots()
            }
        } else {
            excessPulls = 0
        }

        if scan.count == 0 {
            // Underflow or DTX pause: hold the playout point (see type documentation).
            stalledFrames += 1
            counters.concealedFrames += 1
            return .conceal
        }
        if scan.atPlayout >= 0 {
            let played = slots[scan.atPlayout]
            slots[scan.atPlayout].occupied = false
            playoutTimestamp = played.timestamp + played.samples
            packetSamples = played.samples
            concealedOfLostPacket = 0
            expectedSequence = max(expectedSequence, played.sequence + 1)
            counters.framesPlayed += 1
            totalWaitNanoseconds &+= now >= played.arrivalNanoseconds ? now - played.arrivalNanoseconds : 0
            return .packet(
                sequenceNumber: UInt16(truncatingIfNeeded: played.sequence),
                payload: UnsafeRawBufferPointer(start: payloadPointer(slot: scan.atPlayout), count: played.payloadBytes)
            )
        }

        let earliest = slots[scan.earliest]
        let missingPackets = earliest.sequence - expectedSequence
            - nonAudioPackets(from: expectedSequence, upTo: earliest.sequence)
        if scan.hasExpected || missingPackets <= 0 {
            return advanceSilenceGap()
        }
        lastLossNanoseconds = max(now, 1)
        if scan.next >= 0 {
            // The next packet's in-band FEC rebuilds the lost one, all of it (a packet of several
            // frames carries FEC for as many).
            expectedSequence += 1
            playoutTimestamp += packetSamples
            concealedOfLostPacket = 0
            counters.fecRecoveries += 1
            return .fecFromNext(
                payload: UnsafeRawBufferPointer(start: payloadPointer(slot: scan.next), count: slots[scan.next].payloadBytes),
                samples: Int(packetSamples))
        }
        // More time than the missing packets cover before the next buffered one: the surplus is
        // a DTX pause, placed first so the lost packets sit right before the next one (FEC
        // reachable).
        let missingSamples = missingPackets * packetSamples - concealedOfLostPacket
        if earliest.timestamp - playoutTimestamp > missingSamples {
            return advanceSilenceGap()
        }
        // One frame of the lost packet concealed; the packet counts as passed once all its
        // frames are.
        concealedOfLostPacket += frameSamples
        if concealedOfLostPacket >= packetSamples {
            expectedSequence += 1
            concealedOfLostPacket = 0
        }
        playoutTimestamp += frameSamples
        counters.concealedFrames += 1
        return .conceal
    }

    /// Discards every buffered packet, the playout state and the statistics; keeps the storage.
    public func reset() {
        clearSlots()
        slots[candidateIndex] = .empty
        clearSeen()
        hasStream = false
        started = false
        hasCandidate = false
        stalledFrames = 0
        packetSamples = frameSamples
        concealedOfLostPacket = 0
        lastBufferedPullNanoseconds = 0
        excessPulls = 0
        lastLossNanoseconds = 0
        lastLateNanoseconds = 0
        redundancyDepthFrames = 0
        redundancyDepthSeenNanoseconds = 0
        redundancyFECSeenNanoseconds = 0
        totalWaitNanoseconds = 0
        estimator.reset()
        driftThresholdSamples = targetDelaySamples + driftMarginSamples
        let target = Int(targetDelaySamples * 1000 / clockRateHertz)
        counters = JitterBufferStatistics()
        counters.targetDelayMilliseconds = target
        nonAudioSequences.update(repeating: .min, count: Self.nonAudioCapacity)
        nonAudioNext = 0
    }

    /// Starts over for a new source (the call moved to another device, with its own sequence
    /// numbers and timestamps): buffered packets and the playout state go, the statistics stay.
    public func restartStream() {
        let kept = counters
        reset()
        counters = kept
    }

    // MARK: - Insert helpers

    /// A packet's duration in samples: what the caller says, when it is one to six frames.
    private func packetDuration(_ samples: Int?) -> Int64 {
        // Up to 120 ms (Opus's longest packet), or six frames when frames are longer.
        guard let samples, Int64(samples) >= frameSamples, Int64(samples) <= max(6 * frameSamples, clockRateHertz * 120 / 1000) else {
            return frameSamples
        }
        return Int64(samples)
    }

    private func beginStream(sequence: Int64, timestamp: Int64, arrivalNanoseconds: UInt64) {
        hasStream = true
        started = false
        hasCandidate = false
        firstArrivalNanoseconds = arrivalNanoseconds
        anchorTimestamp = timestamp
        highestSequence = sequence
        playoutTimestamp = timestamp
        expectedSequence = sequence
        stalledFrames = 0
        excessPulls = 0
        lastLossNanoseconds = 0
        lastLateNanoseconds = 0
        estimator.reset()  // transits of another stream share no time base with this one
        clearSeen()
    }

    /// Handles a packet far from the playout point: keep it as a re-anchor candidate, or, if it
    /// continues the current candidate, restart playout on the new stream.
    private func insertFarPacket(
        sequenceNumber: UInt16,
        rtpTimestamp: UInt32,
        samples: Int64,
        payload: UnsafeRawBufferPointer,
        arrivalNanoseconds: UInt64
    ) -> InsertOutcome {
        let candidate = slots[candidateIndex]
        let timestampStep = Int64(Int32(bitPattern: rtpTimestamp &- UInt32(truncatingIfNeeded: candidate.timestamp)))
        guard hasCandidate,
              sequenceNumber == UInt16(truncatingIfNeeded: candidate.sequence) &+ 1,
              timestampStep >= 0, timestampStep <= reanchorThresholdSamples
        else {
            write(slot: candidateIndex, sequence: Int64(sequenceNumber), timestamp: Int64(rtpTimestamp), samples: samples,
                  payload: payload, arrivalNanoseconds: arrivalNanoseconds)
            slots[candidateIndex].occupied = false  // never seen by playout scans
            hasCandidate = true
            return .stored
        }

        clearSlots()
        beginStream(sequence: candidate.sequence, timestamp: candidate.timestamp, arrivalNanoseconds: candidate.arrivalNanoseconds)
        payloadPointer(slot: 0).copyMemory(from: payloadPointer(slot: candidateIndex), byteCount: candidate.payloadBytes)
        slots[0] = Slot(occupied: true, sequence: candidate.sequence, timestamp: candidate.timestamp, samples: candidate.samples,
                        payloadBytes: candidate.payloadBytes, arrivalNanoseconds: candidate.arrivalNanoseconds)
        markSeen(candidate.sequence)
        write(slot: 1, sequence: candidate.sequence + 1, timestamp: candidate.timestamp + timestampStep, samples: samples,
              payload: payload, arrivalNanoseconds: arrivalNanoseconds)
        markSeen(candidate.sequence + 1)
        counters.reanchors += 1
        return .stored
    }

    private func endStall(credit: Int64, sequence: Int64, now: UInt64) {
        let missingPackets = max(0, sequence - expectedSequence - nonAudioPackets(from: expectedSequence, upTo: sequence))
        if missingPackets > 0 && credit > 0 {
            lastLossNanoseconds = max(now, 1)
        }
        if credit < stalledFrames {
            lastLateNanoseconds = max(now, 1)  // some held frames were this packet coming late
        }
        // As in `pull`, pause frames come first and lost packets right before the new packet
        // (each lost packet as long as the stream's packets).
        let missingFrames = (missingPackets * packetSamples + frameSamples - 1) / frameSamples
        let pauseFrames = max(0, credit - missingFrames)
        playoutTimestamp += credit * frameSamples
        expectedSequence += min(missingPackets, ((credit - pauseFrames) * frameSamples + packetSamples - 1) / packetSamples)
        concealedOfLostPacket = 0
        counters.concealedFrames -= Int(pauseFrames)
        counters.silenceGapFrames += Int(pauseFrames)
        stalledFrames = 0
    }

    private func dropForOverflow(slot: Int) {
        let dropped = slots[slot]
        slots[slot].occupied = false
        if started && dropped.timestamp >= playoutTimestamp {
            // Follow a sender that ran ahead: the dropped packet's frame counts as consumed.
            playoutTimestamp = dropped.timestamp + dropped.samples
            expectedSequence = max(expectedSequence, dropped.sequence + 1)
        }
    }

    private func write(
        slot: Int, sequence: Int64, timestamp: Int64, samples: Int64, payload: UnsafeRawBufferPointer, arrivalNanoseconds: UInt64,
        recordsTransit: Bool = true
    ) {
        if recordsTransit && slot != candidateIndex {  // a re-anchor candidate is not (yet) part of the stream
            estimator.record(arrivalNanoseconds: arrivalNanoseconds, mediaNanoseconds: mediaNanoseconds(timestamp))
        }
        if let source = payload.baseAddress, payload.count > 0 {
            payloadPointer(slot: slot).copyMemory(from: source, byteCount: payload.count)
        }
        slots[slot] = Slot(occupied: true, sequence: sequence, timestamp: timestamp, samples: samples,
                           payloadBytes: payload.count, arrivalNanoseconds: arrivalNanoseconds)
    }

    // MARK: - Pull helpers

    private enum Adjustment { case keep, insert, drop }

    /// The media time of an extended timestamp since the stream's first packet, in nanoseconds
    /// (the transits' time base). Whole seconds and the rest are scaled apart, so no product
    /// passes 64 bits however long the stream runs (`timestamp × 10⁹` did after 9.22 × 10⁹
    /// samples: 53 hours at 48 kHz, 28.5 from a start near 2³²); the result wraps only after
    /// 292 years of media, and everything that compares transits takes differences that wrap.
    private func mediaNanoseconds(_ timestamp: Int64) -> Int64 {
        let elapsed = timestamp &- anchorTimestamp
        let seconds = elapsed / clockRateHertz
        let rest = elapsed % clockRateHertz
        return seconds &* 1_000_000_000 &+ rest * 1_000_000_000 / clockRateHertz
    }

    /// Adaptive delay control at one pull (see the type documentation); also updates the
    /// target and playout-delay gauges. The estimator always runs, so a fixed-target buffer
    /// reports its playout delay too.
    private func adaptDelay(now: UInt64, quiet: Bool, scan: Scan) -> Adjustment {
        guard !estimator.isEmpty else { return .keep }
        let lowest = estimator.lowestTransitNanoseconds
        let offset = Int64(bitPattern: now) &- mediaNanoseconds(playoutTimestamp)
        let lossy = lastLossNanoseconds != 0 && now &- lastLossNanoseconds < lossMemoryNanoseconds
        // While lossy: one frame for FEC (in the next packet), and as many as RED copies reach
        // back; with RED, FEC's frame only while the oldest copies carry FEC (rebuilding the
        // frame before them).
        let redundancyRecent = redundancyDepthFrames > 0 && now &- redundancyDepthSeenNanoseconds < lossMemoryNanoseconds
        let fecUsable = !redundancyRecent
            || (redundancyFECSeenNanoseconds != 0 && now &- redundancyFECSeenNanoseconds < lossMemoryNanoseconds)
        let lookahead = (configuration.lossLookahead && fecUsable ? 1 : 0) + (redundancyRecent ? redundancyDepthFrames : 0)
        let required = guardNanoseconds + (lossy ? lookahead * frameNanoseconds : 0)
        // Transits are differences of two clocks: only their differences (which wrap) mean anything.
        let desired = lowest &+ min(estimator.percentileTransitNanoseconds &- lowest &+ required, maximumDelayNanoseconds)
        if scan.count > 0 {
            counters.playoutDelayMilliseconds = Int(max(0, offset &- lowest) / 1_000_000)
            lastBufferedPullNanoseconds = now
        } else if lastBufferedPullNanoseconds == 0 || now &- lastBufferedPullNanoseconds >= Self.silentAfterNanoseconds {
            counters.playoutDelayMilliseconds = nil
        }
        guard adaptive else { return .keep }
        counters.targetDelayMilliseconds = Int((desired &- lowest &+ 999_999) / 1_000_000)
        let error = offset &- desired
        if error < 0 {
            excessPulls = 0
            // An empty buffer is an underflow, which holds the playout point anyway.
            return quiet && scan.count > 0 ? .insert : .keep
        }
        guard error >= frameNanoseconds else {
            excessPulls = 0
            return .keep
        }
        excessPulls += 1
        // Only a buffered frame with another behind it can go (a missing one is not "quiet"),
        // and not soon after a packet came late: the delay it made is kept a while rather than
        // shifting the timeline back and forth.
        guard scan.atPlayout >= 0, scan.count >= 2 else { return .keep }
        if lastLateNanoseconds != 0 && now &- lastLateNanoseconds < shrinkHoldoffNanoseconds { return .keep }
        if excessPulls >= driftSustainPulls && (quiet || excessPulls >= quietPatiencePulls) {
            excessPulls = 0
            return .drop
        }
        return .keep
    }

    /// Drops the frame at the playout point to shorten the delay.
    private func dropFrame(at index: Int) {
        let dropped = slots[index]
        slots[index].occupied = false
        playoutTimestamp = dropped.timestamp + dropped.samples
        expectedSequence = max(expectedSequence, dropped.sequence + 1)
        counters.driftDrops += 1
        excessPulls = 0
    }

    private func advanceSilenceGap() -> PullResult {
        playoutTimestamp += frameSamples
        counters.silenceGapFrames += 1
        return .silenceGap
    }

    /// One pass over the slots relative to the playout point; frees stale packets behind it.
    private func scanSlots() -> Scan {
        var scan = Scan()
        var atPlayoutTimestamp = Int64.max
        var earliestTimestamp = Int64.max
        for index in 0..<slotCount where slots[index].occupied {
            let slot = slots[index]
            if slot.timestamp < playoutTimestamp {
                slots[index].occupied = false
                continue
            }
            scan.count += 1
            if slot.timestamp < playoutTimestamp + frameSamples && slot.timestamp < atPlayoutTimestamp {
                scan.atPlayout = index
                atPlayoutTimestamp = slot.timestamp
            }
            if slot.sequence == expectedSequence {
                scan.hasExpected = true
            }
            // The packet right after the expected one: the next sequence number, or the next but
            // for packets of no audio between (padding probes), and the next frame's timestamp.
            if slot.timestamp == playoutTimestamp + packetSamples && concealedOfLostPacket == 0 && slot.sequence > expectedSequence
                && (slot.sequence == expectedSequence + 1
                    || slot.sequence - expectedSequence - 1 == nonAudioPackets(from: expectedSequence + 1, upTo: slot.sequence))
            {
                scan.next = index
            }
            if slot.timestamp < earliestTimestamp {
                scan.earliest = index
                earliestTimestamp = slot.timestamp
            }
            scan.newestEnd = max(scan.newestEnd, slot.timestamp + slot.samples)
        }
        return scan
    }

    // MARK: - Slot helpers

    private func payloadPointer(slot: Int) -> UnsafeMutableRawPointer {
        payloadBase + slot * payloadCapacityBytes
    }

    private func freeSlot() -> Int {
        for index in 0..<slotCount where !slots[index].occupied {
            return index
        }
        return -1
    }

    private func oldestSlot() -> Int {
        earliestSlot() ?? 0
    }

    private func earliestSlot() -> Int? {
        var found: Int?
        var earliest = Int64.max
        for index in 0..<slotCount where slots[index].occupied && slots[index].timestamp < earliest {
            found = index
            earliest = slots[index].timestamp
        }
        return found
    }

    private func clearSlots() {
        for index in 0..<slotCount {
            slots[index].occupied = false
        }
    }

    // MARK: - Sequence and timestamp extension

    private func extendedSequence(_ sequenceNumber: UInt16) -> Int64 {
        let delta = Int16(bitPattern: sequenceNumber &- UInt16(truncatingIfNeeded: highestSequence))
        return highestSequence + Int64(delta)
    }

    private func extendedTimestamp(_ rtpTimestamp: UInt32, near reference: Int64) -> Int64 {
        let delta = Int32(bitPattern: rtpTimestamp &- UInt32(truncatingIfNeeded: reference))
        return reference + Int64(delta)
    }

    // MARK: - Duplicate detection (bitmap over the newest 1024 sequence numbers)

    private func isSeen(_ sequence: Int64) -> Bool {
        guard sequence <= highestSequence, highestSequence - sequence < Self.seenWindowPackets else { return false }
        let bit = Int(sequence & (Self.seenWindowPackets - 1))
        return seenBits[bit >> 6] & (1 << UInt64(bit & 63)) != 0
    }

    private func markSeen(_ sequence: Int64) {
        if sequence > highestSequence {
            if sequence - highestSequence >= Self.seenWindowPackets {
                clearSeen()
            } else {
                var cleared = highestSequence + 1
                while cleared <= sequence {
                    let bit = Int(cleared & (Self.seenWindowPackets - 1))
                    seenBits[bit >> 6] &= ~(1 << UInt64(bit & 63))
                    cleared += 1
                }
            }
            highestSequence = sequence
        }
        guard highestSequence - sequence < Self.seenWindowPackets else { return }
        let bit = Int(sequence & (Self.seenWindowPackets - 1))
        seenBits[bit >> 6] |= 1 << UInt64(bit & 63)
    }

    private func clearSeen() {
        for word in 0..<Self.seenWords {
            seenBits[word] = 0
        }
    }
}
