import Glibc

/// Adapts the sender's Opus settings to the loss the peer reports in RTCP (sans-IO: each report
/// comes with its `now`).
///
/// - The loss estimate follows a report's fraction lost at once when it rises and decays towards
///   lower reports with a half-life of `decayHalfLifeSeconds`, so one clean report after a lossy
///   stretch does not switch protection off.
/// - The estimate in whole percent (`estimatedLossPercent`), bounded to
///   `maximumExpectedLossPercent`, only changes by `hysteresisPercent` or more, or to and from
///   zero, so the encoder is not reconfigured on noise.
/// - **With RED negotiated, RED replaces FEC** (unless `fecWithRedundancy`): while the estimate
///   is above zero each packet carries the frame before it (one frame back: a frame is lost only
///   with the next packet too, as with FEC), and while any RED is on the encoder is told no loss
///   and sends no FEC. FEC's LBRR copy and the robustness the expected loss asks of the encoder
///   cost every frame: Opus alone on a loss-free path (`tether-bench codec-quality`, eight
///   clips, 40 kb/s) scores PESQ-WB 4.43 without FEC, 3.92 told 10 % and 3.63 told 20 %; a RED
///   copy is the frame itself. Measured through the relay (`tether-bench quality`, eight clips):
///   FEC inside RED's copies against none — 10 % 3.60 → 4.06, 20 % 3.53 → 3.84, bursts 2.77 →
///   3.03; at 5 %, FEC 3.93 against RED 4.17. The cost is the payload: two frames a packet at
///   the base + 25 % (two and a half times the base) with one frame back, against one frame at
///   the base + 5 × the loss for FEC (+20 % at 4 %, +50 % at 10 %).
/// - Without RED: expected loss for the encoder (`OPUS_SET_PACKET_LOSS_PERC`, which sizes the
///   in-band FEC) is the estimate, and in-band FEC is on while it is above zero (when the peer
///   accepts FEC at all).
/// - The bitrate rises with the loss, by `bitrateIncreasePerLoss` times the expected loss (5: +50 %
///   at 10 %, twice the base at 20 %), up to `maximumBitrateIncrease` over the base, so that FEC's
///   redundancy (the LBRR copy of every frame) does not starve the primary encoding; it never
///   exceeds `maximumBitrateBitsPerSecond`. Measured with `tether-bench codec-quality` (wideband
///   PESQ, Opus alone): at 10 % loss FEC gives 2.7 at 32 kb/s, 3.2 at 48 and 3.5 at 64; at 20 %,
///   2.0, 2.4 and 2.6. Voice at 64 kb/s is still small next to what a lossy link usually carries,
///   but where loss comes from congestion the extra rate adds to it: cap it with the peer's
///   `maxaveragebitrate` (or `maximumBitrateIncrease`).
/// - Heavy loss, when allowed (RFC 2198 RED negotiated): each packet also carries the two frames
///   before it (`redundantFrameCount`, 2), so a frame is lost only when its packet and the next
///   two are (computed for 20 % independent loss: 0.2³ = 0.8 % left for concealment, against
///   0.2² = 4 % with one frame back; a burst of two is rebuilt whole — the jitter buffer's test
///   shows it). The receiving jitter buffer keeps as many frames more while packets are lost
///   (``JitterBuffer/noteRedundancy(framesBack:oldestCarriesFEC:now:)``): 40 ms, and one more
///   when the copies carry FEC (Chromium's). The bitrate of any RED is the base plus
///   `redundantBitrateIncrease` (a quarter): about three times that in the payload at two
///   frames back, 120 kb/s from 32, against 64 for FEC alone. (Here and below "RED on" and
///   "off" are this heavy RED; under it a loss estimate above zero keeps one frame back.) It switches
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
///   by then. Loss in runs (the mean run at `burstyMeanRunPackets` or more) is released only
///   on all ten reports — three reports of a path losing 4 % in runs often hold one run or
///   none — and between the thresholds (3–5 % in runs) keeps RED: FEC or one frame back rebuilds one frame of
///   each run, so a listener would hear most of that loss, and the rule keeps RED that is on
///   down to 3 %. The first seconds of a lossy call are protected instead of waiting the
///   reports RED needs to switch on, and a moderate path of independent loss (5–10 %: FEC
///   leaves under 1 % to concealment) does not keep RED just because it started with it.
///   Simulated (Python, 50-packet reports, ten-minute calls; without the start in brackets):
///   clean — RED on 0.3 % of the call (0); independent 5 % — 0.9 % (0), off by report 4
///   (median; 90 %: 10); 7 % — 56 % (51 %); 10 % — on in 98 % of the first ten reports (13 %);
///   bursts of mean 3 at 9 % — 95 % (72 %); at 4 % — 65 % of the first ten reports (60 % when
///   three reports could release it).
/// - Bursty loss switches RED on sooner, when the peer says which packets it lost (RTCP XR Loss
///   RLE, RFC 3611, as a Tether peer sends when asked): FEC (or one frame back) rebuilds only the last frame of each
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
///   back under 1.75) each packet carries the four frames before it
///   (`deepRedundantFrameCount`), so runs of four are rebuilt whole. For runs of mean 3.5 (what
///   the relay's Gilbert–Elliott model of mean 3 measures) three frames back leave about 36 % of
///   the lost frames to concealment and four about 26 %; measured (eight clips, RED without
///   FEC): 37 % and 31 % (224 of 608, 186 of 602), PESQ-WB 3.03 and 3.29 (with FEC in the
///   copies, before: three back 2.77–2.95). The payload is five frames a packet, the jitter
///   buffer 80 ms more while packets are lost.
public struct LossAdaptation: Sendable, Equatable {
    public struct Settings: Sendable, Equatable {
        public var expectedLossPercent: Int
        public var inBandFEC: Bool
        public var bitrateBitsPerSecond: Int
        /// How many earlier frames each packet carries again (RFC 2198 RED): 0 (none), 1 (the
        /// frame before: light loss), 2 (the two before: heavy loss) or 4 (on long loss runs).
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

