/// Counters of one direction of a ``UDPImpairmentRelay``. Every datagram received is counted
/// once as received and then either forwarded or dropped for exactly one reason (or still
/// waiting in the delay queue).
public struct UDPRelayDirectionStatistics: Sendable, Equatable, Codable {
    /// Datagrams that arrived on the ingress socket.
    public var packetsReceived: UInt64 = 0
    /// Payload bytes that arrived on the ingress socket.
    public var bytesReceived: UInt64 = 0
    /// Datagrams sent out of the egress socket, duplicates included.
    public var packetsForwarded: UInt64 = 0
    /// Payload bytes sent out of the egress socket, duplicates included.
    public var bytesForwarded: UInt64 = 0
    /// Datagrams dropped because the direction was black-holed (or in a scheduled outage).
    public var droppedByBlackHole: UInt64 = 0
    /// Datagrams dropped by uniform or burst loss.
    public var droppedByLoss: UInt64 = 0
    /// STUN Binding success responses dropped by ``UDPImpairments/dropsBindingResponses``.
    public var droppedBindingResponses: UInt64 = 0
    /// Of those, the RTP packets (version 2, not an RTCP packet type by RFC 5761): what the
    /// receiver should count as lost.
    public var rtpDroppedByLoss: UInt64 = 0
    /// Datagrams dropped because the far peer's address was not known yet.
    public var droppedNoDestination: UInt64 = 0
    /// Datagrams dropped because the delay queue was full.
    public var droppedQueueFull: UInt64 = 0
    /// Datagrams larger than the relay's buffer (65 535 bytes), dropped.
    public var droppedTruncated: UInt64 = 0
    /// Datagrams (or copies) that were held in the delay queue rather than sent at once.
    public var delayed: UInt64 = 0
    /// Extra copies created by duplication.
    public var duplicated: UInt64 = 0
    /// `sendto` failures (the datagram is lost).
    public var sendErrors: UInt64 = 0
    /// Times the ingress peer's source address differed from the one remembered.
    public var peerAddressChanges: UInt64 = 0
    /// When the last datagram (or copy) left the egress socket: `CLOCK_MONOTONIC` nanoseconds
    /// (the clock of `MonotonicClock`), 0 before the first.
    public var lastForwardedNanoseconds: UInt64 = 0

    /// All counters zero.
    public init() {}
}

/// A snapshot of a ``UDPImpairmentRelay``'s counters, per direction.
public struct UDPRelayStatistics: Sendable, Equatable, Codable {
    /// Datagrams from peer A to peer B.
    public var aToB = UDPRelayDirectionStatistics()
    /// Datagrams from peer B to peer A.
    public var bToA = UDPRelayDirectionStatistics()
    /// Datagrams currently waiting in the delay queue (both directions).
    public var queuedPackets: Int = 0

    /// All counters zero.
    public init() {}

    /// The counters of one direction.
    public subscript(direction: RelayDirection) -> UDPRelayDirectionStatistics {
        get { direction == .aToB ? aToB : bToA }
        set {
            if direction == .aToB { aToB = newValue } else { bToA = newValue }
        }
    }
}
