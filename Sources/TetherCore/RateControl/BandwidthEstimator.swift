import Glibc

/// An estimate of the bandwidth the path gives our stream, in bits per second on the wire
/// (payload and every header: RTP, its extension, SRTP, UDP, IP), from what the peer reports
/// (sans-IO: every input carries `now`, monotonic nanoseconds).
///
/// - **With transport-cc** (the peer reports each packet's arrival): the delay gradient
///   (``DelayGradientDetector``) drives an AIMD rate — on overuse the estimate drops to 0.85 of
///   the rate the peer acknowledged receiving (at most once per round trip, 10–200 ms); while the
///   queue is steady it grows, by 8 % a second far from the last drop and by about one packet
///   per response time (RTT + 100 ms) near it; while it drains it holds. A queue that stays
///   (two feedbacks in a row over 15 ms, or one over 60 ms throughout) is overuse too. It never
///   runs ahead of 1.5 × the most the path acknowledged over the last five seconds + 10 kb/s
///   (the last second's alone fell with speech's pauses). The link capacity (an average of
///   the acknowledged rates at drops) starts over when a drop comes far under it (the link
///   narrowed), so after the link widens again the climb back is not held to a packet per
///   response time through the old range.
/// - **With receiver reports only** (baresip, GStreamer: no per-packet feedback): the round-trip
///   time over its minimum (the last 30 s) is the queue. `rttOverusePercent`-style rules: a
///   queue of `queueOveruseMilliseconds` (60) or more, or one growing by 30 ms or more between
///   reports, is overuse; under 15 ms, normal; the same AIMD rate follows, at the reports' pace.
/// - **Loss that comes with a queue is congestion.** Loss alone (a steady delay) is the path's
///   own: it does not lower the estimate (redundancy answers it, inside the estimate). Loss over
///   10 % while the queue is up (``queueMilliseconds`` over `congestedQueueMilliseconds`, or
///   overuse in the last two seconds) cuts the estimate by half the loss, once per 300 ms + RTT.
/// - **Start**: `startBitsPerSecond` before any feedback; while feedback shows neither queue nor
///   loss, the estimate grows fast (doubling every two seconds, `slowStartFactorPerSecond`) until
///   the first overuse or congestion loss, then as above.
///
/// A value type; no allocation.
public struct BandwidthEstimator: Sendable {
    /// What drives the estimate now.
    public enum State: String, Sendable, Equatable {
        /// Growing (the queue is steady).
        case increasing
        /// Holding (the queue drains, or just after a drop).
        case holding
        /// Dropping (the queue grows, or loss comes with it).
        case decreasing
    }

    public var minimumBitsPerSecond: Double
    public var maximumBitsPerSecond: Double
    /// The estimate before any feedback.
    public let startBitsPerSecond: Double
    public var beta = 0.85
    public var slowStartFactorPerSecond = 1.41
    public var queueOveruseMilliseconds = 60.0
    public var queueClearMilliseconds = 15.0
    public var congestedQueueMilliseconds = 30.0
    /// A queue that stays this long (ms) through two feedbacks in a row (their smallest
    /// queueing delay) is overuse even when it no longer grows: a link filled to the brim holds
    /// a standing queue and a steady delay, which the gradient alone reads as normal.
    public var standingQueueMilliseconds = 15.0
    private var standingQueueFeedbacks = 0
    /// When a standing queue was first taken for overuse, and how long it was (ms).
    private var standingSince: (at: UInt64, queue: Double)?
    /// Bytes each packet carries below what the feedback counts (UDP, IPv4 and a link-layer
    /// header: 8 + 20 + 14), added to the acknowledged rate.
    public var belowFeedbackBytes = 42

