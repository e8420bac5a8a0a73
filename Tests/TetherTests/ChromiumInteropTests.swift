import Foundation
import Testing
import TetherAudio
import TetherRealtime
import TetherTestSupport

/// `tether call` against a real headless Chromium (Debian's `chromium`, driven through the
/// DevTools protocol by scripts/interop/chromium-peer.py): DTLS-SRTP both ways, a tone each way
/// verified by its frequency at both ends, ICE restarts from either side that keep the DTLS
/// association.
@Suite(
    "Chromium interop (DTLS-SRTP)", .keepsLogPerTest, .serialized,
    .enabled(if: chromiumAvailable, "needs Debian's chromium (scripts/setup-debian.sh installs it) and python3"))
struct ChromiumInteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/interop/chromium-peer.py").path

    /// A 1 kHz tone for Chromium's fake microphone.
    static func toneFile(_ dir: String) throws -> String {
        let path = dir + "/chromium-mic.wav"
        let samples = (0..<(48_000 * 10)).map { Int16(9000 * sin(2 * Double.pi * 1000 * Double($0) / 48_000)) }
        try WAVFile.write(samples: samples, sampleRateHertz: 48_000, to: path)
        return path
    }

    /// `tether call` (DTLS-SRTP, on 127.0.0.1) and Chromium, each line relayed to the other
    /// (Chromium's through `rewrite`, when given).
    static func call(
        dir: String, tetherRole: String, tetherArguments: [String] = [], chromiumArguments: [String] = [],
        rewrite: (@Sendable (String) -> String)? = nil
    ) throws -> (tether: CallProcess, chromium: CallProcess) {
        let tether = try CallProcess(
            name: "tether",
            arguments: ["--role", tetherRole, "--keying", "dtls", "--local-address", "127.0.0.1", "--statistics-interval", "0.5"]
                + tetherArguments)
        let chromium = try CallProcess(
            name: "chromium",
            program: ["python3", script, "--role", tetherRole == "offer" ? "answer" : "offer", "--audio", try toneFile(dir)] + chromiumArguments)
        tether.relayLines(to: chromium)
        chromium.relayLines(to: tether, rewrite: rewrite)
        return (tether, chromium)
    }

    @Test(arguments: ["offer", "answer"])
    func aCallWithChromiumCarriesATuneEachWayAndSurvivesRestartsFromBothSides(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let received = dir + "/tether-received.wav"
        let (tether, chromium) = try Self.call(
            dir: dir, tetherRole: tetherRole, tetherArguments: ["--input", "tone:660", "--output", "wav:" + received])
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await chromium.waitFor(state: "connected", timeoutSeconds: 30) != nil)
        let first = try #require(await chromium.report(timeoutSeconds: 20) {
            ($0["packetsReceived"] as? Int ?? 0) > 50 && abs(($0["receivedPeakHertz"] as? Double ?? 0) - 660) < 6
        })
        #expect(first["dtlsState"] as? String == "connected")
        #expect(first["tlsVersion"] as? String == "FEFD")  // DTLS 1.2: Chromium fell back from 1.3
        // What Chromium hears is Tether's 660 Hz (an FFT bin is 2.9 Hz wide).
        #expect(abs((first["receivedPeakHertz"] as? Double ?? 0) - 660) < 6)
        #expect((first["packetsReceived"] as? Int ?? 0) > 50)

        // A restart from Chromium (pc.restartIce()), then one from Tether (fresh candidates).
        for (who, command) in [(chromium, "restart"), (tether, "renew")] {
            let answersBefore = (who === chromium ? tether : chromium).objects.filter {
                $0.object["type"] as? String == "answer" && $0.object["restart"] as? Bool == true
            }.count
            let packetsBefore = await chromium.report(timeoutSeconds: 10) { _ in true }?["packetsReceived"] as? Int ?? 0
            who.send(command)
            let answered = await waitUntil(timeoutSeconds: 15) {
                (who === chromium ? tether : chromium).objects.filter {
                    $0.object["type"] as? String == "answer" && $0.object["restart"] as? Bool == true
                }.count > answersBefore
            }
            #expect(answered, "the \(command) was answered")
            let after = try #require(await chromium.report(timeoutSeconds: 15) {
                ($0["packetsReceived"] as? Int ?? 0) > packetsBefore + 50
            })
            #expect(after["dtlsState"] as? String == "connected")
            #expect(after["connectionState"] as? String == "connected")
            #expect((after["packetsReceived"] as? Int ?? 0) > packetsBefore + 50, "media flows after the \(command)")
        }
        let stats = try #require(tether.lastStatistics)
        #expect(stats["srtpKeying"] as? String == "DTLS-SRTP")
        // No new handshake for either restart.
        #expect(stats["dtlsHandshakeDatagramsAfterSetUp"] as? Int == 0)
        #expect(tether.states.filter { $0 == "established" }.count >= 1)
        #expect(!tether.states.contains("mediaDisrupted"))

        // Enough of Chromium's audio recorded for the check below (more than 3 s).
        #expect(await waitUntil(timeoutSeconds: 20) { (tether.lastStatistics?["packetsReceived"] as? Int ?? 0) > 200 })
        chromium.send("hangup")
        // Chromium's pc.close() sends close_notify: Tether ends as a remote hang-up.
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        let ended = tether.objects.last { $0.object["type"] as? String == "state" }?.object
        #expect(ended?["cause"] as? String == "remote hang-up")
        _ = await chromium.waitForExit(timeoutSeconds: 10)

        // What Tether heard is Chromium's 1 kHz.
        let samples = try WAVFile.read(path: received).samples
        #expect(samples.count > 48_000 * 3)
        let hertz = ToneAnalysis.dominantFrequencyHertz(samples.suffix(48_000), sampleRateHertz: 48_000)
        #expect(abs((hertz ?? 0) - 1000) < 2)
    }

    /// Trickle ICE both ways (`tether call --trickle`, Chromium's onicecandidate and
    /// addIceCandidate): Chromium's descriptions carry no candidate at all, so the call can only
    /// be set up from trickled candidates (or the checks they draw); Tether's offer or answer
    /// leaves with its host candidates and `a=ice-options:trickle`, and its end of candidates
    /// follows as a candidate line. Then a restart from each side.
    @Test(arguments: ["offer", "answer"])
    func trickleICEWithChromiumSetsUpAndSurvivesRestarts(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (tether, chromium) = try Self.call(
            dir: dir, tetherRole: tetherRole, tetherArguments: ["--input", "tone:660", "--trickle"], chromiumArguments: ["--trickle"])
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await chromium.waitFor(state: "connected", timeoutSeconds: 30) != nil)
        let heard = await chromium.report(timeoutSeconds: 20) {
            ($0["packetsReceived"] as? Int ?? 0) > 50 && abs(($0["receivedPeakHertz"] as? Double ?? 0) - 660) < 6
        }
        #expect(heard != nil, "Chromium hears Tether's tone")
        func lines(_ side: CallProcess, _ type: String) -> [[String: Any]] { side.objects.map(\.object).filter { $0["type"] as? String == type } }
        let tetherDescription = try #require(lines(tether, tetherRole).first?["sdp"] as? String)
        #expect(tetherDescription.contains("a=ice-options:trickle"))
        #expect(!tetherDescription.contains("a=end-of-candidates"))
        #expect(lines(tether, "candidate").contains { ($0["candidate"] as? String) == "" }, "Tether ended its candidates")
        let chromiumDescription = try #require(lines(chromium, tetherRole == "offer" ? "answer" : "offer").first?["sdp"] as? String)
        #expect(!chromiumDescription.contains("a=candidate:"), "Chromium's description carried no candidate")
        #expect(lines(chromium, "candidate").contains { ($0["candidate"] as? String ?? "").hasPrefix("candidate:") })

        for (who, command) in [(chromium, "restart"), (tether, "renew")] {
            let answerer = who === chromium ? tether : chromium
            func restartAnswers() -> Int { lines(answerer, "answer").filter { $0["restart"] as? Bool == true }.count }
            let answersBefore = restartAnswers()
            let packetsBefore = await chromium.report(timeoutSeconds: 10) { _ in true }?["packetsReceived"] as? Int ?? 0
            who.send(command)
            #expect(await waitUntil(timeoutSeconds: 15) { restartAnswers() > answersBefore }, "the \(command) was answered")
            let after = await chromium.report(timeoutSeconds: 20) { ($0["packetsReceived"] as? Int ?? 0) > packetsBefore + 50 }
            #expect(after?["connectionState"] as? String == "connected", "media flows after the \(command)")
        }
        // Tether's restart trickled (Chromium takes trickled candidates): its offer had no end.
        let restartOffer = lines(tether, "offer").last { $0["restart"] as? Bool == true }?["sdp"] as? String ?? ""
        #expect(restartOffer.contains("a=ice-options:trickle") && !restartOffer.contains("a=end-of-candidates"))
        chromium.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        _ = await chromium.waitForExit(timeoutSeconds: 10)
        #expect(!tether.objects.contains { $0.object["type"] as? String == "error" }, "Tether refused nothing")
    }

    /// RFC 2198 RED both ways: Chromium sends it when RED comes first (its codec preferences when
    /// it offers, Tether's offer when Tether does: `--redundancy always` offers RED first), Tether
    /// sends it always; each side decodes the other's tone from the RED packets. (Chromium's
    /// statistics name the codec inside, audio/opus, either way: the count of RED packets Tether
    /// received is the evidence.)
    @Test(arguments: ["offer", "answer"])
    func redundantAudioFlowsBothWaysWithChromium(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let received = dir + "/tether-received.wav"
        let (tether, chromium) = try Self.call(
            dir: dir, tetherRole: tetherRole,
            tetherArguments: ["--input", "tone:660", "--output", "wav:" + received, "--redundancy", "always"],
            chromiumArguments: ["--prefer-red"])
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await chromium.waitFor(state: "connected", timeoutSeconds: 30) != nil)
        let report = try #require(await chromium.report(timeoutSeconds: 20) {
            ($0["packetsReceived"] as? Int ?? 0) > 100 && abs(($0["receivedPeakHertz"] as? Double ?? 0) - 660) < 6
        })
        print("chromium with RED (tether \(tetherRole)s): \(report)")
        #expect(abs((report["receivedPeakHertz"] as? Double ?? 0) - 660) < 6)
        let concealed = try #require(report["concealedSamples"] as? Int)
        #expect(concealed < 4800, "Chromium concealed \(concealed) samples")
        // RED is sent inside the rate control's budget: once the estimate has room for it (a
        // couple of seconds of its start on this unshaped path).
        #expect(await waitUntil(timeoutSeconds: 20) {
            (tether.lastStatistics?["packetsReceived"] as? Int ?? 0) > 150 && (tether.lastStatistics?["redundantFramesSent"] as? Int ?? 0) > 100
        })
        let stats = try #require(tether.lastStatistics)
        print("tether with RED: received \(stats["redundantAudioPacketsReceived"] ?? "?") RED packets of \(stats["packetsReceived"] ?? "?") (\(stats["paddingPacketsReceived"] ?? "?") of padding alone); sent \(stats["redundantFramesSent"] ?? "?") frames again; estimate \(stats["estimatedBandwidth"] ?? "?") b/s, \(stats["transportFeedbackReceived"] ?? "?") feedbacks received, \(stats["transportFeedbackSent"] ?? "?") sent, queue \(stats["queueingDelayMs"] ?? "?") ms")
        #expect((stats["redundantAudioPacketsReceived"] as? Int ?? 0) > 100)
        #expect((stats["redundantFramesSent"] as? Int ?? 0) > 100)
        #expect(stats["malformedPackets"] as? Int == 0)
        tether.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        chromium.send("hangup")
        _ = await chromium.waitForExit(timeoutSeconds: 10)
        let samples = try WAVFile.read(path: received).samples
        let hertz = ToneAnalysis.dominantFrequencyHertz(samples.suffix(48_000), sampleRateHertz: 48_000)
        #expect(abs((hertz ?? 0) - 1000) < 2)
    }

    /// Browsers hide host addresses behind mDNS names (RFC 8828) that nothing here resolves. The
    /// relay rewrites every Chromium candidate's address into such a name: Tether must reach
    /// Chromium through the peer-reflexive candidates its checks create.
    @Test(arguments: ["offer", "answer"])
    func aChromiumThatHidesItsAddressesBehindMDNSNamesIsReachedAnyway(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (tether, chromium) = try Self.call(dir: dir, tetherRole: tetherRole, rewrite: Self.hidingAddresses)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        let pair = tether.objects.last { $0.object["type"] as? String == "pair" }?.object
        #expect(pair?["remoteType"] as? String == "prflx")
        let r = try #require(await chromium.report(timeoutSeconds: 15) { ($0["packetsReceived"] as? Int ?? 0) > 25 })
        #expect(r["dtlsState"] as? String == "connected")
        #expect((r["packetsReceived"] as? Int ?? 0) > 25)
        tether.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        chromium.send("hangup")
        _ = await chromium.waitForExit(timeoutSeconds: 10)
    }

    /// DTMF from a browser: Chromium's `RTCRtpSender.dtmf.insertDTMF("123#")` sends RFC 4733
    /// events, which Tether reports as the digits 1, 2, 3, # once each. (A browser cannot report
    /// DTMF it receives, so this direction is the one a browser can prove.) Either side offers;
    /// the telephone-event at the Opus clock rate is what is negotiated.
    @Test(arguments: ["offer", "answer"])
    func chromiumsInsertDTMFArrivesAtTetherAsDigits(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (tether, chromium) = try Self.call(dir: dir, tetherRole: tetherRole)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        let connected = try #require(await chromium.report(timeoutSeconds: 20) { ($0["packetsReceived"] as? Int ?? 0) > 25 })
        #expect(connected["canInsertDTMF"] as? Bool == true)
        // Both descriptions name telephone-event at 48000 (Tether offers it first, answers it
        // when the browser offers it).
        let descriptions = (tether.objects + chromium.objects).compactMap { $0.object["sdp"] as? String }
        #expect(descriptions.count >= 2 && descriptions.allSatisfy { $0.contains("telephone-event/48000") })

        chromium.send("dtmf 123#")
        let digits = { tether.objects.filter { $0.object["type"] as? String == "dtmf-received" }.map { $0.object } }
        #expect(await waitUntil(timeoutSeconds: 15) { digits().count >= 4 })
        try await Task.sleep(for: .milliseconds(500))  // no digit twice
        #expect(digits().compactMap { $0["digit"] as? String }.joined() == "123#")
        #expect(digits().allSatisfy { (60...140).contains($0["durationMs"] as? Int ?? 0) })  // Chromium's 100 ms tones
        #expect(chromium.objects.filter { $0.object["type"] as? String == "dtmf-sent" }.count == 4)
        // The statistics line (every 0.5 s) catches up with the digits.
        #expect(await waitUntil(timeoutSeconds: 5) {
            (tether.lastStatistics?["dtmfPacketsReceived"] as? Int ?? 0) >= 4 * 3 && tether.lastStatistics?["dtmfDigitsReceived"] as? Int == 4
        })
        #expect(!tether.states.contains("mediaDisrupted"))
        tether.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        chromium.send("hangup")
        _ = await chromium.waitForExit(timeoutSeconds: 10)
    }

    /// Tether and Chromium in two network namespaces joined by a veth pair; nftables drops all
    /// UDP in Tether's namespace for 5 s. Tether sees the outage, offers an ICE restart, Chromium
    /// answers it, and media is back soon after the path returns, on the same DTLS association.
    @Test(.enabled(if: canMakeNetworkNamespaces, "needs root and iproute2"))
    func aPathCutInANamespaceIsRestoredByTether() async throws {
        let net = try await ShapedNamespacePair(prefix: "tci", subnet: 211, kilobits: nil)
        defer { net.delete() }
        let (nsT, nsC) = (net.a, net.b)

        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tether = try CallProcess(
            name: "tether", namespace: nsT,
            arguments: ["--role", "offer", "--keying", "dtls", "--input", "tone:660", "--statistics-interval", "0.5"])
        let chromium = try CallProcess(
            name: "chromium",
            program: ["ip", "netns", "exec", nsC, "python3", Self.script, "--role", "answer", "--audio", try Self.toneFile(dir)])
        tether.relayLines(to: chromium)
        chromium.relayLines(to: tether)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await chromium.waitFor(state: "connected", timeoutSeconds: 30) != nil)
        try await Task.sleep(for: .seconds(1))

        let rules = "add table inet tethercut; "
            + "add chain inet tethercut input { type filter hook input priority 0; }; add rule inet tethercut input meta l4proto udp drop; "
            + "add chain inet tethercut output { type filter hook output priority 0; }; add rule inet tethercut output meta l4proto udp drop"
        let cut = MonotonicClock.nanoseconds()
        try #require(run(["ip", "netns", "exec", nsT, "nft", rules]) == 0)
        let disrupted = await tether.waitFor(state: "mediaDisrupted", since: cut, timeoutSeconds: 5)
        #expect(disrupted != nil)
        #expect(await tether.waitFor(state: "renewingMedia", since: cut, timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .seconds(5) - .nanoseconds(Int64(MonotonicClock.nanoseconds() - cut)))
        let back = MonotonicClock.nanoseconds()
        #expect(run(["ip", "netns", "exec", nsT, "nft", "delete table inet tethercut"]) == 0)
        let restored = try #require(await tether.waitFor(state: "established", since: back, timeoutSeconds: 10))
        // Restored within a second of the path's return (a margin for a loaded machine).
        #expect(Double(restored - back) / 1e9 < 2.0)
        // Tether offered the restart and Chromium answered it.
        #expect(chromium.objects.contains { $0.object["type"] as? String == "answer" && $0.object["restart"] as? Bool == true })
        let r = try #require(await chromium.report(timeoutSeconds: 15) {
            abs(($0["receivedPeakHertz"] as? Double ?? 0) - 660) < 6
        })
        #expect(r["dtlsState"] as? String == "connected")
        #expect(abs((r["receivedPeakHertz"] as? Double ?? 0) - 660) < 6)
        let stats = try #require(tether.lastStatistics)
        #expect(stats["dtlsHandshakeDatagramsAfterSetUp"] as? Int == 0)
        tether.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        chromium.send("hangup")
        _ = await chromium.waitForExit(timeoutSeconds: 10)
    }

    /// Tether and Chromium in two namespaces over a veth pair whose egresses are both shaped to
    /// 64 kb/s (`tc tbf`, 300 ms queue). Transport-cc is negotiated both ways; Chromium's feedback
    /// drives Tether's rate control, which keeps Tether's direction inside the link (≤ 90 % of it,
    /// every header counted by the qdisc, drops ≤ 2 % of packets) over seconds 12–24 of a voiced
    /// signal; Tether's feedback reaches Chromium. Chromium's own direction is measured and
    /// printed (its audio is not held to the target: its Opus target is fixed).
    @Test(.enabled(if: canMakeNetworkNamespaces, "needs root and iproute2"))
    func overA64KilobitLinkTetherStaysInsideItOnChromiumsFeedback() async throws {
        let net = try await ShapedNamespacePair(prefix: "tcn", subnet: 212, kilobits: 64)
        defer { net.delete() }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tether = try CallProcess(
            name: "tether", namespace: net.a,
            arguments: ["--role", "offer", "--keying", "dtls", "--input", "wav:\(voicedSignalWAVPath)", "--statistics-interval", "0.5"])
        let chromium = try CallProcess(
            name: "chromium",
            program: ["ip", "netns", "exec", net.b, "python3", Self.script, "--role", "answer", "--audio", try Self.toneFile(dir)])
        tether.relayLines(to: chromium)
        chromium.relayLines(to: tether)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await chromium.waitFor(state: "connected", timeoutSeconds: 30) != nil)

        try await Task.sleep(for: .seconds(12))
        let t0 = (t: net.egress(fromA: true), c: net.egress(fromA: false), at: MonotonicClock.nanoseconds())
        let r0 = await chromium.report(timeoutSeconds: 5) { _ in true }
        try await Task.sleep(for: .seconds(12))
        let t1 = (t: net.egress(fromA: true), c: net.egress(fromA: false), at: MonotonicClock.nanoseconds())
        let r1 = await chromium.report(timeoutSeconds: 5) { _ in true }
        let seconds = Double(t1.at - t0.at) / 1e9
        let toChromium = t1.t.since(t0.t, seconds: seconds)
        let toTether = t1.c.since(t0.c, seconds: seconds)
        let stats = try #require(tether.lastStatistics)
        print(String(format: "64 kb/s link, seconds 12–24: Tether → Chromium %.1f kb/s, %.1f %% dropped; Chromium → Tether %.1f kb/s, %.1f %% dropped", toChromium.kilobits, 100 * toChromium.droppedShare, toTether.kilobits, 100 * toTether.droppedShare))
        print("Tether: estimate \(stats["estimatedBandwidth"] ?? "-"), packet \(stats["sentPacketMs"] ?? "-") ms, target \(stats["targetBitrate"] ?? "-"), RTT \(stats["rttMs"] ?? "-") ms, heard loss \(stats["heardLossPercent"] ?? "-") %, feedback received \(stats["transportFeedbackReceived"] ?? "-"), sent \(stats["transportFeedbackSent"] ?? "-"), padding \(stats["paddingPacketsReceived"] ?? "-")")
        if let r0, let r1 {
            func delta(_ key: String) -> Double { (r1[key] as? Double ?? 0) - (r0[key] as? Double ?? 0) }
            print(String(
                format: "Chromium's own view: audio %.1f kb/s payload + %.1f kb/s RTP headers in %.0f packets, all it sent on the pair %.1f kb/s; target %@, available outgoing %@",
                delta("bytesSent") * 8 / seconds / 1000, delta("headerBytesSent") * 8 / seconds / 1000, delta("packetsSent"),
                delta("pairBytesSent") * 8 / seconds / 1000, "\(r1["targetBitrate"] ?? "-")", "\(r1["availableOutgoingBitrate"] ?? "-")"))
        }
        #expect(toChromium.kilobits <= 0.9 * 64 && toChromium.kilobits > 10)
        #expect(toChromium.droppedShare <= 0.02)
        #expect((stats["transportFeedbackReceived"] as? Int ?? 0) > 20)
        #expect((stats["transportFeedbackSent"] as? Int ?? 0) > 20)
        tether.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        chromium.send("hangup")
        _ = await chromium.waitForExit(timeoutSeconds: 10)
    }

    /// Rewrites the address of every `a=candidate` in an offer or answer line into an mDNS name.
    static let hidingAddresses: @Sendable (String) -> String = { line in
        guard let data = line.data(using: .utf8), var object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let sdp = object["sdp"] as? String
        else { return line }
        object["sdp"] = sdp.components(separatedBy: "\r\n").map { sdpLine -> String in
            guard sdpLine.hasPrefix("a=candidate:") else { return sdpLine }
            var fields = sdpLine.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            if fields.count > 4 { fields[4] = UUID().uuidString.lowercased() + ".local" }
            return fields.joined(separator: " ")
        }.joined(separator: "\r\n")
        guard let rewritten = try? JSONSerialization.data(withJSONObject: object) else { return line }
        return String(decoding: rewritten, as: UTF8.self)
    }
}

/// Whether Debian's Chromium and a python3 are installed here.
let chromiumAvailable =
    FileManager.default.isExecutableFile(atPath: "/usr/lib/chromium/chromium") && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
