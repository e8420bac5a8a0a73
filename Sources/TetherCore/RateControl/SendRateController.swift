/// The sender's one decision-maker for what it puts on the path (sans-IO: every input carries
/// `now`, monotonic nanoseconds): the Opus bitrate, the packet duration (20, 40, 60 or 120 ms), in-band
/// FEC and RED depth, together, inside the bandwidth the path gives (``BandwidthEstimator``).
///
/// - **The budget** is 85 % of the estimate (the rest is headroom: the feedback and reports
///   sharing the path, the estimate's own swings), capped by the peer's `b=AS`/`b=TIAS`, and
///   everything counts against it: the payload with its RED copies, and every header — a
///   link-layer header, IP, UDP, RTP, the transport-wide sequence extension and the SRTP tag,
///   72 bytes a packet over Ethernet and IPv4 (29 kb/s at 20 ms, 14 at 40 ms, 10 at 60 ms, 5 at
///   120 ms).
/// - **Protection for random loss only.** ``LossAdaptation`` chooses FEC and RED from the loss the
///   peer reports, but loss that comes with a queue (``BandwidthEstimator/lossIsCongestion``) is
///   not given to it: that loss is answered by sending less, never by sending more.
/// - **The allocation**: what the loss adaptation wants (its bitrate and RED depth) at 20 ms when
///   it fits; if not, less RED (down to one frame back, then FEC instead); if even that does not
///   fit, the bitrate the budget leaves after the headers — at 20 ms while that is at least
///   20 kb/s, at 40 ms while at least 14 kb/s there, at 60 ms while at least 12 kb/s there,
///   else at 120 ms where the peer's `maxptime` allows (never under 6 kb/s): on a 24 kb/s link
///   (a 20 kb/s budget) 120 ms packets leave Opus 15 kb/s against 10 at 60 ms. A longer packet is taken back only when the shorter one
///   fits with 10 % to spare, so the duration does not flap. RED only at 20 ms (its copies
///   assume one frame a packet).
/// - **Start**: the estimate's start rate (64 kb/s) before any feedback: 20 ms packets at
///   25.6 kb/s of Opus (54 kb/s on the wire, inside a 64 kb/s link), no RED until the estimate
///   has room for it; the estimate's slow start brings the wished bitrate within a second.
///
/// A value type; no allocation.
public struct SendRateController: Sendable {
    /// What the sender does now.
    public struct Decision: Sendable, Equatable {
        /// The encoder's settings (bitrate of Opus alone, FEC, expected loss, RED frames).
        public var settings: LossAdaptation.Settings
        /// Packet duration in milliseconds (20, 40, 60 or 120).
        public var frameMilliseconds: Int
        /// The budget this decision fits in, bits per second on the wire.
        public var budgetBitsPerSecond: Int
        /// What the decision sends, headers included, bits per second.
        public var sendBitsPerSecond: Int

        public init(settings: LossAdaptation.Settings, frameMilliseconds: Int, budgetBitsPerSecond: Int, sendBitsPerSecond: Int) {
            self.settings = settings
            self.frameMilliseconds = frameMilliseconds
            self.budgetBitsPerSecond = budgetBitsPerSecond
            self.sendBitsPerSecond = sendBitsPerSecond
        }
    }

    /// The random-loss protection (FEC and RED depth, and the bitrate they want).
    public var lossAdaptation: LossAdaptation
    /// The path's bandwidth.
    public var estimator: BandwidthEstimator
    /// Whether the peer sends transport-cc feedback (else its receiver reports drive the estimate).
    public let usesTransportFeedback: Bool
    /// Whether the rate follows the estimate at all. Off: the loss adaptation's settings at the
    /// shortest duration whatever the path (and its loss is never taken for congestion).
    public let controlsRate: Bool
    /// Bytes every packet carries besides the payload: link layer, IP, UDP, RTP, its
    /// extensions, SRTP's tag.
    public let headerBytes: Int
    /// The share of the estimate the stream may use.
    public static let budgetShare = 0.85
    /// The longest packet duration allowed (the peer's `maxptime` caps it): 20, 40, 60 or 120;
    /// the durations are those of ``longerPacket(than:)`` up to it.
    public let maximumFrameMilliseconds: Int
    /// The peer's cap on what we send (`b=AS` or `b=TIAS`, with headers), bits per second.
    public var peerCapBitsPerSecond: Int?
    /// Opus never goes under this.
    public static let minimumOpusBitsPerSecond = 6_000
    /// The lowest Opus bitrate a duration is chosen for while a longer one is allowed (below it
    /// the next longer one is): 20 kb/s at 20 ms, 14 at 40, 12 at 60.
    public static func opusFloor(atPacket milliseconds: Int) -> Int {
        switch milliseconds {
        case ..<40: 20_000
        case 40..<60: 14_000
        default: 12_000
        }
    }
    /// The packet duration after `milliseconds` among those the controller chooses from (20,
    /// 40, 60, 120; Opus takes 80 and 100 too, which would only add steps to flap between),
    /// nil after the longest. (A function, not an array: the allocation runs on the media
    /// thread, which touches no reference-counted storage.)
    public static func longerPacket(than milliseconds: Int) -> Int? {
        switch milliseconds {
        case ..<20: 20
        case 20..<40: 40
        case 40..<60: 60
        case 60..<120: 120
        default: nil
        }
    }

