/// Turns raw rtnetlink events into debounced ``NetworkChange`` values. Sans-IO: it never reads a
/// clock; every input carries `now`, a monotonic instant in nanoseconds (any origin, the same
/// clock for every call).
///
/// The first relevant event opens a window and snapshots the state; each further relevant event
/// extends it. Once no relevant event has arrived for ``Configuration/debounceMilliseconds`` (or
/// the window has been open for ``Configuration/maximumDelayMilliseconds``, so a flapping link
/// still gets reported), ``poll(now:)`` returns ONE change: the difference between the snapshot
/// and the current state. Changes that cancel out inside the window are therefore not reported,
/// and an empty difference yields nothing.
///
/// Relevant events: an address that appears or disappears, a link whose operational state
/// (``LinkState/isOperational``) changes, appears or disappears; addresses and links the
/// configuration ignores are tracked but never open or extend a window. Repeated `RTM_NEWADDR` for a
/// known address (flag updates) and `RTM_NEWLINK` for statistics or other flags only update the
/// stored state.
///
/// Only usable addresses are known (``InterfaceAddress/isUsable``): an IPv6 address still in
/// duplicate address detection cannot be bound, so it counts as added when detection ends (the
/// kernel's `RTM_NEWADDR` without `IFA_F_TENTATIVE`), not when it appears, and one that fails
/// detection never counts.
public struct NetworkChangeDebouncer: Sendable {
    /// Debouncing and filtering options.
    public struct Configuration: Sendable, Equatable {
        /// Quiet period after the last relevant event before a change is delivered, milliseconds.
        public var debounceMilliseconds: UInt64
        /// Longest time a change may be held while events keep arriving, milliseconds.
        public var maximumDelayMilliseconds: UInt64
        /// Whether loopback (127/8, ::1) and link-local (169.254/16, fe80::/10) addresses and
        /// loopback links are left out of changes.
        public var ignoresLoopbackAndLinkLocal: Bool

        /// Creates a configuration; all durations in milliseconds.
        public init(
            debounceMilliseconds: UInt64 = 300, maximumDelayMilliseconds: UInt64 = 2000,
            ignoresLoopbackAndLinkLocal: Bool = true
        ) {
            self.debounceMilliseconds = debounceMilliseconds
            self.maximumDelayMilliseconds = max(maximumDelayMilliseconds, debounceMilliseconds)
            self.ignoresLoopbackAndLinkLocal = ignoresLoopbackAndLinkLocal
        }
    }

    /// The options in use.
    public let configuration: Configuration
    private var addressTable: [AddressKey: InterfaceAddress] = [:]
    private var linkTable: [UInt32: LinkState] = [:]
    private var window: Window?

    private struct Window: Sendable {
        var addresses: [AddressKey: InterfaceAddress]
        var links: [UInt32: LinkState]
        var openedAt: UInt64
        var lastEventAt: UInt64
    }

    /// Creates a debouncer with an empty state; call ``reset(addresses:links:)`` with a dump.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Replaces the known state without reporting anything (the startup snapshot). Closes any
    /// open window.
    public mutating func reset(addresses: [InterfaceAddress], links: [LinkState]) {
        addressTable = Dictionary(addresses.filter(\.isUsable).map { ($0.key, $0) }, uniquingKeysWith: { $1 })
        linkTable = Dictionary(links.map { ($0.interfaceIndex, $0) }, uniquingKeysWith: { $1 })
        window = nil
    }

    /// Replaces the known state with a fresh dump taken after events were lost (`ENOBUFS`), and
    /// reports the difference like any other change (it counts as one relevant event at `now`).
    public mutating func resynchronize(addresses: [InterfaceAddress], links: [LinkState], now: UInt64) {
        openOrExtendWindow(now: now)
        addressTable = Dictionary(addresses.filter(\.isUsable).map { ($0.key, $0) }, uniquingKeysWith: { $1 })
        linkTable = Dictionary(links.map { ($0.interfaceIndex, $0) }, uniquingKeysWith: { $1 })
    }

