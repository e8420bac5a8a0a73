/// The impairments a ``UDPImpairmentRelay`` applies. Every field can be changed at any time,
/// from any thread, through ``UDPImpairmentRelay/impairments`` or the convenience methods; the
/// change applies to the next datagram that arrives (datagrams already delayed keep the release
/// time they were given).
///
/// Order of the stages for each arriving datagram: black hole → binding-response filter → known destination → loss
/// (uniform, then burst) → duplication → delay and jitter.
public struct UDPImpairments: Sendable, Equatable, Codable {
    /// Drops every datagram in both directions (a total outage), counted as dropped by black hole.
    public var blackHole: Bool = false
    /// Drops every datagram from A to B (a one-way outage).
    public var blackHoleAToB: Bool = false
    /// Drops every datagram from B to A (a one-way outage).
    public var blackHoleBToA: Bool = false
    /// Independent (Bernoulli) loss, in percent of datagrams, `0 ... 100`. Decided by the
    /// relay's seeded generator: the same seed drops the same datagrams of the same sequence.
    public var lossPercent: Double = 0
    /// Optional bursty loss (Gilbert–Elliott), applied in addition to ``lossPercent``.
    public var burstLoss: BurstLoss? = nil
    /// Fixed one-way delay added to every forwarded datagram, in milliseconds.
    public var delayMilliseconds: Double = 0
    /// Jitter, in milliseconds: each datagram's delay is drawn uniformly from
    /// `delayMilliseconds - jitterMilliseconds ... delayMilliseconds + jitterMilliseconds`
    /// (never below zero). Datagrams are released in release-time order, so a jitter larger
    /// than the gap between datagrams REORDERS them, as on a real multi-path network.
    public var jitterMilliseconds: Double = 0
    /// Datagrams forwarded twice, in percent, `0 ... 100`. The copy gets its own jitter draw.
    public var duplicatePercent: Double = 0
    /// Drops the STUN Binding success responses (the answers to ICE connectivity checks)
    /// travelling in this direction, and nothing else: the checks of the side they answer fail
    /// while its peer's succeed and media flows (what unlucky loss does to one side's checks
    /// only). Counted as ``UDPRelayDirectionStatistics/droppedBindingResponses``; nil: none.
    public var dropsBindingResponses: RelayDirection? = nil

    /// No impairment: every datagram is forwarded at once.
    public init() {}

    /// Creates impairments; every unspecified field means "no impairment".
    public init(
        blackHole: Bool = false, blackHoleAToB: Bool = false, blackHoleBToA: Bool = false,
        lossPercent: Double = 0, burstLoss: BurstLoss? = nil, delayMilliseconds: Double = 0,
        jitterMilliseconds: Double = 0, duplicatePercent: Double = 0, dropsBindingResponses: RelayDirection? = nil
    ) {
        self.blackHole = blackHole
        self.blackHoleAToB = blackHoleAToB
        self.blackHoleBToA = blackHoleBToA
        self.lossPercent = lossPercent
        self.burstLoss = burstLoss
        self.delayMilliseconds = delayMilliseconds
        self.jitterMilliseconds = jitterMilliseconds
        self.duplicatePercent = duplicatePercent
        self.dropsBindingResponses = dropsBindingResponses
    }

    /// Whether `bytes`, travelling in `direction`, is a STUN Binding success response that
    /// ``dropsBindingResponses`` drops (RFC 5389: type 0x0101, the magic cookie at byte 4).
    public func dropsAsBindingResponse(_ bytes: UnsafeRawBufferPointer, travelling direction: RelayDirection) -> Bool {
        guard dropsBindingResponses == direction, bytes.count >= 20 else { return false }
        return bytes[0] == 0x01 && bytes[1] == 0x01 && bytes[4] == 0x21 && bytes[5] == 0x12 && bytes[6] == 0xA4
            && bytes[7] == 0x42
    }

    /// Whether datagrams travelling in `direction` are black-holed.
    public func isBlackHoled(_ direction: RelayDirection) -> Bool {
        blackHole || (direction == .aToB ? blackHoleAToB : blackHoleBToA)
    }
}

/// Gilbert–Elliott two-state bursty loss. Each direction has its own state, starting in the good
/// state. For each datagram: it is lost with the loss probability of the current state, then the
/// state moves (good → bad with ``goodToBadProbability``, bad → good with
/// ``badToGoodProbability``). Mean burst length is `1 / badToGoodProbability` datagrams.
/// All probabilities are per datagram, `0 ... 1`.
public struct BurstLoss: Sendable, Equatable, Codable {
    /// Probability per datagram of moving from the good to the bad state, `0 ... 1`.
    public var goodToBadProbability: Double
    /// Probability per datagram of moving from the bad to the good state, `0 ... 1`.
    public var badToGoodProbability: Double
    /// Probability that a datagram is lost while in the bad state, `0 ... 1` (classically 1).
    public var lossProbabilityInBadState: Double
    /// Probability that a datagram is lost while in the good state, `0 ... 1` (classically 0).
    public var lossProbabilityInGoodState: Double

    /// Creates a Gilbert–Elliott model; probabilities are per datagram, `0 ... 1`.
    public init(
        goodToBadProbability: Double, badToGoodProbability: Double,
        lossProbabilityInBadState: Double = 1, lossProbabilityInGoodState: Double = 0
    ) {
        self.goodToBadProbability = goodToBadProbability
        self.badToGoodProbability = badToGoodProbability
        self.lossProbabilityInBadState = lossProbabilityInBadState
        self.lossProbabilityInGoodState = lossProbabilityInGoodState
    }
}
