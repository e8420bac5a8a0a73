import Foundation
import Testing
import TetherAudio
import TetherRealtime
import TetherTestSupport

/// `tether call` as processes: signaling as JSON lines, carried by the test as a tiny relay.
@Suite("tether call processes", .keepsLogPerTest, .serialized)
struct CallProcessTests {
    /// Two `tether call` processes on 127.0.0.1, A offering, each line relayed to the other, both
    /// established.
    func joinedPair(statisticsInterval: String) async throws -> (CallProcess, CallProcess) {
        let a = try CallProcess(name: "A", arguments: ["--role", "offer", "--local-address", "127.0.0.1", "--statistics-interval", statisticsInterval])
        let b = try CallProcess(name: "B", arguments: ["--role", "answer", "--local-address", "127.0.0.1", "--statistics-interval", statisticsInterval])
        a.relayLines(to: b)
        b.relayLines(to: a)
        #expect(await a.waitFor(state: "established", timeoutSeconds: 10) != nil)
        #expect(await b.waitFor(state: "established", timeoutSeconds: 10) != nil)
        return (a, b)
    }

    @Test func twoProcessesJoinedByALineRelayHoldACallAndExitCleanly() async throws {
        let (a, b) = try await joinedPair(statisticsInterval: "0.5")
        try await Task.sleep(for: .seconds(2))
        a.send(#"{"type":"hangup","sipCode":200}"#)
        #expect(await a.waitForExit(timeoutSeconds: 10) == 0)
        #expect(await b.waitForExit(timeoutSeconds: 10) == 0)
        // Statistics lines show media both ways.
        let lastStats = b.objects.last { $0.object["type"] as? String == "statistics" }?.object
        #expect((lastStats?["packetsReceived"] as? Int ?? 0) > 50)
        let ended = a.objects.last { $0.object["type"] as? String == "state" }?.object
        #expect(ended?["state"] as? String == "ended" && ended?["cause"] as? String == "local hang-up" && ended?["sipCode"] as? Int == 200)
        #expect(b.states.last == "ended")
        // The last line each side printed is its call report.
        for p in [a, b] {
            let report = try #require(p.objects.last?.object, "\(p.name) printed nothing")
            #expect(report["type"] as? String == "report" && report["version"] as? Int == 1 && report["state"] as? String == "ended")
            #expect(((report["quality"] as? [String: Any])?["packetsReceived"] as? Int ?? 0) > 50)
            #expect((report["paths"] as? [Any])?.count == 1 && report["startedAt"] is String && report["endedAt"] is String)
        }
        let end = (a.objects.last?.object["end"] as? [String: Any]) ?? [:]
        #expect(end["cause"] as? String == "local hang-up" && end["sipCode"] as? Int == 200)
        #expect((b.objects.last?.object["end"] as? [String: Any])?["cause"] as? String == "remote hang-up")
    }

    /// Hold, resume and DTMF through `tether call`'s stdin: `hold` and `resume` (re-offers carried
    /// by the relay like any description), `hold-state` lines with the direction on both sides,
    /// the statistics' direction, no RTP while held; `dtmf 12#` sent by B and reported by A as
    /// `dtmf-received` lines; a bad digit is a non-terminal error line (5004).
    @Test func holdResumeAndDTMFThroughTheCommandLine() async throws {
        let (a, b) = try await joinedPair(statisticsInterval: "0.25")
        func holdLine(_ p: CallProcess) -> [String: Any]? { p.objects.last { $0.object["type"] as? String == "hold-state" }?.object }
        func received(_ p: CallProcess) -> Int { p.lastStatistics?["packetsReceived"] as? Int ?? 0 }

        a.send("hold")
        #expect(await waitUntil(timeoutSeconds: 10) { holdLine(a)?["local"] as? Bool == true && holdLine(b)?["remote"] as? Bool == true })
        #expect(holdLine(a)?["direction"] as? String == "sendonly" && holdLine(b)?["direction"] as? String == "recvonly")
        #expect(await waitUntil(timeoutSeconds: 5) { a.lastStatistics?["localHold"] as? Bool == true && b.lastStatistics?["remoteHold"] as? Bool == true })
        #expect(a.lastStatistics?["direction"] as? String == "sendonly")
        let heldAt = try #require(await steadyValue(quietSeconds: 1) { [received(a), received(b)] })  // lines every 0.25 s
        try await Task.sleep(for: .seconds(1.5))  // nothing more arrives while held
        #expect(received(a) <= heldAt[0] + 1 && received(b) <= heldAt[1] + 1, "no RTP either way while held")
        b.send("dtmf 1")  // B is held (recvonly): it cannot send
        #expect(await waitUntil(timeoutSeconds: 5) { b.objects.contains { $0.object["type"] as? String == "error" && $0.object["code"] as? Int == 5002 } })

        a.send(#"{"type":"resume"}"#)
        #expect(await waitUntil(timeoutSeconds: 10) { holdLine(a)?["local"] as? Bool == false && holdLine(b)?["remote"] as? Bool == false })
        #expect(holdLine(a)?["direction"] as? String == "sendrecv")
        #expect(await waitUntil(timeoutSeconds: 10) { received(a) > heldAt[0] + 25 && received(b) > heldAt[1] + 25 })

        b.send("dtmf 12#")
        b.send(#"{"type":"dtmf","digits":"9x"}"#)
        let digits = { a.objects.filter { $0.object["type"] as? String == "dtmf-received" }.compactMap { $0.object["digit"] as? String } }
        #expect(await waitUntil(timeoutSeconds: 10) { digits().count >= 3 })
        #expect(await waitUntil(timeoutSeconds: 5) { b.objects.contains { $0.object["type"] as? String == "error" && $0.object["code"] as? Int == 5004 } })
        try await Task.sleep(for: .milliseconds(400))
        #expect(digits().joined() == "12#")
        #expect(!a.states.contains("mediaDisrupted") && !b.states.contains("mediaDisrupted"))
        a.send("hangup")
        #expect(await a.waitForExit(timeoutSeconds: 10) == 0)
        #expect(await b.waitForExit(timeoutSeconds: 10) == 0)
    }

    /// `--log-format json --log-level debug --call-id …`: every stderr line is one JSON object with
    /// time, level, label and message, and the call id the command was given; the call's progress
    /// and an ICE restart are in it; no SRTP key of any description the two sides exchanged
    /// (the first offer and answer, the restart's) is. The other side, at `--log-level warning`,
    /// logs nothing of a clean call's progress.
    @Test func jsonLogLinesCarryTheCallIdAndNoKeyMaterial() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try CallProcess(
            name: "A",
            arguments: [
                "--role", "offer", "--local-address", "127.0.0.1", "--statistics-interval", "0", "--log-format", "json", "--log-level", "debug",
                "--call-id", "cli-call-1",
            ], stderrPath: dir + "/a.log")
        let b = try CallProcess(
            name: "B", arguments: ["--role", "answer", "--local-address", "127.0.0.1", "--statistics-interval", "0", "--log-level", "warning"],
            stderrPath: dir + "/b.log")
        a.relayLines(to: b)
        b.relayLines(to: a)
        #expect(await a.waitFor(state: "established", timeoutSeconds: 10) != nil)
        #expect(await b.waitFor(state: "established", timeoutSeconds: 10) != nil)
        a.send("renew")
        let restartAnswered = { b.objects.contains { $0.object["type"] as? String == "answer" && $0.object["restart"] as? Bool == true } }
        #expect(await waitUntil(timeoutSeconds: 10) { restartAnswered() })
        a.send("hangup")
        #expect(await a.waitForExit(timeoutSeconds: 10) == 0)
        #expect(await b.waitForExit(timeoutSeconds: 10) == 0)

        let descriptions = (a.objects + b.objects).compactMap { $0.object["sdp"] as? String }
        let keys = descriptions.flatMap(inlineKeys)
        #expect(descriptions.count >= 4 && keys.count >= 4, "\(descriptions.count) descriptions, \(keys.count) keys")
        let lines = try textFile(dir + "/a.log").split(separator: "\n").map(String.init)
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(!lines.isEmpty && objects.count == lines.count, "every line is a JSON object: \(lines.prefix(3))")
        for o in objects {
            #expect(o["call-id"] as? String == "cli-call-1" && o["label"] as? String == "tether" && o["time"] is String, "\(o)")
            #expect(["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(o["level"] as? String ?? ""), "\(o)")
        }
        let messages = objects.compactMap { $0["message"] as? String }
        for expected in ["call established", "selected pair host → host", "media: first packet from the peer", "ICE restart offered", "sent restart offer"] {
            #expect(messages.contains(expected), "no '\(expected)' in \(messages)")
        }
        #expect(objects.contains { $0["level"] as? String == "notice" && $0["cause"] as? String == "local hang-up" })
        for line in lines {
            #expect(!line.contains("inline:") && !keys.contains { line.contains($0) }, "key material in \(line)")
        }
        let bLog = try textFile(dir + "/b.log")
        #expect(!bLog.contains("established") && !bLog.contains("selected pair"), "B logged below warning: \(bLog)")
    }

    @Test func badUsageExitsWithCode1() async throws {
        let a = try CallProcess(name: "A", arguments: ["--role", "offer", "--ptime", "30"])
        #expect(await a.waitForExit(timeoutSeconds: 10) == 1)
    }

    /// A first offer Tether cannot use ends the call, and stdout says why: an `error` line with the
    /// code (terminal), then `ended` with cause `error` and the same `errorCode`; exit code 2.
    @Test(arguments: [
        // A real Chromium offer (DTLS-SRTP) whose a=fingerprint was lost on the way: nothing to
        // key SRTP with.
        (UnusableOffer(
            name: "Chromium's offer without a=fingerprint",
            sdp: ((try? String(contentsOfFile: fixturePath("interop/chromium/offer.sdp"), encoding: .utf8)) ?? "missing fixture")
                .components(separatedBy: "\r\n").filter { !$0.hasPrefix("a=fingerprint") }.joined(separator: "\r\n")),
         3002),
        (UnusableOffer(name: "not SDP", sdp: "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\nthis is not SDP\r\n"), 3001),
    ])
    func anOfferThatCannotBeNegotiatedIsReportedOnStdoutWithItsCode(offer: UnusableOffer, code: Int) async throws {
        let b = try CallProcess(name: "B", arguments: ["--role", "answer", "--local-address", "127.0.0.1", "--statistics-interval", "0"])
        let line = try JSONSerialization.data(withJSONObject: ["type": "offer", "sdp": offer.sdp])
        b.send(String(decoding: line, as: UTF8.self))
        #expect(await b.waitForExit(timeoutSeconds: 20) == 2)
        let error = b.objects.first { $0.object["type"] as? String == "error" }?.object
        #expect(error?["code"] as? Int == code)
        #expect(error?["terminal"] as? Bool == true)
        #expect((error?["message"] as? String ?? "").isEmpty == false)
        let ended = b.objects.last { $0.object["type"] as? String == "state" }?.object
        #expect(ended?["state"] as? String == "ended")
        #expect(ended?["cause"] as? String == "error")
        #expect(ended?["causeCode"] as? Int == 5)
        #expect(ended?["errorCode"] as? Int == code)
    }

    /// An offer and what to call it on the test's case line (not the description's many lines).
    struct UnusableOffer: CustomTestStringConvertible, Sendable {
        let name: String
        let sdp: String
        var testDescription: String { name }
    }

    /// Two namespaces joined by a veth pair; A's address changes mid-call (a network switch).
    @Test(.enabled(if: canMakeNetworkNamespaces, "needs root and iproute2"))
    func callSurvivesALocalAddressChangeInANetworkNamespace() async throws {
        let tag = String(UInt32.random(in: 0..<UInt32.max), radix: 16)
        let nsA = "tether-a-\(tag)"
        let nsB = "tether-b-\(tag)"
        defer {
            run(["ip", "netns", "del", nsA])
            run(["ip", "netns", "del", nsB])
        }
        try #require(run(["ip", "netns", "add", nsA]) == 0)
        try #require(run(["ip", "netns", "add", nsB]) == 0)
        // IPv4 only: an IPv6 link-local pair would survive the IPv4 address change untouched.
        // And keep a secondary address when the primary goes (Linux drops secondaries by default).
        for ns in [nsA, nsB] {
            run([
                "ip", "netns", "exec", ns, "sh", "-c",
                "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; "
                    + "echo 1 > /proc/sys/net/ipv4/conf/all/promote_secondaries; echo 1 > /proc/sys/net/ipv4/conf/default/promote_secondaries",
            ])
        }
        try #require(run(["ip", "link", "add", "va", "netns", nsA, "type", "veth", "peer", "name", "vb", "netns", nsB]) == 0)
        try #require(run(["ip", "-n", nsA, "addr", "add", "10.201.0.1/24", "dev", "va"]) == 0)
        try #require(run(["ip", "-n", nsB, "addr", "add", "10.201.0.2/24", "dev", "vb"]) == 0)
        try #require(run(["ip", "-n", nsA, "link", "set", "va", "up"]) == 0)
        try #require(run(["ip", "-n", nsB, "link", "set", "vb", "up"]) == 0)
        // The kernel reports a new link operational up to a second later (linkwatch); libnice
        // finds no usable interface until then.
        let linkA = await linkIsOperational(namespace: nsA, link: "va")
        let linkB = await linkIsOperational(namespace: nsB, link: "vb")
        try #require(linkA && linkB)

        let dir = NSTemporaryDirectory() + "tether-netns-\(tag)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try CallProcess(
            name: "A", namespace: nsA, arguments: ["--role", "offer", "--input", "tone:440:-12", "--statistics-interval", "0"])
        let b = try CallProcess(
            name: "B", namespace: nsB,
            arguments: ["--role", "answer", "--input", "tone:660:-12", "--output", "wav:\(dir)/b.wav", "--statistics-interval", "0"])
        a.relayLines(to: b)
        b.relayLines(to: a)
        let upA = await a.waitFor(state: "established", timeoutSeconds: 10)
        let upB = await b.waitFor(state: "established", timeoutSeconds: 10)
        #expect(upA != nil && upB != nil, "A printed \(a.objects.map { $0.object["type"] ?? "?" }), B printed \(b.objects.map { $0.object["type"] ?? "?" })")
        try await Task.sleep(for: .seconds(1))

        // The network switch: a new address comes, the one in use goes.
        let change = MonotonicClock.nanoseconds()
        #expect(run(["ip", "-n", nsA, "addr", "add", "10.201.0.11/24", "dev", "va"]) == 0)
        #expect(run(["ip", "-n", nsA, "addr", "del", "10.201.0.1/24", "dev", "va"]) == 0)
        let renewing = await a.waitFor(state: "renewingMedia", since: change, timeoutSeconds: 5)
        #expect(renewing != nil)
        let restored = await a.waitFor(state: "established", since: change, timeoutSeconds: 15)
        #expect(restored != nil)
        // A re-gathered: its restart offer carries the new address and not the old one.
        let restartOffer = a.objects.last { $0.object["type"] as? String == "offer" && $0.object["restart"] as? Bool == true }
        let sdp = restartOffer?.object["sdp"] as? String ?? ""
        #expect(sdp.contains("10.201.0.11") && !sdp.contains("10.201.0.1 "))
        // B may not even have noticed (A re-gathered within B's disruption threshold); either way
        // it ends established. Then 2.5 s of steady media for the check of the recording's tail.
        #expect(await waitUntil(timeoutSeconds: 10) { b.states.last == "established" }, "B went \(b.states)")
        try await Task.sleep(for: .seconds(2.5))
        a.send("hangup")
        #expect(await a.waitForExit(timeoutSeconds: 10) == 0)
        #expect(await b.waitForExit(timeoutSeconds: 10) == 0)

        // The audio B received after the change is A's tone.
        let (samples, rate) = try WAVFile.read(path: dir + "/b.wav")
        let tail = Array(samples.suffix(rate * 2))
        #expect(tail.count == rate * 2)
        let f = try #require(ToneAnalysis.dominantFrequencyHertz(tail, sampleRateHertz: rate, searchRange: 100...2000))
        #expect(abs(f - 440) < 2, "received \(f) Hz after the change")
        #expect(abs(ToneAnalysis.rmsDBFS(tail) - -12) < 3)
    }
}

/// A file under Tests/Fixtures (real descriptions from other stacks, corpora).
func fixturePath(_ relative: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").appendingPathComponent(relative).path
}

/// The SRTP master keys and salts (`inline:` base64) a description carries, and each one's first
/// 16 characters (a log that cut a key would still leak most of it).
func inlineKeys(_ sdp: String) -> [String] {
    sdp.split(separator: "\n").flatMap { line -> [String] in
        guard let range = line.range(of: "inline:") else { return [] }
        let key = String(line[range.upperBound...].prefix { !"|\r ".contains($0) })
        return [key, String(key.prefix(16))]
    }
}

/// A text file's contents. Not `String(contentsOfFile:)`: Foundation (Swift 6.3.1) leaks its
/// 4 KiB read buffer on an empty file (a three-line program shows it), which the ASan run's leak
/// check reports; `FileHandle.readToEnd()` does not.
func textFile(_ path: String) throws -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoSuchFile) }
    defer { try? handle.close() }
    return String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
}
