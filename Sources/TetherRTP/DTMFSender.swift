/// One DTMF key press to send: the digit, how long its tone lasts and the pause after it.
public struct DTMFTone: Sendable, Equatable {
    public var digit: DTMFDigit
    /// The tone's length in milliseconds.
    public var durationMilliseconds: Int
    /// The pause after the tone before the next digit starts, in milliseconds.
    public var gapMilliseconds: Int

    public init(digit: DTMFDigit, durationMilliseconds: Int, gapMilliseconds: Int) {
        self.digit = digit
        self.durationMilliseconds = durationMilliseconds
        self.gapMilliseconds = gapMilliseconds
    }
}

/// An RFC 4733 telephone-event packet to send in place of one audio frame.
public struct TelephoneEventPacket: Sendable, Equatable {
    /// The RTP timestamp: the instant the event (or its segment) began, on the stream's clock.
    public var timestamp: UInt32
    /// The RTP marker bit: set on the event's first packet only.
    public var marker: Bool
    public var payload: TelephoneEventPayload
}

/// The sans-IO sending half of RFC 4733 DTMF for one RTP stream.
///
/// The media loop asks it once per audio frame (the packet interval) with the timestamp that
/// frame's audio packet would carry; it answers with the telephone-event packet to send instead,
/// or `nil` to send the audio. The audio timestamps keep running underneath, so audio resumes
/// after the event exactly where it would have been.
///
/// An event (§2.5.1): the first packet carries the marker and one frame's duration; every frame
/// sends an update with the same timestamp and the duration so far; when the tone's length is
/// reached the end bit is set and that final packet is sent three times, one per frame (§2.5.1.4);
/// audio frames are not sent meanwhile. A tone longer than the 16-bit duration field (65535
/// ticks: 1.37 s at 48 kHz) is split into segments (§2.5.1.3, "long-duration events"): the
/// segment closes with a packet of duration 0xFFFF, and the next segment's timestamp is the
/// previous one plus 65535 ticks, its durations counted from there; only the last segment
/// carries the end bit, only the first packet the marker. The next tone starts once the gap has
/// passed after this one's end (and its end packets have been sent).
///
/// Durations are in ticks of the telephone-event clock (8000 or 48000 Hz, as negotiated);
/// timestamps are on the stream's clock (48 kHz for Opus). No allocation; a value type.
public struct DTMFSender: Sendable, Equatable {
    /// The telephone-event clock rate (the negotiated `telephone-event/<rate>`).
    public let eventClockRateHz: UInt32
    /// The RTP stream's clock rate (48000 for Opus).
    public let streamClockRateHz: UInt32
    /// Stream ticks per event tick (6 for telephone-event/8000 beside Opus, else 1).
    private let ticksPerEventTick: UInt32
    /// One frame in event ticks and in stream ticks.
    private let frameEventTicks: UInt32
    private let frameStreamTicks: UInt32
    /// End packets sent in all (RFC 4733 §2.5.1.4).
    public static let endPacketCount = 3
    /// The largest duration one segment can carry.
    public static let maximumSegmentDuration: UInt32 = 0xFFFF

    private enum Phase: Sendable, Equatable {
        case idle
        /// Sending updates: the event, its length and how much of it the packets cover so far.
        case tone(event: UInt8, lengthTicks: UInt32, sentTicks: UInt32, segmentStartTicks: UInt32, segmentTimestamp: UInt32, first: Bool)
        /// Repeating the final packet.
        case ending(packet: TelephoneEventPacket, remaining: Int)
        /// The pause before the next tone may start: until this stream timestamp.
        case gap(until: UInt32)
    }

    private var phase = Phase.idle
    /// The event's start and when the next may start, in stream ticks from the start.
    private var toneStart: UInt32 = 0
    private var nextStartOffset: UInt32 = 0

    /// - Parameters:
    ///   - eventClockRateHz: the negotiated telephone-event clock rate; the stream clock rate
    ///     must be a multiple of it.
    ///   - frameMilliseconds: the audio packet interval (the update interval).
    public init(eventClockRateHz: UInt32, streamClockRateHz: UInt32 = 48_000, frameMilliseconds: Int) {
        precondition(eventClockRateHz > 0 && streamClockRateHz % eventClockRateHz == 0 && frameMilliseconds > 0)
        self.eventClockRateHz = eventClockRateHz
        self.streamClockRateHz = streamClockRateHz
        ticksPerEventTick = streamClockRateHz / eventClockRateHz
        frameEventTicks = eventClockRateHz * UInt32(frameMilliseconds) / 1000
        frameStreamTicks = streamClockRateHz * UInt32(frameMilliseconds) / 1000
    }

