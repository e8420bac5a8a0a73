/// RFC 2198 redundant audio (RED): one RTP payload carrying the current frame (the primary
/// encoding) and copies of earlier frames, each with its payload type and its distance back in
/// RTP time, as Chromium sends Opus with `red/48000/2` and `a=fmtp:63 111/111`.
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// |F|   block PT  |  timestamp offset         |   block length    |   (F = 1: a redundant block)
/// |0|   block PT  |                                                  (F = 0: the primary, last)
/// ```
/// The block headers come first (oldest redundant block first, by convention), then the blocks'
/// data in the same order, the primary's data last (its length is what remains).
///
/// Sans-IO and allocation-free: `parse` reads into a fixed-capacity value, `write` into a caller's
/// buffer.
public struct RedundantAudioPayload: Sendable {
    /// One block: its payload type, how many RTP clock units before the packet's timestamp it was
    /// sampled (0 for the primary), and where its bytes are in the payload.
    public struct Block: Sendable, Equatable {
        public var payloadType: UInt8
        public var timestampOffset: UInt32
        public var range: Range<Int>

        public init(payloadType: UInt8, timestampOffset: UInt32, range: Range<Int>) {
            self.payloadType = payloadType
            self.timestampOffset = timestampOffset
            self.range = range
        }
    }

    /// A redundant block to write: its payload type, its distance back from the primary in RTP
    /// clock units, and its bytes (which must stay valid for the `write` call).
    public struct Source {
        public var payloadType: UInt8
        public var timestampOffset: UInt32
        public var bytes: UnsafeRawBufferPointer

        public init(payloadType: UInt8, timestampOffset: UInt32, bytes: UnsafeRawBufferPointer) {
            self.payloadType = payloadType
            self.timestampOffset = timestampOffset
            self.bytes = bytes
        }
    }

    /// Redundant blocks a payload may carry here (Chromium sends one or two; RFC 2198 allows more,
    /// and a payload with more is refused rather than read in part).
    public static let maximumRedundantBlocks = Storage.count
    /// The largest timestamp offset (14 bits) and block length (10 bits) a header can say.
    public static let maximumTimestampOffset: UInt32 = 0x3FFF
    public static let maximumBlockLength = 0x3FF

    /// Why a payload is not RFC 2198.
    public enum ParseError: Error, Sendable, Equatable {
        /// The headers run past the payload's end, or the block lengths past its data.
        case truncated
        /// More redundant blocks than ``maximumRedundantBlocks``.
        case tooManyBlocks
    }

    /// The redundant blocks, oldest first as they came, and the primary.
    public private(set) var redundantCount = 0
    private typealias Storage = InlineArray<8, Block>
    private var storage = Storage(repeating: Block(payloadType: 0, timestampOffset: 0, range: 0..<0))
    public private(set) var primary = Block(payloadType: 0, timestampOffset: 0, range: 0..<0)

    /// Redundant block `index` (0 ..< `redundantCount`).
    public func redundant(_ index: Int) -> Block { storage[index] }

    /// Reads the block headers of `payload`.
    public init(parsing payload: UnsafeRawBufferPointer) throws(ParseError) {
        var at = 0
        var dataLength = 0
        var primaryType: UInt8 = 0
        while true {
            guard at < payload.count else { throw .truncated }
            let first = payload[at]
            if first & 0x80 == 0 {
                primaryType = first
                at += 1
                break
            }
            guard at + 4 <= payload.count else { throw .truncated }
            guard redundantCount < Self.maximumRedundantBlocks else { throw .tooManyBlocks }
            let word = UInt32(first) << 24 | UInt32(payload[at + 1]) << 16 | UInt32(payload[at + 2]) << 8 | UInt32(payload[at + 3])
            let length = Int(word & 0x3FF)
            storage[redundantCount] = Block(payloadType: first & 0x7F, timestampOffset: (word >> 10) & 0x3FFF, range: 0..<length)
            redundantCount += 1
            dataLength += length
            at += 4
        }
        guard dataLength <= payload.count - at else { throw .truncated }
        for i in 0..<redundantCount {
            let length = storage[i].range.count
            storage[i].range = at..<(at + length)
            at += length
        }
        primary = Block(payloadType: primaryType, timestampOffset: 0, range: at..<payload.count)
    }

    /// The bytes a payload with these blocks takes: 4 per redundant block and 1 of header, plus the data.
    public static func length(primaryBytes: Int, redundantBytes: Int, redundantCount: Int) -> Int {
        4 * redundantCount + 1 + redundantBytes + primaryBytes
    }

    /// Writes a payload into `out`: the redundant blocks (oldest first: payload type, offset back
    /// from the primary, bytes), then the primary. Returns the bytes written, or nil when `out` is
    /// too small or a block cannot be described (offset over 14 bits, length over 10 bits, a payload
    /// type over 127) — the caller then sends the primary alone.
    public static func write(
        primaryPayloadType: UInt8, primary: UnsafeRawBufferPointer,
        redundant: UnsafeBufferPointer<Source>,
        into out: UnsafeMutableRawBufferPointer
    ) -> Int? {
        guard primaryPayloadType <= 0x7F else { return nil }
        var dataBytes = primary.count
        for block in redundant {
            guard block.payloadType <= 0x7F, block.timestampOffset <= maximumTimestampOffset, block.bytes.count <= maximumBlockLength else {
                return nil
            }
            dataBytes += block.bytes.count
        }
        let total = 4 * redundant.count + 1 + dataBytes
        guard total <= out.count else { return nil }
        var at = 0
        for block in redundant {
            let word = 0x8000_0000 | UInt32(block.payloadType) << 24 | block.timestampOffset << 10 | UInt32(block.bytes.count)
            out[at] = UInt8(word >> 24)
            out[at + 1] = UInt8((word >> 16) & 0xFF)
            out[at + 2] = UInt8((word >> 8) & 0xFF)
            out[at + 3] = UInt8(word & 0xFF)
            at += 4
        }
        out[at] = primaryPayloadType
        at += 1
        for block in redundant where block.bytes.count > 0 {
            UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + block.bytes.count)]).copyMemory(from: block.bytes)
            at += block.bytes.count
        }
        if primary.count > 0 {
            UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + primary.count)]).copyMemory(from: primary)
        }
        return total
    }
}
