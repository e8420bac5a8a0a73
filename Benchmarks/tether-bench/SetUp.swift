import ArgumentParser
import Foundation
import Tether
import TetherRealtime

/// Call set-up time on loopback, SDES against DTLS-SRTP: from the moment the offer exists (ICE
/// gathered) to both sides `established` (media decoded both ways).
enum SetUpBench {
    struct Figures {
        var keying: CallConfiguration.Keying
        var milliseconds: [Double]
        var median: Double { milliseconds.sorted()[milliseconds.count / 2] }
        var minimum: Double { milliseconds.min() ?? 0 }
        var maximum: Double { milliseconds.max() ?? 0 }
        var dictionary: [String: Any] { ["keying": keying.rawValue, "medianMs": median, "minMs": minimum, "maxMs": maximum, "calls": milliseconds.count] }
    }

    static func measure(keying: CallConfiguration.Keying, calls: Int) async throws -> Figures {
        var out: [Double] = []
        for _ in 0..<calls {
            var configuration = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false)
            configuration.keying = keying
            let a = try CallSession(configuration: configuration)
            let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0, followsNetworkChanges: false))
            try await a.start()
            try await b.start()
            let offer = try await a.makeOffer()
            let started = MonotonicClock.nanoseconds()
            try await a.applyAnswer(try await b.acceptOffer(offer))
            let deadline = started + 10_000_000_000
            while !(a.state == .established && b.state == .established), MonotonicClock.nanoseconds() < deadline {
                try await Task.sleep(for: .milliseconds(1))
            }
            let ms = Double(MonotonicClock.nanoseconds() - started) / 1e6
            guard a.state == .established && b.state == .established else {
                throw ValidationError("a \(keying.rawValue) call did not establish within 10 s")
            }
            out.append(ms)
            await a.hangUp()
            await b.hangUp()
        }
        return Figures(keying: keying, milliseconds: out)
    }
}

struct SetUpBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup", abstract: "Call set-up time on loopback (offer made → both sides established), SDES against DTLS-SRTP.")

    @Option(help: "Calls per keying.")
    var calls = 20

    func run() async throws {
        for keying in [CallConfiguration.Keying.sdes, .dtls] {
            let f = try await SetUpBench.measure(keying: keying, calls: calls)
            say(String(format: "%@: median %.1f ms [%.1f–%.1f] over %d calls", keying == .sdes ? "SDES     " : "DTLS-SRTP", f.median, f.minimum, f.maximum, calls))
        }
    }
}
