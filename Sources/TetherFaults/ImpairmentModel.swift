/// What the relay does with one datagram, as decided by ``ImpairmentModel``.
public enum ImpairmentDecision: Sendable, Equatable {
    /// Dropped because the direction is black-holed.
    case dropByBlackHole
    /// Dropped by uniform or burst loss.
    case dropByLoss
    /// Forwarded after `delayNanoseconds`; when `duplicateDelayNanoseconds` is set a second copy
    /// is forwarded after that delay.
    case forward(delayNanoseconds: UInt64, duplicateDelayNanoseconds: UInt64?)
}

/// The sans-IO heart of the relay: given the current impairments it decides, datagram by
/// datagram, whether to drop, duplicate or delay. No clock, no socket.
///
/// Determinism: each direction has independent generator streams for uniform loss, burst loss,
/// duplication and jitter, all derived from one seed, and every stream is drawn exactly once per
/// datagram that is not black-holed, whatever the settings. So the n-th datagram of a direction
/// gets the same loss decision for the same seed, even if jitter or duplication settings differ
/// or the other direction carries different traffic.
public struct ImpairmentModel: Sendable {
    struct DirectionState: Sendable {
        var loss: SeededRandom
        var burst: SeededRandom
        var duplicate: SeededRandom
        var jitter: SeededRandom
        var inBadState = false
    }

    /// The seed all streams derive from.
    public let seed: UInt64
    private var states: [DirectionState]

    /// Creates a model whose decisions are fixed by `seed`.
    public init(seed: UInt64) {
        self.seed = seed
        states = RelayDirection.allCases.map { direction in
            let base = UInt64(direction.rawValue) * 16
            return DirectionState(
                loss: SeededRandom(seed: seed, stream: base + 1),
                burst: SeededRandom(seed: seed, stream: base + 2),
                duplicate: SeededRandom(seed: seed, stream: base + 3),
                jitter: SeededRandom(seed: seed, stream: base + 4))
        }
    }

    /// Decides the fate of the next datagram travelling in `direction`.
    public mutating func decide(_ direction: RelayDirection, impairments: UDPImpairments) -> ImpairmentDecision {
        if impairments.isBlackHoled(direction) { return .dropByBlackHole }
        var state = states[direction.rawValue]
        defer { states[direction.rawValue] = state }

        // Every stream is drawn once per datagram, used or not (see the type's documentation).
        let lossDraw = state.loss.nextUnitInterval()
        let burstLossDraw = state.burst.nextUnitInterval()
        let burstMoveDraw = state.burst.nextUnitInterval()
        let duplicateDraw = state.duplicate.nextUnitInterval()
        let jitterDraw = state.jitter.nextUnitInterval()
        let duplicateJitterDraw = state.jitter.nextUnitInterval()

        var lost = lossDraw < impairments.lossPercent / 100
        if let burst = impairments.burstLoss {
            let lossProbability =
                state.inBadState ? burst.lossProbabilityInBadState : burst.lossProbabilityInGoodState
            if burstLossDraw < lossProbability { lost = true }
            if state.inBadState {
                if burstMoveDraw < burst.badToGoodProbability { state.inBadState = false }
            } else if burstMoveDraw < burst.goodToBadProbability {
                state.inBadState = true
            }
        }
        if lost { return .dropByLoss }

        let delay = Self.delayNanoseconds(impairments, draw: jitterDraw)
        let duplicate =
            duplicateDraw < impairments.duplicatePercent / 100
            ? Self.delayNanoseconds(impairments, draw: duplicateJitterDraw) : nil
        return .forward(delayNanoseconds: delay, duplicateDelayNanoseconds: duplicate)
    }

    /// Delay in nanoseconds for a jitter draw in `0 ..< 1`: uniform over delay ± jitter, ≥ 0.
    static func delayNanoseconds(_ impairments: UDPImpairments, draw: Double) -> UInt64 {
        let jitter = max(0, impairments.jitterMilliseconds)
        let milliseconds = impairments.delayMilliseconds + (draw * 2 - 1) * jitter
        guard milliseconds > 0, milliseconds.isFinite else { return 0 }
        return UInt64(milliseconds * 1_000_000)
    }
}
