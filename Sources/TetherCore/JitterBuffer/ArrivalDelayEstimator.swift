/// Estimates, from recent arrivals, the playout delay that lets a given share of packets arrive
/// in time (sans-IO: arrivals come with their instants).
///
/// Each packet's transit is its arrival instant less its media time (RTP timestamp in
/// nanoseconds); only differences of transits matter, so the clocks need no common origin. Over
/// the last `windowPackets` packets, the spread is the `percentile` of the transits less the
/// smallest one: how much later than the fastest packet a packet may arrive and still be
/// played. The window is kept twice in storage allocated once: in arrival order (to know which
/// transit leaves) and sorted (each packet moves at most the window once), so the estimate is
/// current after every packet.
public final class ArrivalDelayEstimator {
    public let windowPackets: Int
    public let percentile: Double

    /// The window in arrival order (a ring).
    private let transits: UnsafeMutablePointer<Int64>
    /// The same transits, ascending.
    private let sorted: UnsafeMutablePointer<Int64>
    private var count = 0
    private var next = 0
    /// The latest estimate, in nanoseconds: the percentile transit less the smallest one.
    public private(set) var spreadNanoseconds: Int64 = 0
    /// The smallest transit in the window (the fastest packet), in nanoseconds; 0 when empty.
    public private(set) var lowestTransitNanoseconds: Int64 = 0
    /// The transit at `percentile` in the window, in nanoseconds; 0 when empty.
    public private(set) var percentileTransitNanoseconds: Int64 = 0
    /// Whether no packet was recorded since `init` or `reset()`.
    public var isEmpty: Bool { count == 0 }

    /// - Precondition: `windowPackets` ≥ 2, 0 < `percentile` ≤ 1.
    public init(windowPackets: Int = 250, percentile: Double = 0.95) {
        precondition(windowPackets >= 2 && percentile > 0 && percentile <= 1)
        self.windowPackets = windowPackets
        self.percentile = percentile
        transits = .allocate(capacity: windowPackets)
        transits.initialize(repeating: 0, count: windowPackets)
        sorted = .allocate(capacity: windowPackets)
        sorted.initialize(repeating: 0, count: windowPackets)
    }

    deinit {
        transits.deallocate()
        sorted.deallocate()
    }

    /// Records one packet. - Note: Never allocates.
    public func record(arrivalNanoseconds: UInt64, mediaNanoseconds: Int64) {
        let transit = Int64(bitPattern: arrivalNanoseconds) &- mediaNanoseconds
        if count == windowPackets {
            // The oldest transit leaves the sorted copy.
            let leaving = firstIndex(notBelow: transits[next])
            (sorted + leaving).update(from: sorted + leaving + 1, count: count - leaving - 1)
            count -= 1
        }
        transits[next] = transit
        next = (next + 1) % windowPackets
        let at = firstIndex(notBelow: transit)
        (sorted + at + 1).update(from: sorted + at, count: count - at)
        sorted[at] = transit
        count += 1
        let rank = min(count - 1, Int((Double(count - 1) * percentile).rounded(.up)))
        lowestTransitNanoseconds = sorted[0]
        percentileTransitNanoseconds = sorted[rank]
        spreadNanoseconds = sorted[rank] &- sorted[0]
    }

    /// Forgets every packet (a new stream).
    public func reset() {
        count = 0
        next = 0
        spreadNanoseconds = 0
        lowestTransitNanoseconds = 0
        percentileTransitNanoseconds = 0
    }

    /// The first position in `sorted` whose transit is ≥ `value` (binary search).
    private func firstIndex(notBelow value: Int64) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
