import Foundation
import Testing
import TetherAudio

/// `tether call` against GStreamer + libnice (Debian's packages, scripts/interop/gstreamer-peer.py):
/// an SDES-SRTP peer built from stock elements, offering Opus on payload type 96. Both roles, a
/// tone each way verified by its frequency.
@Suite("GStreamer + libnice interop (SDES-SRTP)", .serialized, .enabled(if: gstreamerAvailable, "needs GStreamer, libnice's GStreamer elements and python3-gi (scripts/setup-debian.sh installs them)"))
struct GStreamerInteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/interop/gstreamer-peer.py").path

    @Test(arguments: ["offer", "answer"])
    func aCallWithGStreamerCarriesATuneEachWay(tetherRole: String) async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let received = dir + "/tether-received.wav"
        let tether = try CallProcess(
            name: "tether",
            arguments: ["--role", tetherRole, "--local-address", "127.0.0.1", "--input", "tone:660", "--output", "wav:" + received,
                        "--statistics-interval", "0.5"])
        let gstreamer = try CallProcess(
            name: "gstreamer",
            program: ["/usr/bin/python3", Self.script, "--role", tetherRole == "offer" ? "answer" : "offer", "--hertz", "1000"])
        tether.relayLines(to: gstreamer)
        gstreamer.relayLines(to: tether)
        #expect(await tether.waitFor(state: "established", timeoutSeconds: 30) != nil)
        #expect(await gstreamer.waitFor(state: "ready", timeoutSeconds: 30) != nil)
        if tetherRole == "answer" {
            // GStreamer's offer used payload type 96, and Tether answered with it.
            let answer = tether.objects.first { $0.object["type"] as? String == "answer" }?.object["sdp"] as? String ?? ""
            #expect(answer.contains("m=audio") && answer.contains(" RTP/SAVP 96") && answer.contains("a=rtpmap:96 opus/48000/2"))
        }
        // Three seconds of the peer's audio recorded by Tether (the check below takes a second
        // from the middle), then what the peer heard.
        #expect(await waitUntil(timeoutSeconds: 20) { (tether.lastStatistics?["packetsReceived"] as? Int ?? 0) > 150 })
        let report = try #require(await gstreamer.report(timeoutSeconds: 20) {
            abs(($0["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10
        })
        #expect(abs((report["receivedPeakHertz"] as? Int ?? 0) - 660) <= 10)
        let stats = tether.objects.last { $0.object["type"] as? String == "statistics" }?.object
        #expect(stats?["srtpKeying"] as? String == "SDES")
        #expect((stats?["packetsReceived"] as? Int ?? 0) > 100)

        gstreamer.send("hangup")
        _ = await gstreamer.waitForExit(timeoutSeconds: 10)
        tether.send("hangup")
        #expect(await tether.waitForExit(timeoutSeconds: 10) == 0)
        let samples = try WAVFile.read(path: received).samples
        #expect(samples.count > 48_000 * 2)
        let middle = samples.count / 2
        let hertz = ToneAnalysis.dominantFrequencyHertz(samples[(middle - 24_000)..<(middle + 24_000)], sampleRateHertz: 48_000)
        #expect(abs((hertz ?? 0) - 1000) < 2)
    }
}

/// Whether Debian's python3 has GStreamer with libnice's and the SRTP elements.
let gstreamerAvailable: Bool = {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    p.arguments = ["-c", "import gi; gi.require_version('Gst','1.0'); gi.require_version('Nice','0.1'); from gi.repository import Gst, Nice; Gst.init(None); assert all(Gst.ElementFactory.find(e) for e in ['srtpenc','srtpdec','nicesrc','nicesink','opusenc','rtpopuspay'])"]
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    do { try p.run() } catch { return false }
    p.waitUntilExit()
    return p.terminationStatus == 0
}()
