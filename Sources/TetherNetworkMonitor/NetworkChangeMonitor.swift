import CTetherNet
import Foundation
import Glibc
import Synchronization

/// Watches the local network (addresses and links) through rtnetlink and delivers debounced
/// ``NetworkChange`` values: one per burst of kernel events, after the burst went quiet.
///
/// A `NETLINK_ROUTE` socket subscribed to `RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR`
/// is read on the monitor's own thread (`poll(2)` with a stop eventfd). Messages are decoded by
/// ``NetlinkMessageParser`` (malformed ones are counted and skipped) and fed to a
/// ``NetworkChangeDebouncer``. If the kernel drops events (`ENOBUFS`), the monitor takes a fresh
/// dump and reports the difference, so no change is silently lost.
///
/// Optionally the monitor watches another network namespace: its thread enters the namespace
/// (`setns(CLONE_NEWNET)`, which affects only that thread) before opening any socket.
/// The thread ends with ``stop()`` (or deinit).
public final class NetworkChangeMonitor: Sendable {
    /// Options of a monitor.
    public struct Configuration: Sendable, Equatable {
        /// Quiet period before a burst of events is delivered as one change, milliseconds.
        public var debounceMilliseconds: UInt64
        /// Longest a change may be held while events keep arriving, milliseconds.
        public var maximumDelayMilliseconds: UInt64
        /// Leave loopback and link-local addresses, and loopback links, out of changes.
        public var ignoresLoopbackAndLinkLocal: Bool
        /// A network namespace file (such as `/var/run/netns/NAME`) to watch instead of the
        /// process's own namespace; nil for the process's namespace.
        public var networkNamespacePath: String?
        /// Limit for the thread to open its socket and take the first dump, milliseconds.
        public var startupTimeoutMilliseconds: Int

        /// Creates options; durations in milliseconds.
        public init(
            debounceMilliseconds: UInt64 = 300, maximumDelayMilliseconds: UInt64 = 2000,
            ignoresLoopbackAndLinkLocal: Bool = true, networkNamespacePath: String? = nil,
            startupTimeoutMilliseconds: Int = 3000
        ) {
            self.debounceMilliseconds = debounceMilliseconds
            self.maximumDelayMilliseconds = maximumDelayMilliseconds
            self.ignoresLoopbackAndLinkLocal = ignoresLoopbackAndLinkLocal
            self.networkNamespacePath = networkNamespacePath
            self.startupTimeoutMilliseconds = startupTimeoutMilliseconds
        }

        var debouncer: NetworkChangeDebouncer.Configuration {
            .init(
                debounceMilliseconds: debounceMilliseconds, maximumDelayMilliseconds: maximumDelayMilliseconds,
                ignoresLoopbackAndLinkLocal: ignoresLoopbackAndLinkLocal)
        }
    }

    /// The options in use.
    public let configuration: Configuration
    private let core: MonitorCore

    /// Starts monitoring. Returns once the monitor thread has subscribed and taken its first
    /// snapshot (see ``currentAddresses(includingLoopbackAndLinkLocal:)``); changes after that are
    /// reported.
    /// - Parameter onChange: receives each debounced change.
    ///   - Note: Called on the monitor thread; return quickly (hand the change to your own queue).
    /// - Throws: ``NetworkMonitorError`` if the namespace, socket or first dump fails.
    public convenience init(
        configuration: Configuration = Configuration(), onChange: @escaping @Sendable (NetworkChange) -> Void
    ) throws(NetworkMonitorError) {
        try self.init(configuration: configuration, onChange: onChange, onStopped: {})
    }

