import Testing
@testable import TetherCore

/// The send-side rate control against simulated bottlenecks (``BottleneckSimulation``): a
/// token-bucket link with a 300 ms queue, as `tc tbf … latency 300ms` makes one.
struct SendRateControllerTests {
    /// The controller as a call with RED negotiated starts it: base 32 kb/s, up to 64.
    func controller(transportFeedback: Bool = true, maximumFrameMilliseconds: Int = 60) -> SendRateController {
        SendRateController(
            lossAdaptation: LossAdaptation(
                baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true, allowsRedundancy: true),
            usesTransportFeedback: transportFeedback, maximumFrameMilliseconds: maximumFrameMilliseconds)
    }

    func summary(_ s: ArraySlice<BottleneckSimulation.Second>) -> String {
        s.map { "\(Int($0.sendBitsPerSecond / 1000))k/e\(Int($0.estimateBitsPerSecond / 1000))/\($0.frameMilliseconds)ms/q\(Int($0.queueMilliseconds))" }.joined(separator: " ")
    }

    /// The mean over every five seconds from `start` on (the AIMD's sawtooth is a few seconds long).
    func windows(_ s: [BottleneckSimulation.Second], from start: Int) -> [Double] {
        stride(from: start, to: s.count - 4, by: 1).map { i in s[i..<(i + 5)].map(\.sendBitsPerSecond).reduce(0, +) / 5 }
    }

    /// Narrow links: within five seconds (transport-cc) or ten (receiver reports only) the
    /// stream, headers included, stays near 90 % of the link over every five seconds (93 % with
    /// transport-cc; within the link with reports, a second apart; `tether-bench links` measures
    /// the same on `tc tbf`), the queue stays short (no packet waits 150 ms, 250
    /// ms with reports a second apart) and nothing is lost; the packets are as long as the link
    /// needs (60 ms at 24 kb/s, 40 at 40); and the link is used (at least 70 % of it).
    @Test(arguments: [(24_000.0, 60), (40_000.0, 40)])
    func aNarrowLinkIsFilledNotFlooded(rate: Double, frame: Int) {
        for transportFeedback in [true, false] {
            var simulation = BottleneckSimulation(controller: controller(transportFeedback: transportFeedback), link: .init(rateBitsPerSecond: rate))
            simulation.run(seconds: 40)
            let start = transportFeedback ? 5 : 10
            let settled = simulation.seconds[start...]
            let label = "\(Int(rate / 1000)) kb/s, \(transportFeedback ? "transport-cc" : "reports"): \(summary(simulation.seconds[0...]))"
            #expect(windows(simulation.seconds, from: start).allSatisfy { $0 <= (transportFeedback ? 0.93 : 1.0) * rate }, "\(label)")
            #expect(settled.allSatisfy { $0.queueMilliseconds < (transportFeedback ? 150 : 250) }, "\(label)")
            #expect(settled.map(\.lossFraction).reduce(0, +) / Double(settled.count) <= 0.02, "\(label)")
            #expect(settled.last?.frameMilliseconds == frame, "\(label)")
            #expect(settled.map(\.sendBitsPerSecond).reduce(0, +) / Double(settled.count) >= 0.7 * rate, "\(label)")
        }
    }

    /// A link the full stream fits in (64 kb/s: 32 kb/s of Opus in 20 ms packets is 61 kb/s
    /// with every header): the full stream, no standing queue, nothing lost — nothing on the
    /// path says the link is near full, so the rate control has nothing to answer.
    @Test func aLinkTheFullStreamFitsInCarriesIt() {
        var simulation = BottleneckSimulation(controller: controller(), link: .init(rateBitsPerSecond: 64_000))
        simulation.run(seconds: 30)
        let settled = simulation.seconds[15...]
        #expect(settled.allSatisfy { $0.frameMilliseconds == 20 && $0.opusBitsPerSecond == 32_000 && $0.lossFraction == 0 }, "\(summary(simulation.seconds[0...]))")
    }

