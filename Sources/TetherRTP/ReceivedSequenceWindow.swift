/// A 128-packet bitmap of which sequence numbers at or below the highest one were
/// received; used to tell duplicates from late (reordered) packets. Internal.
struct ReceivedSequenceWindow: Sendable, Equatable, Hashable {
    /// Window size in packets.
    static let size = 128

    /// Bit i set: packet (highest − i) received, for i in 0..<64.
    private var low: UInt64 = 0
    /// Bit i set: packet (highest − 64 − i) received, for i in 0..<64.
    private var high: UInt64 = 0

    /// Clears the window and marks the current highest packet as received.
    mutating func reset() {
        low = 1
        high = 0
    }

    /// Moves the highest packet forward by `packets` (≥ 1) and marks the new highest.
    mutating func advance(by packets: Int) {
        if packets >= 128 {
            low = 0
            high = 0
        } else if packets >= 64 {
            high = low << UInt64(packets - 64)
            low = 0
        } else if packets > 0 {
            high = (high << UInt64(packets)) | (low >> UInt64(64 - packets))
            low = low << UInt64(packets)
        }
        low |= 1
    }

    /// Whether the packet `packetsBehind` (≥ 0) below the highest was received (false outside the window).
    func contains(packetsBehind: Int) -> Bool {
        guard packetsBehind >= 0, packetsBehind < ReceivedSequenceWindow.size else { return false }
        return packetsBehind < 64 ? low & (1 << UInt64(packetsBehind)) != 0 : high & (1 << UInt64(packetsBehind - 64)) != 0
    }

    /// Marks the packet `packetsBehind` (≥ 0) below the highest as received.
    /// - Returns: false if it had already been marked (a duplicate). Packets outside the
    ///   window are reported as new.
    mutating func markReceived(packetsBehind: Int) -> Bool {
        guard packetsBehind >= 0, packetsBehind < ReceivedSequenceWindow.size else { return true }
        if packetsBehind < 64 {
            let bit: UInt64 = 1 << UInt64(packetsBehind)
            if low & bit != 0 { return false }
            low |= bit
        } else {
            let bit: UInt64 = 1 << UInt64(packetsBehind - 64)
            if high & bit != 0 { return false }
            high |= bit
        }
        return true
    }
}
