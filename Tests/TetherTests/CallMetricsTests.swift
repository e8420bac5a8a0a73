import Foundation
import MetricsTestKit
import Testing
import TetherTestSupport

@testable import Tether

/// swift-metrics: a call's counters and gauges reach the factory the embedder gave, with its
/// dimensions.
@Suite("Call metrics", .keepsLogPerTest, .serialized)
struct CallMetricsTests {
    @Test func aCallCountsItselfActiveThenEndedWithItsPacketsAndScore() async throws {
        let metrics = TestMetrics()
        let tenant = [("tenant", "t1")]
        var ca = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        ca.metricsFactory = metrics
        ca.metricsDimensions = tenant
        let a = try CallSession(configuration: ca)
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let active = try metrics.expectMeter("tether_calls_active", tenant)
        #expect(active.values == [1])
        let ra = EventRecorder(a)
        try await connect(a, b)
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        #expect(await waitUntil(timeoutSeconds: 10) { a.statistics().packetsReceived > 50 })
        await a.hangUp()
        await ra.finished()
        await b.hangUp()

        #expect(active.values == [1, 0])
        #expect(try metrics.expectCounter("tether_calls_ended_total", tenant + [("cause", "local hang-up")]).totalValue == 1)
        let final = a.statistics()
        #expect(try metrics.expectCounter("tether_packets_sent_total", tenant).totalValue == Int64(final.packetsSent))
        #expect(try metrics.expectCounter("tether_packets_received_total", tenant).totalValue == Int64(final.packetsReceived))
        #expect(try metrics.expectRecorder("tether_call_mos", tenant).lastValue == a.report().quality.meanOpinionScoreMean)
        #expect(try metrics.expectRecorder("tether_call_heard_loss_percent", tenant).lastValue == 0)
        #expect(metrics.counters.allSatisfy { $0.dimensions.contains { $0 == ("tenant", "t1") } })
    }

    /// Disruptions, restarts and give-ups, fed by hand; a session released without ending leaves
    /// the active calls once.
    @Test func disruptionsRestartsAndGiveUpsAreCounted() throws {
        let metrics = TestMetrics()
        let m = CallMetrics(factory: metrics, dimensions: [])
        m.observe(.stateChanged(from: .established, to: .mediaDisrupted, secondsSinceStart: 5))
        m.restartOffered()
        m.restartOffered()
        m.restartAnswered()
        let gaveUp = CallTerminationReason(cause: .mediaTimeout)
        m.observe(.stateChanged(from: .renewingMedia, to: .ended(gaveUp), secondsSinceStart: 55))
        m.sessionReleased()
        #expect(try metrics.expectCounter("tether_disruptions_total").totalValue == 1)
        #expect(try metrics.expectCounter("tether_ice_restarts_total", [("side", "offered")]).totalValue == 2)
        #expect(try metrics.expectCounter("tether_ice_restarts_total", [("side", "answered")]).totalValue == 1)
        #expect(try metrics.expectCounter("tether_give_ups_total").totalValue == 1)
        #expect(try metrics.expectCounter("tether_calls_ended_total", [("cause", "media timeout")]).totalValue == 1)
        #expect(try metrics.expectMeter("tether_calls_active").values == [1, 0])

        let dropped = CallMetrics(factory: metrics, dimensions: [("x", "1")])
        dropped.sessionReleased()
        dropped.sessionReleased()
        #expect(try metrics.expectMeter("tether_calls_active", [("x", "1")]).values == [1, 0])
    }
}
