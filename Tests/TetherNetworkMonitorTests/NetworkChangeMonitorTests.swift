import CTetherNet
import Foundation
import Glibc
import Synchronization
import Testing

@testable import TetherNetworkMonitor

/// The `ip` command (iproute2), if installed.
let ipCommand: String? = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
    FileManager.default.isExecutableFile(atPath: $0)
}

/// Runs `ip ARGS…` and returns its exit status.
@discardableResult
func ip(_ arguments: String...) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: ipCommand!)
    process.arguments = arguments
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

/// Runs several `ip` commands inside `namespace` from one `ip -batch` process, so they reach the
/// kernel microseconds apart whatever the machine's load (separate processes can be tens of
/// milliseconds apart on a busy machine, longer than a debounce window).
@discardableResult
func ipBatch(namespace: String, _ commands: [String]) throws -> Int32 {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("tether-ip-\(UInt32.random(in: 0...UInt32.max)).batch")
    try (commands.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(at: file) }
    return try ip("-n", namespace, "-batch", file.path)
}

/// Collects changes delivered on the monitor thread; the test awaits them with a time limit.
final class ChangeCollector: Sendable {
    private let changes = Mutex<[NetworkChange]>([])
    private let arrived = DispatchSemaphore(value: 0)

    func receive(_ change: NetworkChange) {
        changes.withLock { $0.append(change) }
        arrived.signal()
    }

    /// The next change, or nil after `timeoutMilliseconds`.
    func next(timeoutMilliseconds: Int = 3000) -> NetworkChange? {
        guard arrived.wait(timeout: .now() + .milliseconds(timeoutMilliseconds)) == .success else { return nil }
        return changes.withLock { $0.removeFirst() }
    }
}

/// A private network namespace with an operational veth pair (v0, v1), watched by a monitor
/// (debounce 100 ms) whose changes so far have gone by. Never touches the machine's namespace.
final class WatchedNamespace {
    let name: String
    let collector = ChangeCollector()
    var monitor: NetworkChangeMonitor!

    init(prefix: String) throws {
        name = "\(prefix)-\(UInt32.random(in: 0...UInt32.max))"
        try #require(try ip("netns", "add", name) == 0)
        try #require(try ip("-n", name, "link", "add", "v0", "type", "veth", "peer", "name", "v1") == 0)
        try #require(try ip("-n", name, "link", "set", "v0", "up") == 0)
        try #require(try ip("-n", name, "link", "set", "v1", "up") == 0)
        let collector = collector
        monitor = try NetworkChangeMonitor(
            configuration: .init(debounceMilliseconds: 100, networkNamespacePath: "/var/run/netns/\(name)")
        ) { collector.receive($0) }
        // The kernel may report the pair's carrier after the monitor started (linkwatch defers
        // it): wait until both ends are operational, then let that change (if any) go by, so the
        // steps after each see exactly their own change.
        let deadline = CTetherNet_monotonic_nanoseconds() + 5_000_000_000
        while operationalEnds < 2, CTetherNet_monotonic_nanoseconds() < deadline { usleep(10_000) }
        try #require(operationalEnds == 2)
        while collector.next(timeoutMilliseconds: 400) != nil {}
    }

    var operationalEnds: Int { monitor.currentLinks().filter { ["v0", "v1"].contains($0.interfaceName) && $0.isOperational }.count }

    deinit {
        monitor?.stop()
        _ = try? ip("netns", "del", name)
    }
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct NetworkChangeMonitorTests {
    @Test func oneShotDumpListsLoopbackOfThisNamespaceOnlyWhenAsked() throws {
        let all = try NetworkChangeMonitor.currentAddresses(includingLoopbackAndLinkLocal: true)
        #expect(all.contains { $0.address == .v4(127, 0, 0, 1) && $0.interfaceName == "lo" })
        let filtered = try NetworkChangeMonitor.currentAddresses()
        #expect(!filtered.contains { $0.address.isLoopback || $0.address.isLinkLocal })
    }

    @Test func aMissingNamespaceIsReportedAsAnError() {
        #expect(throws: NetworkMonitorError.namespaceUnavailable(path: "/var/run/netns/tether-no-such-ns", errno: ENOENT)) {
            try NetworkChangeMonitor(configuration: .init(networkNamespacePath: "/var/run/netns/tether-no-such-ns")) { _ in }
        }
    }

    /// The kernel's own duplicate address detection: an IPv6 address added to an operational
    /// link is tentative for 1–2 s, and the change naming it comes only once the kernel reports
    /// it settled (before that, a socket could not bind it).
    @Test(
        .enabled(if: getuid() == 0, "needs root for ip netns"),
        .enabled(if: ipCommand != nil, "needs iproute2"))
    func anIPv6AddressIsReportedOnceDuplicateAddressDetectionIsOver() throws {
        let watched = try WatchedNamespace(prefix: "tether-nm6")
        defer { withExtendedLifetime(watched) {} }  // the namespace lives to the test's end
        let (namespace, collector, monitor) = (watched.name, watched.collector, watched.monitor!)
        try #require(try ip("-n", namespace, "addr", "add", "fd00:77::1/64", "dev", "v0") == 0)
        // Whether the kernel still calls it tentative when the change arrives: it must not.
        let change = try #require(collector.next(timeoutMilliseconds: 10_000))
        let listing = try Self.output("-n", namespace, "-6", "-o", "addr", "show", "dev", "v0", "tentative")
        #expect(change.addedAddresses.map(\.address.description) == ["fd00:77::1"])
        #expect(!listing.contains("fd00:77::1"), "the change came while the address was tentative: \(listing)")
        #expect(monitor.currentAddresses().map(\.address.description) == ["fd00:77::1"])
    }

