import Synchronization
import TetherNetworkMonitor

/// One rtnetlink monitor per process, shared by every call that follows network changes.
///
/// It starts with the first subscriber and stops with the last. Debounced changes are handed to
/// each subscriber on the monitor thread; subscribers hop to their own executor at once.
final class NetworkChangeHub: Sendable {
    static let shared = NetworkChangeHub()

    private struct State {
        var monitor: NetworkChangeMonitor?
        var subscribers: [UInt64: @Sendable (NetworkChange) -> Void] = [:]
        var nextID: UInt64 = 1
    }

    private let state = Mutex(State())

    /// Adds a subscriber; returns its token, or nil when the monitor cannot run here.
    func subscribe(_ handler: @escaping @Sendable (NetworkChange) -> Void) -> UInt64? {
        let needsMonitor = state.withLock { $0.monitor == nil }
        var created: NetworkChangeMonitor?
        if needsMonitor {
            // The hub is the process-wide `shared` instance and is never freed, so the monitor
            // holds it strongly. A weak reference would buy nothing and would give the hub a
            // weak-reference side table that nothing visibly points to (LeakSanitizer reports
            // it as a leak at exit). The cycle hub → monitor → closure → hub is broken when the
            // last subscriber leaves (`unsubscribe` stops and drops the monitor).
            created = try? NetworkChangeMonitor(
                configuration: .init(debounceMilliseconds: 300),
                onChange: { change in self.deliver(change) })
            if created == nil { return nil }
        }
        var surplus: NetworkChangeMonitor?
        let id = state.withLock { s -> UInt64 in
            if let created {
                if s.monitor == nil { s.monitor = created } else { surplus = created }
            }
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = handler
            return id
        }
        surplus?.stop()
        return id
    }

    func unsubscribe(_ id: UInt64) {
        let toStop = state.withLock { s -> NetworkChangeMonitor? in
            s.subscribers[id] = nil
            guard s.subscribers.isEmpty else { return nil }
            defer { s.monitor = nil }
            return s.monitor
        }
        toStop?.stop()
    }

    /// The local addresses media could use now: every address (loopback and link-local too)
    /// on a link that is up and running, or nil when the monitor is not running.
    func usableAddresses() -> [InterfaceAddress]? {
        guard let monitor = state.withLock({ $0.monitor }) else { return nil }
        let operational = Set(monitor.currentLinks().filter { $0.isOperational || $0.isLoopback }.map(\.interfaceIndex))
        return monitor.currentAddresses(includingLoopbackAndLinkLocal: true).filter { operational.contains($0.interfaceIndex) }
    }

    private func deliver(_ change: NetworkChange) {
        let handlers = state.withLock { Array($0.subscribers.values) }
        for h in handlers { h(change) }
    }
}
