import Foundation
import Testing
import TetherAudio

/// A third-party peer driven by a script under `scripts/interop/` that speaks `tether call`'s
/// JSON lines (its descriptions, a `state` line when its media runs, a `report` line on request).
struct ThirdPartyPeer {
    /// The name the test's messages give it.
    var name: String
    /// The driver script (absolute path).
    var script: String
    /// The state the driver prints once its media runs ("established", or "ready").
    var readyState: String
}

/// One SDES-SRTP call between `tether call` (a 660 Hz tone, `tetherRole`) and `peer` (a 1000 Hz
/// tone, the other role), as the interop suites run it: each side's media runs, Tether records
/// three seconds of the peer's audio, the peer's report says it decoded Tether's tone, Tether's
/// statistics say SDES and show packets, both hang up, and a second from the middle of Tether's
/// recording is the peer's 1000 Hz.
/// - Parameters:
///   - checkAnswer: a check of Tether's answer (`tetherRole == "answer"` only).
///   - checkReport: further checks of the peer's report (beyond its tone).
func toneCallEachWay(
    tetherRole: String, peer: ThirdPartyPeer, checkAnswer: (String) -> Void = { _ in },
    checkReport: ([String: Any]) -> Void = { _ in }
) async throws {
    let dir = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let received = dir + "/tether-received.wav"
    let tether = try CallProcess(
        name: "tether",
        arguments: ["--role", tetherRole, "--local-address", "127.0.0.1", "--input", "tone:660", "--output", "wav:" + received,
                    "--statistics-interval", "0.5"])
    let other = try CallProcess(
        name: peer.name, program: ["/usr/bin/python3", peer.script, "--role", tetherRole == "offer" ? "answer" : "offer", "--hertz", "1000"])
    tether.relayLines(to: other)
    other.relayLines(to: tether)
    #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
    #expect(await other.waitFor(state: peer.readyState, timeoutSeconds: 30) != nil, "\(peer.name) never said \(peer.readyState)")
    if tetherRole == "answer" {
        checkAnswer(tether.objects.first { $0.object["type"] as? String == "answer" }?.object["sdp"] as? String ?? "")
    }
    // Three seconds of the peer's audio recorded by Tether (the check below takes a second from
    // the middle), then what the peer heard: Tether's 660 Hz (its analysis has 10 Hz steps).
    #expect(await waitUntil(timeoutSeconds: 20) { (tether.lastStatistics?["packetsReceived"] as? Int ?? 0) > 150 })
    let report = try #require(await other.report(timeoutSeconds: 20) { abs(($0["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10 })
    #expect(abs((report["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10)
    checkReport(report)
    let stats = tether.lastStatistics
    #expect(stats?["srtpKeying"] as? String == "SDES")
    #expect((stats?["packetsReceived"] as? Int ?? 0) > 100)

    // The peer ends its side (baresip with a BYE); Tether is told by its signaling (here: the test).
    other.send("hangup")
    _ = await other.waitForExit(timeoutSeconds: 10)
    tether.send("hangup")
    #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
    let samples = try WAVFile.read(path: received).samples
    #expect(samples.count > 48_000 * 2)
    // A second from the middle of the call (after the peer hangs up Tether hears nothing).
    let middle = samples.count / 2
    let hertz = ToneAnalysis.dominantFrequencyHertz(samples[(middle - 24_000)..<(middle + 24_000)], sampleRateHertz: 48_000)
    #expect(abs((hertz ?? 0) - 1000) < 2)
}