    /// Runs `ip ARGS…` and returns what it printed.
    static func output(_ arguments: String...) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ipCommand!)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Creates a private network namespace with a veth pair, watches it, and changes addresses
    /// and links inside it. Never touches the machine's own namespace.
    @Test(
        .enabled(if: getuid() == 0, "needs root for ip netns"),
        .enabled(if: ipCommand != nil, "needs iproute2"))
    func deliversDebouncedAddressAndLinkChangesFromANamespace() throws {
        let watched = try WatchedNamespace(prefix: "tether-nm")
        defer { withExtendedLifetime(watched) {} }  // the namespace lives to the test's end
        let (namespace, collector, monitor) = (watched.name, watched.collector, watched.monitor!)
        let changesBefore = monitor.statistics().changesDelivered
        #expect(monitor.currentAddresses().isEmpty)  // only link-local so far, filtered

        // An address added: one change naming it.
        let before = CTetherNet_monotonic_nanoseconds()
        try #require(try ip("-n", namespace, "addr", "add", "10.77.0.1/24", "dev", "v0") == 0)
        let ipReturned = CTetherNet_monotonic_nanoseconds()
        let added = try #require(collector.next())
        let delivered = CTetherNet_monotonic_nanoseconds()
        #expect(added.addedAddresses.map(\.description) == ["10.77.0.1/24 on v0 (#\(added.addedAddresses.first?.interfaceIndex ?? 0))"])
        #expect(added.removedAddresses.isEmpty)
        #expect(monitor.currentAddresses().map(\.address) == [.v4(10, 77, 0, 1)])
        let statistics = monitor.statistics()
        print(
            "netlink latency: ip spawn→event \(Double(statistics.lastEventNanoseconds &- before) / 1e6) ms, "
                + "ip exit→event \(Double(Int64(bitPattern: statistics.lastEventNanoseconds &- ipReturned)) / 1e6) ms, "
                + "event→delivery \(Double(delivered - statistics.lastEventNanoseconds) / 1e6) ms (debounce 100 ms)")

        // Removed then re-added within the window, then a different address: only the latter.
        try #require(
            try ipBatch(
                namespace: namespace,
                ["addr del 10.77.0.1/24 dev v0", "addr add 10.77.0.1/24 dev v0", "addr add 10.77.0.9/24 dev v0"]) == 0)
        let third = try #require(collector.next())
        #expect(third.addedAddresses.map(\.address) == [.v4(10, 77, 0, 9)])
        #expect(third.removedAddresses.isEmpty)

        // An address removed.
        try #require(try ip("-n", namespace, "addr", "del", "10.77.0.9/24", "dev", "v0") == 0)
        let removed = try #require(collector.next())
        #expect(removed.removedAddresses.map(\.address) == [.v4(10, 77, 0, 9)])
        #expect(removed.removedAddresses.first?.interfaceName == "v0")

        // The peer end down: v1 goes down and v0 loses its carrier (no longer running).
        try #require(try ip("-n", namespace, "link", "set", "v1", "down") == 0)
        let down = try #require(collector.next())
        #expect(Set(down.linksDown.compactMap(\.interfaceName)) == ["v0", "v1"])
        #expect(down.removedAddresses.isEmpty)  // 10.77.0.1 stays on v0; link-locals are filtered

        try #require(try ip("-n", namespace, "link", "set", "v1", "up") == 0)
        let up = try #require(collector.next())
        #expect(Set(up.linksUp.compactMap(\.interfaceName)) == ["v0", "v1"])

        // Deleting the pair: both down, the address gone.
        try #require(try ip("-n", namespace, "link", "del", "v0") == 0)
        let gone = try #require(collector.next())
        #expect(Set(gone.linksDown.compactMap(\.interfaceName)) == ["v0", "v1"])
        #expect(gone.removedAddresses.map(\.address) == [.v4(10, 77, 0, 1)])
        #expect(monitor.statistics().malformedMessages == 0)
        #expect(monitor.statistics().changesDelivered - changesBefore == 6)
    }

    @Test(
        .enabled(if: getuid() == 0, "needs root for ip netns"),
        .enabled(if: ipCommand != nil, "needs iproute2"))
    func changesStreamFinishesWhenTheMonitorStops() async throws {
        let namespace = "tether-nm-\(UInt32.random(in: 0...UInt32.max))"
        try #require(try ip("netns", "add", namespace) == 0)
        defer { _ = try? ip("netns", "del", namespace) }
        try #require(try ip("-n", namespace, "link", "add", "v0", "type", "veth", "peer", "name", "v1") == 0)
        let (monitor, changes) = try NetworkChangeMonitor.changes(
            configuration: .init(debounceMilliseconds: 50, networkNamespacePath: "/var/run/netns/\(namespace)"))
        let addresses = try NetworkChangeMonitor.currentAddresses(networkNamespacePath: "/var/run/netns/\(namespace)")
        #expect(addresses.isEmpty)
        try #require(try ip("-n", namespace, "addr", "add", "10.77.1.1/24", "dev", "v0") == 0)
        var iterator = changes.makeAsyncIterator()
        let first = await iterator.next()
        #expect(first?.addedAddresses.map(\.address) == [.v4(10, 77, 1, 1)])
        monitor.stop()
        #expect(await iterator.next() == nil)
    }
}