    /// The decision in force.
    public private(set) var decision: Decision

    /// - Parameters:
    ///   - headerBytes: a link-layer header (14: Ethernet) + IPv4 20 (IPv6 40) + UDP 8 + RTP 12 +
    ///     8 with the transport-wide sequence extension + the SRTP tag (10 for
    ///     AES-CM-HMAC-SHA1-80, 16 for GCM).
    ///   - maximumFrameMilliseconds: the longest packet the peer takes (its `maxptime`; 60 when it
    ///     says nothing, 20 to keep packets short): the longest duration the controller chooses from
    ///     (``longerPacket(than:)``) not over it.
    public init(
        lossAdaptation: LossAdaptation, estimator: BandwidthEstimator = BandwidthEstimator(), usesTransportFeedback: Bool,
        headerBytes: Int = 72, maximumFrameMilliseconds: Int = 60, peerCapBitsPerSecond: Int? = nil, controlsRate: Bool = true
    ) {
        self.lossAdaptation = lossAdaptation
        self.estimator = estimator
        self.usesTransportFeedback = usesTransportFeedback
        self.controlsRate = controlsRate
        self.headerBytes = max(0, headerBytes)
        var longest = 20
        while let next = Self.longerPacket(than: longest), next <= maximumFrameMilliseconds { longest = next }
        self.maximumFrameMilliseconds = longest
        self.peerCapBitsPerSecond = peerCapBitsPerSecond
        decision = Decision(settings: lossAdaptation.settings, frameMilliseconds: 20, budgetBitsPerSecond: 0, sendBitsPerSecond: 0)
        decision = allocate(previous: nil)
        self.estimator.noteSending(bitsPerSecond: Double(decision.sendBitsPerSecond))
    }

    /// The budget now: 85 % of the estimate, capped by the peer.
    public var budgetBitsPerSecond: Int {
        guard controlsRate else { return .max }
        let estimate = Int(estimator.estimateBitsPerSecond * Self.budgetShare)
        return peerCapBitsPerSecond.map { min($0, estimate) } ?? estimate
    }

    // MARK: Inputs

    /// One packet of a transport-cc feedback (see ``BandwidthEstimator/packetReported(sentNanoseconds:bytes:arrivalMicroseconds:)``).
    public mutating func packetReported(sentNanoseconds: UInt64, bytes: Int, arrivalMicroseconds: Int64?) {
        estimator.packetReported(sentNanoseconds: sentNanoseconds, bytes: bytes, arrivalMicroseconds: arrivalMicroseconds)
    }

    /// A transport-cc feedback's packets are in.
    /// - Returns: the new decision when it changed.
    public mutating func feedbackEnded(now: UInt64) -> Decision? {
        estimator.feedbackEnded(now: now)
        return redecide()
    }

    /// A receiver report about our stream: its loss (and loss runs, from an XR block) drive the
    /// random-loss protection unless it is congestion's; with no transport-cc its loss and RTT
    /// drive the estimate too.
    /// - Returns: the new decision when it changed.
    public mutating func reportReceived(
        fractionLost: Double, lossRuns: (lost: Int, runs: Int)? = nil, roundTripSeconds: Double?, now: UInt64
    ) -> Decision? {
        estimator.reportReceived(
            fractionLost: fractionLost, roundTripSeconds: roundTripSeconds, usesTransportFeedback: usesTransportFeedback, now: now)
        // Congestion's loss is not the path's own: the protection hears of none.
        let congested = controlsRate && estimator.congested && (fractionLost > 0 || estimator.lossFraction > 0)
        _ = lossAdaptation.reportReceived(
            fractionLost: congested ? 0 : fractionLost, lossRuns: congested ? nil : lossRuns, now: MonotonicInstant(nanoseconds: now))
        return redecide()
    }

