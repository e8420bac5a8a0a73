import Foundation
import Glibc
import Synchronization
import Testing
import TetherRealtime

@Suite("Event count (the media path's wake-up)")
struct EventCountTests {
    @Test func aSignalWithNobodyWaitingMakesNoSystemCall() {
        let e = EventCount()
        #expect(!e.signal())
        #expect(!e.signal())
        let ticket = e.prepareToWait()
        // A ticket was out but its consumer not asleep: the wait is ended (below) with no
        // system call.
        #expect(!e.signal())
        #expect(!e.signal())
        // The signal came after the ticket: the wait ends at once, whatever the deadline.
        #expect(e.wait(ticket, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 60_000_000_000))
    }

    /// The thread's scheduler state (the field after the parenthesised name in /proc's stat) and
    /// its ID, which the thread publishes itself.
    static func state(of threadID: borrowing Atomic<Int32>) -> Character? {
        let id = threadID.load(ordering: .acquiring)
        guard id > 0, let stat = try? String(contentsOfFile: "/proc/self/task/\(id)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].first { $0 != " " }
    }

    static func publishThreadID(_ threadID: borrowing Atomic<Int32>) {
        // "/proc/thread-self" names this thread: "<pid>/task/<tid>".
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        threadID.store(Int32(link.split(separator: "/").last ?? "") ?? -1, ordering: .releasing)
    }

    /// A consumer whose waits have been short spins before it sleeps (here up to 5 s): a signal
    /// that comes while it spins ends the wait with no system call.
    @Test func aSpinningConsumerIsSignalledWithNoSystemCall() throws {
        // A window long enough for a 5 s spin (the default, 10 ms, lets a consumer spin 7.5 ms).
        let e = EventCount(spinWindowNanoseconds: 60_000_000_000)
        let spin: UInt64 = 5_000_000_000
        // Short waits (each signalled before it began) teach it that waits are short.
        for _ in 0..<32 {
            let t = e.prepareToWait()
            e.signal()
            #expect(e.wait(t, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 60_000_000_000, spinNanoseconds: spin))
        }
        let ready = Atomic<Bool>(false)
        let woken = Atomic<Bool>(false)
        let consumer = RealtimeThread(name: "ec-spinner", realtimePriority: 0)
        let ticket = e.prepareToWait()
        try consumer.start { _ in
            ready.store(true, ordering: .releasing)
            woken.store(e.wait(ticket, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 60_000_000_000, spinNanoseconds: spin), ordering: .releasing)
        }
        while !ready.load(ordering: .acquiring) { sched_yield() }
        usleep(20_000)  // well inside the 5 s of spinning, however slow the machine
        #expect(!e.signal())  // no futex wake: it was not asleep
        consumer.join()
        let wasWoken = woken.load(ordering: .acquiring)
        #expect(wasWoken)
    }

    /// A consumer of one ring spins on the ring itself, with no ticket out: the producer's signal
    /// finds nobody to wake, and the spin ends when the value is there.
    @Test func aConsumerSpinningOnItsRingCostsTheProducerNothing() throws {
        let e = EventCount(spinWindowNanoseconds: 60_000_000_000)
        let ring = SPSCRing<UInt32>(capacity: 16)
        let spin: UInt64 = 5_000_000_000
        // Short waits first (each spin finds its value at once).
        for i in 0..<32 {
            var v = UInt32(i)
            _ = withUnsafePointer(to: &v) { ring.write(UnsafeBufferPointer(start: $0, count: 1)) }
            #expect(e.spin(upToNanoseconds: spin, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 60_000_000_000) { ring.availableToRead > 0 })
            _ = ring.discard(1)
        }
        let looks = Atomic<Int>(0)
        let found = Atomic<Bool>(false)
        let consumer = RealtimeThread(name: "ec-ringspin", realtimePriority: 0)
        try consumer.start { _ in
            found.store(
                e.spin(upToNanoseconds: spin, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 60_000_000_000) {
                    looks.add(1, ordering: .relaxed)
                    return ring.availableToRead > 0
                }, ordering: .releasing)
        }
        // Two looks: the consumer is in its spin loop (the first look is before it).
        let give = MonotonicClock.nanoseconds() + 10_000_000_000
        while looks.load(ordering: .relaxed) < 2 && MonotonicClock.nanoseconds() < give { sched_yield() }
        #expect(looks.load(ordering: .relaxed) >= 2, "the consumer did not spin")
        usleep(20_000)  // well inside the 5 s of spinning, however slow the machine
        var v: UInt32 = 99
        #expect(withUnsafePointer(to: &v) { ring.write(UnsafeBufferPointer(start: $0, count: 1)) } == 1)
        #expect(!e.signal())  // no ticket out: nothing to wake, no system call
        consumer.join()
        let wasFound = found.load(ordering: .acquiring)
        #expect(wasFound)
        #expect(e.consumerTimes.spinningNanoseconds >= 10_000_000)
        // A fresh consumer (no short waits) does not spin on its ring either: it gives up at once.
        let fresh = EventCount(spinWindowNanoseconds: 60_000_000_000)
        let start = MonotonicClock.nanoseconds()
        #expect(!fresh.spin(upToNanoseconds: spin, untilMonotonicNanoseconds: start + 60_000_000_000) { false })
        #expect(MonotonicClock.nanoseconds() - start < 2_500_000_000)
    }

    /// A consumer fed faster than its spin budget would spin without end — at realtime priority
    /// the kernel then stops it for 50 ms of every second. The cap makes it sleep at least a
    /// quarter of each 10 ms window: fed every 20 µs for 300 ms, it is asleep for a good share of
    /// that time (without the cap: next to none), and it had waits it could not spin. A machine
    /// too loaded to feed it that fast (its waits grow past the budget and it stops spinning by
    /// itself) cannot test the cap: the test is then cancelled, not passed.
    @Test func aConsumerFedFasterThanItsBudgetStillSleeps() throws {
        let e = EventCount()
        // Short waits first (signalled before they began): the consumer starts out spinning.
        for _ in 0..<32 {
            let t = e.prepareToWait()
            e.signal()
            e.wait(t, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 1_000_000_000, spinNanoseconds: EventCount.mediaSpinNanoseconds)
        }
        let ring = SPSCRing<UInt32>(capacity: 4096)
        let done = Atomic<Bool>(false)
        let producer = RealtimeThread(name: "ec-fastfeed", realtimePriority: 0)
        let feedNanoseconds: UInt64 = 300_000_000
        try producer.start { _ in
            let start = MonotonicClock.nanoseconds()
            var next = start
            var v: UInt32 = 0
            while MonotonicClock.nanoseconds() - start < feedNanoseconds {
                while MonotonicClock.nanoseconds() < next {}
                _ = withUnsafePointer(to: &v) { ring.write(UnsafeBufferPointer(start: $0, count: 1)) }
                e.signal()
                v &+= 1
                next += 20_000
            }
            done.store(true, ordering: .releasing)
            e.signal()
        }
        let start = MonotonicClock.nanoseconds()
        var buffer = [UInt32](repeating: 0, count: 256)
        while !done.load(ordering: .acquiring) {
            if buffer.withUnsafeMutableBufferPointer({ ring.read(into: $0) }) > 0 { continue }
            let ticket = e.prepareToWait()
            if buffer.withUnsafeMutableBufferPointer({ ring.read(into: $0) }) > 0 || done.load(ordering: .acquiring) { continue }
            e.wait(ticket, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 1_000_000_000, spinNanoseconds: EventCount.mediaSpinNanoseconds)
        }
        let elapsed = MonotonicClock.nanoseconds() - start
        producer.join()
        let times = e.consumerTimes
        let asleep = Double(times.asleepNanoseconds) / Double(elapsed)
        print("fed every 20 µs for \(elapsed / 1_000_000) ms: spinning \(times.spinningNanoseconds / 1_000_000) ms, asleep \(times.asleepNanoseconds / 1_000_000) ms, \(times.spinsRefusedForTheWindow) spins refused of \(times.waits) waits")
        #expect(times.spinningNanoseconds > 0)
        if times.spinsRefusedForTheWindow == 0 {
            try Test.cancel("the consumer never used up a window's spinning (\(times.spinningNanoseconds / 1_000_000) ms spun in \(elapsed / 1_000_000) ms): the machine fed it too slowly to test the cap")
        }
        // The cap leaves at least 25 % of each window to sleep (less the last spin and the
        // consumer's own work); a slower machine only makes waits longer and the share larger.
        #expect(asleep >= 0.15, "asleep \(Int(asleep * 100)) % of the time")
    }

    /// A consumer that has not had short waits does not spin, whatever budget it is given: it is
    /// seen asleep long before the budget (5 s) would end, and the signal is a futex wake.
    @Test func aConsumerWithoutShortWaitsSleepsAtOnce() throws {
        let e = EventCount()
        let threadID = Atomic<Int32>(0)
        let consumer = RealtimeThread(name: "ec-sleeper", realtimePriority: 0)
        let ticket = e.prepareToWait()
        let start = MonotonicClock.nanoseconds()
        try consumer.start { _ in
            Self.publishThreadID(threadID)
            e.wait(ticket, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 60_000_000_000, spinNanoseconds: 5_000_000_000)
        }
        let deadline = start + 10_000_000_000
        while Self.state(of: threadID) != "S" && MonotonicClock.nanoseconds() < deadline { sched_yield() }
        let asleepAfter = MonotonicClock.nanoseconds() - start
        #expect(Self.state(of: threadID) == "S")
        #expect(asleepAfter < 2_500_000_000, "asleep only after \(asleepAfter / 1_000_000) ms")
        #expect(e.signal())
        consumer.join()
    }

    @Test func aWaitWithoutASignalTimesOutAtItsDeadline() {
        let e = EventCount()
        let start = MonotonicClock.nanoseconds()
        #expect(!e.wait(e.prepareToWait(), untilMonotonicNanoseconds: start + 20_000_000))
        #expect(MonotonicClock.nanoseconds() - start >= 20_000_000)
    }

    /// The consumer is seen asleep in the kernel (its /proc state) before the signal is sent, so
    /// this is the futex wake path, whatever the machine's speed.
    @Test func aSleepingConsumerIsWokenByAnotherThread() throws {
        let e = EventCount()
        let woken = Atomic<Bool>(false)
        let threadID = Atomic<Int32>(0)
        let consumer = RealtimeThread(name: "ec-sleeper", realtimePriority: 0)
        let ticket = e.prepareToWait()
        try consumer.start { _ in
            Self.publishThreadID(threadID)
            woken.store(e.wait(ticket, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 60_000_000_000), ordering: .releasing)
        }
        func state() -> Character? { Self.state(of: threadID) }
        let deadline = MonotonicClock.nanoseconds() + 10_000_000_000
        while state() != "S" && MonotonicClock.nanoseconds() < deadline { sched_yield() }
        #expect(state() == "S")
        #expect(e.signal())
        consumer.join()
        let wasWoken = woken.load(ordering: .acquiring)
        #expect(wasWoken)
    }

    /// A producer thread pushes 200 000 values through an SPSC ring as fast as it can; the
    /// consumer reads while there is something, and then follows the event count's order
    /// (ticket, look again, sleep). A lost wake-up would
    /// leave it asleep with values in the ring until the 10 s deadline: every value arrives, no
    /// wait times out, and most signals made no system call (the consumer was awake).
    @Test func noWakeUpIsLostAndMostSignalsCostNothing() throws {
        let ring = SPSCRing<UInt32>(capacity: 1024)
        let e = EventCount()
        let count = 200_000
        let calls = Atomic<Int>(0)
        let producer = RealtimeThread(name: "ec-producer", realtimePriority: 0)
        try producer.start { _ in
            var next: UInt32 = 0
            var made = 0
            while Int(next) < count {
                var v = next
                if withUnsafePointer(to: &v, { ring.write(UnsafeBufferPointer(start: $0, count: 1)) }) == 1 {
                    next += 1
                    if e.signal() { made += 1 }
                } else {
                    sched_yield()
                }
            }
            calls.store(made, ordering: .releasing)
        }
        var received = 0
        var inOrder = true
        var timeouts = 0
        var buffer = [UInt32](repeating: 0, count: 256)
        func take() -> Int {
            let n = buffer.withUnsafeMutableBufferPointer { ring.read(into: $0) }
            for i in 0..<n where buffer[i] != UInt32(received + i) { inOrder = false }
            received += n
            return n
        }
        while received < count {
            if take() > 0 { continue }
            let ticket = e.prepareToWait()
            if take() > 0 { continue }
            if !e.wait(ticket, untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 10_000_000_000) {
                timeouts += 1
                break
            }
        }
        producer.join()
        #expect(received == count)
        #expect(inOrder)
        #expect(timeouts == 0)
        let made = calls.load(ordering: .acquiring)
        print("event count: \(made) wake-ups for \(count) values")
        #expect(made < count / 2)
    }
}
