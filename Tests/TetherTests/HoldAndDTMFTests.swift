import Foundation
import Testing
import TetherFaults
import TetherRealtime
import TetherTestbed
import TetherTestSupport

@testable import Tether

/// Hold/resume (RFC 3264 §8.4) and DTMF (RFC 4733) between two real sessions over libnice on
/// loopback, signaled by `InProcessSignaling` (re-offers and answers delivered as a softphone's
/// signaling would), through the impairment relay where the path is lossy or cut.
@Suite("Hold and DTMF between two sessions", .keepsLogPerTest, .serialized)
struct HoldAndDTMFTests {
    struct Call {
        let a: CallSession
        let b: CallSession
        let ra: EventRecorder
        let rb: EventRecorder
        let sourceA: TestSignalSource
        let sourceB: TestSignalSource
        let signaling: InProcessSignaling
        let relay: UDPImpairmentRelay?

        func end() async {
            await a.hangUp()
            await b.hangUp()
            await signaling.waitUntilFinished()
            relay?.stop()
        }
    }

    private func call(
        relay: UDPImpairmentRelay? = nil, dtmfB: Bool = true, policy: ReconnectionPolicy = ReconnectionPolicy()
    ) async throws -> Call {
        let sourceA = TestSignalSource(frequencyHertz: 440)
        let sourceB = TestSignalSource(frequencyHertz: 660)
        let a = try CallSession(
            configuration: CallConfiguration(
                audioSource: sourceA, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, reconnection: policy,
                followsNetworkChanges: false))
        var bConfiguration = CallConfiguration(
            audioSource: sourceB, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, reconnection: policy,
            followsNetworkChanges: false)
        bConfiguration.dtmf = dtmfB
        let b = try CallSession(configuration: bConfiguration)
        let ra = EventRecorder(a, subscribing: true)
        let rb = EventRecorder(b, subscribing: true)
        let signaling = InProcessSignaling(a: a, b: b, relay: relay)
        try await a.start()
        try await b.start()
        try await signaling.connect()
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        #expect(await rb.waitFor("established", timeoutSeconds: 10) != nil)
        return Call(a: a, b: b, ra: ra, rb: rb, sourceA: sourceA, sourceB: sourceB, signaling: signaling, relay: relay)
    }

