/// Named deadlines of one component, sans-IO: each name is armed at most once (arming again
/// moves it), and the owner sleeps until `next` and takes what is due with `takeDue(now:)`.
///
/// It replaces one sleeping task per timer: a call keeps its connect time-out, statistics
/// interval, DTLS retransmission and handshake deadline, gathering time-out and driver pass here,
/// and one task of the owner sleeps until the soonest.
public struct DeadlineSet<Name: Hashable & Sendable>: Sendable {
    private var deadlines: [Name: MonotonicInstant] = [:]

    public init() {}

    /// The soonest armed deadline; nil when none is armed.
    public var next: MonotonicInstant? { deadlines.values.min() }

    /// Whether `name` is armed.
    public func isArmed(_ name: Name) -> Bool { deadlines[name] != nil }

    /// Arms `name` at `instant`, replacing an earlier arming of it.
    public mutating func arm(_ name: Name, at instant: MonotonicInstant) {
        deadlines[name] = instant
    }

    /// Disarms `name` (nothing when it is not armed).
    public mutating func disarm(_ name: Name) {
        deadlines[name] = nil
    }

    /// Disarms everything.
    public mutating func removeAll() {
        deadlines.removeAll()
    }

    /// Disarms and returns the deadlines due at `now` (at or before it), soonest first.
    public mutating func takeDue(now: MonotonicInstant) -> [Name] {
        let due = deadlines.filter { $0.value <= now }.sorted { $0.value < $1.value }
        for (name, _) in due { deadlines[name] = nil }
        return due.map(\.key)
    }
}
