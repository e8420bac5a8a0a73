import Glibc

/// Adapts the sender's Opus settings to the loss the peer reports in RTCP (sans-IO: each report
/// comes with its `now`).
///
/// - The loss estimate follows a report's fraction lost at once when it rises and decays towards
///   lower reports with a half-life of `decayHalfLifeSeconds`, so one clean report after a lossy
///   stretch does not switch protection off.
/// - Expected loss for the encoder (`OPUS_SET_PACKET_LOSS_PERC`, which sizes the in-band FEC) is
///   the estimate in whole percent, bounded to `maximumExpectedLossPercent`; it only changes by
///   `hysteresisPercent` or more, or to and from zero, so the encoder is not reconfigured on noise.
/// - In-band FEC is on while the expected loss is above zero (when the peer accepts FEC at all).
/// - The bitrate rises with the loss, by `bitrateIncreasePerLoss` times the expected loss (5: +50 %
///   at 10 %, twice the base at 20 %), up to `maximumBitrateIncrease` over the base, so that FEC's
///   redundancy (the LBRR copy of every frame) does not starve the primary encoding; it never
///   exceeds `maximumBitrateBitsPerSecond`. Measured with `tether-bench codec-quality` (wideband
///   PESQ, Opus alone): at 10 % loss FEC gives 2.7 at 32 kb/s, 3.2 at 48 and 3.5 at 64; at 20 %,
///   2.0, 2.4 and 2.6. Voice at 64 kb/s is still small next to what a lossy link usually carries,
///   but where loss comes from congestion the extra rate adds to it: cap it with the peer's
///   `maxaveragebitrate` (or `maximumBitrateIncrease`).
/// - Heavy loss, when allowed (RFC 2198 RED negotiated): each packet also carries the two frames
///   before it (`redundantFrameCount`, 2; 1 carries the frame before only), so a frame is lost
///   only when its packet and the next two are — and with FEC inside the oldest copy, the next
///   three (computed for 20 % independent loss: 0.2⁴ = 0.16 % left for concealment, against
///   0.2² = 4 % with one frame back; a burst of three is rebuilt whole — the jitter buffer's
///   test shows it; measured through the relay at 25 %: 6 of 100 lost frames heard lost). The receiving jitter buffer keeps as many frames
///   more while packets are lost (``JitterBuffer/noteRedundancy(framesBack:now:)``): 60 ms
///   with FEC. The bitrate then is the base plus `redundantBitrateIncrease` (a quarter): about
///   three times that in the payload, 120 kb/s from 32, against 64 for FEC alone. It switches
///   on when the *sustained* loss reaches `redundancyOnPercent` (10 %) and off under
///   `redundancyOffPercent` (5 %): the estimate it reads is a moving average of the reports
///   (each report weighs `redundancySmoothing`, 0.15 — the first few more, the n-th 1/(n+2),
///   so that loss present from the call's start is seen in two or three reports, not five or
///   six, while one report alone still cannot switch it on; four one-second reports of 15 %
///   switch it on; two in a row of 20 % or more, `redundancyFastOnPercent`, at once), not the
///   fast-rising one FEC follows — one-second reports (50 packets) at a nominal 5 % loss read
///   10 % or more one time in ten, and one of them must not triple the bitrate (simulated before
///   the start weights, 200 ten-minute calls at 5 %: none switched on; with each report weighing
///   a fifth, 3; simulated with them, 1 000 such calls: one switched on, at its 130th report,
///   the same one as without them — the start weights added none). RED
///   packets are packets of their own, so the reports go on counting the path's loss.
/// - RED is on from the call's first packet (`startsWithRedundancy`), before the reports can
///   tell how lossy the path is. From the third report (one or two noisy reports decide
///   nothing) the mean of the reports so far decides: at or over the switch-on threshold RED
///   stays, as the rule's own (the sustained loss lifted to that mean); under the switch-off
///   threshold it goes off (a clean path: at the third report, about 2.5 s); between them the
///   start ends at report `startReports` (10) with RED off unless the rule has switched it on
///   by then. The first seconds of a lossy call are protected instead of waiting the reports
///   RED needs to switch on, and a moderate path does not keep RED just because it started
///   with it. Simulated (Python, 50-packet reports, ten-minute calls; without the start in
///   brackets): clean — RED on 0.3 % of the call (0); independent 5 % — 0.9 % (0), off by
///   report 4 (median; 90 %: 10); 7 % — 56 % (51 %); 10 % — on in 98 % of the first ten reports
///   (13 %); bursts of mean 3 at 9 % — 95 % (72 %).
/// - Bursty loss switches RED on sooner, when the peer says which packets it lost (RTCP XR Loss
///   RLE, RFC 3611, as a Tether peer sends when asked): FEC rebuilds only the last frame of each
///   run of losses, so what the listener hears is the loss minus the runs — for independent loss
///   at p about p² (1 % at 10 %), for the same loss in runs of three, two thirds of it. With the
///   runs' mean length (lost packets over runs, over the last reports, each older report weighing
///   `burstMemory` = 0.9 of the next, starting from three runs of one) at
///   `burstyMeanRunPackets` (1.5) or more, RED switches on at the switch-off threshold (5 %
///   sustained) instead of 10 %, and off under 3 % instead of 5 % (`burstyRedundancyOffPercent`:
///   at 4 % in runs of 3.5 a listener hears about 3 %). Simulated (Python re-implementation of this rule, 50-packet
///   reports): Gilbert–Elliott bursts of mean 3 at 9 % loss — on at report 3 (median; 90 % by
///   report 8), where the loss alone took 14 (90 %: 32); independent 5 % loss — one ten-minute
///   call of 1 000 switched on, as with the loss alone; independent 7 % — 192 of 300 ten-minute
///   calls switched on, against 185 of 300 with the loss alone (separate random draws, so within
///   the simulation's noise; the unit tests feed the same seeded reports with and without their
///   runs, and 24 such calls at 5 % and 7 % switch on at the same report).
/// - Long runs get deeper RED: with a mean run of 2 packets or more (`deepBurstMeanRunPackets`;
///   back under 1.75) each packet carries the three frames before it
///   (`deepRedundantFrameCount`), so runs of four are rebuilt whole. For runs of mean 3.5 (what
///   the relay's Gilbert–Elliott model of mean 3 measures) two frames back leave about 36 % of
///   the lost frames to concealment and three about 26 %; measured (RED always on, eight clips):
///   38 % and 28 %, PESQ-WB 2.94 and 3.00. The payload is a third larger (four frames a packet).
public struct LossAdaptation: Sendable, Equatable {
    public struct Settings: Sendable, Equatable {
        public var expectedLossPercent: Int
        public var inBandFEC: Bool
        public var bitrateBitsPerSecond: Int
        /// How many earlier frames each packet carries again (RFC 2198 RED): 0 (none), 1 (the
        /// frame before), 2 (the two before) or 3 (on long loss runs).
        public var redundantFrames: Int
        /// Whether packets carry earlier frames at all.
        public var redundancy: Bool { redundantFrames > 0 }