    init(
        configuration: Configuration, onChange: @escaping @Sendable (NetworkChange) -> Void,
        onStopped: @escaping @Sendable () -> Void
    ) throws(NetworkMonitorError) {
        let wake = CTetherNet_eventfd_create()
        guard wake >= 0 else { throw .systemCall("eventfd", errno: errno) }
        self.configuration = configuration
        core = MonitorCore(configuration: configuration, wake: wake, onChange: onChange, onStopped: onStopped)
        let core = self.core
        let thread = Thread { core.run() }
        thread.name = "tether-netmon"
        thread.start()
        _ = core.started.wait(timeout: .now() + .milliseconds(configuration.startupTimeoutMilliseconds))
        let failure: NetworkMonitorError? = core.startup.withLock { startup in
            switch startup {
            case .running: return nil
            case .failed(let error): return error
            case .pending: return .startupTimedOut(milliseconds: configuration.startupTimeoutMilliseconds)
            }
        }
        if let failure {
            core.stop()
            throw failure
        }
    }

    /// Starts a monitor whose changes arrive as an `AsyncStream` (the newest 64 are buffered).
    /// The stream finishes when the monitor stops; keep the monitor alive while iterating.
    /// - Throws: ``NetworkMonitorError`` as ``init(configuration:onChange:)``.
    public static func changes(
        configuration: Configuration = Configuration()
    ) throws(NetworkMonitorError) -> (monitor: NetworkChangeMonitor, changes: AsyncStream<NetworkChange>) {
        let (stream, continuation) = AsyncStream.makeStream(of: NetworkChange.self, bufferingPolicy: .bufferingNewest(64))
        let monitor = try NetworkChangeMonitor(
            configuration: configuration, onChange: { continuation.yield($0) }, onStopped: { continuation.finish() })
        return (monitor, stream)
    }

    deinit {
        core.stop()
    }

    /// The usable local addresses as the monitor knows them now (first dump plus every event
    /// since; no tentative or duplicate IPv6 address), sorted by interface index then address.
    /// - Parameter includingLoopbackAndLinkLocal: also list 127/8, ::1, 169.254/16, fe80::/10.
    public func currentAddresses(includingLoopbackAndLinkLocal: Bool = false) -> [InterfaceAddress] {
        let all = core.snapshot.withLock { $0.addresses }
        return includingLoopbackAndLinkLocal ? all : all.filter { !$0.isLoopbackOrLinkLocal }
    }

    /// The links as the monitor knows them now, sorted by index.
    public func currentLinks() -> [LinkState] {
        core.snapshot.withLock { $0.links }
    }

    /// A one-shot `RTM_GETADDR` dump (no monitor needed), sorted by interface index then
    /// address, with interface names. Blocks for at most a few milliseconds normally.
    /// - Parameters:
    ///   - networkNamespacePath: dump this namespace instead (from a short-lived thread).
    ///   - includingLoopbackAndLinkLocal: also list loopback and link-local addresses.
    /// - Throws: ``NetworkMonitorError``.
    public static func currentAddresses(
        networkNamespacePath: String? = nil, includingLoopbackAndLinkLocal: Bool = false
    ) throws(NetworkMonitorError) -> [InterfaceAddress] {
        let dump: (addresses: [InterfaceAddress], links: [LinkState])
        if let networkNamespacePath {
            let result = Mutex<Result<[InterfaceAddress], NetworkMonitorError>?>(nil)
            let done = DispatchSemaphore(value: 0)
            let thread = Thread {
                let outcome: Result<[InterfaceAddress], NetworkMonitorError>
                do throws(NetworkMonitorError) {
                    try MonitorCore.enterNamespace(networkNamespacePath)
                    outcome = .success(try NetlinkDump.snapshot().addresses)
                } catch {
                    outcome = .failure(error)
                }
                result.withLock { $0 = outcome }
                done.signal()
            }
            thread.start()
            done.wait()
            let outcome = result.withLock { $0 }!
            dump = (try outcome.get(), [])
        } else {
            dump = try NetlinkDump.snapshot()
        }
        var debouncer = NetworkChangeDebouncer()
        debouncer.reset(addresses: dump.addresses, links: dump.links)
        let all = debouncer.addresses
        return includingLoopbackAndLinkLocal ? all : all.filter { !$0.isLoopbackOrLinkLocal }
    }

