/// A small, fast, deterministic pseudo-random generator (SplitMix64).
///
/// The same seed always yields the same sequence, on every machine and every run, which is what
/// makes the relay's loss patterns reproducible. Not cryptographically secure.
public struct SeededRandom: RandomNumberGenerator, Sendable, Equatable {
    /// The generator's whole state (64 bits).
    public private(set) var state: UInt64

    /// Creates a generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// Creates the generator of one independent stream derived from `seed` and a stream number,
    /// so decisions drawn from different streams do not shift one another.
    public init(seed: UInt64, stream: UInt64) {
        state = SeededRandom.mix(seed ^ SeededRandom.mix(stream &+ 0x9E37_79B9_7F4A_7C15))
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return SeededRandom.mix(state)
    }

    /// A uniformly distributed value in `0 ..< 1` with 53 bits of precision.
    public mutating func nextUnitInterval() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// The SplitMix64 finalizer: a bijective 64-bit mixing function.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
