/// A non-allocating, random-access view of the report blocks inside a parsed SR or RR.
///
/// The view borrows the caller's buffer: it is only valid while that buffer is alive
/// and unchanged. Elements are decoded on access.
public struct RTCPReportBlocks: RandomAccessCollection {
    public typealias Element = RTCPReportBlock
    public typealias Index = Int
    public typealias Indices = Range<Int>

    /// The bytes of the blocks (`count` × 24 bytes).
    private let bytes: UnsafeRawBufferPointer
    /// Number of blocks.
    private let blockCount: Int

    /// Creates a view of `count` blocks stored back to back in `bytes`.
    /// The count is reduced if `bytes` is too short, so access can never go out of bounds.
    init(bytes: UnsafeRawBufferPointer, count: Int) {
        self.bytes = bytes
        self.blockCount = Swift.max(0, Swift.min(count, bytes.count / RTCPReportBlock.encodedLength))
    }

    /// An empty view.
    public init() {
        self.bytes = UnsafeRawBufferPointer(start: nil, count: 0)
        self.blockCount = 0
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { blockCount }

    public subscript(position: Int) -> RTCPReportBlock {
        precondition(position >= 0 && position < blockCount, "report block index out of range")
        return RTCPReportBlock(decodingFrom: bytes, at: position * RTCPReportBlock.encodedLength)
    }

    /// A concrete iterator: the default `IndexingIterator` allocated once per loop in debug
    /// builds (caught by `MediaLoopAllocationTests`).
    public struct Iterator: IteratorProtocol {
        private let blocks: RTCPReportBlocks
        private var position = 0

        init(_ blocks: RTCPReportBlocks) { self.blocks = blocks }

        public mutating func next() -> RTCPReportBlock? {
            guard position < blocks.blockCount else { return nil }
            defer { position += 1 }
            return RTCPReportBlock(decodingFrom: blocks.bytes, at: position * RTCPReportBlock.encodedLength)
        }
    }

    public func makeIterator() -> Iterator { Iterator(self) }
}
