/// The sending side of transport-cc: when each packet left and how big it was, by
/// transport-wide sequence number, so that the peer's feedback (``TransportFeedback``) can be
/// turned into what the congestion controller needs — each packet's send time, its arrival on
/// the receiver's clock (or its loss), and its size.
///
/// Sans-IO. Keeps the last ``capacity`` packets in storage allocated in `init`; stamping and
/// reading feedback never allocate.
public final class TransportSendHistory {
    /// Packets remembered: feedback about older ones is ignored.
    public static let capacity = 1024
    /// The furthest the unwrapped reference time goes from zero (2^36 ticks of 64 ms): arrivals
    /// stay under 2^53 µs, exact as Doubles, and any two of them subtract without overflow.
    public static let maximumReferenceTicks: Int64 = 1 << 36

    /// One packet the feedback reported.
    public struct Result: Sendable, Equatable {
        /// The transport-wide sequence number.
        public var sequence: UInt16
        /// When it was sent (monotonic nanoseconds, our clock).
        public var sentNanoseconds: UInt64
        /// Its size on the wire above IP and UDP, in bytes (RTP header, extension, payload, SRTP tag).
        public var bytes: Int
        /// When it arrived, in microseconds on the receiver's clock (continuous across
        /// feedbacks: the reference time is unwrapped); nil when reported lost.
        public var arrivalMicroseconds: Int64?
    }

    private struct Entry {
        var sequence: Int64
        var sentNanoseconds: UInt64
        var bytes: Int32
        var reported: Bool
    }

    private let entries: UnsafeMutablePointer<Entry>
    private var nextSequence: Int64 = 0
    /// The receiver's reference time, unwrapped (24-bit in the packets), and whether one came.
    private var lastReference: Int64 = 0
    private var hasReference = false
    /// Packets the peer's feedback reported, and of those lost (counting each packet once).
    public private(set) var reportedPackets = 0
    public private(set) var reportedLost = 0

    public init(firstSequence: UInt16 = 0) {
        entries = .allocate(capacity: Self.capacity)
        entries.initialize(repeating: Entry(sequence: -1, sentNanoseconds: 0, bytes: 0, reported: false), count: Self.capacity)
        nextSequence = Int64(firstSequence)
    }

    deinit { entries.deallocate() }

    /// The sequence number the next packet carries.
    public var upcomingSequence: UInt16 { UInt16(truncatingIfNeeded: nextSequence) }

    /// Takes the next sequence number for a packet of `bytes` (above IP and UDP) sent at
    /// `nanoseconds`. - Note: No allocation.
    public func stamp(bytes: Int, sentNanoseconds nanoseconds: UInt64) -> UInt16 {
        let sequence = nextSequence
        entries[Int(sequence & Int64(Self.capacity - 1))] = Entry(
            sequence: sequence, sentNanoseconds: nanoseconds, bytes: Int32(clamping: bytes), reported: false)
        nextSequence += 1
        return UInt16(truncatingIfNeeded: sequence)
    }

    /// Reads one feedback packet's body and calls `result` for each packet it reports that is
    /// still in the history, in sequence order (a packet reported twice — the receiver's
    /// feedback about it lost, or repeated — is given once, its first report).
    /// - Returns: whether the body was well-formed.
    /// - Note: No allocation.
    @discardableResult
    public func readFeedback(body: UnsafeRawBufferPointer, _ result: (Result) -> Void) -> Bool {
        guard body.count >= 16 else { return false }
        // The reference time, unwrapped against the last one (24 bits of 64 ms: 12 days).
        let raw = Int64(Int32(bitPattern: UInt32(body[12]) << 24 | UInt32(body[13]) << 16 | UInt32(body[14]) << 8) >> 8)
        var unwrapped = raw
        if hasReference {
            let modulus: Int64 = 1 << 24
            var step = (raw - lastReference) % modulus
            if step >= modulus / 2 { step -= modulus } else if step < -modulus / 2 { step += modulus }
            unwrapped = lastReference + step
            // A receiver's clock moves a tick (64 ms) or so a feedback; one whose reference keeps
            // leaping (a hostile peer: 2^23 ticks a feedback) would take the unwrapped time, and
            // the arrivals after it, past what differences of them can hold. Past about 139
            // years it starts again from the raw value (one bad delay sample, no trap).
            if unwrapped > Self.maximumReferenceTicks || unwrapped < -Self.maximumReferenceTicks { unwrapped = raw }
        }
        let offset = (unwrapped - raw) * TransportFeedback.referenceTickMicroseconds
        let newest = nextSequence - 1
        // Only the packets still remembered are visited: a run of lost ones outside them is not.
        let remembered = Int(min(nextSequence, Int64(Self.capacity)))
        let window = (first: UInt16(truncatingIfNeeded: nextSequence - Int64(remembered)), count: remembered)
        let header = TransportFeedback.read(body: body, window: window) { sequence, arrival in
            // The extended sequence nearest the newest sent.
            let extended = newest - Int64(UInt16(truncatingIfNeeded: newest) &- sequence)
            guard extended >= 0, newest - extended < Int64(Self.capacity) else { return }
            let index = Int(extended & Int64(Self.capacity - 1))
            guard entries[index].sequence == extended, !entries[index].reported else { return }
            entries[index].reported = true
            reportedPackets += 1
            if arrival == nil { reportedLost += 1 }
            result(Result(
                sequence: sequence, sentNanoseconds: entries[index].sentNanoseconds, bytes: Int(entries[index].bytes),
                arrivalMicroseconds: arrival.map { $0 + offset }))
        }
        guard header != nil else { return false }
        lastReference = unwrapped
        hasReference = true
        return true
    }
}
