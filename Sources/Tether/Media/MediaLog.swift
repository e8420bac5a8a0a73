import Logging
import TetherRealtime

/// What the media loop (a realtime thread) has to say, posted as fixed-size records to its
/// `RealtimeLog` and turned into log messages by the session, off the realtime thread. The
/// numbers each event carries are named beside it.
enum MediaLogEvent: UInt16 {
    /// The first packet from the peer's source was accepted. a: its SSRC.
    case firstMediaReceived = 1
    /// Packets of another source replaced the peer's (it moved to another device, re-keyed).
    /// a: the old SSRC, b: the new.
    case sourceSwitched
    /// New SRTP contexts were taken over (the session re-keyed).
    case keysReplaced
    /// The encoder was reconfigured for the loss the peer reports. a: the loss estimate (%),
    /// b: what the encoder is told (%), c: the bitrate (b/s).
    case encoderAdapted
    /// The loss protection changed: how many earlier frames each packet carries (RED), or
    /// whether in-band FEC is sent. a: frames back now (0: none), b: in-band FEC on (1) or off (0).
    case redundancyChanged
    /// Packets were dropped since the last record of their kind (at most one record a second
    /// for each kind). a: the kind (`DropKind`), b: how many since the last record, c: the total.
    case packetsDropped
    /// The rate control changed the packet duration. a: milliseconds, b: the budget (b/s),
    /// c: what the stream sends now (b/s, headers included).
    case packetDurationChanged
    /// The path's use as the rate control sees it changed. a: 0 normal, 1 overusing (the queue
    /// grows: sending less), 2 underusing (it drains); b: the budget (b/s); c: the queueing delay (ms).
    case congestionChanged

    enum DropKind: Int64 {
        case malformed = 1, srtpAuthentication, srtpReplay, receiveQueueFull

        var description: String {
            switch self {
            case .malformed: "malformed"
            case .srtpAuthentication: "failing SRTP authentication"
            case .srtpReplay: "replayed (SRTP)"
            case .receiveQueueFull: "over a full receive queue"
            }
        }
    }
}

/// The media loop's side: the totals last reported for each kind of dropped packet, and when.
/// - Note: Media thread only.
struct DropReporting {
    private var reported = (malformed: 0, authentication: 0, replay: 0, queue: 0)
    private var lastCheck: UInt64 = 0

    /// Posts a record for each kind whose total grew, at most once a second (`final`: now,
    /// the loop's last pass, so the last second's drops are reported too).
    mutating func check(_ stats: MediaCounters, now: UInt64, into log: RealtimeLog, final: Bool = false) {
        guard final || now &- lastCheck >= 1_000_000_000 else { return }
        lastCheck = now
        func post(_ kind: MediaLogEvent.DropKind, _ total: Int, _ last: inout Int) {
            guard total > last else { return }
            log.post(
                RealtimeLogRecord(
                    event: MediaLogEvent.packetsDropped.rawValue, nanoseconds: now, a: kind.rawValue, b: Int64(total - last),
                    c: Int64(total)))
            last = total
        }
        post(.malformed, stats.malformedPackets, &reported.malformed)
        post(.srtpAuthentication, stats.srtpAuthenticationFailures, &reported.authentication)
        post(.srtpReplay, stats.srtpReplayFailures, &reported.replay)
        post(.receiveQueueFull, stats.receiveQueueDrops, &reported.queue)
    }
}

extension MediaLogEvent {
    /// The log message of a record, at its level, with its numbers as metadata. Control thread.
    static func emit(_ record: RealtimeLogRecord, to logger: Logger) {
        guard let event = MediaLogEvent(rawValue: record.event) else {
            logger.warning("media: unknown log record \(record.event)")
            return
        }
        switch event {
        case .firstMediaReceived:
            logger.info("media: first packet from the peer", metadata: ["ssrc": "\(UInt32(truncatingIfNeeded: record.a))"])
        case .sourceSwitched:
            logger.notice(
                "media: the peer's packets come from a new source",
                metadata: ["old-ssrc": "\(UInt32(truncatingIfNeeded: record.a))", "ssrc": "\(UInt32(truncatingIfNeeded: record.b))"])
        case .keysReplaced:
            logger.debug("media: SRTP re-keyed")
        case .encoderAdapted:
            logger.debug(
                "media: encoder adapted to the reported loss",
                metadata: ["loss-estimate-percent": "\(record.a)", "expected-loss-percent": "\(record.b)", "bitrate": "\(record.c)"])
        case .redundancyChanged:
            let red = record.a > 0 ? "RED \(record.a) frame\(record.a == 1 ? "" : "s") back" : "no RED"
            logger.info(
                "media: loss protection now \(red), in-band FEC \(record.b != 0 ? "on" : "off")",
                metadata: ["red-frames": "\(record.a)", "fec": "\(record.b != 0)"])
        case .packetDurationChanged:
            logger.info(
                "media: packets of \(record.a) ms now (budget \(record.b / 1000) kb/s, sending \(record.c / 1000) kb/s with headers)",
                metadata: ["packet-ms": "\(record.a)", "budget": "\(record.b)", "send-rate": "\(record.c)"])
        case .congestionChanged:
            let state = record.a == 1 ? "overusing: the queue grows, sending less" : record.a == 2 ? "underusing: the queue drains" : "normal"
            logger.info(
                "media: path \(state) (budget \(record.b / 1000) kb/s, queue \(record.c) ms)",
                metadata: ["state": "\(record.a)", "budget": "\(record.b)", "queue-ms": "\(record.c)"])
        case .packetsDropped:
            let kind = DropKind(rawValue: record.a)
            logger.warning(
                "media: dropped \(record.b) packet\(record.b == 1 ? "" : "s") \(kind?.description ?? "of kind \(record.a)")",
                metadata: ["dropped": "\(record.b)", "total": "\(record.c)"])
        }
    }
}
