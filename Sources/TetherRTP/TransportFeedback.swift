/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01
/// §3.1): an RTCP transport-layer feedback packet (PT 205, FMT 15) that tells the sender when
/// each of its packets arrived, by transport-wide sequence number.
///
/// ```
///  0                   1                   2                   3
/// |V=2|P|  FMT=15 |    PT=205     |           length              |
/// |                     SSRC of packet sender                     |
/// |                      SSRC of media source                     |
/// |      base sequence number     |      packet status count      |
/// |                 reference time                | fb pkt. count |
/// |          packet chunk         |         packet chunk          |  …
/// |         recv delta            |  recv delta   | zero padding  |  …
/// ```
///
/// Statuses: 0 not received, 1 received with a small delta (one unsigned byte, 250 µs units),
/// 2 received with a large or negative delta (two bytes, signed). Chunks: a run (bit 15 = 0:
/// a status and a 13-bit count) or a vector (bit 15 = 1: fourteen one-bit statuses, or with bit
/// 14 set seven two-bit ones). The first packet's delta is from the reference time (24-bit
/// signed, 64 ms units), each later one from the packet before.
///
/// Reading and writing never allocate.
public enum TransportFeedback {
    /// RTCP packet type (transport-layer feedback, RFC 4585).
    public static let packetType: UInt8 = 205
    /// Feedback message type of transport-cc.
    public static let formatType: UInt8 = 15
    /// Receive deltas' unit, in microseconds.
    public static let deltaTickMicroseconds: Int64 = 250
    /// The reference time's unit, in microseconds.
    public static let referenceTickMicroseconds: Int64 = 64_000

    /// What one feedback packet says, apart from its packets.
    public struct Header: Sendable, Equatable {
        public var senderSSRC: UInt32
        public var mediaSSRC: UInt32
        public var baseSequence: UInt16
        public var statusCount: Int
        /// The reference time, 24-bit signed, in 64 ms units (wraps; unwrap across packets).
        public var referenceTime: Int32
        /// The feedback packet's own count (8 bits, wraps).
        public var feedbackCount: UInt8
    }

    /// Reads a feedback packet's body (the bytes after its 4-byte RTCP header, as
    /// `RTCPPacket.other` gives them) and calls `visit` for each packet it reports, in sequence
    /// order: its transport-wide sequence number and, when it arrived, its arrival time in
    /// microseconds from the reference time's origin (`referenceTime × 64 000` plus the deltas so
    /// far). A malformed body (chunks or deltas beyond it, a reserved status) visits nothing.
    ///
    /// With `window` (the sequence numbers a sender still remembers), runs of lost packets are
    /// visited only where they fall inside it: a peer's 36-byte feedback claiming 65,535 lost
    /// packets costs a walk over its chunks, not 65,535 visits. Received packets (each with a
    /// delta byte) and bit-vector chunks are visited wherever they are.
    /// - Returns: the header, or nil when malformed.
    /// - Note: No allocation; the body is read twice (checked first, then visited).
    @discardableResult
    public static func read(
        body: UnsafeRawBufferPointer, window: (first: UInt16, count: Int)? = nil,
        _ visit: (_ sequence: UInt16, _ arrivalMicroseconds: Int64?) -> Void
    ) -> Header? {
        guard body.count >= 16 else { return nil }
        let header = Header(
            senderSSRC: body.loadBigEndianUInt32(at: 0), mediaSSRC: body.loadBigEndianUInt32(at: 4),
            baseSequence: body.loadBigEndianUInt16(at: 8), statusCount: Int(body.loadBigEndianUInt16(at: 10)),
            referenceTime: Int32(bitPattern: UInt32(body[12]) << 24 | UInt32(body[13]) << 16 | UInt32(body[14]) << 8) >> 8,
            feedbackCount: body[15])
        guard header.statusCount > 0, walk(body, header: header, checkOnly: true, window: nil, visit: { _, _ in }) else { return nil }
        _ = walk(body, header: header, checkOnly: false, window: window, visit: visit)
        return header
    }