    /// Feeds one raw event received at `now` (monotonic nanoseconds). Non-state events (done,
    /// error, malformed…) are ignored.
    public mutating func handle(_ event: NetlinkEvent, now: UInt64) {
        switch event {
        case .newAddress(let address) where !address.isUsable:
            // Tentative or a duplicate: not (or no longer) an address a socket can use.
            if addressTable[address.key] != nil && !isIgnored(address) { openOrExtendWindow(now: now) }
            addressTable[address.key] = nil
        case .newAddress(let address):
            if addressTable[address.key] == nil && !isIgnored(address) { openOrExtendWindow(now: now) }
            addressTable[address.key] = address
        case .deletedAddress(let address):
            if addressTable[address.key] != nil && !isIgnored(address) { openOrExtendWindow(now: now) }
            addressTable[address.key] = nil
        case .newLink(var link):
            let previous = linkTable[link.interfaceIndex]
            if link.interfaceName == nil { link.interfaceName = previous?.interfaceName }
            if previous?.isOperational != link.isOperational && !isIgnored(link) { openOrExtendWindow(now: now) }
            linkTable[link.interfaceIndex] = link
        case .deletedLink(let link):
            if linkTable[link.interfaceIndex] != nil && !isIgnored(link) { openOrExtendWindow(now: now) }
            linkTable[link.interfaceIndex] = nil
            // The kernel removes the link's addresses too (and says so), but do not rely on it.
            for key in addressTable.keys where key.interfaceIndex == link.interfaceIndex { addressTable[key] = nil }
        case .done, .error, .overrun, .malformed:
            break
        }
    }

    /// When ``poll(now:)`` should next be called (monotonic nanoseconds), or nil with nothing
    /// pending.
    public var deadline: UInt64? {
        guard let window else { return nil }
        return min(
            window.lastEventAt &+ configuration.debounceMilliseconds * 1_000_000,
            window.openedAt &+ configuration.maximumDelayMilliseconds * 1_000_000)
    }

    /// Returns the debounced change if the window's deadline has passed at `now` and something
    /// differs; closes the window either way once the deadline has passed.
    public mutating func poll(now: UInt64) -> NetworkChange? {
        guard let window, let deadline, now >= deadline else { return nil }
        self.window = nil
        let change = difference(from: window)
        return change.isEmpty ? nil : change
    }

    /// The addresses known now (all of them, filter or not), sorted by interface then address.
    public var addresses: [InterfaceAddress] {
        addressTable.keys.sorted().compactMap { addressTable[$0].map(named) }
    }

    /// The links known now, sorted by index.
    public var links: [LinkState] {
        linkTable.keys.sorted().compactMap { linkTable[$0] }
    }

    private func isIgnored(_ address: InterfaceAddress) -> Bool {
        configuration.ignoresLoopbackAndLinkLocal && address.isLoopbackOrLinkLocal
    }

    private func isIgnored(_ link: LinkState) -> Bool {
        configuration.ignoresLoopbackAndLinkLocal && link.isLoopback
    }

    private mutating func openOrExtendWindow(now: UInt64) {
        if window == nil {
            window = Window(addresses: addressTable, links: linkTable, openedAt: now, lastEventAt: now)
        } else {
            window?.lastEventAt = now
        }
    }

    private func named(_ address: InterfaceAddress) -> InterfaceAddress {
        var address = address
        if let name = linkTable[address.interfaceIndex]?.interfaceName { address.interfaceName = name }
        return address
    }

    private func difference(from window: Window) -> NetworkChange {
        let ignores = configuration.ignoresLoopbackAndLinkLocal
        func keep(_ address: InterfaceAddress) -> Bool { !(ignores && address.isLoopbackOrLinkLocal) }
        func name(_ address: InterfaceAddress) -> InterfaceAddress {
            var address = address
            if let name = linkTable[address.interfaceIndex]?.interfaceName
                ?? window.links[address.interfaceIndex]?.interfaceName
            {
                address.interfaceName = name
            }
            return address
        }
        let added = Set(addressTable.keys).subtracting(window.addresses.keys).sorted()
            .compactMap { addressTable[$0] }.filter(keep).map(name)
        let removed = Set(window.addresses.keys).subtracting(addressTable.keys).sorted()
            .compactMap { window.addresses[$0] }.filter(keep).map(name)

        var down: [LinkState] = []
        var up: [LinkState] = []
        for index in Set(window.links.keys).union(linkTable.keys).sorted() {
            let before = window.links[index]
            let after = linkTable[index]
            guard let any = after ?? before, !(ignores && any.isLoopback) else { continue }
            let wasOperational = before?.isOperational ?? false
            let isOperational = after?.isOperational ?? false
            var state = any
            if state.interfaceName == nil { state.interfaceName = before?.interfaceName }
            // A deleted link is reported with its last flags minus up and running.
            if after == nil { state.flags &= ~(NetlinkABI.flagUp | NetlinkABI.flagRunning) }
            if wasOperational && !isOperational { down.append(state) }
            if !wasOperational && isOperational { up.append(state) }
        }
        return NetworkChange(addedAddresses: added, removedAddresses: removed, linksDown: down, linksUp: up)
    }
}
