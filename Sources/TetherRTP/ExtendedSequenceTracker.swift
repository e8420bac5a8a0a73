/// Turns 16-bit RTP sequence numbers into monotonic 64-bit extended sequence numbers,
/// handling wrap-around (65535 → 0) and reordering across the wrap.
///
/// Each incoming number is placed within ±32767 packets of the highest extended number
/// seen so far. The first number received maps to itself (cycle 0); a reordered packet
/// sent *before* the first one across a wrap maps to a negative value (e.g. first 0, then
/// 65535 → −1). The low 32 bits of non-negative values match RFC 3550's 32-bit extended
/// highest sequence number (cycles << 16 | seq) when starting in cycle 0.
public struct ExtendedSequenceTracker: Sendable, Equatable, Hashable {
    /// Highest extended sequence number seen so far, or nil before the first packet.
    public private(set) var highestExtended: Int64?

    /// Creates an empty tracker.
    public init() {
        highestExtended = nil
    }

    /// Returns the extended sequence number for `sequenceNumber` without recording it.
    public func extendedValue(for sequenceNumber: UInt16) -> Int64 {
        guard let highest = highestExtended else { return Int64(sequenceNumber) }
        let highestLow16 = UInt16(truncatingIfNeeded: highest)
        return highest + Int64(SequenceNumber.distance(from: highestLow16, to: sequenceNumber))
    }

    /// Extends `sequenceNumber` to 64 bits and records it (advancing `highestExtended`
    /// when it is newer).
    /// - Returns: the extended sequence number.
    @discardableResult
    public mutating func extend(_ sequenceNumber: UInt16) -> Int64 {
        let extended = extendedValue(for: sequenceNumber)
        if let highest = highestExtended {
            if extended > highest { highestExtended = extended }
        } else {
            highestExtended = extended
        }
        return extended
    }

    /// Forgets all history (e.g. after an SSRC change).
    public mutating func reset() {
        highestExtended = nil
    }
}
