/// Estimates, from recent arrivals, the playout delay that lets a given share of packets arrive
/// in time (sans-IO: arrivals come with their instants).
///
/// Each packet's transit is its arrival instant less its media time (RTP timestamp in
/// nanoseconds); only differences of transits matter, so the clocks need no common origin. Over
/// the last `windowPackets` packets, the spread is the `percentile` of the transits less the
/// smallest one: how much later than the fastest packet a packet may arrive and still be
/// played. The estimate is recomputed every `updateEveryPackets` packets from a sorted copy
/// of the window in storage allocated once.
public final class ArrivalDelayEstimator {
    public let windowPackets: Int
    public let percentile: Double
    public let updateEveryPackets: Int

    private let transits: UnsafeMutablePointer<Int64>
    private let scratch: UnsafeMutablePointer<Int64>
    private var count = 0
    private var next = 0
    private var sinceUpdate = 0
    /// The latest estimate, in nanoseconds.
    public private(set) var spreadNanoseconds: Int64 = 0

    /// - Precondition: `windowPackets` ≥ 2, 0 < `percentile` ≤ 1, `updateEveryPackets` ≥ 1.
    public init(windowPackets: Int = 250, percentile: Double = 0.95, updateEveryPackets: Int = 10) {
        precondition(windowPackets >= 2 && percentile > 0 && percentile <= 1 && updateEveryPackets >= 1)
        self.windowPackets = windowPackets
        self.percentile = percentile
        self.updateEveryPackets = updateEveryPackets
        transits = .allocate(capacity: windowPackets)
        transits.initialize(repeating: 0, count: windowPackets)
        scratch = .allocate(capacity: windowPackets)
        scratch.initialize(repeating: 0, count: windowPackets)
    }

    deinit {
        transits.deallocate()
        scratch.deallocate()
    }

    /// Records one packet. - Note: Never allocates.
    public func record(arrivalNanoseconds: UInt64, mediaNanoseconds: Int64) {
        transits[next] = Int64(bitPattern: arrivalNanoseconds) &- mediaNanoseconds
        next = (next + 1) % windowPackets
        count = min(count + 1, windowPackets)
        sinceUpdate += 1
        if sinceUpdate >= updateEveryPackets || count <= updateEveryPackets {
            sinceUpdate = 0
            update()
        }
    }

    /// Forgets every packet (a new stream).
    public func reset() {
        count = 0
        next = 0
        sinceUpdate = 0
        spreadNanoseconds = 0
    }

    private func update() {
        guard count >= 2 else {
            spreadNanoseconds = 0
            return
        }
        scratch.update(from: transits, count: count)
        let window = UnsafeMutableBufferPointer(start: scratch, count: count)
        // Insertion sort: the window is small, mostly ordered between updates, and it never allocates.
        for i in 1..<count {
            let value = window[i]
            var j = i - 1
            while j >= 0 && window[j] > value {
                window[j + 1] = window[j]
                j -= 1
            }
            window[j + 1] = value
        }
        let rank = min(count - 1, Int((Double(count - 1) * percentile).rounded(.up)))
        spreadNanoseconds = window[rank] - window[0]
    }
}
