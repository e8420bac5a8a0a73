import Synchronization

/// A single-writer, many-reader cell for a trivially copyable value, without locks.
///
/// The writer (the media loop) bumps the sequence to odd, writes, and bumps it to even; readers
/// retry while the sequence is odd or changed under them. Writing never blocks and never
/// allocates, so the media loop can publish statistics without waiting for readers.
public final class SeqlockCell<Value: BitwiseCopyable>: @unchecked Sendable {
    private let sequence = Atomic<UInt64>(0)
    private let storage: UnsafeMutablePointer<Value>

    public init(_ initial: Value) {
        storage = .allocate(capacity: 1)
        storage.initialize(to: initial)
    }

    deinit {
        storage.deallocate()
    }

    /// Publishes a new value.
    /// - Note: One writer thread only. Never allocates, locks or blocks.
    @inline(__always)
    public func write(_ value: Value) {
        let s = sequence.load(ordering: .relaxed)
        // Odd: a write is in progress. The fence keeps the data write after the odd store.
        sequence.store(s &+ 1, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        storage.pointee = value
        // Release: the data is visible before the even sequence.
        sequence.store(s &+ 2, ordering: .releasing)
    }

    /// Reads a consistent value (retries while a write is in progress).
    public func read() -> Value {
        while true {
            // Acquire: pairs with the writer's release of the even sequence.
            let before = sequence.load(ordering: .acquiring)
            if before & 1 == 1 { continue }
            let value = storage.pointee
            atomicMemoryFence(ordering: .acquiring)
            if sequence.load(ordering: .relaxed) == before { return value }
        }
    }
}
