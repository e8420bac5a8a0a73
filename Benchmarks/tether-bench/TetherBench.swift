import ArgumentParser
import Logging
import CAllocationCounter
import COpus
import CSRTP
import Foundation
import TetherCodec
import TetherAudio
import TetherCore
import TetherRTP
import TetherRealtime

/// `tether-bench`: Tether's performance against the C floor, and through real devices.
@main
struct TetherBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-bench",
        abstract: "Tether's performance: hot-path CPU and allocations against the C floor, mouth-to-ear latency through devices, speech quality under loss, recovery from real network faults.",
        subcommands: [RunBench.self, HotPathBench.self, RingsBench.self, LatencyBench.self, QualityBench.self, CodecQualityBench.self, EchoBench.self, CallsStepBench.self, FaultsBench.self, LinksBench.self, SetUpBenchCommand.self],
        defaultSubcommand: RunBench.self)

    /// The benches' calls log warnings and above on stderr (their figures go to stdout); then
    /// parses and runs the subcommand as ArgumentParser's own `main` does.
    static func main() async {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Per-frame CPU of the send and receive paths against direct libopus + libsrtp calls, and heap
/// allocations per frame.
struct HotPathBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hotpath",
        abstract: "Per-frame CPU of Tether's send and receive paths against direct libopus + libsrtp calls, and heap allocations per frame.")

    @Option(help: "Frames per measurement (20 ms each).")
    var frames: Int = 3000

    @Option(help: "Opus complexity (0…10).")
    var complexity: Int = 9

    @Option(help: "Repetitions; the fastest is reported.")
    var repetitions: Int = 5

    @Option(help: "Write every figure as JSON to this file.")
    var json: String?

    struct Figures {
        var sendTether, sendFloor, receiveTether, receiveFloor, allocationsTether, allocationsLibsrtp: Double
        /// Voice processing (all stages, WebRTC) per frame: Tether's `VoiceProcessor` and the
        /// library called directly.
        var voiceTether, voiceFloor: Double
        /// Tether's own echo canceller with WebRTC's NS, AGC and HPF (`VoiceProcessor`, engine
        /// `.tether`), per frame.
        var voiceOwn: Double
        /// A hostile peer's crafted XR loss reports: CPU per report read, µs.
        var craftedReports: [(name: String, bytes: Int, packets: Int, microseconds: Double)] = []
        /// Transport-cc feedback, as written and crafted: CPU per feedback read, µs.
        var feedbacks: [(name: String, bytes: Int, statuses: Int, microseconds: Double)] = []

        var dictionary: [String: Double] {
            [
                "send.tether.microsecondsPerFrame": sendTether, "send.floor.microsecondsPerFrame": sendFloor,
                "send.ratio": sendTether / sendFloor, "receive.tether.microsecondsPerFrame": receiveTether,
                "receive.floor.microsecondsPerFrame": receiveFloor, "receive.ratio": receiveTether / receiveFloor,
                "allocations.tether.perFrame": allocationsTether, "allocations.libsrtp.perFrame": allocationsLibsrtp,
                "voice.tether.microsecondsPerFrame": voiceTether, "voice.floor.microsecondsPerFrame": voiceFloor,
                "voice.own.microsecondsPerFrame": voiceOwn, "voice.own.ratioToWebRTC": voiceOwn / voiceTether,
                "sendWithVoice.ratio": (sendTether + voiceTether) / (sendFloor + voiceFloor),
            ].merging(
                craftedReports.enumerated().map { ("craftedLossReport\($0.offset).microsecondsPerReport", $0.element.microseconds) },
                uniquingKeysWith: { a, _ in a }
            ).merging(
                feedbacks.enumerated().map { ("transportFeedback\($0.offset).microsecondsPerFeedback", $0.element.microseconds) },
                uniquingKeysWith: { a, _ in a })
        }
    }

    /// Tether's paths and the floor, interleaved repetitions, the fastest of each.
    ///
    /// Interference (other threads, the hypervisor) only ever adds time, so the fastest
    /// repetition is the best estimate of a path's cost; medians of five let one noisy stretch
    /// move a ratio by 0.1. The receive path is short (~50 µs a frame), so each repetition runs it
    /// four times, Tether and floor alternating (T F F T T F F T), so a drift hits both alike.
    static func measure(frames: Int, complexity: Int, repetitions: Int) throws -> Figures {
        let pcm = TetherBench.speechLikeSignal(frames: frames)
        let packets = try HotPath.makePackets(pcm: pcm, frames: frames, complexity: complexity)
        let (played, captured) = HotPath.echoSignals(pcm: pcm)
        var send: [Double] = [], sendC: [Double] = [], receive: [Double] = [], receiveC: [Double] = []
        var voice: [Double] = [], voiceC: [Double] = [], voiceOwn: [Double] = []
        let webrtc = VoiceProcessingSettings(engine: .webrtc)
        for _ in 0..<repetitions {
            voice.append(try HotPath.tetherVoiceProcessing(played: played, captured: captured, frames: frames, settings: webrtc))
            voiceC.append(try HotPath.floorVoiceProcessing(played: played, captured: captured, frames: frames, settings: webrtc))
            voiceOwn.append(
                try HotPath.tetherVoiceProcessing(played: played, captured: captured, frames: frames, settings: VoiceProcessingSettings(engine: .tether)))
            send.append(try HotPath.tetherSend(pcm: pcm, frames: frames, complexity: complexity))
            sendC.append(try HotPath.floorSend(pcm: pcm, frames: frames, complexity: complexity))
            for _ in 0..<2 {  // T F F T, twice
                receive.append(try HotPath.tetherReceive(packets: packets))
                receiveC.append(try HotPath.floorReceive(packets: packets))
                receiveC.append(try HotPath.floorReceive(packets: packets))
                receive.append(try HotPath.tetherReceive(packets: packets))
            }
        }
        let allocations = try HotPath.allocationsPerFrame(pcm: pcm, frames: min(frames, 1000), complexity: complexity)
        return Figures(
            sendTether: send.min()!, sendFloor: sendC.min()!, receiveTether: receive.min()!, receiveFloor: receiveC.min()!,
            allocationsTether: allocations.tether, allocationsLibsrtp: allocations.libsrtp, voiceTether: voice.min()!, voiceFloor: voiceC.min()!, voiceOwn: voiceOwn.min()!,
            craftedReports: HotPath.craftedLossReportMicroseconds(repetitions: repetitions),
            feedbacks: HotPath.feedbackMicroseconds(repetitions: repetitions))
    }

    func run() throws {
        print("tether-bench: \(frames) frames × \(repetitions) repetitions, Opus 48 kHz mono 20 ms 32 kb/s complexity \(complexity), AES_CM_128_HMAC_SHA1_80")
        let f = try Self.measure(frames: frames, complexity: complexity, repetitions: repetitions)
        let results = f.dictionary
        let (sendTether, sendFloor, receiveTether, receiveFloor) = (f.sendTether, f.sendFloor, f.receiveTether, f.receiveFloor)
        let allocations = (tether: f.allocationsTether, libsrtp: f.allocationsLibsrtp)

        print("")
        print("path      Tether µs/frame   floor µs/frame   ratio (target ≤ 1.10)")
        print(String(format: "send      %14.1f   %14.1f   %5.3f", sendTether, sendFloor, sendTether / sendFloor))
        print(String(format: "receive   %14.1f   %14.1f   %5.3f", receiveTether, receiveFloor, receiveTether / receiveFloor))
        print("")
        print("with voice processing (WebRTC AEC, NS, AGC, HPF; floor: the library called directly)")
        print(String(format: "voice     %14.1f   %14.1f   %5.3f", f.voiceTether, f.voiceFloor, f.voiceTether / f.voiceFloor))
        print(String(format: "Tether's own AEC with WebRTC's NS, AGC, HPF: %.1f µs/frame, %.2f × WebRTC's (target ≤ 2)", f.voiceOwn, f.voiceOwn / f.voiceTether))
        print(String(format: "send+voice%14.1f   %14.1f   %5.3f", sendTether + f.voiceTether, sendFloor + f.voiceFloor, (sendTether + f.voiceTether) / (sendFloor + f.voiceFloor)))
        print("")
        print(String(format: "heap allocations per frame (send + receive): Tether's own %.2f (target 0), libsrtp's %.1f", allocations.tether, allocations.libsrtp))
        print("")
        print("a peer's crafted XR loss reports (worst cases in one datagram), read as the media loop reads them:")
        for report in f.craftedReports {
            print(String(format: "  %@ %5d bytes, %8d packets claimed: %7.3f µs per report", report.name.padding(toLength: 22, withPad: " ", startingAt: 0), report.bytes, report.packets, report.microseconds))
        }
        print("transport-cc feedback, read as the media loop reads it (against the last 1,024 packets sent):")
        for feedback in f.feedbacks {
            print(String(format: "  %@ %5d bytes, %8d statuses:        %7.3f µs per feedback", feedback.name.padding(toLength: 22, withPad: " ", startingAt: 0), feedback.bytes, feedback.statuses, feedback.microseconds))
        }
        let perCallCPU = (sendTether + receiveTether) / 20_000
        print(String(format: "compute per call (one endpoint): %.2f %% of a core → about %.0f calls per core before I/O", perCallCPU * 100, 1 / perCallCPU))
        let withVoice = (sendTether + receiveTether + f.voiceTether) / 20_000
        let withOwn = (sendTether + receiveTether + f.voiceOwn) / 20_000
        print(String(format: "with voice processing: %.2f %% of a core (WebRTC's AEC), %.2f %% (Tether's own)", withVoice * 100, withOwn * 100))
        if let json {
            let data = try JSONSerialization.data(withJSONObject: results, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: json))
            print("figures written to \(json)")
        }
        if allocations.tether > 0 {
            throw ValidationError("allocation budget exceeded: Tether's own hot path allocated \(allocations.tether) times per frame")
        }
    }
}

extension TetherBench {
    /// A voiced, speech-like test signal (harmonics with a slow syllabic envelope), 48 kHz mono.
    static func speechLikeSignal(frames: Int) -> [Int16] {
        (0..<(frames * 960)).map { i in
            let t = Double(i) / 48_000
            let envelope = 0.5 + 0.5 * sin(2 * .pi * 3 * t)
            let f0 = 140 + 20 * sin(2 * .pi * 0.5 * t)
            var v = 0.0
            for h in 1...8 { v += sin(2 * .pi * f0 * Double(h) * t) / Double(h) }
            return Int16(clamping: Int(6000 * envelope * v))
        }
    }
}