    /// A peer that takes 120 ms packets (another Tether says `a=maxptime:120`), on 24 kb/s shaped
    /// as the lab shapes it (`tc tbf … burst 3000`): the packets go to 120 ms, whose headers cost
    /// half what 60 ms packets' do, and Opus gets the difference (on average a sixth more than
    /// with 60 ms packets) inside the same link, with nothing lost once settled.
    @Test func aVeryNarrowLinkGetsPacketsOf120MillisecondsWhereThePeerTakesThem() {
        func run(_ maximum: Int) -> (opus: Double, long: Double, label: String) {
            var simulation = BottleneckSimulation(
                controller: controller(maximumFrameMilliseconds: maximum), link: .init(rateBitsPerSecond: 24_000, burstBytes: 3000))
            simulation.run(seconds: 60)
            let settled = simulation.seconds[10...]
            let label = summary(simulation.seconds[0...])
            let count = Double(settled.count)
            #expect(settled.map(\.sendBitsPerSecond).reduce(0, +) / count <= 24_000, "\(label)")
            #expect(settled.map(\.lossFraction).reduce(0, +) / count <= 0.02, "\(label)")
            let opus = settled.map { Double($0.opusBitsPerSecond) }.reduce(0, +) / count
            return (opus, Double(settled.filter { $0.frameMilliseconds == maximum }.count) / count, label)
        }
        let long = run(120)
        let short = run(60)
        #expect(long.long >= 0.5, "\(long.label)")
        #expect(long.opus >= 1.15 * short.opus, "\(long.opus) against \(short.opus): \(long.label)")
    }

    /// With transport-cc the narrow link is found within five seconds of the start.
    @Test func theStartFindsANarrowLinkWithinFiveSeconds() {
        var simulation = BottleneckSimulation(controller: controller(), link: .init(rateBitsPerSecond: 24_000))
        simulation.run(seconds: 15)
        #expect(windows(simulation.seconds, from: 5).allSatisfy { $0 <= 0.92 * 24_000 }, "\(summary(simulation.seconds[0...]))")
        #expect(simulation.seconds[5...].allSatisfy { $0.queueMilliseconds < 150 }, "\(summary(simulation.seconds[0...]))")
        // The start's loss (the 64 kb/s start overflows the queue) is over: no congestion loss
        // is reported any more.
        simulation.run(seconds: 10)
        #expect(simulation.seconds[(simulation.seconds.count - 5)...].allSatisfy { $0.lossFraction == 0 })
        #expect(!simulation.controller.estimator.lossIsCongestion, "loss \(simulation.controller.estimator.lossFraction)")
    }

    /// A wide link: the full-rate stream at 20 ms, as without rate control.
    @Test func aWideLinkCarriesTheFullStream() {
        var simulation = BottleneckSimulation(controller: controller(), link: .init(rateBitsPerSecond: 1_000_000))
        simulation.run(seconds: 20)
        let last = try! #require(simulation.seconds.last)
        #expect(last.frameMilliseconds == 20 && last.opusBitsPerSecond == 32_000 && last.queueMilliseconds < 5)
    }

    /// 1 Mb/s, then 40 kb/s for 20 s, then 1 Mb/s again: within five seconds of the drop the
    /// stream fits again with the queue drained; within ten of the widening it is back to full
    /// (the capacity learnt on the narrow link is forgotten once the stream passes it with no
    /// queue: it took 20 s on `tc tbf` while the estimate climbed through it a packet at a time).
    @Test func aLinkThatNarrowsAndWidensAgainIsFollowed() {
        var simulation = BottleneckSimulation(controller: controller(), link: .init(rateBitsPerSecond: 1_000_000))
        simulation.run(seconds: 65) { second, link in
            link.rateBitsPerSecond = (20..<40).contains(second) ? 40_000 : 1_000_000
        }
        #expect(windows(Array(simulation.seconds[25..<40]), from: 0).allSatisfy { $0 <= 0.92 * 40_000 }, "\(summary(simulation.seconds[18..<42]))")
        #expect(simulation.seconds[25..<40].allSatisfy { $0.queueMilliseconds < 100 }, "\(summary(simulation.seconds[18..<42]))")
        let wide = simulation.seconds[50...]
        #expect(wide.allSatisfy { $0.frameMilliseconds == 20 && $0.opusBitsPerSecond == 32_000 }, "\(summary(simulation.seconds[38...]))")
    }