    /// A snapshot of the monitor's counters.
    public func statistics() -> NetworkMonitorStatistics {
        core.statistics.withLock { $0 }
    }

    /// Stops the monitor thread and closes its sockets; blocks until the thread has ended (at
    /// most one poll wake-up). No change is delivered after it returns. Idempotent.
    /// - Important: Do not call it from `onChange` (the monitor thread would wait for itself).
    public func stop() {
        core.stop()
    }
}

/// Counters of a ``NetworkChangeMonitor``.
public struct NetworkMonitorStatistics: Sendable, Equatable {
    /// Netlink messages decoded from the subscription socket (events of every kind).
    public var messagesReceived: UInt64 = 0
    /// Messages (or buffer tails) skipped as malformed.
    public var malformedMessages: UInt64 = 0
    /// Times the kernel dropped events (`ENOBUFS`/`NLMSG_OVERRUN`) and a resync dump was taken.
    public var overruns: UInt64 = 0
    /// Debounced changes delivered.
    public var changesDelivered: UInt64 = 0
    /// CLOCK_MONOTONIC instant of the last address or link event, nanoseconds (0 = none yet).
    public var lastEventNanoseconds: UInt64 = 0
    /// CLOCK_MONOTONIC instant of the last delivered change, nanoseconds (0 = none yet).
    public var lastChangeNanoseconds: UInt64 = 0

    /// All zero.
    public init() {}
}

/// Owns the monitor thread's resources; separate so the thread does not keep the public
/// object alive.
final class MonitorCore: Sendable {
    enum Startup: Sendable {
        case pending
        case running
        case failed(NetworkMonitorError)
    }

    struct Snapshot: Sendable {
        var addresses: [InterfaceAddress] = []
        var links: [LinkState] = []
    }

    let configuration: NetworkChangeMonitor.Configuration
    let wake: Int32
    let onChange: @Sendable (NetworkChange) -> Void
    let onStopped: @Sendable () -> Void
    let startup = Mutex(Startup.pending)
    let snapshot = Mutex(Snapshot())
    let statistics = Mutex(NetworkMonitorStatistics())
    /// Set once by `stop()`; read by the thread after each wake-up. Releasing/acquiring so the
    /// thread observes the request together with everything before it.
    let stopRequested = Atomic<Bool>(false)
    let stopped = Mutex(false)
    let started = DispatchSemaphore(value: 0)
    let finished = DispatchSemaphore(value: 0)

    init(
        configuration: NetworkChangeMonitor.Configuration, wake: Int32,
        onChange: @escaping @Sendable (NetworkChange) -> Void, onStopped: @escaping @Sendable () -> Void
    ) {
        self.configuration = configuration
        self.wake = wake
        self.onChange = onChange
        self.onStopped = onStopped
    }