    /// One pass over the chunks and deltas; with `checkOnly`, only checks that they fit.
    private static func walk(
        _ body: UnsafeRawBufferPointer, header: Header, checkOnly: Bool, window: (first: UInt16, count: Int)?,
        visit: (UInt16, Int64?) -> Void
    ) -> Bool {
        // Chunks first: find where the deltas begin.
        var chunkPosition = 16
        var covered = 0
        while covered < header.statusCount {
            guard body.count - chunkPosition >= 2 else { return false }
            let chunk = body.loadBigEndianUInt16(at: chunkPosition)
            chunkPosition += 2
            covered += chunk & 0x8000 == 0 ? Int(chunk & 0x1FFF) : (chunk & 0x4000 == 0 ? 14 : 7)
        }
        var cursor = Cursor(
            deltaPosition: chunkPosition, arrival: Int64(header.referenceTime) * referenceTickMicroseconds,
            sequence: header.baseSequence, left: header.statusCount)
        var position = 16
        while cursor.left > 0, position < chunkPosition {
            let chunk = body.loadBigEndianUInt16(at: position)
            position += 2
            if chunk & 0x8000 == 0 {
                let status = chunk >> 13 & 0x3
                let run = Int(chunk & 0x1FFF)
                // A run of lost packets has no deltas: skipped in one step when only checking,
                // and visited only inside the window when there is one.
                if status == 0 && (checkOnly || window != nil) {
                    let n = min(run, cursor.left)
                    if !checkOnly, let window { visitLost(from: cursor.sequence, count: n, inside: window, visit) }
                    cursor.left -= n
                    cursor.sequence &+= UInt16(truncatingIfNeeded: n)
                    continue
                }
                for _ in 0..<min(run, cursor.left) where !cursor.take(status, body, visit) { return false }
            } else if chunk & 0x4000 == 0 {
                for bit in 0..<14 where !cursor.take(chunk >> UInt16(13 - bit) & 0x1, body, visit) { return false }
            } else {
                for symbol in 0..<7 where !cursor.take(chunk >> UInt16(12 - 2 * symbol) & 0x3, body, visit) { return false }
            }
        }
        return cursor.left == 0
    }

    /// Visits the lost packets `first`, `first + 1`, … (`count` of them, mod 2^16) that fall
    /// inside `window`: at most the window's size, whatever `count`.
    private static func visitLost(
        from first: UInt16, count: Int, inside window: (first: UInt16, count: Int), _ visit: (UInt16, Int64?) -> Void
    ) {
        let size = min(max(0, window.count), 1 << 16)
        // Where the run starts relative to the window, and the first of its packets inside it.
        let offset = Int(first &- window.first)
        let start = offset < size ? 0 : (1 << 16) - offset
        var i = start
        while i < count && (offset + i) & 0xFFFF < size {
            visit(first &+ UInt16(truncatingIfNeeded: i), nil)
            i += 1
        }
    }

    /// Where a walk is: the next delta, the arrival so far, the next sequence number, the
    /// statuses left. (A value, not a nested function's captures: nothing is boxed on the heap.)
    private struct Cursor {
        var deltaPosition: Int
        var arrival: Int64
        var sequence: UInt16
        var left: Int

        /// One status, then its delta if it has one; false when its delta is beyond the body or
        /// the status is reserved.
        mutating func take(_ status: UInt16, _ body: UnsafeRawBufferPointer, _ visit: (UInt16, Int64?) -> Void) -> Bool {
            guard left > 0 else { return true }  // symbols past the count in the last chunk
            left -= 1
            switch status {
            case 0:
                visit(sequence, nil)
            case 1:
                guard deltaPosition < body.count else { return false }
                arrival += Int64(body[deltaPosition]) * TransportFeedback.deltaTickMicroseconds
                deltaPosition += 1
                visit(sequence, arrival)
            case 2:
                guard body.count - deltaPosition >= 2 else { return false }
                arrival += Int64(Int16(bitPattern: body.loadBigEndianUInt16(at: deltaPosition))) * TransportFeedback.deltaTickMicroseconds
                deltaPosition += 2
                visit(sequence, arrival)
            default:
                return false  // reserved
            }
            sequence &+= 1
            return true
        }
    }
}

/// The receiving side of transport-cc: the arrival of each packet by transport-wide sequence
/// number, written out as feedback packets (``TransportFeedback``) — every packet once, in
/// sequence order, lost ones as not received.
///
/// Sans-IO: each arrival comes with its instant. Keeps the last ``capacity`` sequence numbers;
/// all storage is allocated in `init`, and recording and writing never allocate.
public final class TransportFeedbackRecorder {
    /// Sequence numbers remembered.
    public static let capacity = 512
    /// Most packets one feedback reports (under 1,200 bytes whatever the statuses).
    public static let maximumStatusesPerFeedback = 400