    /// The same on a token bucket (`tc tbf … burst 3000`, as the lab shapes): the bucket hides
    /// the queue for a second's worth of excess on the narrow link, and still the stream is back
    /// to full within ten seconds of the widening.
    @Test func aTokenBucketLinkThatNarrowsAndWidensAgainIsFollowed() {
        var simulation = BottleneckSimulation(controller: controller(), link: .init(rateBitsPerSecond: 1_000_000, burstBytes: 3_000))
        simulation.run(seconds: 65) { second, link in
            link.rateBitsPerSecond = (20..<40).contains(second) ? 40_000 : 1_000_000
        }
        #expect(simulation.seconds[25..<40].allSatisfy { $0.queueMilliseconds < 300 && $0.lossFraction == 0 }, "\(summary(simulation.seconds[18..<42]))")
        let wide = simulation.seconds[50...]
        #expect(wide.allSatisfy { $0.frameMilliseconds == 20 && $0.opusBitsPerSecond == 32_000 }, "\(summary(simulation.seconds[38...]))")
    }

    /// One transport-cc feedback to `estimator`: `packets` packets of `bytes`, `spacing` apart from
    /// `sent` on, each `queueMilliseconds` late over a 20 ms path; it reaches the sender 20 ms
    /// after the last was sent.
    func feedback(
        _ estimator: inout BandwidthEstimator, sent: inout UInt64, packets: Int, spacing: UInt64, bytes: Int,
        queueMilliseconds: Double = 0
    ) {
        for _ in 0..<packets {
            let arrival = Int64(sent / 1000) + 20_000 + Int64(queueMilliseconds * 1000)
            estimator.packetReported(sentNanoseconds: sent, bytes: bytes, arrivalMicroseconds: arrival)
            sent += spacing
        }
        estimator.feedbackEnded(now: sent + 20_000_000)
    }

    /// One feedback whose every packet waited past the overuse threshold is overuse at once (a
    /// token bucket's queue, once its bucket is empty, grows a few hundred milliseconds a second:
    /// waiting for a second feedback, up to 500 ms later, let it reach 300 ms on 24 kb/s).
    @Test func aFeedbackThatQueuedThroughoutIsOveruseAtOnce() {
        var estimator = BandwidthEstimator(startBitsPerSecond: 40_000)
        var sent: UInt64 = 1_000_000_000
        // 120 ms packets of 300 bytes, three to a feedback: three seconds with no queue.
        for _ in 0..<9 { feedback(&estimator, sent: &sent, packets: 3, spacing: 120_000_000, bytes: 300) }
        #expect(estimator.usage != .overusing)
        let before = estimator.estimateBitsPerSecond
        // The next feedback: every packet 80 ms late, and no later than the first of them.
        feedback(&estimator, sent: &sent, packets: 3, spacing: 120_000_000, bytes: 300, queueMilliseconds: 80)
        #expect(estimator.usage == .overusing)
        #expect(estimator.estimateBitsPerSecond < before)
    }

    /// A pause in speech sends less for a second: the estimate is not pulled down to what that
    /// second carried (1.5 × it + 10 kb/s) — the cap is what the last five seconds carried at most.
    @Test func aPauseInSpeechDoesNotPullTheEstimateDown() {
        var estimator = BandwidthEstimator(startBitsPerSecond: 40_000)
        var sent: UInt64 = 1_000_000_000
        // 20 ms packets, five to a feedback. 120 bytes + 42 below: ~65 kb/s. One overuse ends the
        // slow start, then ten seconds clear.
        for _ in 0..<20 { feedback(&estimator, sent: &sent, packets: 5, spacing: 20_000_000, bytes: 120) }
        feedback(&estimator, sent: &sent, packets: 5, spacing: 20_000_000, bytes: 120, queueMilliseconds: 80)
        for _ in 0..<100 { feedback(&estimator, sent: &sent, packets: 5, spacing: 20_000_000, bytes: 120) }
        let talking = estimator.estimateBitsPerSecond
        // Over what the pause's one second would cap it to (20-byte frames + 42 below: 24.8 kb/s).
        #expect(talking > 1.5 * 24_800 + 10_000)
        for _ in 0..<10 { feedback(&estimator, sent: &sent, packets: 5, spacing: 20_000_000, bytes: 20) }
        #expect(estimator.estimateBitsPerSecond >= talking)
    }