    /// The estimate, bits per second on the wire.
    public private(set) var estimateBitsPerSecond: Double
    public private(set) var state: State = .increasing
    /// The queue's use as last judged (delay gradient with transport-cc, RTT without).
    public private(set) var usage: DelayGradientDetector.Usage = .normal
    /// The queueing delay as last measured, in milliseconds (one-way delay over its minimum
    /// with transport-cc; RTT over its minimum without).
    public private(set) var queueMilliseconds = 0.0
    /// The rate the peer acknowledged receiving (transport-cc) over the last second, bits/s.
    public private(set) var acknowledgedBitsPerSecond: Double?
    /// The loss the last feedback or report showed, 0…1.
    public private(set) var lossFraction = 0.0
    /// Whether loss now is congestion's (it comes with a queue), not the path's own.
    /// (Loss under 1 % is none: the loss over feedback decays by its age and never reaches 0
    /// exactly, so one packet lost would otherwise read as congestion loss for the rest of the
    /// call — as it did in the statistics.)
    public var lossIsCongestion: Bool { lossFraction >= 0.01 && congested }
    /// Whether the path shows a queue now, or showed overuse in the last two seconds.
    public private(set) var congested = false
    /// Whether the call is still in its start (no overuse or congestion loss seen yet).
    public private(set) var inSlowStart = true
    /// The round-trip time, seconds (from the reports; nil until known).
    public private(set) var roundTripSeconds: Double?

    private var detector = DelayGradientDetector()
    private var lastUpdate: UInt64?
    private var lastDecrease: UInt64 = 0
    private var lastLossDecrease: UInt64 = 0
    private var lastOveruse: UInt64 = 0
    /// The link capacity around the last drops (acknowledged rates there), and its spread.
    private var linkCapacity: Double?
    private var linkCapacityVariance = 0.4
    /// Acknowledged bytes over a sliding second: a ring of (arrival µs, bytes).
    private var acked = AcknowledgedRate()
    /// One-way delay (arrival − send) minimum over the window, microseconds.
    private var minimumOneWay = RunningMinimum(windowNanoseconds: 30_000_000_000)
    private var minimumRoundTrip = RunningMinimum(windowNanoseconds: 30_000_000_000)
    /// The highest acknowledged rate over the last five seconds (negated: a running minimum).
    private var peakAcknowledged = RunningMinimum(windowNanoseconds: 5_000_000_000)
    private var lastRoundTripQueue: Double?
    /// Feedback in the current report: packets and of those lost, and the smallest queueing
    /// delay of its packets (ms).
    private var feedbackPackets = 0
    private var feedbackLost = 0
    private var feedbackMinimumQueue = Double.infinity
    /// Packets the last second of feedback reported, and lost (for the loss over feedback).
    private var recentPackets = 0.0
    private var recentLost = 0.0
    /// Loss without a queue is the path's own, or congestion the delay cannot show (a policer,
    /// or a queue that was full before the first measurement): sending less tells which. While
    /// `probe` runs the estimate is held at what got through (the acknowledged rate, or what we
    /// send less the loss). Random loss takes the same share at any rate; congestion's share
    /// falls as the rate does (what gets through is the link's rate). So after each step (two
    /// seconds, at least four round trips): loss under 2 % says congestion (the lower rate
    /// stays); loss down by more than 15 % says congestion too, and the probe steps down again
    /// to what got through; loss that did not fall says the path's own (the rate goes back,
    /// and loss up to that is not probed again for `probeHoldoffSeconds`).
    private struct LossProbe: Sendable {
        var fromEstimate: Double
        var target: Double
        var loss: Double
        var started: UInt64
    }
    /// What the sender sends now, bits/s on the wire (``noteSending(bitsPerSecond:)``).
    private var sendingBitsPerSecond: Double?
    private var probe: LossProbe?
    private var lastProbe: UInt64 = 0
    /// The loss a probe found the path's own (0: none found).
    public private(set) var randomLossFloor = 0.0
    public var probeHoldoffSeconds = 30.0
    /// Loss over this without a queue starts a probe.
    public var probeLossThreshold = 0.1

