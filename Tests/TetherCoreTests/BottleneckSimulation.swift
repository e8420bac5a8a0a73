import TetherCore

/// A path with a bottleneck, simulated on a manual clock: a token-bucket link (what `tc tbf`
/// does: `rate`, a bucket of `burstBytes`, and a queue that drops what would wait longer than
/// `queueMilliseconds`), a fixed
/// one-way propagation delay each way, seeded random loss before the queue, and optionally
/// competing traffic that takes a share of the link. A ``SendRateController`` sends through it;
/// the receiver answers with transport-cc feedback (every 100 ms) or receiver reports (every
/// second), as a peer would.
///
/// The simulation hands the controller what a real call would: each packet's send time and
/// size, its arrival on the receiver's clock (which has its own origin) or its loss, the
/// fraction lost and RTT of each report. Everything is deterministic.
struct BottleneckSimulation {
    struct Link {
        var rateBitsPerSecond: Double
        var queueMilliseconds: Double = 300
        var propagationMilliseconds: Double = 20
        var randomLoss: Double = 0
        /// Another flow through the same queue, bits per second, sent smoothly.
        var competingBitsPerSecond: Double = 0
        /// The token bucket's depth, bytes (`tc tbf … burst`: the lab shapes with 3000): a packet
        /// leaves at once while the bucket holds its size, so a stream a little over the rate
        /// shows no queue until the bucket is empty. 0: every packet waits its own transmission
        /// time, as on a slow serial link.
        var burstBytes: Double = 0
    }

    struct Packet {
        var sentNanoseconds: UInt64
        var bytes: Int
        var sequence: Int
        var arrivalNanoseconds: UInt64?
    }

    /// One second's view, for assertions.
    struct Second {
        var sendBitsPerSecond: Double
        var queueMilliseconds: Double
        var lossFraction: Double
        var frameMilliseconds: Int
        var opusBitsPerSecond: Int
        var redundantFrames: Int
        var estimateBitsPerSecond: Double
    }

    var controller: SendRateController
    var link: Link
    let usesFeedback: Bool
    private(set) var seconds: [Second] = []
    private var now: UInt64 = 1_000_000_000
    /// When the bottleneck is free again (the token bucket's drain), nanoseconds.
    private var linkFreeAt: UInt64 = 0
    /// The bucket's tokens (bytes) at `linkFreeAt`.
    private var tokens: Double = 0
    private var nextSendAt: UInt64 = 1_000_000_000
    private var nextFeedbackAt: UInt64 = 1_100_000_000
    private var nextReportAt: UInt64 = 2_000_000_000
    private var competingCredit = 0.0
    private var sequence = 0
    private var rng: UInt64
    private var inFlight: [Packet] = []  // sent, not yet reported
    private var reportWindow = (expected: 0, lost: 0)
    private var secondStats = (bytes: 0, packets: 0, lost: 0, queue: 0.0)
    private var nextSecond: UInt64 = 2_000_000_000
    /// The receiver's clock is ours plus this (another origin).
    private let receiverOffsetMicroseconds: Int64 = 7_777_000_000

    init(controller: SendRateController, link: Link, seed: UInt64 = 1) {
        self.controller = controller
        self.link = link
        usesFeedback = controller.usesTransportFeedback
        rng = seed | 1
    }

    private mutating func random() -> Double {
        rng ^= rng << 13
        rng ^= rng >> 7
        rng ^= rng << 17
        return Double(rng >> 11) / Double(1 << 53)
    }

    /// Runs for `duration` seconds; `change` is called at every whole second with the second's
    /// index, to change the link.
    mutating func run(seconds duration: Int, change: (Int, inout Link) -> Void = { _, _ in }) {
        let end = now + UInt64(duration) * 1_000_000_000
        var secondIndex = seconds.count
        change(secondIndex, &link)
        while now < end {
            // The next event: a send, a feedback, a report, a second's end.
            let next = min(nextSendAt, usesFeedback ? nextFeedbackAt : UInt64.max, nextReportAt, nextSecond)
            advanceLink(to: next)
            now = next
            if now == nextSendAt { send() }
            if usesFeedback && now == nextFeedbackAt {
                deliverFeedback()
                nextFeedbackAt += 100_000_000
            }
            if now == nextReportAt {
                deliverReport()
                nextReportAt += 1_000_000_000
            }
            if now == nextSecond {
                closeSecond()
                nextSecond += 1_000_000_000
                secondIndex += 1
                change(secondIndex, &link)
            }
        }
    }

    /// Competing traffic fills the queue as it comes.
    private mutating func advanceLink(to time: UInt64) {
        guard link.competingBitsPerSecond > 0, time > now else { return }
        competingCredit += link.competingBitsPerSecond * Double(time - now) / 1e9 / 8
        while competingCredit >= 1200 {
            competingCredit -= 1200
            _ = enqueue(bytes: 1200 + 42, at: time)
        }
    }

