/// One datagram (or duplicate copy) waiting in the relay's delay queue.
struct DelayedDatagram {
    /// CLOCK_MONOTONIC release instant, in nanoseconds.
    var releaseNanoseconds: UInt64
    /// Arrival order, breaking ties so equal release times leave first-in, first-out.
    var order: UInt64
    var direction: RelayDirection
    var destination: UDPRelayEndpoint
    var bytes: [UInt8]
}

/// Datagrams ordered by release time (then arrival order). Owned by the relay thread only.
/// Stored sorted in DESCENDING order so the earliest is `removeLast()` in O(1); insertion is a
/// binary search plus an O(n) move, fine for the few thousand datagrams the relay allows.
struct DelayQueue {
    private var items: [DelayedDatagram] = []
    private var nextOrder: UInt64 = 0

    var count: Int { items.count }

    /// The earliest release instant, in CLOCK_MONOTONIC nanoseconds.
    var earliestReleaseNanoseconds: UInt64? { items.last?.releaseNanoseconds }

    mutating func insert(
        releaseNanoseconds: UInt64, direction: RelayDirection, destination: UDPRelayEndpoint, bytes: [UInt8]
    ) {
        let item = DelayedDatagram(
            releaseNanoseconds: releaseNanoseconds, order: nextOrder, direction: direction,
            destination: destination, bytes: bytes)
        nextOrder &+= 1
        var low = 0
        var high = items.count
        while low < high {
            let middle = (low + high) / 2
            if Self.isBefore(item, items[middle]) { low = middle + 1 } else { high = middle }
        }
        items.insert(item, at: low)
    }

    /// Removes and returns the earliest datagram if it is due at `nowNanoseconds`.
    mutating func popDue(nowNanoseconds: UInt64) -> DelayedDatagram? {
        guard let last = items.last, last.releaseNanoseconds <= nowNanoseconds else { return nil }
        return items.removeLast()
    }

    mutating func removeAll() { items.removeAll() }

    private static func isBefore(_ lhs: DelayedDatagram, _ rhs: DelayedDatagram) -> Bool {
        (lhs.releaseNanoseconds, lhs.order) < (rhs.releaseNanoseconds, rhs.order)
    }
}
