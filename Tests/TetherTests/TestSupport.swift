import Foundation
import Synchronization
import Tether
import TetherAudio
import TetherRealtime

/// Records a session's events and lets a test await a state.
final class EventRecorder: Sendable {
    private final class Store: Sendable {
        let states = Mutex<[(CallState, Double)]>([])
        let errors = Mutex<[TetherError]>([])
        let devices = Mutex<[(AudioDirection, AudioDeviceEvent)]>([])
        let dtmf = Mutex<[(Character, Int)]>([])
        let holds = Mutex<[HoldState]>([])
        let descriptions = Mutex<[SessionDescriptionMessage]>([])
        let wakeup = Wakeup()
    }

    private let store = Store()
    private let task: Task<Void, Never>

    /// Records `session.events` or, with `subscribing`, a further subscription (when something
    /// else, such as `InProcessSignaling`, consumes `events`).
    init(_ session: CallSession, subscribing: Bool = false) {
        let store = self.store
        let events = subscribing ? session.subscribeToEvents() : session.events
        task = Task {
            for await event in events {
                switch event {
                case .stateChanged(_, let to, let t): store.states.withLock { $0.append((to, t)) }
                case .error(let e): store.errors.withLock { $0.append(e) }
                case .audioDevice(let d, let e): store.devices.withLock { $0.append((d, e)) }
                case .dtmf(let digit, let ms): store.dtmf.withLock { $0.append((digit, ms)) }
                case .holdChanged(let h): store.holds.withLock { $0.append(h) }
                case .localDescription(let d): store.descriptions.withLock { $0.append(d) }
                default: break
                }
                store.wakeup.signal()
            }
            store.wakeup.signal()
        }
    }

    deinit { task.cancel() }

    var stateNames: [String] { store.states.withLock { $0.map { $0.0.name } } }
    var recordedErrors: [TetherError] { store.errors.withLock { $0 } }
    var deviceEvents: [(AudioDirection, AudioDeviceEvent)] { store.devices.withLock { $0 } }
    /// DTMF digits received, in order, and their durations.
    var dtmfDigits: String { String(store.dtmf.withLock { $0.map(\.0) }) }
    var dtmfDurations: [Int] { store.dtmf.withLock { $0.map(\.1) } }
    /// Every `.holdChanged`, in order.
    var holdChanges: [HoldState] { store.holds.withLock { $0 } }
    /// Every description the session emitted, in order.
    var descriptions: [SessionDescriptionMessage] { store.descriptions.withLock { $0 } }

    /// Waits until `count` device events match `match`.
    func waitForDeviceEvent(timeoutSeconds: Double, _ match: @escaping (AudioDirection, AudioDeviceEvent) -> Bool) async -> Bool {
        let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutSeconds * 1e9)
        while MonotonicClock.nanoseconds() < deadline {
            if deviceEvents.contains(where: { match($0.0, $0.1) }) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// Seconds since session creation at which `name` was first entered, waiting up to `timeoutSeconds`.
    func waitFor(_ name: String, timeoutSeconds: Double) async -> Double? {
        let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutSeconds * 1e9)
        while true {
            if let hit = store.states.withLock({ $0.first { $0.0.name == name }?.1 }) { return hit }
            if MonotonicClock.nanoseconds() >= deadline { return nil }
            // Sleep in short slices rather than blocking a thread of the (2-thread) cooperative pool.
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// The final state once the event stream finished.
    func finished() async {
        await task.value
    }

    var endReason: CallTerminationReason? {
        store.states.withLock { s in
            for (state, _) in s { if case .ended(let r) = state { return r } }
            return nil
        }
    }
}

func temporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "tether-tests-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Starts both sessions and joins them directly: A offers, B answers, A applies the answer.
func connect(_ a: CallSession, _ b: CallSession) async throws {
    try await a.start()
    try await b.start()
    try await a.applyAnswer(try await b.acceptOffer(try await a.makeOffer()))
}

/// A WAV file (48 kHz mono, 4 s) of a voiced, speech-like signal: eight harmonics of a pitch that
/// glides around 140 Hz, gated at a syllable rate. Opus's voice activity detector takes it for
/// speech, so its encoder sends in-band FEC (LBRR) for it when FEC is on; a steady sine it takes
/// for background after a moment, and then sends none.
let voicedSignalWAVPath: String = {
    let path = NSTemporaryDirectory() + "tether-voiced-\(getpid()).wav"
    var samples = [Int16](repeating: 0, count: 4 * 48_000)
    var phase = 0.0
    for i in samples.indices {
        let t = Double(i) / 48_000
        phase += 2 * Double.pi * (140 + 40 * sin(2 * Double.pi * 0.7 * t)) / 48_000
        let envelope = 0.55 + 0.45 * sin(2 * Double.pi * 4 * t)
        var v = 0.0
        for h in 1...8 { v += sin(Double(h) * phase) / Double(h) }
        samples[i] = Int16(max(-32_767, min(32_767, 6000 * envelope * v)))
    }
    try? WAVFile.write(samples: samples, sampleRateHertz: 48_000, to: path)
    return path
}()

/// Polls `condition` every 10 ms until it holds or `timeoutSeconds` pass; returns whether it held.
///
/// For tests that wait for something to have happened: the deadline is a ceiling for a loaded
/// machine, not a measurement, so a fast machine returns as soon as the condition holds.
func waitUntil(timeoutSeconds: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutSeconds * 1e9)
    while true {
        if condition() { return true }
        if MonotonicClock.nanoseconds() >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
}

/// Waits until `read()` has kept one value for `quietSeconds` (packets in flight have landed,
/// counters have stopped), polling every 10 ms, and returns it; nil after `timeoutSeconds`. For a
/// baseline before asserting that nothing more happens: on a slow machine it waits longer, on a
/// fast one no longer than it must.
func steadyValue<T: Equatable>(timeoutSeconds: Double = 10, quietSeconds: Double = 0.25, _ read: () -> T) async -> T? {
    let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutSeconds * 1e9)
    var value = read()
    var since = MonotonicClock.nanoseconds()
    while MonotonicClock.nanoseconds() < deadline {
        try? await Task.sleep(for: .milliseconds(10))
        let now = read()
        if now != value {
            value = now
            since = MonotonicClock.nanoseconds()
        } else if MonotonicClock.nanoseconds() - since >= UInt64(quietSeconds * 1e9) {
            return value
        }
    }
    return nil
}
