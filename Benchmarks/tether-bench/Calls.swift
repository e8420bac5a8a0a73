import ArgumentParser
import Foundation
import Glibc
import Synchronization
import Tether
import TetherAudio
import TetherFaults
import TetherRealtime
import TetherTestbed

/// Many calls in one process, and one call through outages.
enum CallsBench {
    // MARK: Calls per core

    struct LoadStep: Sendable {
        var calls: Int
        var endpoints: Int { 2 * calls }
        /// Cores' worth of CPU the process used (user + system over wall time).
        var coresUsed: Double
        /// Frames that were not played on time: concealed (with no packet lost), playback
        /// underruns and capture overruns, over all endpoints, per frame expected.
        var lateFrameRatio: Double
        /// The late frames by kind: concealed with no packet lost (the packet came after its
        /// playout), playback underruns, capture overruns.
        var concealedWithoutLoss = 0
        var playbackUnderruns = 0
        var captureOverruns = 0
        var established: Bool
    }

    /// Starts `calls` calls (two sessions each, A and B, over loopback ICE with test signals and
    /// clocked discard sinks), lets them settle, then measures CPU and late frames for `seconds`.
    static func load(calls: Int, seconds: Double, complexity: Int) async throws -> LoadStep {
        var pairs: [(CallSession, CallSession, InProcessSignaling)] = []
        for i in 0..<calls {
            var opus = OpusSettings()
            opus.complexity = complexity
            let a = try CallSession(configuration: CallConfiguration(
                audioSource: TestSignalSource(frequencyHertz: 300 + Double(i)), opus: opus,
                localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false))
            let b = try CallSession(configuration: CallConfiguration(
                audioSource: TestSignalSource(frequencyHertz: 700 + Double(i)), opus: opus,
                localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false))
            let signaling = InProcessSignaling(a: a, b: b)
            try await a.start()
            try await b.start()
            try await signaling.connect()
            pairs.append((a, b, signaling))
        }
        // Wait until every side decodes (up to 10 s), then 1 s to settle.
        let deadline = MonotonicClock.nanoseconds() + 10_000_000_000
        var established = false
        while MonotonicClock.nanoseconds() < deadline {
            established = pairs.allSatisfy { $0.0.statistics().framesDecoded > 0 && $0.1.statistics().framesDecoded > 0 }
            if established { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        try await Task.sleep(for: .seconds(1))

        func late() -> (concealed: Int, underruns: Int, overruns: Int) {
            var total = (concealed: 0, underruns: 0, overruns: 0)
            for (a, b, _) in pairs {
                for s in [a.statistics(), b.statistics()] {
                    total.concealed += max(0, s.framesConcealed - s.packetsLost)
                    total.underruns += s.playbackUnderruns
                    total.overruns += s.captureOverruns
                }
            }
            return total
        }
        let lateBefore = late()
        let cpuBefore = processCPUSeconds()
        let wallBefore = MonotonicClock.nanoseconds()
        try await Task.sleep(for: .seconds(seconds))
        let wall = Double(MonotonicClock.nanoseconds() - wallBefore) / 1e9
        let cpu = processCPUSeconds() - cpuBefore
        let lateAfter = late()
        let concealed = lateAfter.concealed - lateBefore.concealed
        let underruns = lateAfter.underruns - lateBefore.underruns
        let overruns = lateAfter.overruns - lateBefore.overruns
        let lateFrames = concealed + underruns + overruns
        for (a, b, signaling) in pairs {
            await a.hangUp()
            await b.hangUp()
            await signaling.waitUntilFinished()
        }
        let framesExpected = Double(2 * calls) * wall * 50
        return LoadStep(
            calls: calls, coresUsed: cpu / wall, lateFrameRatio: Double(lateFrames) / framesExpected,
            concealedWithoutLoss: concealed, playbackUnderruns: underruns, captureOverruns: overruns, established: established)
    }

    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    // MARK: Recovery

    struct Sample: Sendable {
        var seconds: Double
        var state: String
        var packetsPerSecond: Double
    }

    struct Recovery: Sendable {
        var outageSeconds: Double
        /// Cut → `mediaDisrupted`, per side.
        var detectionSeconds: [Double]
        /// Path back → `established` (A).
        var restorationSeconds: Double?
        var restartsOffered: Int
        /// For the give-up case: cut → `ended`, per side, and the error code.
        var endedAfterSeconds: [Double]
        var endCodes: [Int]
        /// A's state and received packets per second, every 100 ms, from 1 s before the cut.
        var timeline: [Sample]
    }

    /// One call through the relay, cut both ways after it settles, restored after `outageSeconds`
    /// (or never, for a give-up run).
    static func recovery(outageSeconds: Double, restore: Bool) async throws -> Recovery {
        let relay = try UDPImpairmentRelay()
        defer { relay.stop() }
        let a = try CallSession(configuration: CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: 440), localAddresses: ["127.0.0.1"], rtcpIntervalSeconds: 1,
            statisticsIntervalSeconds: 0, followsNetworkChanges: false))
        let b = try CallSession(configuration: CallConfiguration(
            audioSource: TestSignalSource(frequencyHertz: 660), localAddresses: ["127.0.0.1"], rtcpIntervalSeconds: 1,
            statisticsIntervalSeconds: 0, followsNetworkChanges: false))
        let log = Mutex<[(side: String, state: String, at: UInt64, code: Int?)]>([])
        let signaling = InProcessSignaling(a: a, b: b, relay: relay) { side, event in
            if case .stateChanged(_, let to, _) = event {
                var code: Int?
                if case .ended(let reason) = to { code = reason.error?.code.rawValue }
                log.withLock { $0.append((side.rawValue, to.name, MonotonicClock.nanoseconds(), code)) }
            }
        }
        try await a.start()
        try await b.start()
        try await signaling.connect()
        func first(_ side: String, _ state: String, since: UInt64) -> (UInt64, Int?)? {
            log.withLock { $0.first { $0.side == side && $0.state == state && $0.at >= since }.map { ($0.at, $0.code) } }
        }
        let setUp = MonotonicClock.nanoseconds() + 10_000_000_000
        while first("A", "established", since: 0) == nil && MonotonicClock.nanoseconds() < setUp {
            try await Task.sleep(for: .milliseconds(10))
        }
        // Sample A every 100 ms from here on; the rate is over the last 500 ms (the counters
        // are published every 100 ms, so a shorter window aliases).
        var timeline: [Sample] = []
        var history: [(at: UInt64, packets: Int)] = [(MonotonicClock.nanoseconds(), a.statistics().packetsReceived)]
        let origin = MonotonicClock.nanoseconds() + 1_000_000_000  // the cut, 1 s from now
        func sample() {
            let now = MonotonicClock.nanoseconds()
            let s = a.statistics()
            let state = log.withLock { entries in entries.last { $0.side == "A" }?.state ?? "connecting" }
            history.append((now, s.packetsReceived))
            let base = history.last { now - $0.at >= 500_000_000 } ?? history[0]
            let pps = now > base.at ? Double(s.packetsReceived - base.packets) / (Double(now - base.at) / 1e9) : 0
            timeline.append(Sample(seconds: (Double(now) - Double(origin)) / 1e9, state: state, packetsPerSecond: pps))
        }
        while MonotonicClock.nanoseconds() < origin {
            try await Task.sleep(for: .milliseconds(100))
            sample()
        }
        let cut = MonotonicClock.nanoseconds()
        relay.blackHole(true)
        var back: UInt64?
        let end = cut + UInt64((outageSeconds + (restore ? 4 : 3)) * 1e9)
        while MonotonicClock.nanoseconds() < end {
            try await Task.sleep(for: .milliseconds(100))
            sample()
            if restore && back == nil && MonotonicClock.nanoseconds() >= cut + UInt64(outageSeconds * 1e9) {
                back = MonotonicClock.nanoseconds()
                relay.blackHole(false)
            }
            if !restore && first("A", "ended", since: cut) != nil && first("B", "ended", since: cut) != nil { break }
        }
        let detection = ["A", "B"].compactMap { first($0, "mediaDisrupted", since: cut).map { Double($0.0 - cut) / 1e9 } }
        let restored = back.flatMap { b in first("A", "established", since: b).map { Double($0.0 - b) / 1e9 } }
        let ended = ["A", "B"].compactMap { first($0, "ended", since: cut) }
        let restarts = a.statistics().recovery.restartCount
        await a.hangUp()
        await b.hangUp()
        await signaling.waitUntilFinished()
        return Recovery(
            outageSeconds: outageSeconds, detectionSeconds: detection, restorationSeconds: restored, restartsOffered: restarts,
            endedAfterSeconds: ended.map { Double($0.0 - cut) / 1e9 }, endCodes: ended.compactMap { $0.1 }, timeline: timeline)
    }
}

/// `tether-bench calls`: one step of the calls-per-core measurement (for profiling).
struct CallsStepBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calls", abstract: "N calls in one process for a while: cores used and late frames (one step of `run`).")

    @Option(help: "Calls (two sessions each).")
    var calls: Int = 8

    @Option(help: "Seconds to measure.")
    var seconds: Double = 8

    @Option(help: "Opus complexity (0…10).")
    var complexity: Int = 9

    func run() async throws {
        let step = try await CallsBench.load(calls: calls, seconds: seconds, complexity: complexity)
        say(String(format: "%d calls (%d endpoints): %.2f cores, %.2f %% of a core per endpoint, late frames %.3f %% (concealed without loss %d, playback underruns %d, capture overruns %d)",
                   step.calls, step.endpoints, step.coresUsed, 100 * step.coresUsed / Double(step.endpoints), 100 * step.lateFrameRatio,
                   step.concealedWithoutLoss, step.playbackUnderruns, step.captureOverruns))
    }
}
