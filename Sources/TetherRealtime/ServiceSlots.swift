import Synchronization

/// A fixed table of objects that one service thread visits, which other threads add and remove
/// without ever making the service thread lock or allocate.
///
/// Each slot has an atomic state: free → filling → active → stopping → released → free. A control
/// thread claims a free slot, stores the object and publishes it (`active`, release). To remove
/// it, the control thread marks it `stopping` and waits; the service thread, on its next visit,
/// gives the object a last call and marks it `released`, after which it never touches it again.
/// The table holds its objects unretained: whoever inserts an object keeps it alive until
/// `remove` returns.
public final class ServiceSlots<Element: AnyObject>: @unchecked Sendable {
    public let capacity: Int

    @usableFromInline static var free: Int { 0 }
    @usableFromInline static var filling: Int { 1 }
    @usableFromInline static var active: Int { 2 }
    @usableFromInline static var stopping: Int { 3 }
    @usableFromInline static var released: Int { 4 }

    /// Per slot: its state (acquire/release: the element is published by the move to `active`,
    /// and the service thread's last use of it by the move to `released`).
    @usableFromInline let states: UnsafeMutablePointer<Atomic<Int>>
    /// Per slot: the element, written while `filling`, read by the service thread while `active`
    /// or `stopping`.
    @usableFromInline let elements: UnsafeMutablePointer<Unmanaged<Element>?>
    /// Slots at or past this index were never used (relaxed: a scan bound; each slot is only
    /// trusted through its own state).
    @usableFromInline let highWater = Atomic<Int>(0)
    /// Slots holding an element that is not yet released.
    @usableFromInline let occupied = Atomic<Int>(0)
    /// Signalled each time the service thread releases a slot.
    @usableFromInline let releasedSignal = Wakeup()

    public init(capacity: Int) {
        self.capacity = capacity
        states = .allocate(capacity: capacity)
        for i in 0..<capacity { (states + i).initialize(to: Atomic(Self.free)) }
        elements = .allocate(capacity: capacity)
        elements.initialize(repeating: nil, count: capacity)
    }

    deinit {
        states.deinitialize(count: capacity)
        states.deallocate()
        elements.deinitialize(count: capacity)
        elements.deallocate()
    }

    /// Elements inserted and not yet released. Relaxed: a hint for the service thread's idling.
    @inlinable
    public var count: Int { occupied.load(ordering: .relaxed) }

    /// Stores `element` in a free slot; the service thread visits it from its next pass.
    /// - Returns: the slot, or nil when the table is full.
    public func insert(_ element: Element) -> Int? {
        for slot in 0..<capacity {
            guard states[slot].compareExchange(expected: Self.free, desired: Self.filling, ordering: .acquiring).exchanged
            else { continue }
            elements[slot] = .passUnretained(element)
            occupied.add(1, ordering: .relaxed)
            var high = highWater.load(ordering: .relaxed)
            while high < slot + 1 {
                let (done, current) = highWater.compareExchange(expected: high, desired: slot + 1, ordering: .relaxed)
                if done { break }
                high = current
            }
            states[slot].store(Self.active, ordering: .releasing)
            return slot
        }
        return nil
    }

    /// Asks the service thread to let go of the element in `slot` and waits until it has: on
    /// return the service thread no longer touches it. `nudge` is called while waiting, to wake
    /// a service thread that may be asleep.
    /// - Note: Never from the service thread itself.
    public func remove(slot: Int, nudge: () -> Void) {
        guard states[slot].compareExchange(expected: Self.active, desired: Self.stopping, ordering: .acquiringAndReleasing).exchanged
        else { return }
        nudge()
        while states[slot].load(ordering: .acquiring) != Self.released {
            releasedSignal.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 2_000_000)
            nudge()
        }
        elements[slot] = nil
        states[slot].store(Self.free, ordering: .releasing)
    }

    /// The service thread's pass: `active` for each active element, `last` once for each element
    /// being removed (which is then released).
    /// - Note: Service thread only; allocates nothing, takes no lock, retains nothing.
    @inlinable
    public func visit(active: (Element) -> Void, last: (Element) -> Void) {
        let high = highWater.load(ordering: .relaxed)
        var slot = 0
        while slot < high {
            switch states[slot].load(ordering: .acquiring) {
            case Self.active:
                elements[slot]!._withUnsafeGuaranteedRef { active($0) }
            case Self.stopping:
                elements[slot]!._withUnsafeGuaranteedRef { last($0) }
                states[slot].store(Self.released, ordering: .releasing)
                occupied.subtract(1, ordering: .relaxed)
                releasedSignal.signal()
            default:
                break
            }
            slot += 1
        }
    }
}