        public init(expectedLossPercent: Int, inBandFEC: Bool, bitrateBitsPerSecond: Int, redundantFrames: Int = 0) {
            self.expectedLossPercent = expectedLossPercent
            self.inBandFEC = inBandFEC
            self.bitrateBitsPerSecond = bitrateBitsPerSecond
            self.redundantFrames = redundantFrames
        }
    }

    /// The deepest RED asked for: three frames back.
    public static let maximumRedundantFrames = 3

    public var baseBitrateBitsPerSecond: Int
    public var maximumBitrateBitsPerSecond: Int
    /// Whether the peer accepts in-band FEC (`useinbandfec=1`).
    public var peerAcceptsFEC: Bool
    public var decayHalfLifeSeconds = 8.0
    public var maximumExpectedLossPercent = 30
    public var hysteresisPercent = 2
    public var maximumBitrateIncrease = 1.0
    public var bitrateIncreasePerLoss = 5.0
    /// Whether packets may be sent twice under heavy loss.
    public var allowsRedundancy: Bool
    public var redundancyOnPercent = 10
    public var redundancyOffPercent = 5
    public var redundantBitrateIncrease = 0.25
    /// Frames each packet carries again under heavy loss (1 to 3). With two, a frame is lost only
    /// when its packet and the next two are (with FEC in the oldest copy, the next three). The
    /// settings follow a change at once.
    public var redundantFrameCount = 2 {
        didSet { settings = target(expectedLossPercent: settings.expectedLossPercent, heavy: heavyLoss || protectingStart, deep: deepBursts) }
    }
    /// Whether redundancy is on whatever the loss (when allowed at all).
    public var alwaysRedundant: Bool
    /// The weight of each report in the sustained-loss average that switches redundancy.
    public var redundancySmoothing = 0.15
    /// Two reports in a row of at least this much loss switch redundancy on at once, without
    /// waiting for the average (about four reports): at a nominal 5 % a one-second report reads
    /// 20 % about once in 3 000, two in a row about once in ten million.
    public var redundancyFastOnPercent = 20
    /// Mean run of consecutive losses (packets, from the peer's Loss RLE reports) from which loss
    /// counts as bursty: RED then switches on from `redundancyOffPercent` instead of
    /// `redundancyOnPercent`.
    public var burstyMeanRunPackets = 1.5
    /// The switch-off threshold while loss is bursty: in runs FEC rebuilds one frame of each, so a
    /// listener hears most of a bursty path's loss (at 4 % in runs of 3.5, about 3 %), more than
    /// FEC leaves of independent 10 %.
    public var burstyRedundancyOffPercent = 3
    /// How much each older Loss RLE report weighs in the mean run, relative to the next one.
    public var burstMemory = 0.9
    /// Mean loss run (packets) from which RED carries `deepRedundantFrameCount` frames instead of
    /// `redundantFrameCount`: runs of four are then rebuilt whole (with FEC in the oldest copy).
    /// Back to `redundantFrameCount` under `deepBurstOffMeanRunPackets`.
    public var deepBurstMeanRunPackets = 2.0
    public var deepBurstOffMeanRunPackets = 1.75
    public var deepRedundantFrameCount = 3
    /// Whether RED is on from the first packet (when allowed), before the reports can tell how
    /// lossy the path is: from the third report the mean of the reports so far decides — at or
    /// over the switch-on threshold (10 %, 5 % bursty) RED stays on as the rule's own, under the
    /// switch-off threshold (5 %, 3 % bursty) it goes off, and between them the start ends at
    /// report `startReports` with RED off unless the rule itself has switched it on. A call's
    /// first seconds are then protected on a lossy path instead of waiting the reports RED
    /// needs to switch on; a clean path has RED for its first two reports (about 2.5 s).
    public let startsWithRedundancy: Bool
    /// The report by which the start's RED ends unless the loss has confirmed it.
    public var startReports = 10

