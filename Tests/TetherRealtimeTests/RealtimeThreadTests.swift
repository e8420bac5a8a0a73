import Glibc
import Dispatch
import Synchronization
import Testing

@testable import TetherRealtime

@Suite("RealtimeThread")
struct RealtimeThreadTests {
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
