/// Whether the path's queue is growing, from each packet's send and arrival times (sans-IO): the
/// delay-based overuse detection of Google Congestion Control (draft-ietf-rmcat-gcc-02, as
/// libwebrtc does it): packets sent within 5 ms of each other form a group; for consecutive
/// groups the difference between their arrival spacing and their send spacing is the change in
/// queueing delay; a trendline over the last 20 groups' accumulated, smoothed delay gives the
/// delay gradient; against an adaptive threshold that gradient says overusing (the queue grows),
/// underusing (it drains) or normal.
///
/// Send times are ours (monotonic nanoseconds), arrival times the receiver's (microseconds on
/// its own clock): only differences of each are used, so the clocks need no common origin.
/// A value type; no allocation.
public struct DelayGradientDetector: Sendable {
    /// The path's use as the queue shows it.
    public enum Usage: String, Sendable, Equatable {
        /// The queue neither grows nor drains.
        case normal
        /// The queue grows: send less.
        case overusing
        /// The queue drains: hold the rate until it is empty.
        case underusing
    }

    /// Packets sent within this of a group's first belong to it, in milliseconds.
    public var burstMilliseconds = 5.0
    /// Groups in the trendline's window.
    public static let windowGroups = 20
    /// The smoothing of the accumulated delay (the weight of the previous value).
    public var smoothing = 0.9
    /// The trend is scaled by this (and by the number of deltas, up to 60) before comparing.
    public var thresholdGain = 4.0
    /// The adaptive threshold's rates of change, up and down, per millisecond, and its bounds.
    public var thresholdUp = 0.0087
    public var thresholdDown = 0.039
    public var thresholdBounds: ClosedRange<Double> = 6...600
    /// A trend must stay over the threshold this long (ms, of send time) to count as overuse.
    public var overuseMilliseconds = 10.0

    /// What the detector says now.
    public private(set) var usage: Usage = .normal
    /// The current threshold and the last scaled trend (for statistics and tests).
    public private(set) var threshold = 12.5
    public private(set) var modifiedTrend = 0.0
    /// The accumulated queueing delay change since the window began, smoothed, in milliseconds:
    /// how far above its start the one-way delay runs.
    public private(set) var smoothedDelayMilliseconds = 0.0

    private struct Group {
        var firstSentNanoseconds: UInt64
        var lastSentNanoseconds: UInt64
        var lastArrivalMicroseconds: Int64
        var bytes: Int
    }

    private var current: Group?
    private var previous: Group?
    private var accumulatedDelay = 0.0
    private var deltas = 0
    /// The window: arrival time (ms since the first) and smoothed delay, a ring.
    private var windowX = InlineArray<20, Double>(repeating: 0)
    private var windowY = InlineArray<20, Double>(repeating: 0)
    private var windowCount = 0
    private var windowNext = 0
    private var firstArrivalMicroseconds: Int64?
    private var timeOverUsing = -1.0
    private var overuseCounter = 0
    private var previousTrend = 0.0
    private var lastThresholdUpdateMilliseconds: Double?

    public init() {}

    /// Takes one packet the peer received (in send order, as feedback reports them).
    /// - Returns: the usage after it.
    @discardableResult
    public mutating func packetArrived(sentNanoseconds: UInt64, arrivalMicroseconds: Int64, bytes: Int) -> Usage {
        guard var group = current else {
            current = Group(
                firstSentNanoseconds: sentNanoseconds, lastSentNanoseconds: sentNanoseconds,
                lastArrivalMicroseconds: arrivalMicroseconds, bytes: bytes)
            return usage
        }
        // A packet sent before the group began (reordered in the feedback): ignored.
        guard sentNanoseconds >= group.firstSentNanoseconds else { return usage }
        if Double(sentNanoseconds - group.firstSentNanoseconds) / 1e6 <= burstMilliseconds {
            group.lastSentNanoseconds = max(group.lastSentNanoseconds, sentNanoseconds)
            group.lastArrivalMicroseconds = max(group.lastArrivalMicroseconds, arrivalMicroseconds)
            group.bytes += bytes
            current = group
            return usage
        }
        // The group is complete: compare it with the one before.
        if let before = previous {
            let sendDelta = Double(group.lastSentNanoseconds &- before.lastSentNanoseconds) / 1e6
            let arrivalDelta = Double(group.lastArrivalMicroseconds - before.lastArrivalMicroseconds) / 1e3
            // A jump of the receiver's clock, or a reordering of whole groups: start over.
            if arrivalDelta < -1000 || arrivalDelta > 3000 || sendDelta <= 0 {
                reset()
            } else {
                update(delayDelta: arrivalDelta - sendDelta, sendDelta: sendDelta, arrivalMicroseconds: group.lastArrivalMicroseconds)
            }
        }
        previous = group
        current = Group(
            firstSentNanoseconds: sentNanoseconds, lastSentNanoseconds: sentNanoseconds,
            lastArrivalMicroseconds: arrivalMicroseconds, bytes: bytes)
        return usage
    }