    public init(startBitsPerSecond: Double = 64_000, minimumBitsPerSecond: Double = 12_000, maximumBitsPerSecond: Double = 300_000) {
        self.startBitsPerSecond = startBitsPerSecond
        self.minimumBitsPerSecond = minimumBitsPerSecond
        self.maximumBitsPerSecond = max(minimumBitsPerSecond, maximumBitsPerSecond)
        estimateBitsPerSecond = min(max(startBitsPerSecond, minimumBitsPerSecond), maximumBitsPerSecond)
    }

    // MARK: Transport-cc

    /// One packet a transport-cc feedback reported: sent at `sentNanoseconds`, `bytes` above
    /// UDP, arrived at `arrivalMicroseconds` on the receiver's clock or lost (nil). Call for
    /// each packet of a feedback in order, then ``feedbackEnded(now:)``.
    public mutating func packetReported(sentNanoseconds: UInt64, bytes: Int, arrivalMicroseconds: Int64?) {
        feedbackPackets += 1
        guard let arrival = arrivalMicroseconds else {
            feedbackLost += 1
            return
        }
        usage = detector.packetArrived(sentNanoseconds: sentNanoseconds, arrivalMicroseconds: arrival, bytes: bytes)
        acked.add(arrivalMicroseconds: arrival, bytes: bytes + belowFeedbackBytes)
        let oneWay = Double(arrival) - Double(sentNanoseconds / 1000)
        minimumOneWay.add(oneWay, at: sentNanoseconds)
        queueMilliseconds = max(0, (oneWay - minimumOneWay.value) / 1000)
        feedbackMinimumQueue = min(feedbackMinimumQueue, queueMilliseconds)
    }

    /// Whether transport-cc feedback has come (the queue is then measured packet by packet).
    private var usesFeedback = false

    /// The feedback's packets are in: updates the estimate.
    /// - Returns: the estimate (bits per second on the wire).
    @discardableResult
    public mutating func feedbackEnded(now: UInt64) -> Double {
        usesFeedback = true
        let loss = feedbackPackets > 0 ? Double(feedbackLost) / Double(feedbackPackets) : 0
        // The loss over about the last second of feedback.
        let elapsed = lastUpdate.map { Double(now &- $0) / 1e9 } ?? 0
        let keep = max(0, 1 - min(1, elapsed))
        recentPackets = recentPackets * keep + Double(feedbackPackets)
        recentLost = recentLost * keep + Double(feedbackLost)
        lossFraction = recentPackets > 0 ? recentLost / recentPackets : loss
        // A standing queue is overuse too, unless the gradient says it drains.
        var judged = usage
        if feedbackMinimumQueue.isFinite, feedbackMinimumQueue >= standingQueueMilliseconds {
            standingQueueFeedbacks += 1
        } else {
            standingQueueFeedbacks = 0
        }
        // Two feedbacks in a row over the standing threshold, or one whose every packet queued
        // past the overuse threshold (a token bucket's queue grows a few hundred ms a second
        // once its bucket is empty: waiting for a second feedback, 100–500 ms later, let it
        // reach 300 ms on a 24 kb/s link).
        let overThreshold = feedbackMinimumQueue.isFinite && feedbackMinimumQueue >= queueOveruseMilliseconds
        if standingQueueFeedbacks >= 2 || overThreshold, usage != .underusing {
            judged = .overusing
            if standingSince == nil { standingSince = (now, feedbackMinimumQueue) }
        }
        // A queue drains when the rate drops below the link's. One that stays where it was 1.5 s
        // after the rate dropped for it is no queue: the path's delay itself grew (a narrower
        // link takes longer to pass each packet, a longer route). The minimum starts over.
        if let since = standingSince, now &- since.at >= 1_500_000_000 {
            if feedbackMinimumQueue.isFinite, feedbackMinimumQueue > since.queue - 5 {
                minimumOneWay.reset()
                judged = usage
                standingQueueFeedbacks = 0
            }
            standingSince = nil
        }
        feedbackPackets = 0
        feedbackLost = 0
        feedbackMinimumQueue = .infinity
        acknowledgedBitsPerSecond = acked.bitsPerSecond
        if let acknowledged = acknowledgedBitsPerSecond { peakAcknowledged.add(-acknowledged, at: now) }
        usage = judged
        return update(usage: judged, now: now)
    }