    /// Arrival instants (monotonic nanoseconds; 0: not received) by sequence number mod capacity.
    private let arrivals: UnsafeMutablePointer<UInt64>
    /// Scratch for one feedback: each packet's status and delta (250 µs ticks).
    private let statuses: UnsafeMutablePointer<UInt8>
    private let deltas: UnsafeMutablePointer<Int16>
    private var hasPackets = false
    /// Extended sequence number of the highest packet received.
    private var highest: Int64 = 0
    /// The first packet the next feedback reports (extended).
    private var nextToReport: Int64 = 0
    private var feedbackCount: UInt8 = 0
    /// Packets recorded since the last feedback was written.
    public private(set) var unreportedPackets = 0

    public init() {
        arrivals = .allocate(capacity: Self.capacity)
        arrivals.initialize(repeating: 0, count: Self.capacity)
        statuses = .allocate(capacity: Self.maximumStatusesPerFeedback)
        statuses.initialize(repeating: 0, count: Self.maximumStatusesPerFeedback)
        deltas = .allocate(capacity: Self.maximumStatusesPerFeedback)
        deltas.initialize(repeating: 0, count: Self.maximumStatusesPerFeedback)
    }

    deinit {
        arrivals.deallocate()
        statuses.deallocate()
        deltas.deallocate()
    }

    /// Forgets every packet: the peer's stream is another's now (a call moved to another
    /// device, whose transport-wide sequence has nothing to do with the last one's). Without
    /// this its first packets read as far behind (ignored) or far ahead (the gap reported lost).
    /// - Note: No allocation.
    public func reset() {
        arrivals.update(repeating: 0, count: Self.capacity)
        hasPackets = false
        highest = 0
        nextToReport = 0
        unreportedPackets = 0
    }

    /// A packet with transport-wide sequence number `sequence` arrived at `arrivalNanoseconds`
    /// (monotonic). Packets from before the last feedback's range are ignored (they were
    /// reported lost), and so are duplicates. - Note: No allocation.
    public func record(sequence: UInt16, arrivalNanoseconds: UInt64) {
        let now = max(arrivalNanoseconds, 1)
        guard hasPackets else {
            hasPackets = true
            highest = Int64(sequence)
            nextToReport = highest
            arrivals[slot(highest)] = now
            unreportedPackets = 1
            return
        }
        let extended = highest + Int64(Int16(bitPattern: sequence &- UInt16(truncatingIfNeeded: highest)))
        guard extended >= nextToReport, highest - extended < Int64(Self.capacity) else { return }
        if extended > highest {
            // The slots between are not received (yet); more than the capacity ahead of the
            // unreported range, the oldest are given up (not reported at all).
            var clear = max(highest + 1, extended - Int64(Self.capacity) + 1)
            while clear < extended {
                arrivals[slot(clear)] = 0
                clear += 1
            }
            highest = extended
            nextToReport = max(nextToReport, highest - Int64(Self.capacity) + 1)
        } else if arrivals[slot(extended)] != 0 {
            return  // a duplicate
        }
        arrivals[slot(extended)] = now
        unreportedPackets += 1
    }

