import Foundation
import Testing
import TetherAudio

/// `tether call` against baresip (Debian's baresip-core 1.0), an SDES-SRTP SIP softphone with its
/// own ICE, reached through a minimal SIP exchange (scripts/interop/baresip-peer.py): both roles,
/// a tone each way verified by its frequency, no SRTP error logged by baresip.
@Suite("baresip interop (SDES-SRTP over SIP)", .serialized, .enabled(if: baresipAvailable, "needs Debian's baresip-core (scripts/setup-debian.sh installs it)"))
struct BaresipInteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/interop/baresip-peer.py").path

    @Test(arguments: ["offer", "answer"])
    func aCallWithBaresipCarriesATuneEachWay(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let received = dir + "/tether-received.wav"
        let tether = try CallProcess(
            name: "tether",
            arguments: ["--role", tetherRole, "--local-address", "127.0.0.1", "--input", "tone:660", "--output", "wav:" + received,
                        "--statistics-interval", "0.5"])
        let baresip = try CallProcess(
            name: "baresip", program: ["python3", Self.script, "--role", tetherRole == "offer" ? "answer" : "offer", "--hertz", "1000"])
        tether.relayLines(to: baresip)
        baresip.relayLines(to: tether)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await baresip.waitFor(state: "established", timeoutSeconds: 30) != nil)
        // Three seconds of the peer's audio recorded by Tether (the check below takes a second
        // from the middle), then what the peer heard.
        #expect(await waitUntil(timeoutSeconds: 20) { (tether.lastStatistics?["packetsReceived"] as? Int ?? 0) > 150 })
        let report = try #require(await baresip.report(timeoutSeconds: 20) {
            abs(($0["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10
        })
        // What baresip decoded is Tether's 660 Hz (10 Hz steps), and its SRTP refused nothing.
        #expect(abs((report["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10)
        #expect(report["srtpErrors"] as? Int == 0)
        let stats = tether.objects.last { $0.object["type"] as? String == "statistics" }?.object
        #expect(stats?["srtpKeying"] as? String == "SDES")
        #expect((stats?["packetsReceived"] as? Int ?? 0) > 100)

        // baresip's BYE ends its side; Tether is told by its signaling (here: the test).
        baresip.send("hangup")
        _ = await baresip.waitForExit(timeoutSeconds: 10)
        tether.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        let samples = try WAVFile.read(path: received).samples
        #expect(samples.count > 48_000 * 2)
        // A second from the middle of the call (after baresip's BYE Tether hears nothing).
        let middle = samples.count / 2
        let hertz = ToneAnalysis.dominantFrequencyHertz(samples[(middle - 24_000)..<(middle + 24_000)], sampleRateHertz: 48_000)
        #expect(abs((hertz ?? 0) - 1000) < 2)
    }
}

/// Whether Debian's baresip is installed here.
let baresipAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/baresip")
    && FileManager.default.fileExists(atPath: "/usr/lib/baresip/modules/srtp.so")
