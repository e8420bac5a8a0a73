import Dispatch
import Glibc
import Synchronization
import Testing

@testable import TetherRealtime

@Suite("SPSCRing")
struct SPSCRingTests {
    /// Every capacity × start slot × fill level: writes and reads wrap correctly and keep content.
    @Test(arguments: [1, 2, 4, 8, 16, 64])
    func everyStartPositionAndFillLevelRoundTrips(capacity: Int) {
        for start in 0..<capacity {
            for fill in 0...capacity {
                let ring = SPSCRing<Int32>(capacity: capacity)
                // Advance both indices to `start`.
                var scratch = [Int32](repeating: 0, count: capacity)
                if start > 0 {
                    let pre = [Int32](repeating: -1, count: start)
                    #expect(pre.withUnsafeBufferPointer { ring.write($0) } == start)
                    #expect(scratch.withUnsafeMutableBufferPointer { ring.read(into: UnsafeMutableBufferPointer(rebasing: $0[0..<start])) } == start)
                }
                let values = (0..<fill).map { Int32(start * 1000 + $0) }
                #expect(values.withUnsafeBufferPointer { ring.write($0) } == fill)
                #expect(ring.availableToRead == fill)
                #expect(ring.availableToWrite == capacity - fill)
                // A write into a full ring writes nothing.
                if fill == capacity {
                    #expect([Int32(7)].withUnsafeBufferPointer { ring.write($0) } == 0)
                }
                var out = [Int32](repeating: 0, count: capacity + 1)
                let n = out.withUnsafeMutableBufferPointer { ring.read(into: $0) }
                #expect(n == fill)
                #expect(Array(out[0..<n]) == values)
                #expect(ring.availableToRead == 0)
            }
        }
    }

    @Test func allOrNothingOperations() {
        let ring = SPSCRing<Int16>(capacity: 8)
        let six = [Int16](1...6)
        #expect(six.withUnsafeBufferPointer { ring.writeAll($0) })
        #expect(!six.withUnsafeBufferPointer { ring.writeAll($0) })
        #expect(ring.availableToRead == 6)
        var four = [Int16](repeating: 0, count: 4)
        #expect(four.withUnsafeMutableBufferPointer { ring.readAll(into: $0) })
        #expect(four == [1, 2, 3, 4])
        var three = [Int16](repeating: 0, count: 3)
        #expect(!three.withUnsafeMutableBufferPointer { ring.readAll(into: $0) })
        #expect(ring.discard(5) == 2)
        #expect(ring.availableToRead == 0)
    }

    @Test func twoThreadStressKeepsOrderAndContent() async throws {
        let ring = SPSCRing<UInt32>(capacity: 64)
        let total: UInt32 = 2_000_000
        let producer = RealtimeThread(name: "ring-producer", realtimePriority: 0)
        try producer.start { _ in
            var next: UInt32 = 0
            var chunk = [UInt32](repeating: 0, count: 37)
            while next < total {
                let n = min(UInt32(chunk.count), total - next)
                for i in 0..<Int(n) { chunk[i] = next &+ UInt32(i) }
                let wrote = chunk.withUnsafeBufferPointer { ring.write(UnsafeBufferPointer(rebasing: $0[0..<Int(n)])) }
                next &+= UInt32(wrote)
                if wrote == 0 { sched_yield() }
            }
        }
        var expected: UInt32 = 0
        var mismatches = 0
        var out = [UInt32](repeating: 0, count: 29)
        while expected < total {
            let n = out.withUnsafeMutableBufferPointer { ring.read(into: $0) }
            for i in 0..<n where out[i] != expected &+ UInt32(i) { mismatches += 1 }
            expected &+= UInt32(n)
            if n == 0 { sched_yield() }
        }
        producer.join()
        #expect(mismatches == 0)
        #expect(expected == total)
    }
}