    /// The token bucket: the packet leaves when the link has sent what was before it; dropped
    /// when it would wait longer than the queue allows. Returns when it is on the wire, or nil.
    private mutating func enqueue(bytes: Int, at time: UInt64) -> UInt64? {
        let start = max(time, linkFreeAt)
        let wait = Double(start - time) / 1e6
        guard wait <= link.queueMilliseconds else { return nil }
        let bytesPerNanosecond = link.rateBitsPerSecond / 8 / 1e9
        guard link.burstBytes > 0 else {
            linkFreeAt = start + UInt64(Double(bytes) / bytesPerNanosecond)
            return linkFreeAt
        }
        // Tokens earned since the last packet left (the bucket holds at most `burstBytes`, and
        // always one packet's worth: a packet larger than the bucket still passes at the rate).
        let available = min(max(link.burstBytes, Double(bytes)), tokens + Double(start - linkFreeAt) * bytesPerNanosecond)
        if available >= Double(bytes) {
            tokens = available - Double(bytes)
            linkFreeAt = start
        } else {
            linkFreeAt = start + UInt64((Double(bytes) - available) / bytesPerNanosecond)
            tokens = 0
        }
        return linkFreeAt
    }

    private mutating func send() {
        let decision = controller.decision
        let frame = decision.frameMilliseconds
        let opusBytes = Double(decision.settings.bitrateBitsPerSecond) * Double(frame) / 8000
        let red = decision.settings.redundantFrames
        let payload = Int(opusBytes * Double(1 + red)) + (red > 0 ? 1 + 4 * red : 0)
        let bytes = payload + controller.headerBytes - 42  // above UDP, as the history counts it
        var packet = Packet(sentNanoseconds: now, bytes: bytes, sequence: sequence, arrivalNanoseconds: nil)
        sequence += 1
        secondStats.bytes += bytes + 42
        secondStats.packets += 1
        if random() >= link.randomLoss, let leaves = enqueue(bytes: bytes + 42, at: now) {
            packet.arrivalNanoseconds = leaves + UInt64(link.propagationMilliseconds * 1e6)
            secondStats.queue = max(secondStats.queue, Double(leaves - now) / 1e6)
        } else {
            secondStats.lost += 1
        }
        inFlight.append(packet)
        nextSendAt = now + UInt64(frame) * 1_000_000
    }

    /// Feedback about every packet that has arrived by now, and the lost ones before it,
    /// reaching the sender one propagation delay later (applied at once: what matters is what
    /// it says).
    private mutating func deliverFeedback() {
        let backDelay = UInt64(link.propagationMilliseconds * 1e6)
        guard now > backDelay else { return }
        let horizon = now - backDelay
        var reported = 0
        for packet in inFlight {
            if let arrival = packet.arrivalNanoseconds, arrival > horizon { break }
            let arrival = packet.arrivalNanoseconds.map { Int64($0 / 1000) + receiverOffsetMicroseconds }
            controller.packetReported(sentNanoseconds: packet.sentNanoseconds, bytes: packet.bytes, arrivalMicroseconds: arrival)
            reportWindow.expected += 1
            if arrival == nil { reportWindow.lost += 1 }
            reported += 1
        }
        inFlight.removeFirst(reported)
        if reported > 0 { _ = controller.feedbackEnded(now: now) }
    }

    /// A receiver report: the fraction lost since the last one, and the RTT (propagation both
    /// ways plus the queue a packet met lately).
    private mutating func deliverReport() {
        if !usesFeedback {
            // Without feedback the report is all there is: count what has arrived or been lost by now.
            var counted = 0
            for packet in inFlight {
                if let arrival = packet.arrivalNanoseconds, arrival > now { break }
                reportWindow.expected += 1
                if packet.arrivalNanoseconds == nil { reportWindow.lost += 1 }
                counted += 1
            }
            inFlight.removeFirst(counted)
        }
        let fraction = reportWindow.expected > 0 ? Double(reportWindow.lost) / Double(reportWindow.expected) : 0
        reportWindow = (0, 0)
        let queue = Double(max(now, linkFreeAt) - now) / 1e9
        let rtt = 2 * link.propagationMilliseconds / 1000 + queue
        _ = controller.reportReceived(fractionLost: (fraction * 256).rounded(.down) / 256, roundTripSeconds: rtt, now: now)
    }

    private mutating func closeSecond() {
        let decision = controller.decision
        seconds.append(
            Second(
                sendBitsPerSecond: Double(secondStats.bytes * 8), queueMilliseconds: secondStats.queue,
                lossFraction: secondStats.packets > 0 ? Double(secondStats.lost) / Double(secondStats.packets) : 0,
                frameMilliseconds: decision.frameMilliseconds, opusBitsPerSecond: decision.settings.bitrateBitsPerSecond,
                redundantFrames: decision.settings.redundantFrames, estimateBitsPerSecond: controller.estimator.estimateBitsPerSecond))
        secondStats = (0, 0, 0, 0)
    }
}