    /// What the sender sends now (bits per second on the wire): the loss probe holds the
    /// estimate at what of it got through.
    public mutating func noteSending(bitsPerSecond: Double) {
        sendingBitsPerSecond = bitsPerSecond
    }

    // MARK: Receiver reports

    /// A receiver report about our stream: its fraction lost and, when it carried LSR/DLSR, the
    /// round trip. With transport-cc its loss and RTT only refine the feedback's; without, they
    /// are all there is (the RTT's growth over its minimum stands for the queue).
    @discardableResult
    public mutating func reportReceived(fractionLost: Double, roundTripSeconds: Double?, usesTransportFeedback: Bool, now: UInt64) -> Double {
        if let rtt = roundTripSeconds, rtt >= 0, rtt < 60 {
            self.roundTripSeconds = rtt
            minimumRoundTrip.add(rtt * 1000, at: now)
        }
        guard !usesTransportFeedback else { return estimateBitsPerSecond }
        lossFraction = min(1, max(0, fractionLost))
        var judged = DelayGradientDetector.Usage.normal
        if let rtt = roundTripSeconds, rtt >= 0, rtt < 60 {
            let queue = max(0, rtt * 1000 - minimumRoundTrip.value)
            let growth = queue - (lastRoundTripQueue ?? queue)
            lastRoundTripQueue = queue
            queueMilliseconds = queue
            if queue >= queueOveruseMilliseconds || growth >= 30 {
                judged = .overusing
            } else if queue >= queueClearMilliseconds {
                judged = growth < -10 ? .underusing : .normal
            }
        }
        usage = judged
        return update(usage: judged, now: now)
    }

    // MARK: The rate

    private mutating func update(usage: DelayGradientDetector.Usage, now: UInt64) -> Double {
        let elapsed = lastUpdate.map { min(1, Double(now &- $0) / 1e9) } ?? 0
        lastUpdate = now
        if usage == .overusing { lastOveruse = now }
        congested = queueMilliseconds >= congestedQueueMilliseconds || (lastOveruse != 0 && now &- lastOveruse < 2_000_000_000)
        let rtt = roundTripSeconds ?? 0.1
        var estimate = estimateBitsPerSecond
        switch usage {
        case .overusing:
            let interval = UInt64(min(0.2, max(0.01, rtt)) * 1e9)
            if state != .decreasing || now &- lastDecrease >= interval {
                // 0.85 of what the path carried (a second drop soon after is of the same rate,
                // not compounded).
                let basis = acknowledgedBitsPerSecond ?? estimate
                let dropped = beta * basis
                if let capacity = linkCapacity, basis < capacity - 2 * capacityDeviation(capacity) {
                    // Far under where it used to drop: the link narrowed. The capacity starts
                    // over from here (an average would take dozens of drops to come down, and
                    // hold the growth to its slow pace all the way back up after the link widens).
                    linkCapacity = basis
                } else if let capacity = linkCapacity {
                    // libwebrtc's link capacity: an average of the rates at drops, its variance
                    // normalised by the capacity in kb/s.
                    linkCapacity = 0.95 * capacity + 0.05 * basis
                    let error = (capacity - basis) / 1000
                    linkCapacityVariance = min(2.5, max(0.4, 0.95 * linkCapacityVariance + 0.05 * error * error / max(1, capacity / 1000)))
                } else {
                    linkCapacity = basis
                }
                estimate = min(estimate, dropped)
                lastDecrease = now
                inSlowStart = false
            }
            state = .decreasing
        case .underusing:
            state = .holding
        case .normal:
            if state == .decreasing { state = .holding } else { state = .increasing }
            if state == .increasing {
                estimate = increased(estimate, elapsed: elapsed, rtt: rtt)
            }
        }
        // Loss with a queue: congestion, cut by half the loss (once per 300 ms + RTT).
        if lossFraction > 0.1 && congested && now &- lastLossDecrease >= UInt64((0.3 + rtt) * 1e9) {
            estimate = min(estimate, estimate * (1 - 0.5 * lossFraction))
            lastLossDecrease = now
            inSlowStart = false
            state = .decreasing
            probe = nil
        } else if !usesFeedback || queueMilliseconds >= 5 {
            // With transport-cc the queue is measured packet by packet: loss with none at all is
            // the path's own (a drop-tail queue drops only when full). Without, probe.
            estimate = probeLoss(estimate, now: now, rtt: rtt)
        }
        // Never far ahead of what the path has carried lately: the peak of the last five
        // seconds, not the last second's (speech's pauses send less, and held the estimate
        // under the rate it had just carried while a widened link was being found).
        if let acknowledged = acknowledgedBitsPerSecond, !inSlowStart {
            estimate = min(estimate, 1.5 * max(acknowledged, -peakAcknowledged.value) + 10_000)
        }
        estimateBitsPerSecond = min(maximumBitsPerSecond, max(minimumBitsPerSecond, estimate))
        return estimateBitsPerSecond
    }

