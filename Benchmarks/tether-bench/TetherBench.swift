import ArgumentParser
import CAllocationCounter
import COpus
import CSRTP
import Foundation
import TetherCodec
import TetherCore
import TetherRTP
import TetherRealtime

/// `tether-bench`: Tether's performance against the C floor, and through real devices.
@main
struct TetherBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether-bench",
        abstract: "Tether's performance: hot-path CPU and allocations against the C floor, mouth-to-ear latency through devices, speech quality under loss.",
        subcommands: [HotPathBench.self, LatencyBench.self, QualityBench.self, CodecQualityBench.self], defaultSubcommand: HotPathBench.self)
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

    @Option(help: "Repetitions; the median is reported.")
    var repetitions: Int = 5

    @Option(help: "Write every figure as JSON to this file.")
    var json: String?

    func run() throws {
        print("tether-bench: \(frames) frames × \(repetitions) repetitions, Opus 48 kHz mono 20 ms 32 kb/s complexity \(complexity), AES_CM_128_HMAC_SHA1_80")
        let pcm = TetherBench.speechLikeSignal(frames: frames)
        var results: [String: Double] = [:]

        let sendTether = median((0..<repetitions).map { _ in try! HotPath.tetherSend(pcm: pcm, frames: frames, complexity: complexity) })
        let sendFloor = median((0..<repetitions).map { _ in try! HotPath.floorSend(pcm: pcm, frames: frames, complexity: complexity) })
        let packets = try HotPath.makePackets(pcm: pcm, frames: frames, complexity: complexity)
        let receiveTether = median((0..<repetitions).map { _ in try! HotPath.tetherReceive(packets: packets) })
        let receiveFloor = median((0..<repetitions).map { _ in try! HotPath.floorReceive(packets: packets) })
        let allocations = try HotPath.allocationsPerFrame(pcm: pcm, frames: min(frames, 1000), complexity: complexity)

        results["send.tether.microsecondsPerFrame"] = sendTether
        results["send.floor.microsecondsPerFrame"] = sendFloor
        results["send.ratio"] = sendTether / sendFloor
        results["receive.tether.microsecondsPerFrame"] = receiveTether
        results["receive.floor.microsecondsPerFrame"] = receiveFloor
        results["receive.ratio"] = receiveTether / receiveFloor
        results["allocations.tether.perFrame"] = allocations.tether
        results["allocations.libsrtp.perFrame"] = allocations.libsrtp

        print("")
        print("path      Tether µs/frame   floor µs/frame   ratio (target ≤ 1.10)")
        print(String(format: "send      %14.1f   %14.1f   %5.3f", sendTether, sendFloor, sendTether / sendFloor))
        print(String(format: "receive   %14.1f   %14.1f   %5.3f", receiveTether, receiveFloor, receiveTether / receiveFloor))
        print("")
        print(String(format: "heap allocations per frame (send + receive): Tether's own %.2f (target 0), libsrtp's %.1f", allocations.tether, allocations.libsrtp))
        let perCallCPU = (sendTether + receiveTether) / 20_000
        print(String(format: "compute per call (one endpoint): %.2f %% of a core → about %.0f calls per core before I/O", perCallCPU * 100, 1 / perCallCPU))
        if let json {
            let data = try JSONSerialization.data(withJSONObject: results, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: json))
            print("figures written to \(json)")
        }
        if allocations.tether > 0 {
            throw ValidationError("allocation budget exceeded: Tether's own hot path allocated \(allocations.tether) times per frame")
        }
    }

    func median(_ values: [Double]) -> Double {
        let s = values.sorted()
        return s[s.count / 2]
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
