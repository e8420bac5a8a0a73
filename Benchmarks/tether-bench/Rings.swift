import ArgumentParser
import Glibc
import Synchronization
import TetherRealtime

/// Hand-off between two threads: Tether's SPSC ring with its event-count wake-up (what device
/// threads and the GLib thread use to reach the media loop) against a mutex-and-condition queue
/// (what a straightforward implementation would use).
enum RingBench {
    struct Result: Sendable {
        var medianLatencyNanoseconds: Double
        var p99LatencyNanoseconds: Double
        /// The longest hand-off: a stall of the consumer (a realtime thread stopped by the
        /// kernel's realtime throttling shows as about 50 ms).
        var maximumLatencyNanoseconds: Double
        var messagesPerSecond: Double
        /// The event count's consumer in the latency phase: share of the time spent spinning and
        /// asleep (nil for the mutex queue).
        var consumerSpinningShare: Double?
        var consumerAsleepShare: Double?

        /// The figures for `run`'s JSON (the spinning share only where there is an event count).
        var dictionary: [String: Double] {
            var d = ["medianLatencyNs": medianLatencyNanoseconds, "p99LatencyNs": p99LatencyNanoseconds, "maxLatencyNs": maximumLatencyNanoseconds, "messagesPerSecond": messagesPerSecond]
            d["consumerSpinningShare"] = consumerSpinningShare
            return d
        }

        /// "median / p99 / max µs".
        var latencyText: String {
            String(format: "%.1f / %.1f / %.1f µs", medianLatencyNanoseconds / 1000, p99LatencyNanoseconds / 1000, maximumLatencyNanoseconds / 1000)
        }
    }

    /// A queue of stamps between one producer and one blocking consumer.
    protocol Channel: AnyObject, Sendable {
        /// Producer: enqueues, returns false when full.
        func send(_ value: UInt64) -> Bool
        /// Consumer: blocks until something is there or `stop` was called; reads up to
        /// `into.count` values, returns how many (0 after stop with nothing left).
        func receive(into: UnsafeMutableBufferPointer<UInt64>) -> Int
        func stop()
        /// Where the consumer's waits went (the ring's event count only).
        var consumerTimes: EventCount.ConsumerTimes? { get }
    }

    final class RingChannel: Channel, @unchecked Sendable {
        let ring = SPSCRing<UInt64>(capacity: 4096)
        let wakeup = EventCount()
        let stopped = Atomic<Bool>(false)
        /// How long the consumer spins before it sleeps (the media worker's figure by default).
        let spinNanoseconds: UInt64
        /// What the consumer watches while it spins.
        let spinsOn: SpinTarget

        enum SpinTarget {
            /// The ring itself, before it takes a ticket (`EventCount.spin(…)`: a consumer of
            /// one ring); producers' signals find no ticket and cost nothing.
            case ring
            /// The event count, with a ticket out (`wait(…, spinNanoseconds:)`: the media
            /// worker's way, which has many rings to watch and one count).
            case count
        }

        init(spinNanoseconds: UInt64 = EventCount.mediaSpinNanoseconds, spinsOn: SpinTarget = .ring) {
            self.spinNanoseconds = spinNanoseconds
            self.spinsOn = spinsOn
        }

        func send(_ value: UInt64) -> Bool {
            var v = value
            let ok = withUnsafePointer(to: &v) { ring.write(UnsafeBufferPointer(start: $0, count: 1)) == 1 }
            if ok { wakeup.signal() }
            return ok
        }

