import Synchronization

/// A lock-free single-producer/single-consumer queue of datagrams.
///
/// Fixed number of slots (a power of two), each holding up to `maximumPacketBytes` bytes plus the
/// packet's length and its arrival instant. All storage is allocated once in `init`. The GLib
/// thread pushes received datagrams; the media loop pops them.
public final class PacketRing: @unchecked Sendable {
    /// Number of packets the ring holds when full.
    public let slotCount: Int
    /// Largest datagram a slot holds, in bytes.
    public let maximumPacketBytes: Int
    private let mask: Int
    private let bytes: UnsafeMutableRawPointer
    private let lengths: UnsafeMutablePointer<Int>
    private let arrivals: UnsafeMutablePointer<UInt64>
    private let head = Atomic<Int>(0)
    private let tail = Atomic<Int>(0)
    /// Packets refused because the ring was full.
    private let droppedFullCount = Atomic<Int>(0)
    /// Packets refused because they were larger than a slot.
    private let droppedOversizeCount = Atomic<Int>(0)

    /// - Precondition: `slotCount` is a power of two; `maximumPacketBytes` > 0.
    public init(slotCount: Int, maximumPacketBytes: Int = 1500) {
        precondition(slotCount > 0 && slotCount & (slotCount - 1) == 0, "PacketRing slotCount must be a power of two")
        precondition(maximumPacketBytes > 0)
        self.slotCount = slotCount
        self.maximumPacketBytes = maximumPacketBytes
        self.mask = slotCount - 1
        self.bytes = .allocate(byteCount: slotCount * maximumPacketBytes, alignment: 16)
        self.lengths = .allocate(capacity: slotCount)
        self.lengths.initialize(repeating: 0, count: slotCount)
        self.arrivals = .allocate(capacity: slotCount)
        self.arrivals.initialize(repeating: 0, count: slotCount)
    }

    deinit {
        bytes.deallocate()
        lengths.deallocate()
        arrivals.deallocate()
    }

    /// Packets waiting to be popped (exact for the consumer).
    public var count: Int { tail.load(ordering: .acquiring) &- head.load(ordering: .relaxed) }

    /// Packets pushed since the ring was made, a running total (``count`` of them still wait).
    public var pushedCount: Int { tail.load(ordering: .acquiring) }

    /// Packets dropped because the ring was full.
    public var droppedBecauseFull: Int { droppedFullCount.load(ordering: .relaxed) }
    /// Packets dropped because they did not fit a slot.
    public var droppedBecauseOversize: Int { droppedOversizeCount.load(ordering: .relaxed) }

    /// Copies `packet` into the next free slot.
    /// - Parameter arrivalNanoseconds: monotonic arrival instant of the packet.
    /// - Returns: `false` when the ring is full or the packet is too large (it is counted and dropped).
    /// - Note: Producer thread only. Never allocates, locks or blocks.
    @discardableResult
    public func push(_ packet: UnsafeRawBufferPointer, arrivalNanoseconds: UInt64) -> Bool {
        guard packet.count <= maximumPacketBytes else {
            droppedOversizeCount.add(1, ordering: .relaxed)
            return false
        }
        let t = tail.load(ordering: .relaxed)
        // Acquire: the consumer finished reading the slot it released.
        guard t &- head.load(ordering: .acquiring) < slotCount else {
            droppedFullCount.add(1, ordering: .relaxed)
            return false
        }
        let slot = t & mask
        if let base = packet.baseAddress, packet.count > 0 {
            (bytes + slot * maximumPacketBytes).copyMemory(from: base, byteCount: packet.count)
        }
        lengths[slot] = packet.count
        arrivals[slot] = arrivalNanoseconds
        // Release: slot contents are visible before the new tail.
        tail.store(t &+ 1, ordering: .releasing)
        return true
    }

    /// Calls `body` with the oldest packet (valid only during the call) and its arrival instant,
    /// then frees its slot.
    /// - Returns: `nil` when the ring is empty, otherwise what `body` returned.
    /// - Note: Consumer thread only. Never allocates, locks or blocks.
    @inline(__always)
    public func pop<R>(_ body: (UnsafeMutableRawBufferPointer, UInt64) throws -> R) rethrows -> R? {
        let h = head.load(ordering: .relaxed)
        // Acquire: pairs with the producer's release of tail.
        guard tail.load(ordering: .acquiring) &- h > 0 else { return nil }
        let slot = h & mask
        let buffer = UnsafeMutableRawBufferPointer(start: bytes + slot * maximumPacketBytes, count: lengths[slot])
        defer {
            // Release: we are done with the slot before the producer may reuse it.
            head.store(h &+ 1, ordering: .releasing)
        }
        return try body(buffer, arrivals[slot])
    }
}