    /// The deepest RED asked for: four frames back.
    public static let maximumRedundantFrames = 4

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
    /// Frames each packet carries again under heavy loss (1 to 4). With two, a frame is lost only
    /// when its packet and the next two are. The settings follow a change at once.
    public var redundantFrameCount = 2 {
        didSet { retarget() }
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
    /// `redundantFrameCount`: runs of four are then rebuilt whole.
    /// Back to `redundantFrameCount` under `deepBurstOffMeanRunPackets`.
    public var deepBurstMeanRunPackets = 2.0
    public var deepBurstOffMeanRunPackets = 1.75
    public var deepRedundantFrameCount = 4
    /// Whether RED is on from the first packet (when allowed), before the reports can tell how
    /// lossy the path is: from the third report the mean of the reports so far decides — at or
    /// over the switch-on threshold (10 %, 5 % bursty) RED stays on as the rule's own, under the
    /// switch-off threshold (5 %) it goes off, and between them the start ends at report
    /// `startReports` with RED off unless the rule itself has switched it on. Loss in runs (on
    /// from 5 %) is not released before report `startReports`, and there only under 3 % (as the
    /// rule keeps RED it switched on). A call's first seconds are then protected on a lossy path
    /// instead of waiting the reports RED needs to switch on; a clean path has RED for its first
    /// two reports (about 2.5 s).
    public let startsWithRedundancy: Bool
    /// The report by which the start's RED ends unless the loss has confirmed it.
    public var startReports = 10
    /// Whether FEC stays the protection with RED negotiated: FEC for light loss and inside RED's
    /// copies (sized by the loss estimate), as before RED replaced it. Off (the default): light
    /// loss gets one frame back and the encoder is told no loss while RED is on — FEC's LBRR
    /// copy and the robustness the expected loss asks of the encoder cost every frame's quality,
    /// and RED's copies are the frames themselves.
    public var fecWithRedundancy = false {
        didSet { retarget() }
    }

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
    /// The loss estimate in whole percent as last applied (with the hysteresis): what the
    /// encoder is told while RED is off.
    public private(set) var estimatedLossPercent = 0
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
        estimatedLossPercent = min(maximumExpectedLossPercent, max(0, initialExpectedLossPercent))
        settings = target(expectedLossPercent: estimatedLossPercent, heavy: protectingStart)
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
        let current = estimatedLossPercent
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
            } else if reports >= 3 && meanPercent < offThreshold && !bursty {
                protectingStart = false
            } else if reports >= startReports {
                // Loss in runs is only released by the mean of all the start's reports (three
                // reports of a path losing 4 % in runs often hold one run or none), and between
                // the thresholds keeps the start's RED as the rule's own: the rule's switch-off
                // threshold is what holds RED that is on, and FEC rebuilds one frame a run (at
                // 4 % in runs a listener hears about 3 %). Loss alone between them releases it
                // (FEC leaves under 1 % of independent loss under 10 % to concealment).
                heavy = bursty && meanPercent >= offThreshold
                if heavy { sustainedLoss = max(sustainedLoss, mean) }
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
        estimatedLossPercent = wanted
        guard next != settings else { return nil }
        settings = next
        return next
    }

    /// Applies a changed setting at once (not at the next report).
    private mutating func retarget() {
        settings = target(expectedLossPercent: estimatedLossPercent, heavy: heavyLoss || protectingStart, deep: deepBursts)
    }

    private func target(expectedLossPercent: Int, heavy: Bool, deep: Bool = false) -> Settings {
        let redundancy = heavy || (allowsRedundancy && alwaysRedundant)
        let wanted = deep ? max(redundantFrameCount, deepRedundantFrameCount) : redundantFrameCount
        var frames = redundancy ? min(Self.maximumRedundantFrames, max(1, wanted)) : 0
        // With RED negotiated, lighter loss gets one frame back instead of FEC, and the encoder
        // is told no loss while RED is on (unless `fecWithRedundancy`).
        if frames == 0 && allowsRedundancy && !fecWithRedundancy && expectedLossPercent > 0 { frames = 1 }
        let fecReplaced = frames > 0 && !fecWithRedundancy
        let told = fecReplaced ? 0 : expectedLossPercent
        let increase = heavy || (fecReplaced && expectedLossPercent > 0)
            ? redundantBitrateIncrease
            : min(maximumBitrateIncrease, bitrateIncreasePerLoss * Double(expectedLossPercent) / 100)
        let bitrate = min(maximumBitrateBitsPerSecond, Int((Double(baseBitrateBitsPerSecond) * (1 + increase)).rounded()))
        return Settings(
            expectedLossPercent: told, inBandFEC: peerAcceptsFEC && told > 0, bitrateBitsPerSecond: bitrate, redundantFrames: frames)
    }
}
