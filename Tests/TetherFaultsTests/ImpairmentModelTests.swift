import Testing

@testable import TetherFaults

struct ImpairmentModelTests {
    @Test func sameSeedGivesTheSameDecisionsAndOtherSettingsDoNotShiftLoss() {
        var plain = ImpairmentModel(seed: 9)
        var jittery = ImpairmentModel(seed: 9)
        let lossOnly = UDPImpairments(lossPercent: 30)
        let lossAndMore = UDPImpairments(lossPercent: 30, delayMilliseconds: 5, jitterMilliseconds: 5, duplicatePercent: 50)
        for _ in 0..<5000 {
            let a = plain.decide(.aToB, impairments: lossOnly)
            let b = jittery.decide(.aToB, impairments: lossAndMore)
            #expect((a == .dropByLoss) == (b == .dropByLoss))
            // Traffic in the other direction does not shift this direction's stream.
            _ = jittery.decide(.bToA, impairments: lossAndMore)
        }
    }

    @Test func blackHoleDropsWithoutDrawing() {
        var model = ImpairmentModel(seed: 3)
        var reference = ImpairmentModel(seed: 3)
        #expect(model.decide(.aToB, impairments: UDPImpairments(blackHole: true)) == .dropByBlackHole)
        #expect(model.decide(.bToA, impairments: UDPImpairments(blackHoleBToA: true)) == .dropByBlackHole)
        for _ in 0..<100 {
            #expect(
                model.decide(.aToB, impairments: UDPImpairments(lossPercent: 50))
                    == reference.decide(.aToB, impairments: UDPImpairments(lossPercent: 50)))
        }
    }

    @Test func gilbertElliottLossMatchesItsStationaryRateAndBurstLength() {
        var model = ImpairmentModel(seed: 11)
        let burst = BurstLoss(goodToBadProbability: 0.05, badToGoodProbability: 0.25)
        let impairments = UDPImpairments(burstLoss: burst)
        var lost = 0
        var bursts = 0
        var previousLost = false
        let count = 200_000
        for _ in 0..<count {
            let isLost = model.decide(.aToB, impairments: impairments) == .dropByLoss
            if isLost {
                lost += 1
                if !previousLost { bursts += 1 }
            }
            previousLost = isLost
        }
        // Stationary bad-state share p / (p + r) = 1/6; mean burst 1 / r = 4 datagrams.
        let rate = Double(lost) / Double(count)
        let meanBurst = Double(lost) / Double(bursts)
        #expect(abs(rate - 1.0 / 6.0) < 0.01, "rate \(rate)")
        #expect(abs(meanBurst - 4) < 0.2, "mean burst \(meanBurst)")
    }

    @Test func jitterStaysWithinDelayPlusOrMinusJitterAndNeverBelowZero() {
        var model = ImpairmentModel(seed: 5)
        let impairments = UDPImpairments(delayMilliseconds: 10, jitterMilliseconds: 15)
        var sawZero = false
        for _ in 0..<10_000 {
            guard case .forward(let delay, nil) = model.decide(.bToA, impairments: impairments) else {
                Issue.record("expected a single forward")
                return
            }
            #expect(delay <= 25_000_000)
            if delay == 0 { sawZero = true }
        }
        #expect(sawZero)
    }

    @Test func delayQueueReleasesByTimeThenArrivalOrder() {
        var queue = DelayQueue()
        let endpoint = UDPRelayEndpoint(address: 1, port: 1)
        for (release, tag) in [(30, 0), (10, 1), (20, 2), (10, 3), (30, 4)] as [(UInt64, UInt8)] {
            queue.insert(releaseNanoseconds: release, direction: .aToB, destination: endpoint, bytes: [tag])
        }
        #expect(queue.popDue(nowNanoseconds: 5) == nil)
        var order: [UInt8] = []
        while let item = queue.popDue(nowNanoseconds: 100) { order.append(item.bytes[0]) }
        #expect(order == [1, 3, 2, 0, 4])
    }

    @Test func controlCommandChangesImpairmentsAndReportsStatistics() throws {
        let relay = try UDPImpairmentRelay()
        defer { relay.stop() }
        let command = try UDPRelayControlCommand(
            jsonLine: #"{"peerB":"127.0.0.1:40002","lossPercent":12.5,"delayMilliseconds":30,"blackHoleBToA":true,"statistics":true}"#)
        let reply = try command.apply(to: relay)
        #expect(reply.ok)
        #expect(reply.statistics == UDPRelayStatistics())
        #expect(relay.impairments == UDPImpairments(blackHoleBToA: true, lossPercent: 12.5, delayMilliseconds: 30))
        #expect(relay.peerB == UDPRelayEndpoint(address: 0x7F00_0001, port: 40002))
        #expect(throws: UDPRelayError.self) { try UDPRelayControlCommand(jsonLine: "{nope") }
        #expect(throws: UDPRelayError.invalidAddress("nowhere")) {
            try UDPRelayControlCommand(jsonLine: #"{"peerA":"nowhere"}"#).apply(to: relay)
        }
        #expect(reply.jsonLine.hasPrefix(#"{"ok":true,"statistics":{"#))
    }
}
