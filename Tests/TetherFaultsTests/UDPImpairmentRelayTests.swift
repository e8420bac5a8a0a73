import CTetherNet
import Foundation
import Testing

@testable import TetherFaults

/// Real sockets on 127.0.0.1; serialized so timing measurements do not compete.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct UDPImpairmentRelayTests {
    /// A relay with peer B preconfigured (as ICE tests do), and the two peers.
    func makeRelay(seed: UInt64 = 1) throws -> (UDPImpairmentRelay, TestPeer, TestPeer) {
        let relay = try UDPImpairmentRelay(seed: seed)
        let a = try TestPeer()
        let b = try TestPeer()
        try relay.setPeerA(address: "127.0.0.1", port: a.port)
        try relay.setPeerB(address: "127.0.0.1", port: b.port)
        return (relay, a, b)
    }

    @Test func forwardsBothWaysWithContentIntact() throws {
        let (relay, a, b) = try makeRelay()
        defer { relay.stop() }
        for size in [1, 172, 1200, 9000, 65_507] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            a.send(payload, toPort: relay.portA)
            let atB = try #require(b.receive())
            #expect(atB.bytes == payload)
            #expect(atB.source == UDPRelayEndpoint(address: 0x7F00_0001, port: relay.portB))

            let reply = payload.reversed() as [UInt8]
            b.send(reply, toPort: relay.portB)
            let atA = try #require(a.receive())
            #expect(atA.bytes == reply)
            #expect(atA.source == UDPRelayEndpoint(address: 0x7F00_0001, port: relay.portA))
        }
        // The relay counts a datagram as forwarded just after sending it: the peer can read it first.
        #expect(waitUntil { relay.statistics().bToA.packetsForwarded == 5 })
        let statistics = relay.statistics()
        #expect(statistics.aToB.packetsReceived == 5)
        #expect(statistics.aToB.packetsForwarded == 5)
        #expect(statistics.bToA.packetsForwarded == 5)
        #expect(statistics.aToB.bytesForwarded == UInt64(1 + 172 + 1200 + 9000 + 65_507))
    }

    @Test func learnsPeerBFromItsFirstDatagramWithoutConfiguration() throws {
        let relay = try UDPImpairmentRelay()
        defer { relay.stop() }
        let a = try TestPeer()
        let b = try TestPeer()
        a.send(sequence: 1, toPort: relay.portA)
        #expect(waitUntil { relay.statistics().aToB.droppedNoDestination == 1 })
        b.send(sequence: 2, toPort: relay.portB)
        #expect(a.receive().map { TestPeer.sequence(of: $0.bytes) } == 2)
        a.send(sequence: 3, toPort: relay.portA)
        #expect(b.receive().map { TestPeer.sequence(of: $0.bytes) } == 3)
        #expect(relay.peerB == UDPRelayEndpoint(address: 0x7F00_0001, port: b.port))
    }

    @Test func blackHoleDropsEverythingAndCountsItThenRestoringForwardsAgain() throws {
        let (relay, a, b) = try makeRelay()
        defer { relay.stop() }
        relay.blackHole(true)
        for sequence in 0..<10 as Range<UInt32> {
            a.send(sequence: sequence, toPort: relay.portA)
            b.send(sequence: sequence, toPort: relay.portB)
        }
        #expect(waitUntil { relay.statistics().aToB.packetsReceived == 10 && relay.statistics().bToA.packetsReceived == 10 })
        let statistics = relay.statistics()
        #expect(statistics.aToB.droppedByBlackHole == 10)
        #expect(statistics.bToA.droppedByBlackHole == 10)
        #expect(statistics.aToB.packetsForwarded == 0)
        #expect(a.drainPending().isEmpty)
        #expect(b.drainPending().isEmpty)

        relay.blackHole(false)
        a.send(sequence: 100, toPort: relay.portA)
        b.send(sequence: 200, toPort: relay.portB)
        #expect(b.receive().map { TestPeer.sequence(of: $0.bytes) } == 100)
        #expect(a.receive().map { TestPeer.sequence(of: $0.bytes) } == 200)
    }

    @Test func oneWayBlackHoleDropsOnlyThatDirection() throws {
        let (relay, a, b) = try makeRelay()
        defer { relay.stop() }
        relay.blackHole(.aToB, true)
        a.send(sequence: 1, toPort: relay.portA)
        b.send(sequence: 2, toPort: relay.portB)
        #expect(a.receive().map { TestPeer.sequence(of: $0.bytes) } == 2)
        #expect(waitUntil { relay.statistics().aToB.droppedByBlackHole == 1 })
        #expect(b.drainPending().isEmpty)
        #expect(relay.statistics().bToA.droppedByBlackHole == 0)

        relay.blackHole(.aToB, false)
        relay.blackHole(.bToA, true)
        a.send(sequence: 3, toPort: relay.portA)
        b.send(sequence: 4, toPort: relay.portB)
        #expect(b.receive().map { TestPeer.sequence(of: $0.bytes) } == 3)
        #expect(waitUntil { relay.statistics().bToA.droppedByBlackHole == 1 })
        #expect(a.drainPending().isEmpty)
    }

    /// The binding-response filter takes STUN Binding success responses in its direction only:
    /// not requests, not indications, not RTP, not the other direction, not short datagrams.
    @Test func bindingResponseFilterTakesOnlyBindingSuccessResponsesInItsDirection() {
        func stun(_ type: UInt16) -> [UInt8] {
            [UInt8(type >> 8), UInt8(type & 0xFF), 0, 0, 0x21, 0x12, 0xA4, 0x42] + [UInt8](repeating: 7, count: 12)
        }
        let impairments = UDPImpairments(dropsBindingResponses: .bToA)
        func drops(_ bytes: [UInt8], _ direction: RelayDirection) -> Bool {
            bytes.withUnsafeBytes { impairments.dropsAsBindingResponse($0, travelling: direction) }
        }
        #expect(drops(stun(0x0101), .bToA))
        #expect(!drops(stun(0x0101), .aToB))
        #expect(!drops(stun(0x0001), .bToA))  // a request
        #expect(!drops(stun(0x0011), .bToA))  // an indication (keepalive)
        #expect(!drops(stun(0x0111), .bToA))  // an error response
        #expect(!drops(Array(stun(0x0101)[0..<19]), .bToA))
        var rtp = [UInt8](repeating: 0, count: 40)
        rtp[0] = 0x80
        rtp[1] = 111
        #expect(!drops(rtp, .bToA))
        #expect(!stun(0x0101).withUnsafeBytes { UDPImpairments().dropsAsBindingResponse($0, travelling: .bToA) })
    }

    /// Sends `count` numbered datagrams A→B through a relay with `lossPercent` and returns the
    /// sequence numbers that did NOT arrive.
    func droppedSequences(seed: UInt64, lossPercent: Double, count: UInt32) throws -> Set<UInt32> {
        let (relay, a, b) = try makeRelay(seed: seed)
        defer { relay.stop() }
        relay.updateImpairments { $0.lossPercent = lossPercent }
        var received = Set<UInt32>()
        let batch: UInt32 = 100
        for start in stride(from: 0, to: count, by: Int(batch)) {
            for sequence in UInt32(start)..<min(UInt32(start) + batch, count) {
                a.send(sequence: sequence, toPort: relay.portA)
            }
            let expected = UInt64(min(UInt32(start) + batch, count))
            #expect(waitUntil { relay.statistics().aToB.packetsReceived == expected })
            received.formUnion(b.drainPending())
        }
        #expect(waitUntil { relay.statistics().aToB.packetsForwarded == UInt64(count) - relay.statistics().aToB.droppedByLoss })
        received.formUnion(b.drainPending())
        let statistics = relay.statistics().aToB
        #expect(statistics.packetsForwarded == UInt64(received.count))
        #expect(statistics.droppedByLoss == UInt64(count) - UInt64(received.count))
        return Set(0..<count).subtracting(received)
    }

    @Test func seededLossDropsTheConfiguredShareAndTheSameSeedRepeatsThePattern() throws {
        let first = try droppedSequences(seed: 42, lossPercent: 10, count: 2000)
        #expect((160...240).contains(first.count), "dropped \(first.count) of 2000")
        let second = try droppedSequences(seed: 42, lossPercent: 10, count: 2000)
        #expect(second == first)
        let otherSeed = try droppedSequences(seed: 43, lossPercent: 10, count: 2000)
        #expect(otherSeed != first)

        // The sans-IO model predicts exactly the same datagrams.
        var model = ImpairmentModel(seed: 42)
        let predicted = Set(
            (0..<2000 as Range<UInt32>).filter {
                _ = $0
                return model.decide(.aToB, impairments: UDPImpairments(lossPercent: 10)) == .dropByLoss
            })
        #expect(predicted == first)
    }

    @Test func delayHoldsEveryDatagramAtLeastTheConfiguredTime() throws {
        let (relay, a, b) = try makeRelay()
        defer { relay.stop() }
        relay.updateImpairments { $0.delayMilliseconds = 50 }
        var delaysMilliseconds: [Double] = []
        for sequence in 0..<20 as Range<UInt32> {
            let sent = CTetherNet_monotonic_nanoseconds()
            a.send(sequence: sequence, toPort: relay.portA)
            let received = try #require(b.receive(timeoutMilliseconds: 2000))
            let arrived = CTetherNet_monotonic_nanoseconds()
            #expect(TestPeer.sequence(of: received.bytes) == sequence)
            delaysMilliseconds.append(Double(arrived - sent) / 1e6)
        }
        // Never early (the property under test), and about on time: a relay that held datagrams
        // twice as long would read 100 ms. The margins are for a loaded machine (each sample
        // includes two thread wake-ups).
        let sorted = delaysMilliseconds.sorted()
        let minimum = sorted.first ?? 0
        let median = sorted[sorted.count / 2]
        let maximum = sorted.last ?? 0
        #expect(minimum >= 50, "min \(minimum) ms")
        #expect(median <= 50 + 45, "median \(median) ms")
        #expect(maximum <= 50 + 400, "max \(maximum) ms")
        #expect(relay.statistics().aToB.delayed == 20)
    }

    @Test func jitterReordersDatagramsButDeliversAll() throws {
        let (relay, a, b) = try makeRelay(seed: 7)
        defer { relay.stop() }
        relay.updateImpairments {
            $0.delayMilliseconds = 20
            $0.jitterMilliseconds = 15
        }
        for sequence in 0..<200 as Range<UInt32> { a.send(sequence: sequence, toPort: relay.portA) }
        var arrivals: [UInt32] = []
        while arrivals.count < 200, let (bytes, _) = b.receive(timeoutMilliseconds: 2000) {
            arrivals.append(TestPeer.sequence(of: bytes))
        }
        #expect(Set(arrivals) == Set(0..<200))
        #expect(arrivals.count == 200)
        #expect(arrivals != arrivals.sorted(), "jitter of ±15 ms over back-to-back datagrams should reorder")
    }

    @Test func duplicationSendsTwoCopies() throws {
        let (relay, a, b) = try makeRelay()
        defer { relay.stop() }
        relay.updateImpairments { $0.duplicatePercent = 100 }
        for sequence in 0..<10 as Range<UInt32> { a.send(sequence: sequence, toPort: relay.portA) }
        var arrivals: [UInt32] = []
        while arrivals.count < 20, let (bytes, _) = b.receive() { arrivals.append(TestPeer.sequence(of: bytes)) }
        #expect(arrivals.sorted() == (0..<10).flatMap { [UInt32($0), UInt32($0)] })
        #expect(relay.statistics().aToB.duplicated == 10)
        // Counted just after each send: the peer can read the last copy before the count moves.
        #expect(waitUntil { relay.statistics().aToB.packetsForwarded == 20 })
    }

    @Test func followsAPeerThatChangesAddress() throws {
        let (relay, a, b) = try makeRelay()
        defer { relay.stop() }
        a.send(sequence: 1, toPort: relay.portA)
        #expect(b.receive().map { TestPeer.sequence(of: $0.bytes) } == 1)

        let movedA = try TestPeer()  // same host, new port: like a NAT rebinding
        movedA.send(sequence: 2, toPort: relay.portA)
        #expect(b.receive().map { TestPeer.sequence(of: $0.bytes) } == 2)
        b.send(sequence: 3, toPort: relay.portB)
        #expect(movedA.receive().map { TestPeer.sequence(of: $0.bytes) } == 3)
        #expect(a.drainPending().isEmpty)
        #expect(relay.peerA == UDPRelayEndpoint(address: 0x7F00_0001, port: movedA.port))
        #expect(relay.statistics().aToB.peerAddressChanges == 1)
    }

    @Test func scheduledOutageDropsForItsDurationThenHeals() throws {
        let (relay, a, b) = try makeRelay()
        defer { relay.stop() }
        // The outage runs from the scheduling call, so nothing can pass before start + 0.3 s.
        let start = CTetherNet_monotonic_nanoseconds()
        relay.scheduleOutage(afterSeconds: 0, forSeconds: 0.3)
        a.send(sequence: 1, toPort: relay.portA)
        #expect(waitUntil { relay.statistics().aToB.droppedByBlackHole == 1 })
        // Probe every 10 ms until one datagram passes: the outage ends by itself.
        var healed = false
        var probe: UInt32 = 100
        while !healed, CTetherNet_monotonic_nanoseconds() - start < 3_000_000_000 {
            a.send(sequence: probe, toPort: relay.portA)
            probe += 1
            healed = b.receive(timeoutMilliseconds: 10) != nil
        }
        #expect(healed)
        #expect(Double(CTetherNet_monotonic_nanoseconds() - start) / 1e9 >= 0.3)
    }

    @Test func stopIsIdempotentAndClosesThePorts() throws {
        let relay = try UDPImpairmentRelay()
        let port = relay.portA
        relay.stop()
        relay.stop()
        // The port can be bound again once the relay has closed it.
        let again = try UDPImpairmentRelay(portA: port)
        #expect(again.portA == port)
        again.stop()
    }

    @Test func rejectsAnAddressThatIsNotIPv4() {
        #expect(throws: UDPRelayError.invalidAddress("localhost")) { try UDPImpairmentRelay(bindAddress: "localhost") }
    }
}