    /// The current loss estimate, 0…1 (FEC's: rises at once, decays slowly).
    public private(set) var lossEstimate = 0.0
    /// The sustained loss, 0…1: the reports' moving average (redundancy's).
    public private(set) var sustainedLoss = 0.0
    /// Whether the sustained loss counts as heavy (between the on and off thresholds: as it was).
    public private(set) var heavyLoss = false
    /// Whether RED is on because the call has just started (`startsWithRedundancy`), not yet
    /// confirmed or released by the reports.
    public private(set) var protectingStart = false
    /// The start's reports' fractions lost, summed (their mean decides the start).
    private var startLossTotal = 0.0
    /// Whether the peer's loss runs are long enough for the deeper RED (between the two mean
    /// runs: as it was).
    public private(set) var deepBursts = false
    /// What the encoder should use now.
    public private(set) var settings: Settings
    private var lastReport: MonotonicInstant?
    /// The previous report's fraction lost (the fast switch-on looks at two in a row).
    private var previousReported = 0.0
    /// Reports taken so far (the sustained average's first weights).
    private var reports = 0
    /// Lost packets and runs of losses in the peer's Loss RLE reports, older ones weighing less
    /// (`burstMemory`), starting as three runs of one packet each; `sawLossRuns` once one came.
    private var recentLost = 3.0
    private var recentLossRuns = 3.0
    private var sawLossRuns = false

    /// The mean run of consecutive losses in the peer's recent Loss RLE reports, in packets (1:
    /// every loss alone); nil when the peer sends none.
    public var meanLossRunPackets: Double? {
        guard sawLossRuns else { return nil }
        return recentLossRuns > 1e-9 ? recentLost / recentLossRuns : 1  // (no loss for thousands of reports)
    }

    public init(
        baseBitrateBitsPerSecond: Int, maximumBitrateBitsPerSecond: Int, peerAcceptsFEC: Bool, initialExpectedLossPercent: Int = 0,
        allowsRedundancy: Bool = false, alwaysRedundant: Bool = false, startsWithRedundancy: Bool = true
    ) {
        self.allowsRedundancy = allowsRedundancy
        self.alwaysRedundant = alwaysRedundant
        self.startsWithRedundancy = startsWithRedundancy
        self.baseBitrateBitsPerSecond = baseBitrateBitsPerSecond
        self.maximumBitrateBitsPerSecond = max(baseBitrateBitsPerSecond, maximumBitrateBitsPerSecond)
        self.peerAcceptsFEC = peerAcceptsFEC
        lossEstimate = Double(max(0, initialExpectedLossPercent)) / 100
        settings = Settings(expectedLossPercent: 0, inBandFEC: false, bitrateBitsPerSecond: baseBitrateBitsPerSecond)
        protectingStart = allowsRedundancy && startsWithRedundancy
        settings = target(expectedLossPercent: min(maximumExpectedLossPercent, max(0, initialExpectedLossPercent)), heavy: protectingStart)
    }