        func receive(into buffer: UnsafeMutableBufferPointer<UInt64>) -> Int {
            while true {
                let n = ring.read(into: buffer)
                if n > 0 { return n }
                // Stopped: what is left (the stop came after the last value), then 0.
                if stopped.load(ordering: .acquiring) { return ring.read(into: buffer) }
                let deadline = MonotonicClock.nanoseconds() + 100_000_000
                if spinsOn == .ring && wakeup.spin(upToNanoseconds: spinNanoseconds, untilMonotonicNanoseconds: deadline, until: { ring.availableToRead > 0 || stopped.load(ordering: .relaxed) }) {
                    continue
                }
                // The event count's order: ticket, look again, sleep only on an empty ring.
                let ticket = wakeup.prepareToWait()
                let m = ring.read(into: buffer)
                if m > 0 { return m }
                if stopped.load(ordering: .acquiring) { return ring.read(into: buffer) }
                wakeup.wait(ticket, untilMonotonicNanoseconds: deadline, spinNanoseconds: spinsOn == .count ? spinNanoseconds : 0)
            }
        }

        func stop() {
            stopped.store(true, ordering: .releasing)
            wakeup.signal()
        }

        var consumerTimes: EventCount.ConsumerTimes? { wakeup.consumerTimes }
    }

    final class MutexChannel: Channel, @unchecked Sendable {
        let capacity = 4096
        let storage: UnsafeMutablePointer<UInt64>
        var head = 0
        var count = 0
        var stopped = false
        let mutex: UnsafeMutablePointer<pthread_mutex_t>
        let condition: UnsafeMutablePointer<pthread_cond_t>

        init() {
            storage = .allocate(capacity: capacity)
            mutex = .allocate(capacity: 1)
            condition = .allocate(capacity: 1)
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(condition, nil)
        }

        deinit {
            pthread_cond_destroy(condition)
            pthread_mutex_destroy(mutex)
            condition.deallocate()
            mutex.deallocate()
            storage.deallocate()
        }

        func send(_ value: UInt64) -> Bool {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            guard count < capacity else { return false }
            storage[(head + count) % capacity] = value
            count += 1
            pthread_cond_signal(condition)
            return true
        }

        func receive(into buffer: UnsafeMutableBufferPointer<UInt64>) -> Int {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            while count == 0 && !stopped { pthread_cond_wait(condition, mutex) }
            let n = min(count, buffer.count)
            for i in 0..<n { buffer[i] = storage[(head + i) % capacity] }
            head = (head + n) % capacity
            count -= n
            return n
        }

        func stop() {
            pthread_mutex_lock(mutex)
            stopped = true
            pthread_cond_signal(condition)
            pthread_mutex_unlock(mutex)
        }

        var consumerTimes: EventCount.ConsumerTimes? { nil }
    }