@Suite("PacketRing")
struct PacketRingTests {
    @Test(arguments: [1, 2, 4, 16])
    func everyStartSlotAndFillLevelKeepsPacketsAndArrivals(slots: Int) {
        for start in 0..<slots {
            for fill in 0...slots {
                let ring = PacketRing(slotCount: slots, maximumPacketBytes: 64)
                for i in 0..<start {
                    #expect([UInt8(i)].withUnsafeBytes { ring.push($0, arrivalNanoseconds: 0) })
                    #expect(ring.pop { b, _ in b.count } == 1)
                }
                for i in 0..<fill {
                    let bytes = [UInt8](repeating: UInt8(i), count: i + 1)
                    #expect(bytes.withUnsafeBytes { ring.push($0, arrivalNanoseconds: UInt64(100 + i)) })
                }
                if fill == slots {
                    #expect(![UInt8(0)].withUnsafeBytes { ring.push($0, arrivalNanoseconds: 0) })
                    #expect(ring.droppedBecauseFull == 1)
                }
                #expect(ring.count == fill)
                for i in 0..<fill {
                    let ok = ring.pop { b, t in b.count == i + 1 && b.allSatisfy { $0 == UInt8(i) } && t == UInt64(100 + i) }
                    #expect(ok == true)
                }
                #expect(ring.pop { _, _ in 0 } == nil)
            }
        }
    }

    @Test func oversizePacketIsDroppedAndCounted() {
        let ring = PacketRing(slotCount: 4, maximumPacketBytes: 8)
        #expect(![UInt8](repeating: 0, count: 9).withUnsafeBytes { ring.push($0, arrivalNanoseconds: 0) })
        #expect(ring.droppedBecauseOversize == 1)
        #expect(ring.count == 0)
    }

    @Test func twoThreadStressKeepsOrderAndContent() throws {
        let ring = PacketRing(slotCount: 16, maximumPacketBytes: 256)
        let total = 200_000
        let producer = RealtimeThread(name: "pkt-producer", realtimePriority: 0)
        try producer.start { _ in
            var buffer = [UInt8](repeating: 0, count: 256)
            var i = 0
            while i < total {
                let len = 4 + i % 200
                buffer[0] = UInt8(truncatingIfNeeded: i)
                buffer[1] = UInt8(truncatingIfNeeded: i >> 8)
                buffer[2] = UInt8(truncatingIfNeeded: i >> 16)
                buffer[len - 1] = UInt8(truncatingIfNeeded: len)
                if buffer.withUnsafeBytes({ ring.push(UnsafeRawBufferPointer(rebasing: $0[0..<len]), arrivalNanoseconds: UInt64(i)) }) {
                    i += 1
                } else {
                    sched_yield()
                }
            }
        }
        var next = 0
        var bad = 0
        while next < total {
            if let ok = ring.pop({ b, t in
                let n = Int(b[0]) | Int(b[1]) << 8 | Int(b[2]) << 16
                return n == next & 0xFF_FFFF && b.count == 4 + next % 200 && b[b.count - 1] == UInt8(truncatingIfNeeded: b.count) && t == UInt64(next)
            }) {
                if !ok { bad += 1 }
                next += 1
            } else {
                sched_yield()
            }
        }
        producer.join()
        #expect(bad == 0)
    }
}

@Suite("Wakeup and RealtimeThread")
struct WakeupTests {
    @Test func waitTimesOutWithoutSignalAndReturnsOnSignal() {
        let w = Wakeup()
        let start = MonotonicClock.nanoseconds()
        #expect(!w.wait(untilMonotonicNanoseconds: start + 20_000_000))
        #expect(MonotonicClock.nanoseconds() - start >= 20_000_000)
        w.signal()
        #expect(w.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 1_000_000_000))
    }

    @Test func threadReportsItsSchedulingAndStops() throws {
        let t = RealtimeThread(name: "sched-probe", realtimePriority: 5)
        let started = Wakeup()
        try t.start { me in
            started.signal()
            while !me.isStopRequested { MonotonicClock.sleep(untilNanoseconds: MonotonicClock.nanoseconds() + 1_000_000) }
        }
        #expect(started.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 5_000_000_000))
        #expect(t.scheduling != .notStarted)
        t.stop()
    }

    @Test func startIfNeededFromManyThreadsStartsOneThread() throws {
        let thread = RealtimeThread(name: "start-once", realtimePriority: 0)
        let bodies = Atomic<Int>(0)
        let failures = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do throws(RealtimeThread.StartError) {
                try thread.startIfNeeded { t in
                    bodies.add(1, ordering: .relaxed)
                    while !t.isStopRequested { usleep(1000) }
                }
            } catch {
                failures.add(1, ordering: .relaxed)
            }
        }
        thread.stop()
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(bodies.load(ordering: .relaxed) == 1)
        #expect(thread.scheduling == .normal)
    }
}