    /// Writes a feedback packet about the packets since the last one into `buffer` at `offset`.
    /// A delta too large for the format (over 8 s between two arrivals) ends the feedback
    /// early; the next one goes on from there.
    /// - Returns: the bytes written, or nil when nothing came since the last one or there is
    ///   no room (nothing is written then).
    /// - Note: No allocation.
    public func writeFeedback(
        into buffer: UnsafeMutableRawBufferPointer, at offset: Int, senderSSRC: UInt32, mediaSSRC: UInt32
    ) -> Int? {
        guard hasPackets, unreportedPackets > 0, highest >= nextToReport else { return nil }
        // The first packet of the range that arrived gives the reference time.
        var first = nextToReport
        while first <= highest && arrivals[slot(first)] == 0 { first += 1 }
        guard first <= highest else { return nil }
        let referenceTicks = Int64(arrivals[slot(first)] / 1000) / TransportFeedback.referenceTickMicroseconds
        // Statuses and deltas, as far as every delta fits.
        var clock = referenceTicks * TransportFeedback.referenceTickMicroseconds
        var count = 0
        var deltaBytes = 0
        while nextToReport + Int64(count) <= highest, count < Self.maximumStatusesPerFeedback {
            let at = arrivals[slot(nextToReport + Int64(count))]
            if at == 0 {
                statuses[count] = 0
            } else {
                let ticks = Self.ticks(Int64(at / 1000) - clock)
                guard ticks >= Int64(Int16.min), ticks <= Int64(Int16.max) else { break }
                clock += ticks * TransportFeedback.deltaTickMicroseconds
                deltas[count] = Int16(ticks)
                let small = ticks >= 0 && ticks <= 255
                statuses[count] = small ? 1 : 2
                deltaBytes += small ? 1 : 2
            }
            count += 1
        }
        guard count > 0 else { return nil }
        let chunks = chunkCount(count)
        let total = (20 + chunks * 2 + deltaBytes + 3) / 4 * 4
        guard offset >= 0, buffer.count - offset >= total else { return nil }
        buffer[offset] = 0x80 | TransportFeedback.formatType
        buffer[offset + 1] = TransportFeedback.packetType
        buffer.storeBigEndian(UInt16(total / 4 - 1), at: offset + 2)
        buffer.storeBigEndian(senderSSRC, at: offset + 4)
        buffer.storeBigEndian(mediaSSRC, at: offset + 8)
        buffer.storeBigEndian(UInt16(truncatingIfNeeded: nextToReport), at: offset + 12)
        buffer.storeBigEndian(UInt16(count), at: offset + 14)
        let reference = UInt32(truncatingIfNeeded: referenceTicks)
        buffer[offset + 16] = UInt8(truncatingIfNeeded: reference >> 16)
        buffer[offset + 17] = UInt8(truncatingIfNeeded: reference >> 8)
        buffer[offset + 18] = UInt8(truncatingIfNeeded: reference)
        buffer[offset + 19] = feedbackCount
        var position = offset + 20
        var index = 0
        while index < count {
            let (chunk, covered) = nextChunk(at: index, count: count)
            buffer.storeBigEndian(chunk, at: position)
            position += 2
            index += covered
        }
        for i in 0..<count {
            switch statuses[i] {
            case 1:
                buffer[position] = UInt8(deltas[i])
                position += 1
            case 2:
                buffer.storeBigEndian(UInt16(bitPattern: deltas[i]), at: position)
                position += 2
            default:
                break
            }
        }
        buffer.zero(from: position, count: offset + total - position)
        feedbackCount &+= 1
        nextToReport += Int64(count)
        unreportedPackets = 0
        return total
    }

    private func slot(_ sequence: Int64) -> Int { Int(sequence & Int64(Self.capacity - 1)) }

    /// A time difference in microseconds as 250 µs ticks, rounded to the nearest.
    private static func ticks(_ microseconds: Int64) -> Int64 {
        let tick = TransportFeedback.deltaTickMicroseconds
        return microseconds >= 0 ? (microseconds + tick / 2) / tick : -((-microseconds + tick / 2) / tick)
    }

    private func chunkCount(_ count: Int) -> Int {
        var chunks = 0
        var index = 0
        while index < count {
            index += nextChunk(at: index, count: count).covered
            chunks += 1
        }
        return chunks
    }

    /// The chunk for the statuses from `index`: a run when fourteen or more are equal (or the
    /// rest of the range is one status), else fourteen one-bit statuses when none of them is a
    /// large delta, else seven two-bit ones. A last vector's symbols past the range are 0.
    private func nextChunk(at index: Int, count: Int) -> (chunk: UInt16, covered: Int) {
        let first = statuses[index]
        var run = 1
        while index + run < count && statuses[index + run] == first && run < 0x1FFF { run += 1 }
        if run >= 14 || index + run == count {
            return (UInt16(first) << 13 | UInt16(run), run)
        }
        let covered14 = min(14, count - index)
        var large = false
        for i in index..<(index + covered14) where statuses[i] == 2 { large = true }
        if !large {
            var chunk: UInt16 = 0x8000
            for bit in 0..<covered14 where statuses[index + bit] == 1 { chunk |= 1 << UInt16(13 - bit) }
            return (chunk, covered14)
        }
        var chunk: UInt16 = 0xC000
        let covered = min(7, count - index)
        for symbol in 0..<covered { chunk |= UInt16(statuses[index + symbol]) << UInt16(12 - 2 * symbol) }
        return (chunk, covered)
    }
}