    /// Whether nothing is being sent and no gap is running.
    public var isIdle: Bool { phase == .idle }

    /// Whether a tone can start with the frame at `streamTimestamp` (the previous one's gap is
    /// over). Ends a gap that is over.
    public mutating func isReady(at streamTimestamp: UInt32) -> Bool {
        if case let .gap(until) = phase, Int32(bitPattern: streamTimestamp &- until) >= 0 { phase = .idle }
        return phase == .idle
    }

    /// Starts a tone with the next frame. Ignored unless ready (see ``isReady(at:)``).
    public mutating func start(_ tone: DTMFTone) {
        guard phase == .idle else { return }
        // 64-bit arithmetic on lengths capped at a day, clamped: a tone or gap of any length
        // cannot overflow (the stream clock's 32 bits wrap after a day at 48 kHz; a tone is
        // seconds long).
        let day = 86_400_000
        let lengthTicks = UInt32(
            clamping: max(1, UInt64(min(day, max(0, tone.durationMilliseconds))) * UInt64(eventClockRateHz) / 1000))
        let gapTicks = UInt64(min(day, max(0, tone.gapMilliseconds))) * UInt64(streamClockRateHz) / 1000
        nextStartOffset = UInt32(clamping: UInt64(lengthTicks) * UInt64(ticksPerEventTick) + gapTicks)
        phase = .tone(event: tone.digit.event, lengthTicks: lengthTicks, sentTicks: 0, segmentStartTicks: 0, segmentTimestamp: 0, first: true)
    }

    /// The packet to send for the audio frame whose timestamp would be `streamTimestamp`, or nil
    /// to send the audio frame.
    public mutating func nextFrame(streamTimestamp: UInt32) -> TelephoneEventPacket? {
        switch phase {
        case .idle:
            return nil
        case .gap:
            _ = isReady(at: streamTimestamp)
            return nil
        case let .ending(packet, remaining):
            phase = remaining > 1 ? .ending(packet: packet, remaining: remaining - 1) : .gap(until: toneStart &+ nextStartOffset)
            return TelephoneEventPacket(timestamp: packet.timestamp, marker: false, payload: packet.payload)
        case .tone(let event, let lengthTicks, var sentTicks, var segmentStart, var segmentTimestamp, let first):
            if first {
                toneStart = streamTimestamp
                segmentTimestamp = streamTimestamp
            }
            sentTicks = lengthTicks - sentTicks <= frameEventTicks ? lengthTicks : sentTicks + frameEventTicks
            let inSegment = sentTicks - segmentStart
            if inSegment > Self.maximumSegmentDuration {
                // The segment is full: close it at 0xFFFF; the rest goes in the next segment.
                let packet = TelephoneEventPacket(
                    timestamp: segmentTimestamp, marker: first,
                    payload: TelephoneEventPayload(event: event, isEnd: false, duration: UInt16(Self.maximumSegmentDuration)))
                segmentStart += Self.maximumSegmentDuration
                segmentTimestamp &+= Self.maximumSegmentDuration * ticksPerEventTick
                phase = .tone(
                    event: event, lengthTicks: lengthTicks, sentTicks: sentTicks, segmentStartTicks: segmentStart,
                    segmentTimestamp: segmentTimestamp, first: false)
                return packet
            }
            let ended = sentTicks >= lengthTicks
            let packet = TelephoneEventPacket(
                timestamp: segmentTimestamp, marker: first,
                payload: TelephoneEventPayload(event: event, isEnd: ended, duration: UInt16(inSegment)))
            if ended {
                phase = .ending(packet: packet, remaining: Self.endPacketCount - 1)
            } else {
                phase = .tone(
                    event: event, lengthTicks: lengthTicks, sentTicks: sentTicks, segmentStartTicks: segmentStart,
                    segmentTimestamp: segmentTimestamp, first: false)
            }
            return packet
        }
    }

    /// Drops the tone in progress (the call stopped sending: hold, a new stream).
    public mutating func cancel() {
        phase = .idle
    }
}