    /// A holds: once B's answer is applied no RTP flows either way (A sends nothing, B is
    /// recvonly), both capture devices are released, RTCP keeps flowing, and neither side reports
    /// a disruption over three seconds (three times the disruption threshold). On resume audio
    /// returns both ways and the devices reopen.
    @Test func holdStopsTheAudioBothWaysKeepsRTCPAndResumeBringsItBack() async throws {
        let c = try await call()
        try await c.a.hold()
        #expect(await waitUntil(timeoutSeconds: 5) { c.a.holdState == HoldState(local: true) && c.b.holdState == HoldState(remote: true) })
        // The events say the same (they reach the recorders a moment after the state).
        #expect(await waitUntil(timeoutSeconds: 5) { c.ra.holdChanges == [HoldState(local: true)] && c.rb.holdChanges == [HoldState(remote: true)] })
        #expect(c.a.statistics().direction == "sendonly" && c.b.statistics().direction == "recvonly")
        let offers = c.ra.descriptions.filter { $0.kind == .offer && $0.isRestart }
        #expect(offers.count == 1 && offers[0].sdp.contains("a=sendonly"))

        // Once packets already in flight have landed…
        _ = try #require(await steadyValue { [c.a.statistics().packetsReceived, c.b.statistics().packetsReceived] })
        let before = (a: c.a.statistics(), b: c.b.statistics())
        let framesA = c.sourceA.statistics.framesTransferred
        let framesB = c.sourceB.statistics.framesTransferred
        try await Task.sleep(for: .seconds(3))  // three disruption thresholds: nothing flows, nothing is disrupted
        let during = (a: c.a.statistics(), b: c.b.statistics())
        #expect(during.a.packetsSent == before.a.packetsSent)
        #expect(during.b.packetsSent == before.b.packetsSent)
        #expect(during.a.packetsReceived == before.a.packetsReceived && during.b.packetsReceived == before.b.packetsReceived)
        #expect(during.b.framesDecoded == before.b.framesDecoded && during.a.framesDecoded == before.a.framesDecoded)
        #expect(during.a.rtcpPacketsReceived > before.a.rtcpPacketsReceived)
        #expect(during.b.rtcpPacketsReceived > before.b.rtcpPacketsReceived)
        #expect(c.sourceA.statistics.framesTransferred <= framesA + 1)  // microphones released
        #expect(c.sourceB.statistics.framesTransferred <= framesB + 1)
        #expect(!c.ra.stateNames.contains("mediaDisrupted") && !c.rb.stateNames.contains("mediaDisrupted"))
        #expect(c.a.state == .established && c.b.state == .established)

        try await c.a.resume()
        #expect(await waitUntil(timeoutSeconds: 5) { !c.a.holdState.isOnHold && !c.b.holdState.isOnHold })
        #expect(await waitUntil(timeoutSeconds: 5) {
            c.b.statistics().framesDecoded > during.b.framesDecoded + 25 && c.a.statistics().framesDecoded > during.a.framesDecoded + 25
        })
        #expect(c.a.statistics().direction == "sendrecv" && c.b.statistics().direction == "sendrecv")
        #expect(c.sourceA.statistics.framesTransferred > framesA + 10 && c.sourceB.statistics.framesTransferred > framesB + 10)
        #expect(!c.ra.stateNames.contains("mediaDisrupted") && !c.rb.stateNames.contains("mediaDisrupted"))
        #expect(c.signaling.errors.isEmpty)
        await c.end()
    }

    /// Both press hold at once: the re-offers cross; the controlling side (A) keeps its own and
    /// refuses B's (5003), B answers A's with its own hold (inactive), and both end up holding.
    /// Then each resumes in turn.
    @Test func bothHoldingAtOnceConvergesAndEachResumes() async throws {
        let c = try await call()
        async let holdA: Void = c.a.hold()
        async let holdB: Void = c.b.hold()
        _ = try await (holdA, holdB)
        let both = HoldState(local: true, remote: true)
        #expect(await waitUntil(timeoutSeconds: 5) { c.a.holdState == both && c.b.holdState == both })
        #expect(c.a.statistics().direction == "inactive" && c.b.statistics().direction == "inactive")
        #expect(c.signaling.errors.allSatisfy { $0.contains("5003") })

        try await c.a.resume()  // A offers sendrecv; B still holds and answers sendonly
        #expect(await waitUntil(timeoutSeconds: 5) { c.a.holdState == HoldState(remote: true) && c.b.holdState == HoldState(local: true) })
        #expect(c.a.statistics().direction == "recvonly")
        try await c.b.resume()
        #expect(await waitUntil(timeoutSeconds: 5) { !c.a.holdState.isOnHold && !c.b.holdState.isOnHold })
        let decoded = c.a.statistics().framesDecoded
        #expect(await waitUntil(timeoutSeconds: 5) { c.a.statistics().framesDecoded > decoded + 25 })
        #expect(!c.ra.stateNames.contains("mediaDisrupted") && !c.rb.stateNames.contains("mediaDisrupted"))
        await c.end()
    }

    /// An ICE restart during hold (either side renews the path) keeps the hold: the restart
    /// offer and its answer carry the direction, and no RTP flows afterwards.
    @Test func anICERestartDuringHoldKeepsTheHold() async throws {
        let c = try await call()
        try await c.a.hold()
        #expect(await waitUntil(timeoutSeconds: 5) { c.a.holdState.local && c.b.holdState.remote })
        await c.a.renewMedia()  // A's restart offer
        #expect(await waitUntil(timeoutSeconds: 10) { c.a.statistics().recovery.restartsOffered == 1 && c.b.statistics().recovery.restartsAnswered == 1 })
        await c.b.renewMedia()  // B's restart offer, answered by the holding side
        #expect(await waitUntil(timeoutSeconds: 10) { c.b.statistics().recovery.restartsOffered == 1 && c.a.statistics().recovery.restartsAnswered == 1 })
        let restartOffers = (c.ra.descriptions + c.rb.descriptions).filter { $0.isRestart }
        #expect(restartOffers.count == 6)  // hold offer + answer, two restarts with their answers
        #expect(c.a.holdState == HoldState(local: true) && c.b.holdState == HoldState(remote: true))
        let sent = try #require(await steadyValue { [c.a.statistics().packetsSent, c.b.statistics().packetsSent] })
        try await Task.sleep(for: .seconds(1.5))  // nothing more is sent while held
        #expect([c.a.statistics().packetsSent, c.b.statistics().packetsSent] == sent)
        #expect(c.a.state == .established && c.b.state == .established, "A went \(c.ra.stateNames), B \(c.rb.stateNames)")
        try await c.a.resume()
        let decoded = c.b.statistics().framesDecoded
        #expect(await waitUntil(timeoutSeconds: 5) { c.b.statistics().framesDecoded > decoded + 25 })
        #expect(c.signaling.errors.isEmpty)
        await c.end()
    }

    /// On hold the call is judged by RTCP: when the peer vanishes (the path is cut) it is
    /// disrupted after the on-hold threshold and given up on at the give-up time, error 1004.
    @Test func aPeerThatVanishesWhileHeldIsStillGivenUp() async throws {
        let relay = try UDPImpairmentRelay()
        let policy = ReconnectionPolicy(onHoldDisruptionThresholdSeconds: 2, giveUpSeconds: 5)
        let c = try await call(relay: relay, policy: policy)
        try await c.a.hold()
        #expect(await waitUntil(timeoutSeconds: 5) { c.a.holdState.local && c.b.holdState.remote })
        try await Task.sleep(for: .seconds(2.5))  // longer than the on-hold threshold: RTCP keeps it up
        #expect(!c.ra.stateNames.contains("mediaDisrupted") && !c.rb.stateNames.contains("mediaDisrupted"))
        relay.blackHole(true)
        #expect(await c.ra.waitFor("ended", timeoutSeconds: 20) != nil)
        #expect(await c.rb.waitFor("ended", timeoutSeconds: 20) != nil)
        #expect(c.ra.stateNames.contains("mediaDisrupted") && c.rb.stateNames.contains("mediaDisrupted"))
        #expect(c.ra.endReason?.cause == .mediaTimeout && c.rb.endReason?.cause == .mediaTimeout)
        #expect(c.ra.endReason?.error?.code == .mediaTimeout)
        await c.end()
    }

    /// Every DTMF key both ways over a path losing 20 % of packets (seeded): each digit arrives
    /// once, in order, with the audio going on around it.
    @Test func dtmfDigitsArriveOnceAndInOrderOverALossyPath() async throws {
        let relay = try UDPImpairmentRelay(seed: 4733)
        relay.updateImpairments { $0.lossPercent = 20 }
        let c = try await call(relay: relay)
        try await c.a.sendDTMF("0123456789*#ABCD")
        try await c.b.sendDTMF("951", toneDuration: .milliseconds(160), gap: .milliseconds(50))
        try await c.a.sendDTMF("#")  // queued behind the first sixteen
        #expect(await waitUntil(timeoutSeconds: 15) { c.rb.dtmfDigits.count >= 17 && c.ra.dtmfDigits.count >= 3 })
        try await Task.sleep(for: .seconds(1))  // nothing more may come
        #expect(c.rb.dtmfDigits == "0123456789*#ABCD#")
        #expect(c.ra.dtmfDigits == "951")
        // Durations come from the packets: the full tone when an end packet arrived.
        #expect(c.rb.dtmfDurations.allSatisfy { (20...100).contains($0) })
        #expect(c.ra.dtmfDurations.allSatisfy { (20...160).contains($0) })
        let sa = c.a.statistics()
        let sb = c.b.statistics()
        #expect(sa.dtmfDigitsSent == 17 && sb.dtmfDigitsReceived == 17 && sb.dtmfDigitsSent == 3 && sa.dtmfDigitsReceived == 3)
        #expect(sa.dtmfPacketsSent >= 17 * 7 && sb.dtmfPacketsReceived > 0)
        // The audio went on around the digits (decoded frames after the last digit).
        let decoded = sb.framesDecoded
        #expect(await waitUntil(timeoutSeconds: 5) { c.b.statistics().framesDecoded > decoded + 25 })
        await c.end()
    }

    /// A hold asked for while our own restart offer is being prepared or is outstanding is not
    /// lost: it rides on that offer, or goes out once the restart is answered.
    @Test func aHoldAskedDuringARenewalIsNotLost() async throws {
        let c = try await call()
        await c.a.renewMedia()  // re-gathers, then offers a restart
        try await c.a.hold()
        #expect(await waitUntil(timeoutSeconds: 10) { c.a.holdState == HoldState(local: true) && c.b.holdState == HoldState(remote: true) })
        // The statistics' recovery figures are published with the next snapshot (under load it
        // still read 0 when both hold states were in).
        #expect(await waitUntil(timeoutSeconds: 5) { c.a.statistics().recovery.restartsOffered >= 1 })
        #expect(c.a.statistics().recovery.restartsOffered == 1)
        let sent = try #require(await steadyValue { c.a.statistics().packetsSent })
        try await Task.sleep(for: .seconds(1))  // nothing more is sent while held
        #expect(c.a.statistics().packetsSent == sent)
        #expect(c.signaling.errors.isEmpty)
        await c.end()
    }

    /// A re-offer the peer never answers does not block the call: refused (`offerRejected()`)
    /// or unanswered past the set-up time (error 1006), it is dropped, the hold did not happen,
    /// the microphone reopens, and the next hold goes out.
    @Test func aReofferThatIsRefusedOrNeverAnsweredIsWithdrawn() async throws {
        let source = TestSignalSource(frequencyHertz: 440)
        var configuration = CallConfiguration(audioSource: source, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        configuration.connectTimeoutSeconds = 2
        let a = try CallSession(configuration: configuration)
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await connect(a, b)  // no signaling after this: re-offers reach nobody
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        func offers() -> Int { ra.descriptions.filter { $0.kind == .offer && $0.isRestart }.count }
        try await a.hold()
        #expect(await waitUntil(timeoutSeconds: 5) { offers() == 1 })
        let framesHeld = source.statistics.framesTransferred
        await a.offerRejected()  // the signaling said 488
        #expect(!a.holdState.isOnHold)
        #expect(await waitUntil(timeoutSeconds: 5) { source.statistics.framesTransferred > framesHeld + 10 }, "the microphone reopened")
        try await a.hold()  // not blocked by the refused one
        #expect(await waitUntil(timeoutSeconds: 5) { offers() == 2 })
        // Unanswered: withdrawn after the set-up time (2 s here), with error 1006.
        #expect(await waitUntil(timeoutSeconds: 10) { ra.recordedErrors.contains { $0.code == .renegotiationUnanswered } })
        #expect(!a.holdState.isOnHold && a.state == .established)
        try await a.hold()
        #expect(await waitUntil(timeoutSeconds: 5) { offers() == 3 })
        await a.hangUp()
        await b.hangUp()
        _ = rb
    }

    /// Re-offers keep the payload types the first offer/answer gave (RFC 3264 §8.3.2): a Tether
    /// that answered a SIP phone's Opus on 96 and telephone-event/8000 on 101 holds with the same.
    @Test func aReofferKeepsTheNegotiatedPayloadTypes() async throws {
        let a = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let rb = EventRecorder(b)
        try await a.start()
        try await b.start()
        // A's offer as a SIP phone would put it: Opus on 96, telephone-event only at 8000 on 101,
        // no RED.
        let offer = try await a.makeOffer()
            .replacingOccurrences(of: "111 63 101 100", with: "96 101")
            .replacingOccurrences(of: "a=rtpmap:63 red/48000/2\r\na=fmtp:63 111/111\r\n", with: "")
            .replacingOccurrences(of: ":111 ", with: ":96 ")
            .replacingOccurrences(of: "a=rtpmap:101 telephone-event/48000\r\na=fmtp:101 0-15\r\n", with: "")
            .replacingOccurrences(of: "a=rtpmap:100 telephone-event/8000\r\na=fmtp:100 0-15", with: "a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15")
        let answer = try await b.acceptOffer(offer)
        #expect(answer.contains(" 96 101\r\n") && answer.contains("a=rtpmap:101 telephone-event/8000"))
        try await b.hold()
        #expect(await waitUntil(timeoutSeconds: 5) { rb.descriptions.contains { $0.kind == .offer } })
        let reoffer = try #require(rb.descriptions.last { $0.kind == .offer })
        #expect(reoffer.sdp.contains(" 96 101\r\n"))
        #expect(reoffer.sdp.contains("a=rtpmap:96 opus/48000/2") && reoffer.sdp.contains("a=rtpmap:101 telephone-event/8000"))
        // Payload type 111 nowhere: not in the m= line's formats, no rtpmap or fmtp for it (the
        // string "111" alone can turn up in ports, priorities or the fingerprint).
        let mLine = try #require(reoffer.sdp.split(separator: "\r\n").first { $0.hasPrefix("m=audio ") })
        #expect(!mLine.split(separator: " ").dropFirst(3).contains("111"), "\(mLine)")
        #expect(!reoffer.sdp.contains("a=rtpmap:111 ") && !reoffer.sdp.contains("a=fmtp:111 "))
        #expect(!reoffer.sdp.contains("telephone-event/48000"))
        #expect(reoffer.sdp.contains("a=sendonly"))
        await a.hangUp()
        await b.hangUp()
    }

    @Test func sendDTMFRefusesWhatItCannotSendWithTypedErrors() async throws {
        let c = try await call(dtmfB: false)
        func code(_ body: () async throws -> Void) async -> Int? {
            do {
                try await body()
                return nil
            } catch {
                return (error as? TetherError)?.code.rawValue ?? -1
            }
        }
        // B did not accept telephone-event: A cannot send (3004), nor B (it has none).
        #expect(await code { try await c.a.sendDTMF("1") } == 3004)
        #expect(await code { try await c.b.sendDTMF("1") } == 3004)
        #expect(await code { try await c.a.sendDTMF("12E") } == 5004)
        #expect(await code { try await c.a.sendDTMF("") } == 5004)
        #expect(await code { try await c.a.sendDTMF("1", toneDuration: .milliseconds(10)) } == 5004)
        #expect(await code { try await c.a.sendDTMF("1", gap: .milliseconds(5)) } == 5004)
        await c.end()

        let d = try await call()
        try await d.a.hold()
        #expect(await code { try await d.a.sendDTMF("1") } == 5002)  // on hold
        #expect(await waitUntil(timeoutSeconds: 5) { d.b.holdState.remote })
        #expect(await code { try await d.b.sendDTMF("1") } == 5002)  // held: recvonly
        await d.end()
        #expect(await code { try await d.a.sendDTMF("1") } == 5002)  // ended
        #expect(await code { try await d.a.hold() } == 5002)
    }
}
