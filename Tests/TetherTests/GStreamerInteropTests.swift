import Foundation
import Testing
import TetherAudio
import TetherTestSupport

/// `tether call` against GStreamer + libnice (Debian's packages, scripts/interop/gstreamer-peer.py):
/// an SDES-SRTP peer built from stock elements, offering Opus on payload type 96. Both roles, a
/// tone each way verified by its frequency.
@Suite(
    "GStreamer + libnice interop (SDES-SRTP)", .keepsLogPerTest, .serialized,
    .enabled(if: gstreamerAvailable, "needs GStreamer, libnice's GStreamer elements and python3-gi (scripts/setup-debian.sh installs them)"))
struct GStreamerInteropTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/interop/gstreamer-peer.py").path

    @Test(arguments: ["offer", "answer"])
    func aCallWithGStreamerCarriesATuneEachWay(tetherRole: String) async throws {
        try await toneCallEachWay(
            tetherRole: tetherRole, peer: ThirdPartyPeer(name: "gstreamer", script: Self.script, readyState: "ready"),
            checkAnswer: { answer in
                // GStreamer's offer used payload type 96, and Tether answered with it.
                #expect(answer.contains("m=audio") && answer.contains(" RTP/SAVP 96") && answer.contains("a=rtpmap:96 opus/48000/2"))
            })
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