    /// Forgets the history (a new path: the queue it measured is gone).
    public mutating func reset() {
        let keep = (burstMilliseconds, smoothing, thresholdGain, thresholdUp, thresholdDown, thresholdBounds, overuseMilliseconds)
        self = DelayGradientDetector()
        (burstMilliseconds, smoothing, thresholdGain, thresholdUp, thresholdDown, thresholdBounds, overuseMilliseconds) = keep
    }

    private mutating func update(delayDelta: Double, sendDelta: Double, arrivalMicroseconds: Int64) {
        deltas = min(deltas + 1, 1000)
        accumulatedDelay += delayDelta
        smoothedDelayMilliseconds = smoothing * smoothedDelayMilliseconds + (1 - smoothing) * accumulatedDelay
        let first = firstArrivalMicroseconds ?? arrivalMicroseconds
        firstArrivalMicroseconds = first
        let x = Double(arrivalMicroseconds - first) / 1e3
        windowX[windowNext] = x
        windowY[windowNext] = smoothedDelayMilliseconds
        windowNext = (windowNext + 1) % Self.windowGroups
        windowCount = min(windowCount + 1, Self.windowGroups)
        var trend = previousTrend
        if windowCount == Self.windowGroups, let slope = slope() { trend = slope }
        detect(trend: trend, sendDelta: sendDelta, nowMilliseconds: x)
    }

    /// The least-squares slope of the window's delay against its arrival times.
    private func slope() -> Double? {
        var sumX = 0.0
        var sumY = 0.0
        for i in 0..<windowCount {
            sumX += windowX[i]
            sumY += windowY[i]
        }
        let meanX = sumX / Double(windowCount)
        let meanY = sumY / Double(windowCount)
        var numerator = 0.0
        var denominator = 0.0
        for i in 0..<windowCount {
            let dx = windowX[i] - meanX
            numerator += dx * (windowY[i] - meanY)
            denominator += dx * dx
        }
        return denominator > 0 ? numerator / denominator : nil
    }

    private mutating func detect(trend: Double, sendDelta: Double, nowMilliseconds: Double) {
        guard deltas >= 2 else {
            usage = .normal
            previousTrend = trend
            return
        }
        let scaled = Double(min(deltas, 60)) * trend * thresholdGain
        modifiedTrend = scaled
        if scaled > threshold {
            timeOverUsing = timeOverUsing < 0 ? sendDelta / 2 : timeOverUsing + sendDelta
            overuseCounter += 1
            if timeOverUsing > overuseMilliseconds && overuseCounter > 1 && trend >= previousTrend {
                timeOverUsing = 0
                overuseCounter = 0
                usage = .overusing
            }
        } else if scaled < -threshold {
            timeOverUsing = -1
            overuseCounter = 0
            usage = .underusing
        } else {
            timeOverUsing = -1
            overuseCounter = 0
            usage = .normal
        }
        previousTrend = trend
        updateThreshold(scaled, nowMilliseconds: nowMilliseconds)
    }

    private mutating func updateThreshold(_ scaled: Double, nowMilliseconds: Double) {
        let last = lastThresholdUpdateMilliseconds ?? nowMilliseconds
        lastThresholdUpdateMilliseconds = nowMilliseconds
        // A trend far over the threshold (a sudden change of path) does not move it.
        guard abs(scaled) <= threshold + 15 else { return }
        let k = abs(scaled) < threshold ? thresholdDown : thresholdUp
        let elapsed = min(max(0, nowMilliseconds - last), 100)
        threshold += k * (abs(scaled) - threshold) * elapsed
        threshold = min(thresholdBounds.upperBound, max(thresholdBounds.lowerBound, threshold))
    }
}
