import Synchronization

/// A lock-free single-producer/single-consumer ring of trivially copyable elements.
///
/// Capacity is a power of two fixed at creation; the storage is allocated once in `init` and
/// never again. One thread may write and one (other) thread may read at the same time, with no
/// locks and no allocation: device threads and the media loop hand PCM samples and packets to
/// each other through rings.
///
/// The indices are free-running counters (they never wrap in practice: 2^63 elements); the slot
/// of index `i` is `i & mask`. The producer publishes `tail` with release ordering after writing
/// the elements, and the consumer reads it with acquire ordering before reading them; symmetrically
/// the consumer publishes `head` with release after it has finished reading, so the producer never
/// overwrites a slot that is still being read.
///
/// Each side keeps the other's index as last read and reads it again only when the ring looks
/// full (producer) or empty (consumer), and each side's fields sit on cache lines of their own:
/// with `head` and `tail` side by side, every write invalidated the reader's line and every
/// read the writer's.
///
/// Reads and writes are inlinable, so each element type gets code of its own in the caller's
/// module (unspecialized generic code copied one element at a time through the type's witnesses).
public final class SPSCRing<Element: BitwiseCopyable>: @unchecked Sendable {
    /// Number of elements the ring holds when full.
    public let capacity: Int
    @usableFromInline let mask: Int
    @usableFromInline let storage: UnsafeMutablePointer<Element>
    /// Two cache lines (with the adjacent-line prefetch) between the read-only fields and each side's.
    private let padding0 = InlineArray<16, UInt64>(repeating: 0)
    /// Index of the next element to write. Written by the producer only.
    @usableFromInline let tail = Atomic<Int>(0)
    /// `head` as the producer last read it. Producer only.
    /// (Each side's own field: no exclusivity check per access; only one thread touches it.)
    @exclusivity(unchecked) @usableFromInline var producerHead = 0
    private let padding1 = InlineArray<16, UInt64>(repeating: 0)
    /// Index of the next element to read. Written by the consumer only.
    @usableFromInline let head = Atomic<Int>(0)
    /// `tail` as the consumer last read it. Consumer only.
    @exclusivity(unchecked) @usableFromInline var consumerTail = 0
    private let padding2 = InlineArray<16, UInt64>(repeating: 0)

    /// Creates a ring holding `capacity` elements.
    /// - Precondition: `capacity` is a power of two, at least 1.
    public init(capacity: Int) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "SPSCRing capacity must be a power of two")
        self.capacity = capacity
        self.mask = capacity - 1
        self.storage = .allocate(capacity: capacity)
    }

    deinit {
        storage.deallocate()
    }

    /// Elements currently readable. Exact when called by the consumer. Called by the producer,
    /// an upper bound: the consumer may have read more since (the media loop reads the playback
    /// ring's fill this way, and may see a device's read a moment late). From a third thread, an
    /// estimate only (its two loads are not taken at one instant).
    @inlinable public var availableToRead: Int {
        // Acquire on tail: the producer's element writes happen-before our later reads.
        tail.load(ordering: .acquiring) &- head.load(ordering: .relaxed)
    }

    /// Free slots. Exact when called by the producer. Called by the consumer, an upper bound:
    /// the producer may have written more since. From a third thread, an estimate only.
    @inlinable public var availableToWrite: Int {
        // Acquire on head: the consumer has finished reading the slots it released.
        capacity &- (tail.load(ordering: .relaxed) &- head.load(ordering: .acquiring))
    }

    /// Writes as many elements of `source` as fit and returns how many were written.
    /// - Note: Producer thread only. Never allocates, locks or blocks.
    @inlinable @discardableResult
    public func write(_ source: UnsafeBufferPointer<Element>) -> Int {
        let t = tail.load(ordering: .relaxed)
        if capacity &- (t &- producerHead) < source.count {
            producerHead = head.load(ordering: .acquiring)
        }
        let count = min(source.count, capacity &- (t &- producerHead))
        guard count > 0, let base = source.baseAddress else { return 0 }
        let start = t & mask
        let first = min(count, capacity &- start)
        (storage + start).update(from: base, count: first)
        if count > first {
            storage.update(from: base + first, count: count &- first)
        }
        // Release: the element writes above become visible before the new tail.
        tail.store(t &+ count, ordering: .releasing)
        return count
    }

    /// Writes all of `source` or nothing.
    /// - Returns: `false` (and writes nothing) when there is not room for every element.
    /// - Note: Producer thread only.
    @inlinable public func writeAll(_ source: UnsafeBufferPointer<Element>) -> Bool {
        guard availableToWrite >= source.count else { return false }
        return write(source) == source.count
    }

    /// Reads up to `destination.count` elements and returns how many were read.
    /// - Note: Consumer thread only. Never allocates, locks or blocks.
    @inlinable @discardableResult
    public func read(into destination: UnsafeMutableBufferPointer<Element>) -> Int {
        let h = head.load(ordering: .relaxed)
        if consumerTail &- h < destination.count {
            consumerTail = tail.load(ordering: .acquiring)
        }
        let count = min(destination.count, consumerTail &- h)
        guard count > 0, let base = destination.baseAddress else { return 0 }
        let start = h & mask
        let first = min(count, capacity &- start)
        base.update(from: storage + start, count: first)
        if count > first {
            (base + first).update(from: storage, count: count &- first)
        }
        // Release: our reads of the slots complete before the producer may reuse them.
        head.store(h &+ count, ordering: .releasing)
        return count
    }

    /// Reads exactly `destination.count` elements or nothing.
    /// - Note: Consumer thread only.
    @inlinable public func readAll(into destination: UnsafeMutableBufferPointer<Element>) -> Bool {
        guard availableToRead >= destination.count else { return false }
        return read(into: destination) == destination.count
    }

    /// Drops up to `count` readable elements; returns how many were dropped.
    /// - Note: Consumer thread only.
    @inlinable @discardableResult
    public func discard(_ count: Int) -> Int {
        let h = head.load(ordering: .relaxed)
        if consumerTail &- h < count {
            consumerTail = tail.load(ordering: .acquiring)
        }
        let n = min(count, consumerTail &- h)
        head.store(h &+ n, ordering: .releasing)
        return n
    }
}