    func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        stopRequested.store(true, ordering: .releasing)
        _ = CTetherNet_eventfd_signal(wake)
        finished.wait()
        close(wake)
        onStopped()
    }

    /// Moves the calling thread into the network namespace at `path`.
    static func enterNamespace(_ path: String) throws(NetworkMonitorError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .namespaceUnavailable(path: path, errno: errno) }
        defer { close(fd) }
        guard CTetherNet_setns_network(fd) == 0 else { throw .namespaceUnavailable(path: path, errno: errno) }
    }

    private func fail(_ error: NetworkMonitorError) {
        startup.withLock { $0 = .failed(error) }
        started.signal()
    }

    /// The monitor thread.
    func run() {
        defer { finished.signal() }
        if let path = configuration.networkNamespacePath {
            do throws(NetworkMonitorError) {
                try Self.enterNamespace(path)
            } catch {
                return fail(error)
            }
        }
        let groups = NetlinkABI.groupLink | NetlinkABI.groupIPv4Address | NetlinkABI.groupIPv6Address
        // Subscribe before the dump so nothing between the two is missed (events that repeat
        // the dump are idempotent in the debouncer).
        let socket = CTetherNet_netlink_route_open(groups, 4 << 20)
        guard socket >= 0 else { return fail(.systemCall("socket(NETLINK_ROUTE)", errno: errno)) }
        defer { close(socket) }
        var debouncer = NetworkChangeDebouncer(configuration: configuration.debouncer)
        do throws(NetworkMonitorError) {
            let dump = try NetlinkDump.snapshot()
            debouncer.reset(addresses: dump.addresses, links: dump.links)
        } catch {
            return fail(error)
        }
        publish(debouncer)
        startup.withLock { $0 = .running }
        started.signal()

        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        var fds = [
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while !stopRequested.load(ordering: .acquiring) {
            var timeoutMilliseconds: Int32 = -1
            if let deadline = debouncer.deadline {
                let now = CTetherNet_monotonic_nanoseconds()
                timeoutMilliseconds = deadline > now ? Int32(min((deadline - now + 999_999) / 1_000_000, 60_000)) : 0
            }
            for index in fds.indices { fds[index].revents = 0 }
            if poll(&fds, nfds_t(fds.count), timeoutMilliseconds) < 0, errno != EINTR { break }
            if stopRequested.load(ordering: .acquiring) { break }
            if fds[1].revents != 0 { CTetherNet_eventfd_drain(wake) }
            if fds[0].revents != 0 && readEvents(socket: socket, buffer: buffer, debouncer: &debouncer) {
                publish(debouncer)
            }
            let now = CTetherNet_monotonic_nanoseconds()
            if let change = debouncer.poll(now: now) {
                statistics.withLock {
                    $0.changesDelivered += 1
                    $0.lastChangeNanoseconds = now
                }
                onChange(change)
            }
        }
    }

    /// Reads everything pending; returns whether the known state may have changed.
    private func readEvents(
        socket: Int32, buffer: UnsafeMutableRawBufferPointer, debouncer: inout NetworkChangeDebouncer
    ) -> Bool {
        var changed = false
        for _ in 0..<256 {
            var truncated: Int32 = 0
            let length = CTetherNet_netlink_receive(socket, buffer.baseAddress, buffer.count, &truncated)
            let now = CTetherNet_monotonic_nanoseconds()
            if length < 0 {
                let code = errno
                if code == ENOBUFS {
                    resynchronize(&debouncer, now: now)
                    changed = true
                    continue
                }
                return changed  // EAGAIN: drained
            }
            let events = NetlinkMessageParser.parse(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
            var malformed: UInt64 = truncated != 0 ? 1 : 0
            var stateEvents = false
            var overrun = false
            for event in events {
                switch event {
                case .malformed: malformed += 1
                case .overrun: overrun = true
                case .newAddress, .deletedAddress, .newLink, .deletedLink:
                    stateEvents = true
                    debouncer.handle(event, now: now)
                case .done, .error: break
                }
            }
            statistics.withLock {
                $0.messagesReceived += UInt64(events.count)
                $0.malformedMessages += malformed
                if stateEvents { $0.lastEventNanoseconds = now }
            }
            if overrun || truncated != 0 { resynchronize(&debouncer, now: now) }
            changed = changed || stateEvents || overrun || truncated != 0
        }
        return changed
    }

    private func resynchronize(_ debouncer: inout NetworkChangeDebouncer, now: UInt64) {
        statistics.withLock { $0.overruns += 1 }
        // On failure keep the old state; the next event or overrun tries again.
        if let dump = try? NetlinkDump.snapshot() {
            debouncer.resynchronize(addresses: dump.addresses, links: dump.links, now: now)
        }
    }

    private func publish(_ debouncer: NetworkChangeDebouncer) {
        let current = Snapshot(addresses: debouncer.addresses, links: debouncer.links)
        snapshot.withLock { $0 = current }
    }
}