    /// Random loss on a wide path is the path's own: protection answers it (RED, as without rate
    /// control) and the estimate does not fall for it.
    @Test func randomLossIsNotTakenForCongestion() {
        var simulation = BottleneckSimulation(controller: controller(), link: .init(rateBitsPerSecond: 1_000_000, randomLoss: 0.15))
        simulation.run(seconds: 30)
        let last = simulation.seconds[20...]
        #expect(last.allSatisfy { $0.redundantFrames >= 2 }, "\(last.map(\.redundantFrames))")
        #expect(!simulation.controller.estimator.lossIsCongestion)
        #expect(simulation.controller.estimator.estimateBitsPerSecond >= 120_000)
    }

    /// 64 kb/s with 5 % random loss: the stream stays inside the link, and whatever protection
    /// fits is what the loss gets.
    @Test func randomLossOnANarrowLinkGetsWhatProtectionFits() {
        var simulation = BottleneckSimulation(controller: controller(), link: .init(rateBitsPerSecond: 64_000, randomLoss: 0.05))
        simulation.run(seconds: 40)
        #expect(windows(simulation.seconds, from: 10).allSatisfy { $0 <= 0.95 * 64_000 }, "\(summary(simulation.seconds[0...]))")
        #expect(simulation.seconds[10...].allSatisfy { $0.queueMilliseconds < 100 }, "\(summary(simulation.seconds[0...]))")
        let decision = simulation.controller.decision
        #expect(decision.settings.inBandFEC || decision.settings.redundantFrames > 0)
    }

    /// The acknowledged rate is what arrived after the first arrival of its window over the
    /// window's span: nine packets of 300 bytes 120 ms apart are 20 kb/s (counting the first
    /// packet's bytes too read 22.5, and a narrow link's capacity an eighth high).
    @Test func theAcknowledgedRateCountsWhatArrivedOverItsSpan() {
        var rate = AcknowledgedRate()
        for i in 0..<9 { rate.add(arrivalMicroseconds: 5_000_000 + Int64(i) * 120_000, bytes: 300) }
        #expect(abs((rate.bitsPerSecond ?? 0) - 20_000) < 1)
        // A steady 20 ms stream of 200 bytes: 80 kb/s, whatever the window holds.
        var steady = AcknowledgedRate()
        for i in 0..<200 { steady.add(arrivalMicroseconds: Int64(i) * 20_000, bytes: 200) }
        #expect(abs((steady.bitsPerSecond ?? 0) - 80_000) < 1)
    }

    /// The allocation alone: headers count, RED only at 20 ms, durations by what Opus is left.
    @Test func theBudgetIsSpentHeadersFirst() {
        let c = controller()
        #expect(c.headerBytes == 72)
        #expect(c.sendBitsPerSecond(opus: 32_000, frameMilliseconds: 20, redundantFrames: 0) == 32_000 + 72 * 8 * 50)
        #expect(c.sendBitsPerSecond(opus: 16_000, frameMilliseconds: 60, redundantFrames: 0) == 16_000 + Int((72.0 * 8 * 1000 / 60).rounded(.up)))
        // The start: 85 % of 64 kb/s before any feedback, at 20 ms, no RED (it would not fit).
        #expect(c.decision.settings.redundantFrames == 0 && c.decision.frameMilliseconds == 20)
        #expect(c.decision.sendBitsPerSecond <= 54_400 && c.decision.settings.bitrateBitsPerSecond >= 20_000)
        // A peer that takes 20 ms packets only.
        var short = BottleneckSimulation(controller: controller(maximumFrameMilliseconds: 20), link: .init(rateBitsPerSecond: 40_000))
        short.run(seconds: 20)
        #expect(short.seconds.allSatisfy { $0.frameMilliseconds == 20 })
    }
}
