import Synchronization

/// One thing a realtime thread has to say, in a fixed size: what happened (`event`, a code the
/// posting module defines), when (monotonic nanoseconds), and up to three numbers. No strings,
/// no references: a realtime thread fills it on its stack and copies it into a ring.
public struct RealtimeLogRecord: BitwiseCopyable, Sendable, Equatable {
    public var event: UInt16
    public var nanoseconds: UInt64
    public var a: Int64
    public var b: Int64
    public var c: Int64

    public init(event: UInt16, nanoseconds: UInt64, a: Int64 = 0, b: Int64 = 0, c: Int64 = 0) {
        self.event = event
        self.nanoseconds = nanoseconds
        self.a = a
        self.b = b
        self.c = c
    }
}

/// Log records from one realtime thread (the producer) to one non-realtime thread (the
/// consumer), which turns them into log messages. Posting never allocates, locks or waits: a
/// record that finds the ring full is dropped and counted, and the consumer reports the count
/// with the next records it drains, so a flood costs the realtime thread a failed write and
/// the log one line saying how much it lost.
public final class RealtimeLog: Sendable {
    private let ring: SPSCRing<RealtimeLogRecord>
    /// Records dropped on a full ring since the consumer last read the count. The producer adds,
    /// the consumer exchanges it for zero: one atomic word, no record lost between them.
    private let dropped = Atomic<Int>(0)

    /// A log holding up to `capacity` records (a power of two) between two drains.
    public init(capacity: Int = 256) {
        ring = SPSCRing(capacity: capacity)
    }

    public var capacity: Int { ring.capacity }

    /// Posts a record, or counts it as dropped when the ring is full.
    /// - Note: Producer thread only. Never allocates, locks or blocks.
    @inline(__always)
    public func post(_ record: RealtimeLogRecord) {
        let written = withUnsafePointer(to: record) { ring.write(UnsafeBufferPointer(start: $0, count: 1)) }
        if written == 0 { dropped.add(1, ordering: .relaxed) }
    }

    /// Hands every record posted so far to `body`, oldest first, and returns how many records
    /// were dropped on a full ring since the last drain.
    /// - Note: Consumer thread only.
    @discardableResult
    public func drain(_ body: (RealtimeLogRecord) -> Void) -> Int {
        let lost = dropped.exchange(0, ordering: .relaxed)
        var record = RealtimeLogRecord(event: 0, nanoseconds: 0)
        while withUnsafeMutablePointer(to: &record, { ring.read(into: UnsafeMutableBufferPointer(start: $0, count: 1)) }) == 1 {
            body(record)
        }
        return lost
    }
}