    /// Takes a report's fraction lost (0…1, RTCP's 8-bit value / 256) and, when the peer sent a
    /// Loss RLE block with it, the packets it lost and in how many runs of consecutive losses.
    /// Returns the new settings when they changed, `nil` otherwise.
    public mutating func reportReceived(fractionLost: Double, lossRuns: (lost: Int, runs: Int)? = nil, now: MonotonicInstant) -> Settings? {
        let reported = min(1, max(0, fractionLost))
        if let lossRuns, lossRuns.lost >= 0, lossRuns.runs >= 0, lossRuns.runs <= lossRuns.lost {
            sawLossRuns = true
            recentLost = recentLost * burstMemory + Double(lossRuns.lost)
            recentLossRuns = recentLossRuns * burstMemory + Double(lossRuns.runs)
        }
        // The first reports weigh more (the n-th 1/(n+2), as if two loss-free reports came
        // before them) until that falls to `redundancySmoothing`: an average that starts at
        // zero would take five or six reports to reach a heavy loss the call had from the start,
        // and with these weights one report alone still cannot switch redundancy on (it would
        // take 30 % lost in the first).
        reports += 1
        sustainedLoss += (reported - sustainedLoss) * max(redundancySmoothing, 1 / Double(reports + 2))
        let fastOn = Double(redundancyFastOnPercent) / 100
        if reported >= fastOn && previousReported >= fastOn {
            // Heavy loss twice in a row: the average is lifted to the lesser of the two, from
            // where it follows the reports (and falls to the off threshold) as before.
            sustainedLoss = max(sustainedLoss, min(reported, previousReported))
        }
        previousReported = reported
        if let lastReport, now > lastReport {
            let elapsed = Double(now.nanoseconds - lastReport.nanoseconds) / 1e9
            lossEstimate *= pow(0.5, elapsed / decayHalfLifeSeconds)
        }
        lastReport = now
        lossEstimate = max(lossEstimate, reported)
        let wanted = min(maximumExpectedLossPercent, Int((lossEstimate * 100).rounded()))
        let current = settings.expectedLossPercent
        let sustained = Int((sustainedLoss * 100).rounded())
        let meanRun = meanLossRunPackets ?? 1
        let bursty = meanRun >= burstyMeanRunPackets
        let onThreshold = bursty ? redundancyOffPercent : redundancyOnPercent
        let offThreshold = bursty ? burstyRedundancyOffPercent : redundancyOffPercent
        var heavy = allowsRedundancy && sustained >= (heavyLoss ? offThreshold : onThreshold)
        if protectingStart {
            // The start's RED: the rule's own once it switches on; from the third report (one or
            // two noisy reports decide nothing) the reports' mean confirms it (the sustained loss
            // lifted to that mean, so the rule keeps it) or releases it.
            startLossTotal += reported
            let mean = startLossTotal / Double(reports)
            let meanPercent = Int((mean * 100).rounded())
            if heavy {
                protectingStart = false
            } else if reports >= 3 && meanPercent >= onThreshold {
                heavy = true
                sustainedLoss = max(sustainedLoss, mean)
                protectingStart = false
            } else if reports >= 3 && (meanPercent < offThreshold || reports >= startReports) {
                protectingStart = false
            }
        }
        let deep = meanRun >= (deepBursts ? deepBurstOffMeanRunPackets : deepBurstMeanRunPackets)
        let next = target(expectedLossPercent: wanted, heavy: heavy || protectingStart, deep: deep)
        let changes = (wanted == 0) != (current == 0) || abs(wanted - current) >= hysteresisPercent || heavy != heavyLoss
            || next.redundantFrames != settings.redundantFrames
        deepBursts = deep
        guard changes else { return nil }
        heavyLoss = heavy
        guard next != settings else { return nil }
        settings = next
        return next
    }

    private func target(expectedLossPercent: Int, heavy: Bool, deep: Bool = false) -> Settings {
        let redundancy = heavy || (allowsRedundancy && alwaysRedundant)
        let wanted = deep ? max(redundantFrameCount, deepRedundantFrameCount) : redundantFrameCount
        let frames = redundancy ? min(Self.maximumRedundantFrames, max(1, wanted)) : 0
        let increase = heavy
            ? redundantBitrateIncrease
            : min(maximumBitrateIncrease, bitrateIncreasePerLoss * Double(expectedLossPercent) / 100)
        let bitrate = min(maximumBitrateBitsPerSecond, Int((Double(baseBitrateBitsPerSecond) * (1 + increase)).rounded()))
        return Settings(
            expectedLossPercent: expectedLossPercent, inBandFEC: peerAcceptsFEC && expectedLossPercent > 0,
            bitrateBitsPerSecond: bitrate, redundantFrames: frames)
    }
}
