/// Which packets of a range of sequence numbers arrived: up to `capacity` consecutive packets
/// from `beginSequence`, one bit each (what an RTCP XR Loss RLE block reports, RFC 3611 §4.1).
/// The bits are a reception window (the one `ReceptionStatistics` keeps for duplicates) whose
/// newest packet is the range's last. A value type of fixed size: no allocation.
public struct ReceivedPackets: Sendable {
    /// Most packets one value describes: the reception window's reach.
    public static let capacity = ReceivedSequenceWindow.size

    /// The first packet's sequence number.
    public var beginSequence: UInt16
    /// Packets described, `0…capacity`.
    public private(set) var count: Int
    /// Packet `beginSequence + i` is `count − 1 − i` packets behind the window's newest.
    private var window: ReceivedSequenceWindow

    /// `count` packets from `beginSequence`, none received yet.
    public init(beginSequence: UInt16, count: Int) {
        self.init(beginSequence: beginSequence, count: count, window: ReceivedSequenceWindow())
    }

    /// `count` packets ending with `window`'s newest.
    init(beginSequence: UInt16, count: Int, window: ReceivedSequenceWindow) {
        precondition(count >= 0 && count <= Self.capacity, "ReceivedPackets holds 0…\(Self.capacity) packets")
        self.beginSequence = beginSequence
        self.count = count
        self.window = window
    }

    /// One past the last packet's sequence number (the block's `end_seq`).
    public var endSequence: UInt16 { beginSequence &+ UInt16(count) }

    /// Marks packet `index` (0 = `beginSequence`) as received.
    public mutating func markReceived(_ index: Int) {
        precondition(index >= 0 && index < count)
        _ = window.markReceived(packetsBehind: count - 1 - index)
    }

    /// Whether packet `index` (0 = `beginSequence`) arrived.
    public func received(_ index: Int) -> Bool {
        guard index >= 0, index < count else { return false }
        return window.contains(packetsBehind: count - 1 - index)
    }

    /// Packets that arrived.
    public var receivedCount: Int { (0..<count).reduce(0) { $0 + (received($1) ? 1 : 0) } }
}

/// What a run of received/lost flags says about loss that recovery cannot undo. A lost packet's
/// frame comes back from the next packet's in-band FEC, or from RED copies in the packets after
/// it: how many lost packets were preceded, in their run of losses, by at least 1 or 3 others
/// is what FEC alone, or two RED copies with FEC, leaves for concealment.
public struct LossRunStatistics: Sendable, Equatable {
    /// Packets described.
    public var packets = 0
    /// Packets lost.
    public var lost = 0
    /// Runs of consecutive losses (bursts; a single loss is a run of one).
    public var lossRuns = 0
    /// The longest run of consecutive losses.
    public var longestLossRun = 0
    /// Lost packets with three lost just before them: what RED two frames back, with FEC in the
    /// oldest copy, cannot rebuild.
    public var lostAfterThreeLosses = 0

    public init() {}

    /// Lost packets with another lost just before them: what in-band FEC, carried in the next
    /// packet, cannot rebuild (for loss independent at rate p, about p² of the packets) — all
    /// but the last of each run.
    public var lostAfterALoss: Int { lost - lossRuns }

    /// Adds one packet in sequence order; `currentRun` is the caller's count of losses just
    /// before it (updated).
    mutating func add(received: Bool, currentRun: inout Int) {
        packets += 1
        if received {
            currentRun = 0
            return
        }
        lost += 1
        if currentRun == 0 { lossRuns += 1 }
        if currentRun >= 3 { lostAfterThreeLosses += 1 }
        currentRun += 1
        longestLossRun = max(longestLossRun, currentRun)
    }

    /// Adds `length` packets in sequence order that all arrived or were all lost, in constant
    /// time (what `length` calls of ``add(received:currentRun:)`` would do).
    mutating func addRun(received: Bool, length: Int, currentRun: inout Int) {
        guard length > 0 else { return }
        packets += length
        if received {
            currentRun = 0
            return
        }
        lost += length
        if currentRun == 0 { lossRuns += 1 }
        // The run's packets have currentRun, currentRun + 1, … losses before them.
        lostAfterThreeLosses += max(0, length - max(0, 3 - currentRun))
        currentRun += length
        longestLossRun = max(longestLossRun, currentRun)
    }
}

/// RTCP Extended Reports (XR, packet type 207, RFC 3611) with Loss RLE blocks (block type 1):
/// writing one, and reading the blocks of one that arrived.
public enum RTCPExtendedReport {
    /// The XR packet type.
    public static let packetType: UInt8 = 207
    /// The Loss RLE block type.
    public static let lossRunLengthBlockType: UInt8 = 1

    /// Most bytes an XR packet with one Loss RLE block of `ReceivedPackets.capacity` packets
    /// takes: 8 (header, reporter) + 12 (block header, source, sequence range) + chunks (at
    /// most one per 15 packets, two bytes each, rounded up to 32 bits).
    public static let maximumLossRunLengthPacketBytes = 8 + 12 + ((ReceivedPackets.capacity + 14) / 15 * 2 + 3) / 4 * 4