    /// The loss probe (see `probe`): started by loss over the threshold (and over what was
    /// found the path's own), judged after two seconds and at least two reports.
    private mutating func probeLoss(_ estimate: Double, now: UInt64, rtt: Double) -> Double {
        if let running = probe {
            guard now &- running.started >= UInt64(max(2, 4 * rtt) * 1e9) else { return min(estimate, running.target) }
            if lossFraction < 0.02 {
                // Congestion: the loss went with the rate. The lower rate stays.
                probe = nil
                lastProbe = now
                inSlowStart = false
                lastDecrease = now
                if linkCapacity == nil { linkCapacity = running.target }
                return min(estimate, running.target)
            }
            if lossFraction < 0.85 * running.loss {
                // Falling with the rate: congestion, not yet below the link. Down to what got through.
                let delivered = acknowledgedBitsPerSecond ?? (sendingBitsPerSecond ?? running.target) * (1 - lossFraction)
                inSlowStart = false
                probe = LossProbe(
                    fromEstimate: running.fromEstimate, target: max(minimumBitsPerSecond, min(running.target, delivered)),
                    loss: lossFraction, started: now)
                return min(estimate, probe!.target)
            }
            probe = nil
            lastProbe = now
            // The path's own: back to where it was.
            randomLossFloor = max(randomLossFloor, running.loss)
            return max(estimate, running.fromEstimate)
        }
        let quiet = lastProbe != 0 && now &- lastProbe < UInt64(probeHoldoffSeconds * 1e9)
        guard lossFraction > probeLossThreshold, lossFraction > 1.5 * randomLossFloor + 0.05 || !quiet else { return estimate }
        guard !quiet || lossFraction > 1.5 * randomLossFloor + 0.05 else { return estimate }
        // What got through: the acknowledged rate, or what we send less the loss.
        let delivered = acknowledgedBitsPerSecond ?? (sendingBitsPerSecond ?? estimate) * (1 - lossFraction)
        let target = max(minimumBitsPerSecond, min(0.7 * estimate, delivered))
        probe = LossProbe(fromEstimate: estimate, target: target, loss: lossFraction, started: now)
        return target
    }

    /// The link capacity's standard deviation, bits per second (libwebrtc's: the variance is
    /// normalised by the capacity in kb/s).
    private func capacityDeviation(_ capacity: Double) -> Double {
        sqrt(linkCapacityVariance * capacity / 1000) * 1000
    }