    private mutating func redecide() -> Decision? {
        let next = allocate(previous: decision)
        guard next != decision else { return nil }
        decision = next
        estimator.noteSending(bitsPerSecond: Double(next.sendBitsPerSecond))
        return next
    }

    // MARK: Allocation

    /// Bits per second a stream of `opus` bits per second in packets of `frameMilliseconds`,
    /// each with `redundantFrames` earlier frames again, puts on the wire.
    public func sendBitsPerSecond(opus: Int, frameMilliseconds: Int, redundantFrames: Int) -> Int {
        let frameBytes = Double(opus) * Double(frameMilliseconds) / 8000
        // RED: one byte for the primary's block header, four for each redundant one.
        let redBytes = redundantFrames > 0 ? 1 + 4 * Double(redundantFrames) : 0
        let packetBytes = frameBytes * Double(1 + redundantFrames) + redBytes + Double(headerBytes)
        return Int((packetBytes * 8 * 1000 / Double(frameMilliseconds)).rounded(.up))
    }

    private func allocate(previous: Decision?) -> Decision {
        let budget = budgetBitsPerSecond
        let wish = lossAdaptation.settings
        let shortest = 20
        guard controlsRate else {
            return Decision(
                settings: wish, frameMilliseconds: shortest, budgetBitsPerSecond: budget,
                sendBitsPerSecond: sendBitsPerSecond(opus: wish.bitrateBitsPerSecond, frameMilliseconds: shortest, redundantFrames: wish.redundantFrames))
        }
        // What the protection wants, at 20 ms, with less RED down to none while it does not fit.
        var frames = wish.redundantFrames
        while true {
            var settings = wish
            settings.redundantFrames = frames
            if frames < wish.redundantFrames && frames == 0 && wish.redundancy {
                // RED given up: FEC instead, sized by the loss (inside the bitrate).
                settings.expectedLossPercent = max(wish.expectedLossPercent, lossAdaptation.estimatedLossPercent)
                settings.inBandFEC = lossAdaptation.peerAcceptsFEC && settings.expectedLossPercent > 0
            }
            let needed = sendBitsPerSecond(opus: settings.bitrateBitsPerSecond, frameMilliseconds: shortest, redundantFrames: frames)
            // Returning to the shortest packets needs 10 % to spare.
            let margin = (previous?.frameMilliseconds ?? shortest) > shortest ? 1.1 : 1.0
            if Double(needed) * margin <= Double(budget) {
                return Decision(settings: settings, frameMilliseconds: shortest, budgetBitsPerSecond: budget, sendBitsPerSecond: needed)
            }
            if frames == 0 { break }
            frames -= 1
        }
        // The wished bitrate does not fit: what the budget leaves, at the shortest duration that
        // leaves Opus enough, no RED.
        var settings = wish
        settings.redundantFrames = 0
        if wish.redundancy {
            settings.expectedLossPercent = max(wish.expectedLossPercent, lossAdaptation.estimatedLossPercent)
            settings.inBandFEC = lossAdaptation.peerAcceptsFEC && settings.expectedLossPercent > 0
        }
        // (A plain loop: no collection, nothing allocated on the media thread.)
        var chosen = maximumFrameMilliseconds
        var next: Int? = 20
        while let duration = next, duration <= maximumFrameMilliseconds {
            next = Self.longerPacket(than: duration)
            let floor = duration == maximumFrameMilliseconds ? Self.minimumOpusBitsPerSecond : Self.opusFloor(atPacket: duration)
            // Moving to a shorter packet than the one in force needs 10 % to spare.
            let margin = (previous?.frameMilliseconds ?? duration) > duration ? 1.1 : 1.0
            if Double(opusBits(budget: budget, frameMilliseconds: duration)) >= Double(floor) * margin {
                chosen = duration
                break
            }
        }
        let opus = min(wish.bitrateBitsPerSecond, max(Self.minimumOpusBitsPerSecond, opusBits(budget: budget, frameMilliseconds: chosen)))
        settings.bitrateBitsPerSecond = opus
        return Decision(
            settings: settings, frameMilliseconds: chosen, budgetBitsPerSecond: budget,
            sendBitsPerSecond: sendBitsPerSecond(opus: opus, frameMilliseconds: chosen, redundantFrames: 0))
    }

    /// The Opus bitrate `budget` leaves after the headers of packets of `frameMilliseconds`.
    private func opusBits(budget: Int, frameMilliseconds: Int) -> Int {
        budget - headerBytes * 8 * 1000 / frameMilliseconds
    }
}