    /// Writes an XR packet (RFC 3611 §2) holding one Loss RLE block (§4.1, thinning 0) about
    /// `sourceSSRC`'s packets `packets` into `buffer` at `offset`. Runs of 15 or more equal
    /// flags become run-length chunks, the rest 15-packet bit vectors (bits past the range are
    /// 0); a null chunk pads to 32 bits.
    /// - Returns: the bytes written, or nil when `buffer` is too small (nothing is written then).
    /// - Note: No allocation.
    public static func writeLossRunLength(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, reporterSSRC: UInt32, sourceSSRC: UInt32,
        packets: ReceivedPackets
    ) -> Int? {
        // Chunks first counted, then written: the length fields come before them.
        let chunks = chunkCount(packets)
        let chunkBytes = (chunks * 2 + 3) / 4 * 4
        let total = 8 + 12 + chunkBytes
        guard offset >= 0, buffer.count - offset >= total else { return nil }
        buffer[offset] = 0x80  // V=2, P=0, reserved
        buffer[offset + 1] = packetType
        buffer.storeBigEndian(UInt16(total / 4 - 1), at: offset + 2)
        buffer.storeBigEndian(reporterSSRC, at: offset + 4)
        let block = offset + 8
        buffer[block] = lossRunLengthBlockType
        buffer[block + 1] = 0  // reserved, thinning 0
        buffer.storeBigEndian(UInt16((12 + chunkBytes) / 4 - 1), at: block + 2)
        buffer.storeBigEndian(sourceSSRC, at: block + 4)
        buffer.storeBigEndian(packets.beginSequence, at: block + 8)
        buffer.storeBigEndian(packets.endSequence, at: block + 10)
        var position = block + 12
        var index = 0
        while index < packets.count {
            let (chunk, covered) = nextChunk(packets, from: index)
            buffer.storeBigEndian(chunk, at: position)
            position += 2
            index += covered
        }
        buffer.zero(from: position, count: offset + total - position)  // null chunk(s)
        return total
    }

    private static func chunkCount(_ packets: ReceivedPackets) -> Int {
        var count = 0
        var index = 0
        while index < packets.count {
            index += nextChunk(packets, from: index).covered
            count += 1
        }
        return count
    }

    /// The chunk that describes packets from `index`, and how many it covers.
    private static func nextChunk(_ packets: ReceivedPackets, from index: Int) -> (chunk: UInt16, covered: Int) {
        let value = packets.received(index)
        var run = 1
        while index + run < packets.count && packets.received(index + run) == value { run += 1 }
        if run >= 15 {
            // Run-length chunk: 0, run type (1 = received), 14-bit length.
            return (UInt16(value ? 0x4000 : 0) | UInt16(run), run)
        }
        // Bit vector chunk: 1, then 15 packets, the first in the most significant bit.
        var chunk: UInt16 = 0x8000
        let covered = min(15, packets.count - index)
        for bit in 0..<covered where packets.received(index + bit) {
            chunk |= 1 << UInt16(14 - bit)
        }
        return (chunk, covered)
    }

    /// Most Loss RLE blocks about one source read from one XR packet; later ones are skipped.
    /// A receiver sends one (RFC 3611 allows one per source and thinning); the limit bounds
    /// what a peer can make us read.
    public static let maximumLossRunLengthBlocksRead = 4

    /// The Loss RLE blocks of an XR packet's body (the bytes after its 4-byte header, as
    /// `RTCPPacket.other` gives them): each block about `sourceSSRC` with thinning 0, read
    /// into loss-run statistics (at most ``maximumLossRunLengthBlocksRead`` of them); other
    /// block types and sources are skipped. Malformed blocks end the reading (what was read
    /// before stays).
    ///
    /// The work is bounded by the body's size, not by the packets its blocks claim: a
    /// run-length chunk (up to 16,383 packets) is read in constant time, a bit-vector chunk in
    /// 15 steps, so a 1,500-byte datagram costs at most a few thousand steps however many of
    /// the 65,535 packets a block may describe it claims.
    /// - Returns: the statistics of the blocks about `sourceSSRC` (nil when there is none).
    /// - Note: No allocation.
    public static func lossRuns(inBody body: UnsafeRawBufferPointer, sourceSSRC: UInt32) -> LossRunStatistics? {
        guard body.count >= 4 else { return nil }
        var result: LossRunStatistics?
        var blocksRead = 0
        var position = 4  // after the reporter's SSRC
        while body.count - position >= 4, blocksRead < maximumLossRunLengthBlocksRead {
            let blockType = body[position]
            let blockLength = (Int(body.loadBigEndianUInt16(at: position + 2)) + 1) * 4
            guard blockLength <= body.count - position else { break }
            let thinning = body[position + 1] & 0x0F
            if blockType == lossRunLengthBlockType, blockLength >= 12, thinning == 0,
               body.loadBigEndianUInt32(at: position + 4) == sourceSSRC
            {
                let begin = body.loadBigEndianUInt16(at: position + 8)
                let end = body.loadBigEndianUInt16(at: position + 10)
                var statistics = result ?? LossRunStatistics()
                blocksRead += 1
                readChunks(
                    body.slice(from: position + 12, to: position + blockLength), packets: Int(end &- begin),
                    into: &statistics)
                result = statistics
            }
            position += blockLength
        }
        return result
    }

    /// Reads chunks for `packets` packets (fewer when the chunks end first; bits past the
    /// range are ignored, a null chunk ends the list).
    private static func readChunks(_ chunks: UnsafeRawBufferPointer, packets: Int, into statistics: inout LossRunStatistics) {
        var left = packets
        var run = 0
        var position = 0
        while left > 0, chunks.count - position >= 2 {
            let chunk = chunks.loadBigEndianUInt16(at: position)
            position += 2
            if chunk == 0 { break }  // terminating null chunk
            if chunk & 0x8000 == 0 {
                let received = chunk & 0x4000 != 0
                let length = min(Int(chunk & 0x3FFF), left)
                statistics.addRun(received: received, length: length, currentRun: &run)
                left -= length
            } else {
                let length = min(15, left)
                for bit in 0..<length {
                    statistics.add(received: chunk & (1 << UInt16(14 - bit)) != 0, currentRun: &run)
                }
                left -= length
            }
        }
    }
}
