import Foundation
import Testing
import TetherAudio
import TetherTestSupport

/// `tether call` against aiortc (PyPI), a second DTLS-SRTP peer with its own DTLS stack
/// (pyOpenSSL) and ICE (aioice): both roles, a tone each way verified by its frequency.
@Suite(
    "aiortc interop (DTLS-SRTP)", .keepsLogPerTest, .serialized,
    .enabled(if: aiortcAvailable, "needs python3 with aiortc (scripts/setup-debian.sh installs it)"))
struct AiortcInteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/interop/aiortc-peer.py").path

    @Test(arguments: ["offer", "answer"])
    func aCallWithAiortcCarriesATuneEachWay(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let received = dir + "/tether-received.wav"
        let microphone = dir + "/aiortc-mic.wav"
        try WAVFile.write(
            samples: (0..<(48_000 * 10)).map { Int16(9000 * sin(2 * Double.pi * 1000 * Double($0) / 48_000)) }, sampleRateHertz: 48_000,
            to: microphone)
        // No --local-address: aiortc gathers on the machine's interfaces, not loopback.
        let tether = try CallProcess(
            name: "tether",
            arguments: ["--role", tetherRole, "--keying", "dtls", "--input", "tone:660", "--output", "wav:" + received,
                        "--statistics-interval", "0.5"])
        let aiortc = try CallProcess(
            name: "aiortc", program: ["python3", Self.script, "--role", tetherRole == "offer" ? "answer" : "offer", "--audio", microphone])
        tether.relayLines(to: aiortc)
        aiortc.relayLines(to: tether)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await aiortc.waitFor(state: "connected", timeoutSeconds: 30) != nil)
        // Three seconds of the peer's audio recorded by Tether (the check below takes a second
        // from the middle), then what the peer heard.
        #expect(await waitUntil(timeoutSeconds: 20) { (tether.lastStatistics?["packetsReceived"] as? Int ?? 0) > 150 })
        let report = try #require(await aiortc.report(timeoutSeconds: 20) {
            abs(($0["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10
        })
        #expect(report["dtlsState"] as? String == "connected")
        #expect((report["packetsReceived"] as? Int ?? 0) > 50)
        // What aiortc hears is Tether's 660 Hz (10 Hz steps).
        #expect(abs((report["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10)
        let stats = tether.objects.last { $0.object["type"] as? String == "statistics" }?.object
        #expect(stats?["srtpKeying"] as? String == "DTLS-SRTP")

        aiortc.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        #expect(tether.objects.last { $0.object["type"] as? String == "state" }?.object["cause"] as? String == "remote hang-up")
        _ = await aiortc.waitForExit(timeoutSeconds: 10)
        let samples = try WAVFile.read(path: received).samples
        #expect(samples.count > 48_000 * 2)
        let hertz = ToneAnalysis.dominantFrequencyHertz(samples.suffix(48_000), sampleRateHertz: 48_000)
        #expect(abs((hertz ?? 0) - 1000) < 2)
    }
}

/// Whether python3 can import aiortc here.
let aiortcAvailable: Bool = {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = ["python3", "-c", "import aiortc"]
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    do { try p.run() } catch { return false }
    p.waitUntilExit()
    return p.terminationStatus == 0
}()
