import Foundation
import Testing
import TetherAudio
import TetherRealtime
import TetherTestSupport

/// `tether call` against baresip (Debian's baresip-core 1.0), an SDES-SRTP SIP softphone with its
/// own ICE, reached through a minimal SIP exchange (scripts/interop/baresip-peer.py): both roles,
/// a tone each way verified by its frequency, no SRTP error logged by baresip.
@Suite(
    "baresip interop (SDES-SRTP over SIP)", .keepsLogPerTest, .serialized,
    .enabled(if: baresipAvailable, "needs Debian's baresip-core (scripts/setup-debian.sh installs it)"))
struct BaresipInteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/interop/baresip-peer.py").path

    @Test(arguments: ["offer", "answer"])
    func aCallWithBaresipCarriesATuneEachWay(tetherRole: String) async throws {
        try await toneCallEachWay(
            tetherRole: tetherRole, peer: ThirdPartyPeer(name: "baresip", script: Self.script, readyState: "established"),
            checkReport: { report in
                // baresip's SRTP refused nothing.
                #expect(report["srtpErrors"] as? Int == 0)
            })
    }

    /// Tether and baresip in two namespaces over a veth pair shaped to 64 kb/s each way (`tc
    /// tbf`, 300 ms queue). baresip negotiates no transport-cc: Tether's rate control runs on its
    /// receiver reports (RTT over its minimum, and loss), and keeps Tether's direction inside the
    /// link (≤ 90 % of it with every header, drops ≤ 2 %) over seconds 15–27 of a voiced signal.
    /// baresip's direction (its Opus at a fixed rate) is measured and printed.
    @Test(.enabled(if: canMakeNetworkNamespaces, "needs root and iproute2"))
    func overA64KilobitLinkTetherStaysInsideItOnReceiverReports() async throws {
        let net = try await ShapedNamespacePair(prefix: "tbn", subnet: 213, kilobits: 64)
        defer { net.delete() }
        let tether = try CallProcess(
            name: "tether", namespace: net.a,
            arguments: ["--role", "offer", "--local-address", net.addressA, "--input", "wav:\(voicedSignalWAVPath)", "--statistics-interval", "0.5"])
        let baresip = try CallProcess(
            name: "baresip", program: ["ip", "netns", "exec", net.b, "python3", Self.script, "--role", "answer", "--hertz", "1000"])
        tether.relayLines(to: baresip)
        baresip.relayLines(to: tether)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await baresip.waitFor(state: "established", timeoutSeconds: 30) != nil)
        try await Task.sleep(for: .seconds(15))
        let t0 = (t: net.egress(fromA: true), b: net.egress(fromA: false), at: MonotonicClock.nanoseconds())
        try await Task.sleep(for: .seconds(12))
        let t1 = (t: net.egress(fromA: true), b: net.egress(fromA: false), at: MonotonicClock.nanoseconds())
        let seconds = Double(t1.at - t0.at) / 1e9
        let toBaresip = t1.t.since(t0.t, seconds: seconds)
        let toTether = t1.b.since(t0.b, seconds: seconds)
        let stats = try #require(tether.lastStatistics)
        print(String(format: "64 kb/s link, seconds 15–27: Tether → baresip %.1f kb/s, %.1f %% dropped; baresip → Tether %.1f kb/s, %.1f %% dropped", toBaresip.kilobits, 100 * toBaresip.droppedShare, toTether.kilobits, 100 * toTether.droppedShare))
        print("Tether: estimate \(stats["estimatedBandwidth"] ?? "-"), packet \(stats["sentPacketMs"] ?? "-") ms, target \(stats["targetBitrate"] ?? "-"), RTT \(stats["rttMs"] ?? "-") ms, heard loss \(stats["heardLossPercent"] ?? "-") %, feedback \(stats["transportFeedbackReceived"] ?? "-")")
        #expect(toBaresip.kilobits <= 0.9 * 64 && toBaresip.kilobits > 10)
        #expect(toBaresip.droppedShare <= 0.02)
        #expect(stats["transportFeedbackReceived"] as? Int == 0)
        await end((tether, baresip))
    }

    /// Starts `tether call` and baresip joined by their JSON lines, and waits for both to be up.
    private func call(tetherRole: String) async throws -> (tether: CallProcess, baresip: CallProcess) {
        let tether = try CallProcess(
            name: "tether",
            arguments: ["--role", tetherRole, "--local-address", "127.0.0.1", "--input", "tone:660", "--statistics-interval", "0.25"])
        let baresip = try CallProcess(
            name: "baresip", program: ["python3", Self.script, "--role", tetherRole == "offer" ? "answer" : "offer", "--hertz", "1000"])
        tether.relayLines(to: baresip)
        baresip.relayLines(to: tether)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await baresip.waitFor(state: "established", timeoutSeconds: 30) != nil)
        return (tether, baresip)
    }

    private func end(_ c: (tether: CallProcess, baresip: CallProcess)) async {
        c.baresip.send("hangup")
        _ = await c.baresip.waitForExit(timeoutSeconds: 10)
        c.tether.send("hangup")
        #expect(await c.tether.waitForExit(timeoutSeconds: 10) == 0)
    }

    /// DTMF both ways (RFC 4733): the digits Tether sends are the ones baresip logs receiving, and
    /// the digits baresip sends arrive at Tether once each, in order. baresip only takes
    /// telephone-event/8000: whichever side offers, that is what is negotiated.
    @Test(arguments: ["offer", "answer"])
    func dtmfTravelsBothWaysWithBaresip(tetherRole: String) async throws {
        let c = try await call(tetherRole: tetherRole)
        let descriptions = (c.tether.objects + c.baresip.objects).compactMap { $0.object["sdp"] as? String }
        #expect(descriptions.allSatisfy { $0.contains("telephone-event/8000") })
        c.tether.send("dtmf 147*#D")
        let report = await c.baresip.report(timeoutSeconds: 15) { ($0["dtmf"] as? String ?? "").count >= 6 }
        #expect(report?["dtmf"] as? String == "147*#D")
        #expect(await waitUntil(timeoutSeconds: 5) { c.tether.lastStatistics?["dtmfDigitsSent"] as? Int == 6 })

        c.baresip.send("dtmf 2580")
        let received = { c.tether.objects.filter { $0.object["type"] as? String == "dtmf-received" }.compactMap { $0.object["digit"] as? String } }
        #expect(await waitUntil(timeoutSeconds: 15) { received().count >= 4 })
        try await Task.sleep(for: .milliseconds(500))
        #expect(received().joined() == "2580")
        #expect(!c.tether.states.contains("mediaDisrupted"))
        await end(c)
    }

    /// Hold and resume against baresip, from each side. Tether holds: baresip answers recvonly,
    /// the packets it receives stop (Tether sends no RTP) and neither side sends; on resume they
    /// return both ways. baresip holds: Tether answers recvonly, reports the peer's hold, sees no
    /// disruption while only RTCP arrives, and hears baresip again after the resume.
    @Test(arguments: ["offer", "answer"])
    func holdAndResumeWithBaresipFromEitherSide(tetherRole: String) async throws {
        let c = try await call(tetherRole: tetherRole)
        func received() -> Int { c.tether.lastStatistics?["packetsReceived"] as? Int ?? 0 }
        func holdState() -> [String: Any]? { c.tether.objects.last { $0.object["type"] as? String == "hold-state" }?.object }
        #expect(await c.baresip.report(timeoutSeconds: 10) { ($0["receivedPacketsPerSecond"] as? Int ?? 0) > 30 } != nil)

        // Tether holds.
        c.tether.send("hold")
        #expect(await waitUntil(timeoutSeconds: 10) { holdState()?["local"] as? Bool == true })
        #expect(holdState()?["direction"] as? String == "sendonly")
        let held = await c.baresip.report(timeoutSeconds: 10) { ($0["receivedPacketsPerSecond"] as? Int ?? -1) == 0 }
        #expect(held?["direction"] as? String == "recvonly", "baresip answers Tether's hold recvonly")
        // Statistics lines come every 0.25 s: steady for a second once nothing arrives.
        let atHold = try #require(await steadyValue(quietSeconds: 1) { received() })
        try await Task.sleep(for: .seconds(2))
        #expect(received() <= atHold + 2, "baresip sends nothing to the side that holds it")
        c.tether.send("resume")
        #expect(await waitUntil(timeoutSeconds: 10) { holdState()?["local"] as? Bool == false })
        #expect(await c.baresip.report(timeoutSeconds: 10) { ($0["receivedPacketsPerSecond"] as? Int ?? 0) > 30 } != nil)
        #expect(await waitUntil(timeoutSeconds: 10) { received() > atHold + 50 })

        // baresip holds.
        c.baresip.send("hold")
        #expect(await waitUntil(timeoutSeconds: 10) { holdState()?["remote"] as? Bool == true })
        #expect(holdState()?["direction"] as? String == "recvonly")
        let atRemoteHold = try #require(await steadyValue(quietSeconds: 1) { received() })
        try await Task.sleep(for: .seconds(2.5))  // past the 1 s disruption threshold: RTCP keeps it
        #expect(received() <= atRemoteHold + 2)
        #expect(await c.baresip.report(timeoutSeconds: 10) { ($0["receivedPacketsPerSecond"] as? Int ?? -1) == 0 } != nil,
            "Tether is recvonly: it sends nothing to baresip")
        c.baresip.send("resume")
        #expect(await waitUntil(timeoutSeconds: 10) { holdState()?["remote"] as? Bool == false })
        #expect(await waitUntil(timeoutSeconds: 10) { received() > atRemoteHold + 50 })
        #expect(await c.baresip.report(timeoutSeconds: 10) { ($0["receivedPacketsPerSecond"] as? Int ?? 0) > 30 } != nil)
        #expect(!c.tether.states.contains("mediaDisrupted"))
        #expect(!c.tether.objects.contains { $0.object["type"] as? String == "error" })
        await end(c)
    }
}

/// Whether Debian's baresip is installed here.
let baresipAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/baresip")
    && FileManager.default.fileExists(atPath: "/usr/lib/baresip/modules/srtp.so")