    private mutating func increased(_ estimate: Double, elapsed: Double, rtt: Double) -> Double {
        if inSlowStart {
            return estimate * pow(slowStartFactorPerSecond, elapsed)
        }
        if let capacity = linkCapacity {
            let deviation = capacityDeviation(capacity)
            if estimate > capacity + 2 * deviation {
                linkCapacity = nil  // the path changed: far above where it used to drop
            } else if estimate >= capacity - 2 * deviation {
                // Near the capacity: about one packet (~100 bytes) per response time, at most
                // 6 % of the capacity a second, between 2 and 4 kb/s (libwebrtc's floor of 4 is a
                // video stream's; an audio stream's packets are small). A flat 2 kb/s took 9–17 s
                // to climb back through the band a 40 kb/s token bucket left when it widened.
                let response = rtt + 0.1
                let step = min(4_000, max(2_000, 0.06 * capacity))
                return estimate + min(step, 800 / response) * elapsed
            }
            return estimate + max(1_000 * elapsed, estimate * (pow(1.08, elapsed) - 1))
        }
        // No capacity known (never dropped, or far above where it last did): a voice stream's
        // range is narrow (tens of kb/s), so it grows by a fifth a second.
        return estimate + max(1_000 * elapsed, estimate * (pow(1.2, elapsed) - 1))
    }
}

/// The bytes acknowledged over the last second of arrivals (transport-cc), in a ring of 64.
struct AcknowledgedRate: Sendable {
    private var arrivals = InlineArray<64, Int64>(repeating: 0)
    private var sizes = InlineArray<64, Int>(repeating: 0)
    private var count = 0
    private var next = 0

    mutating func add(arrivalMicroseconds: Int64, bytes: Int) {
        arrivals[next] = arrivalMicroseconds
        sizes[next] = bytes
        next = (next + 1) % 64
        count = min(count + 1, 64)
    }

    /// Bits per second over the arrivals of the last second (nil with fewer than 5, or under 200 ms).
    var bitsPerSecond: Double? {
        guard count >= 5 else { return nil }
        let newest = arrivals[(next + 63) % 64]
        var oldest = newest
        var bytes = 0
        var oldestBytes = 0
        for i in 0..<count {
            let index = (next + 63 - i) % 64
            guard newest - arrivals[index] <= 1_000_000 else { break }
            oldest = arrivals[index]
            bytes += sizes[index]
            oldestBytes = sizes[index]
        }
        let span = Double(newest - oldest) / 1e6
        guard span >= 0.2 else { return nil }
        // The span runs from the oldest packet's arrival: its bytes came before it. (Counting
        // them read 9 packets of 120 ms as 9/8 of the rate, and the rate at drops 14 % high.)
        return Double((bytes - oldestBytes) * 8) / span
    }
}

/// The minimum of samples over a sliding window of time (the newest kept per 1/8 of the window).
struct RunningMinimum: Sendable {
    let windowNanoseconds: UInt64
    private var buckets = InlineArray<8, Double>(repeating: .infinity)
    private var bucketStarts = InlineArray<8, UInt64>(repeating: 0)
    private var current = 0
    private var started = false

    init(windowNanoseconds: UInt64) { self.windowNanoseconds = windowNanoseconds }

    mutating func add(_ sample: Double, at now: UInt64) {
        let bucket = max(1, windowNanoseconds / UInt64(buckets.count))
        if !started {
            started = true
            bucketStarts[0] = now
        } else if now &- bucketStarts[current] >= bucket {
            current = (current + 1) % buckets.count
            bucketStarts[current] = now
            buckets[current] = .infinity
        }
        buckets[current] = min(buckets[current], sample)
    }

    /// Forgets every sample.
    mutating func reset() {
        buckets = InlineArray<8, Double>(repeating: .infinity)
        started = false
        current = 0
    }

    /// The minimum over the window (0 before any sample).
    var value: Double {
        var m = Double.infinity
        for i in buckets.indices { m = min(m, buckets[i]) }
        return m.isFinite ? m : 0
    }
}
