import Glibc
import Synchronization
import Testing

@testable import TetherRealtime

/// An element that counts the service thread's visits.
private final class Visited: Sendable {
    let visits = Atomic<Int>(0)
    let lastCalls = Atomic<Int>(0)
    /// Set while the element is alive; the service thread checks it on every visit.
    let alive = Atomic<Bool>(true)
}

@Suite("ServiceSlots")
struct ServiceSlotsTests {
    @Test func elementsAreVisitedUntilRemovedAndGetExactlyOneLastCall() throws {
        let slots = ServiceSlots<Visited>(capacity: 8)
        let service = RealtimeThread(name: "slots-test", realtimePriority: 0)
        let touchedAfterRemoval = Atomic<Int>(0)
        try service.start { thread in
            while !thread.isStopRequested {
                slots.visit(
                    active: { e in
                        if !e.alive.load(ordering: .acquiring) { touchedAfterRemoval.add(1, ordering: .relaxed) }
                        e.visits.add(1, ordering: .relaxed)
                    },
                    last: { e in e.lastCalls.add(1, ordering: .relaxed) })
                usleep(200)
            }
        }
        defer { service.stop() }
        let elements = (0..<5).map { _ in Visited() }
        let slotNumbers = elements.map { slots.insert($0) }
        #expect(slotNumbers.allSatisfy { $0 != nil })
        #expect(Set(slotNumbers.compactMap { $0 }).count == 5)
        #expect(slots.count == 5)
        // Wait for every element to be visited a few times.
        let deadline = MonotonicClock.nanoseconds() + 5_000_000_000
        while elements.contains(where: { $0.visits.load(ordering: .relaxed) < 3 }) && MonotonicClock.nanoseconds() < deadline {
            usleep(1000)
        }
        #expect(elements.allSatisfy { $0.visits.load(ordering: .relaxed) >= 3 })
        for (element, slot) in zip(elements, slotNumbers) {
            slots.remove(slot: slot!, nudge: {})
            // On return the service thread has let go: it never visits the element again.
            element.alive.store(false, ordering: .releasing)
            #expect(element.lastCalls.load(ordering: .relaxed) == 1)
        }
        #expect(slots.count == 0)
        let visitsAfter = elements.map { $0.visits.load(ordering: .relaxed) }
        usleep(20_000)
        #expect(elements.map { $0.visits.load(ordering: .relaxed) } == visitsAfter)
        #expect(touchedAfterRemoval.load(ordering: .relaxed) == 0)
        // Freed slots are reused; a full table refuses.
        let again = (0..<8).map { _ in Visited() }
        let reused = again.map { slots.insert($0) }
        #expect(reused.allSatisfy { $0 != nil })
        #expect(slots.insert(Visited()) == nil)
        for slot in reused { slots.remove(slot: slot!, nudge: {}) }
    }

    @Test func removingTwiceOrAFreeSlotReturnsAtOnce() throws {
        let slots = ServiceSlots<Visited>(capacity: 2)
        slots.remove(slot: 1, nudge: { Issue.record("a never-used slot has nothing to wait for") })
        // No service thread: the nudge runs the pass itself, so a removal that waited for a
        // pass that never comes would hang here.
        let element = Visited()
        let slot = try #require(slots.insert(element))
        let pass = {
            slots.visit(
                active: { $0.visits.add(1, ordering: .relaxed) },
                last: { $0.lastCalls.add(1, ordering: .relaxed) })
        }
        pass()
        slots.remove(slot: slot, nudge: pass)
        #expect(element.visits.load(ordering: .relaxed) == 1)
        #expect(element.lastCalls.load(ordering: .relaxed) == 1)
        #expect(slots.count == 0)
        // Removed already: returns at once, with no second last call.
        slots.remove(slot: slot, nudge: { Issue.record("a removed slot has nothing to wait for") })
        #expect(element.lastCalls.load(ordering: .relaxed) == 1)
    }
}
