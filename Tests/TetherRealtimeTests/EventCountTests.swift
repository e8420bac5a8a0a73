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
        let e = EventCount()
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
