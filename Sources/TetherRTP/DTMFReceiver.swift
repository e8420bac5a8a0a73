/// A DTMF digit the peer sent (RFC 4733), reported once when it ended.
public struct DTMFReceived: Sendable, Equatable {
    public var digit: DTMFDigit
    /// The tone's length, from the packets' durations (the last one seen when the end was lost).
    public var durationMilliseconds: Int
    /// Whether an end packet arrived (false: reported when the next event began, or after the
    /// time-out without updates).
    public var endSeen: Bool
    /// Whether the tone went on past ``DTMFReceiver/maximumEventMilliseconds``: it is reported
    /// then, at that length, and the rest of it is ignored.
    public var lengthCapped: Bool

    public init(digit: DTMFDigit, durationMilliseconds: Int, endSeen: Bool, lengthCapped: Bool = false) {
        self.digit = digit
        self.durationMilliseconds = durationMilliseconds
        self.endSeen = endSeen
        self.lengthCapped = lengthCapped
    }
}

/// The sans-IO receiving half of RFC 4733 DTMF for one RTP stream: telephone-event packets in,
/// each digit out once.
///
/// An event is identified by its RTP timestamp (§2.5.2): updates and the repeated end packets
/// of one event collapse into one digit, reported at its first end packet. A digit whose end
/// packets were all lost is reported when a packet of a later event arrives, or when no update
/// came for ``timeoutNanoseconds`` (call ``expire(now:)``). A long event's next segment (same
/// event, timestamp 65535 ticks on, §2.5.1.3) continues it. Packets of an event already
/// reported, arriving late or repeated, are dropped. Events outside 0…15 are ignored.
/// Duplicates by sequence number are the caller's to drop (SRTP's replay check does).
///
/// An event is at most ``maximumEventMilliseconds`` long: one that goes on (a stuck key, or a
/// peer that never ends it) is reported when it reaches that length, with
/// ``DTMFReceived/lengthCapped``, and its later segments and end packets are taken in silently.
///
/// No allocation; a value type. Every input carries the caller's `now` (monotonic nanoseconds).
public struct DTMFReceiver: Sendable {
    public let eventClockRateHz: UInt32
    private let ticksPerEventTick: UInt32
    /// How long an event may go without an update before it is reported as ended.
    public let timeoutNanoseconds: UInt64
    /// How far behind the last reported event a packet may be and still count as its late
    /// packet (further back: a new stream), in stream ticks.
    private let lateWindowTicks: UInt32
    /// The longest event reported, in event-clock ticks.
    private let maximumEventTicks: UInt64

    /// The longest tone reported as one digit, in milliseconds: 30 s. A person holding a key
    /// down for an IVR's "press and hold" holds it for seconds; a tone that goes on for longer
    /// is a stuck key or a peer that never sends the end. Longer events are reported at this
    /// length (``DTMFReceived/lengthCapped``) and the rest of them is ignored.
    public static let maximumEventMilliseconds = 30_000

    private struct Current: Sendable, Equatable {
        var timestamp: UInt32
        var event: UInt8
        /// Ticks covered by the event's closed segments (at most `maximumEventTicks`).
        var closedTicks: UInt64
        var duration: UInt16
        var lastUpdate: UInt64
        /// Already reported at the length cap: later packets of it are taken in silently.
        var reported = false
    }

    private var current: Current?
    /// The timestamp of the last reported event's last segment.
    private var lastReported: UInt32?
    /// Digits ready to be taken, oldest first (at most two per packet).
    private var outbox: (DTMFReceived?, DTMFReceived?) = (nil, nil)

    public init(eventClockRateHz: UInt32, streamClockRateHz: UInt32 = 48_000, timeoutNanoseconds: UInt64 = 500_000_000) {
        precondition(eventClockRateHz > 0 && streamClockRateHz % eventClockRateHz == 0)
        self.eventClockRateHz = eventClockRateHz
        ticksPerEventTick = streamClockRateHz / eventClockRateHz
        self.timeoutNanoseconds = timeoutNanoseconds
        lateWindowTicks = streamClockRateHz * 10
        maximumEventTicks = UInt64(eventClockRateHz) * UInt64(Self.maximumEventMilliseconds) / 1000
    }

