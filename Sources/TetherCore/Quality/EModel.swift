/// A simplified E-model (ITU-T G.107) that turns delay and loss into a transmission rating R and
/// an estimated MOS (conversational quality, 1…4.5), as mobile SDKs' quality scores do.
///
/// Simplifications, each standard practice for a live estimate:
/// - default values for every factor the call cannot observe (room noise, loudness ratings,
///   echo): R0 − Is = 93.2, A = 0;
/// - the delay impairment from the one-way delay `d` (ms) by the common fit
///   `Id = 0.024 d + 0.11 (d − 177.3) H(d − 177.3)`;
/// - the effective equipment impairment `Ie,eff = Ie + (95 − Ie) · Ppl / (Ppl / BurstR + Bpl)`,
///   with Ppl the loss the listener hears (percent, after FEC) and BurstR the burst ratio
///   (1 for random loss, above 1 when losses come in bursts).
///
/// Opus has no G.113 table entry in the narrowband scale; `opus` takes Ie = 0 (transparent at
/// speech bitrates) and Bpl = 20 (its concealment), values in line with published measurements.
public struct EModel: Sendable, Equatable {
    /// Equipment impairment factor of the codec at zero loss.
    public var equipmentImpairment: Double
    /// Packet-loss robustness factor of the codec and its concealment.
    public var packetLossRobustness: Double

    public init(equipmentImpairment: Double, packetLossRobustness: Double) {
        self.equipmentImpairment = equipmentImpairment
        self.packetLossRobustness = packetLossRobustness
    }

    /// Opus with its loss concealment.
    public static let opus = EModel(equipmentImpairment: 0, packetLossRobustness: 20)

    /// The basic signal-to-noise ratio with default factors, less the simultaneous impairment.
    public static let defaultBasicRating = 93.2

    /// Transmission rating R for a one-way delay, a heard loss (percent, 0…100) and a burst ratio.
    public func rating(oneWayDelayMilliseconds: Double, lossPercent: Double, burstRatio: Double = 1) -> Double {
        let d = max(0, oneWayDelayMilliseconds)
        let delayImpairment = 0.024 * d + (d > 177.3 ? 0.11 * (d - 177.3) : 0)
        let loss = min(100, max(0, lossPercent))
        let burst = max(1, burstRatio)
        let ie = equipmentImpairment
        let effective = ie + (95 - ie) * loss / (loss / burst + packetLossRobustness)
        return Self.defaultBasicRating - delayImpairment - effective
    }

    /// The MOS that a rating R maps to (G.107 Annex B): 1 below 0, 4.5 above 100.
    public static func meanOpinionScore(rating r: Double) -> Double {
        if r <= 0 { return 1 }
        if r >= 100 { return 4.5 }
        return 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6
    }
}