    /// Latency: `messages` stamps sent one every `intervalNanoseconds` (the consumer is asleep
    /// each time, as the media loop is between frames); throughput: `burst` values as fast as
    /// the producer can send them.
    static func measure(_ make: () -> any Channel, messages: Int, intervalNanoseconds: UInt64 = 50_000, burst: Int = 2_000_000) -> Result {
        // Latency.
        let latencies = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: messages)
        defer { latencies.deallocate() }
        var consumerTimes: EventCount.ConsumerTimes?
        var latencySeconds = 0.0
        do {
            let channel = make()
            let received = Atomic<Int>(0)
            let latencyBox = UnsafeSendable(latencies)
            let consumer = RealtimeThread(name: "bench-consumer", realtimePriority: 10)
            try? consumer.start { _ in
                let buffer = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: 64)
                defer { buffer.deallocate() }
                var index = 0
                while true {
                    let n = channel.receive(into: buffer)
                    if n == 0 { break }
                    let now = MonotonicClock.nanoseconds()
                    for i in 0..<n where index < latencyBox.value.count {
                        latencyBox.value[index] = now &- buffer[i]
                        index += 1
                    }
                    received.store(index, ordering: .releasing)
                }
            }
            let first = MonotonicClock.nanoseconds() + 1_000_000
            var next = first
            for _ in 0..<messages {
                while MonotonicClock.nanoseconds() < next {}  // spin to the instant: no sleep jitter in the producer
                _ = channel.send(MonotonicClock.nanoseconds())
                next += intervalNanoseconds
            }
            while received.load(ordering: .acquiring) < messages {}
            channel.stop()
            consumer.join()
            latencySeconds = Double(MonotonicClock.nanoseconds() - first) / 1e9
            consumerTimes = channel.consumerTimes
        }
        let sorted = Array(latencies).sorted()

        // Throughput.
        let channel = make()
        let total = Atomic<Int>(0)
        let consumer = RealtimeThread(name: "bench-consumer", realtimePriority: 10)
        try? consumer.start { _ in
            let buffer = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: 256)
            defer { buffer.deallocate() }
            var count = 0
            while true {
                let n = channel.receive(into: buffer)
                if n == 0 { break }
                count += n
            }
            total.store(count, ordering: .releasing)
        }
        let start = MonotonicClock.nanoseconds()
        var sent = 0
        while sent < burst {
            if channel.send(UInt64(sent)) { sent += 1 } else { sched_yield() }
        }
        channel.stop()
        consumer.join()
        let seconds = Double(MonotonicClock.nanoseconds() - start) / 1e9
        return Result(
            medianLatencyNanoseconds: Double(sorted[sorted.count / 2]),
            p99LatencyNanoseconds: Double(sorted[min(sorted.count - 1, sorted.count * 99 / 100)]),
            maximumLatencyNanoseconds: Double(sorted.last ?? 0),
            messagesPerSecond: Double(total.load(ordering: .acquiring)) / seconds,
            consumerSpinningShare: consumerTimes.map { Double($0.spinningNanoseconds) / 1e9 / latencySeconds },
            consumerAsleepShare: consumerTimes.map { Double($0.asleepNanoseconds) / 1e9 / latencySeconds })
    }

    /// Carries a pointer into a thread body (the bench owns its lifetime).
    struct UnsafeSendable<T>: @unchecked Sendable {
        var value: T
        init(_ value: T) { self.value = value }
    }
}

/// `tether-bench rings`: the hand-off step of `run`, alone.
struct RingsBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rings", abstract: "Hand-off between two threads: the SPSC ring with its event count against a mutex and condition queue (one step of `run`).")

    @Option(help: "Messages for the latency figures (one every 50 µs; the default, 3 s, spans three periods of the kernel's realtime throttling).")
    var messages: Int = 60_000

    @Option(help: "Messages for the throughput figure.")
    var burst: Int = 2_000_000

    @Option(help: "Also run the ring with the consumer spinning this long before it sleeps, in µs (repeatable; the media worker's own figure always runs).")
    var spinMicroseconds: [Int] = []

    func run() throws {
        let spins = [Int(EventCount.mediaSpinNanoseconds / 1000)] + spinMicroseconds
        var channels: [(String, () -> any RingBench.Channel)] = spins.map { us in
            ("ring + event count, spin \(us) µs on the ring", { RingBench.RingChannel(spinNanoseconds: UInt64(us) * 1000) })
        }
        channels.append(("ring + event count, spin \(spins[0]) µs on the count (the media worker's wait)", { RingBench.RingChannel(spinsOn: .count) }))
        channels.append(("mutex + condition", { RingBench.MutexChannel() }))
        for (name, make) in channels {
            let r = RingBench.measure(make, messages: messages, burst: burst)
            var line = String(format: "%@: latency median %.1f µs, p99 %.1f µs, max %.1f µs; throughput %.1f M msg/s", name, r.medianLatencyNanoseconds / 1000, r.p99LatencyNanoseconds / 1000, r.maximumLatencyNanoseconds / 1000, r.messagesPerSecond / 1e6)
            if let spinning = r.consumerSpinningShare, let asleep = r.consumerAsleepShare {
                line += String(format: "; consumer spinning %.0f %%, asleep %.0f %% of the latency phase", 100 * spinning, 100 * asleep)
            }
            say(line)
        }
    }
}