    /// A telephone-event packet with RTP timestamp `timestamp` arrived at `now`. Take what it
    /// completed with ``takeReceived()``.
    public mutating func receive(_ payload: TelephoneEventPayload, timestamp: UInt32, now: UInt64) {
        guard DTMFDigit(event: payload.event) != nil else { return }
        if let reported = lastReported {
            let behind = Int64(Int32(bitPattern: reported &- timestamp))
            if behind >= 0 && behind < Int64(lateWindowTicks) { return }  // a late or repeated packet of a reported event
        }
        if var event = current {
            let ahead = Int32(bitPattern: timestamp &- event.timestamp)
            if ahead < 0 { return }  // an older segment's late packet
            if ahead == 0 {
                guard payload.event == event.event else { return }
                event.duration = max(event.duration, payload.duration)
                event.lastUpdate = now
                current = event
                update(endSeen: payload.isEnd)
                return
            }
            if payload.event == event.event
                && UInt32(ahead) == DTMFSender.maximumSegmentDuration * ticksPerEventTick
            {
                // The next segment of a long event.
                event.closedTicks = min(event.closedTicks + UInt64(DTMFSender.maximumSegmentDuration), maximumEventTicks)
                event.timestamp = timestamp
                event.duration = payload.duration
                event.lastUpdate = now
                current = event
                update(endSeen: payload.isEnd)
                return
            }
            // Its end packets were lost (or it was reported at the cap): a new event began.
            if event.reported { finish() } else { report(endSeen: false) }
        }
        current = Current(timestamp: timestamp, event: payload.event, closedTicks: 0, duration: payload.duration, lastUpdate: now)
        update(endSeen: payload.isEnd)
    }

    /// After a packet of the current event: reports it at its end, or when it reached the cap.
    private mutating func update(endSeen: Bool) {
        guard let event = current else { return }
        if event.reported {
            if endSeen { finish() }
            return
        }
        if endSeen {
            report(endSeen: true)
        } else if event.closedTicks + UInt64(event.duration) >= maximumEventTicks {
            report(endSeen: false, capped: true)
        }
    }

    /// Reports an event that had no update for the time-out (its end packets lost, and no
    /// event after it). Call periodically; take what it completed with ``takeReceived()``.
    public mutating func expire(now: UInt64) {
        guard let event = current, now >= event.lastUpdate, now - event.lastUpdate >= timeoutNanoseconds else { return }
        if event.reported { finish() } else { report(endSeen: false) }
    }

    /// The next completed digit, oldest first, or nil.
    public mutating func takeReceived() -> DTMFReceived? {
        let first = outbox.0
        outbox = (outbox.1, nil)
        return first
    }

    /// Forgets everything (the stream started over: another source).
    public mutating func reset() {
        current = nil
        lastReported = nil
        outbox = (nil, nil)
    }

    /// Puts the current event in the outbox; it ends there, or, when `capped`, stays current
    /// (reported) so that the rest of it is recognised and ignored.
    private mutating func report(endSeen: Bool, capped: Bool = false) {
        guard var event = current, let digit = DTMFDigit(event: event.event) else { return }
        let ticks = min(event.closedTicks + UInt64(event.duration), maximumEventTicks)
        let received = DTMFReceived(
            digit: digit, durationMilliseconds: Int(ticks * 1000 / UInt64(eventClockRateHz)), endSeen: endSeen,
            lengthCapped: capped)
        if outbox.0 == nil { outbox.0 = received } else { outbox.1 = received }
        if capped {
            event.reported = true
            current = event
        } else {
            finish()
        }
    }

    /// The current event is over (reported before): later packets of it are late ones.
    private mutating func finish() {
        guard let event = current else { return }
        lastReported = event.timestamp
        current = nil
    }
}
