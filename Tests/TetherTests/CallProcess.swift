import Foundation
import Testing
import Synchronization
import TetherFaultLab
import TetherRealtime
import TetherTestSupport

/// A `tether call` process (optionally inside a network namespace), or a third-party peer's
/// driver that speaks the same JSON lines, on the fault lab's `JSONLineProcess`: these are the
/// tests' views of its lines (instants in monotonic nanoseconds).
final class CallProcess: Sendable {
    let name: String
    let lines: JSONLineProcess

    /// The `tether` executable built next to the test bundle.
    static var tetherExecutable: String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        var dir = bundle
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("tether").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir.deleteLastPathComponent()
        }
        return bundle.appendingPathComponent("tether").path
    }

    /// A process of another program that speaks the same JSON lines (a third-party peer's driver).
    convenience init(name: String, program: [String]) throws {
        try self.init(name: name, namespace: nil, arguments: program, executable: true)
    }

    /// - Parameter stderrPath: a file that receives the process's stderr (its log); none: a file
    ///   beside the test's log, shown when the test fails (`TestLog`), or discarded outside
    ///   `scripts/run-tests.sh`.
    init(name: String, namespace: String? = nil, arguments: [String], executable: Bool = false, stderrPath: String? = nil) throws {
        self.name = name
        let (path, fullArguments): (String, [String])
        if executable {
            (path, fullArguments) = ("/usr/bin/env", arguments)
        } else if let namespace {
            (path, fullArguments) = ("/usr/sbin/ip", ["netns", "exec", namespace, Self.tetherExecutable, "call"] + arguments)
        } else {
            (path, fullArguments) = (Self.tetherExecutable, ["call"] + arguments)
        }
        lines = try JSONLineProcess(
            name: name, executable: path, arguments: fullArguments, errorPath: stderrPath ?? TestLog.childErrorPath(process: name))
    }

    /// Sends every line this process prints to `peer`'s standard input (the signaling relay).
    /// `rewrite` changes each line on its way (a test playing a peer that hides its addresses).
    func relayLines(to peer: CallProcess, rewrite: (@Sendable (String) -> String)? = nil) {
        lines.relayLines(to: peer.lines, rewrite: rewrite)
    }

    func send(_ line: String) {
        lines.send(line)
    }

    /// Asks a third-party peer's driver for a `report` line until `until` holds for one (a new
    /// request every half second) or `timeoutSeconds` pass; returns the last report, if any.
    func report(timeoutSeconds: Double, until: ([String: Any]) -> Bool) async -> [String: Any]? {
        let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutSeconds * 1e9)
        var last: [String: Any]?
        repeat {
            let before = objects.count
            send("report")
            let asked = MonotonicClock.nanoseconds()
            while MonotonicClock.nanoseconds() < max(deadline, asked + 10_000_000_000) {
                if let r = objects.dropFirst(before).last(where: { $0.object["type"] as? String == "report" }) {
                    last = r.object
                    break
                }
                try? await Task.sleep(for: .milliseconds(10))
            }
            if let last, until(last) { return last }
            try? await Task.sleep(for: .milliseconds(500))
        } while MonotonicClock.nanoseconds() < deadline
        return last
    }

    /// The last `statistics` line a `tether call` printed.
    var lastStatistics: [String: Any]? { objects.last { $0.object["type"] as? String == "statistics" }?.object }

    /// The parsed JSON objects printed so far.
    var objects: [(object: [String: Any], atNanoseconds: UInt64)] {
        lines.recorded.compactMap { line in line.object.map { ($0, line.atNanoseconds) } }
    }

    /// The states printed so far, in order.
    var states: [String] { objects.compactMap { $0.object["type"] as? String == "state" ? $0.object["state"] as? String : nil } }

    /// Waits for a state line `state` printed after `since`; returns its arrival instant.
    func waitFor(state: String, since: UInt64 = 0, timeoutSeconds: Double) async -> UInt64? {
        let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutSeconds * 1e9)
        while MonotonicClock.nanoseconds() < deadline {
            if let hit = objects.first(where: {
                $0.atNanoseconds >= since && $0.object["type"] as? String == "state" && $0.object["state"] as? String == state
            }) {
                return hit.atNanoseconds
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// Waits for the process to exit (up to `timeoutSeconds`, then kills it) and for its last
    /// lines; returns its status.
    func waitForExit(timeoutSeconds: Double) async -> Int32 {
        await lines.waitForExit(timeoutSeconds: timeoutSeconds)
    }
}

/// Runs a command (for network namespace set-up); returns its exit status.
@discardableResult
func run(_ arguments: [String]) -> Int32 {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = arguments
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    do { try p.run() } catch { return -1 }
    p.waitUntilExit()
    return p.terminationStatus
}

/// Runs a command and returns what it printed on standard output ("" when it could not run).
func commandOutput(_ arguments: [String]) -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = arguments
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = FileHandle.nullDevice
    do { try p.run() } catch { return "" }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

/// Two network namespaces joined by a veth pair (`a` on 10.X.0.1, `b` on 10.X.0.2, IPv6 off,
/// loopback up), each egress shaped with `tc tbf` at `kilobits` (300 ms queue) when given.
/// `delete()` removes both.
struct ShapedNamespacePair {
    let a: String
    let b: String
    let addressA: String
    let addressB: String

    init(prefix: String, subnet: Int, kilobits: Int?) async throws {
        let tag = String(UInt32.random(in: 0..<UInt32.max), radix: 16)
        a = "\(prefix)-a-\(tag)"
        b = "\(prefix)-b-\(tag)"
        addressA = "10.\(subnet).0.1"
        addressB = "10.\(subnet).0.2"
        try #require(run(["ip", "netns", "add", a]) == 0)
        try #require(run(["ip", "netns", "add", b]) == 0)
        for ns in [a, b] {
            run(["ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
        }
        try #require(run(["ip", "link", "add", "va", "netns", a, "type", "veth", "peer", "name", "vb", "netns", b]) == 0)
        try #require(run(["ip", "-n", a, "addr", "add", "\(addressA)/24", "dev", "va"]) == 0)
        try #require(run(["ip", "-n", b, "addr", "add", "\(addressB)/24", "dev", "vb"]) == 0)
        for (ns, link) in [(a, "va"), (b, "vb")] {
            try #require(run(["ip", "-n", ns, "link", "set", link, "up"]) == 0)
            if let kilobits {
                try #require(run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", link, "root", "tbf", "rate", "\(kilobits)kbit", "burst", "3000", "latency", "300ms"]) == 0)
            }
        }
        let upA = await linkIsOperational(namespace: a, link: "va")
        let upB = await linkIsOperational(namespace: b, link: "vb")
        try #require(upA && upB)
    }

    func delete() {
        run(["ip", "netns", "del", a])
        run(["ip", "netns", "del", b])
    }

    /// An egress qdisc's counters: bytes and packets sent, packets dropped.
    struct Counters {
        var bytes = 0.0, packets = 0.0, dropped = 0.0
        /// Kilobits per second from `earlier` to these over `seconds`, and the share dropped.
        func since(_ earlier: Counters, seconds: Double) -> (kilobits: Double, droppedShare: Double) {
            let sent = packets - earlier.packets
            let lost = dropped - earlier.dropped
            return ((bytes - earlier.bytes) * 8 / seconds / 1000, lost / max(1, sent + lost))
        }
    }

    /// The counters of A's egress (`fromA`) or B's.
    func egress(fromA: Bool) -> Counters {
        let text = commandOutput(["ip", "netns", "exec", fromA ? a : b, "tc", "-s", "qdisc", "show", "dev", fromA ? "va" : "vb"])
        let words = text.split(whereSeparator: { " \n,()".contains($0) }).map(String.init)
        func after(_ word: String) -> Double {
            guard let i = words.firstIndex(of: word), i + 1 < words.count else { return 0 }
            return Double(words[i + 1]) ?? 0
        }
        return Counters(bytes: after("Sent"), packets: after("bytes"), dropped: after("dropped"))
    }
}

/// Whether network namespaces can be made here (root and iproute2).
var canMakeNetworkNamespaces: Bool {
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
}

/// Waits (up to 5 s) until `link` in `namespace` is operationally up.
func linkIsOperational(namespace: String, link: String) async -> Bool {
    for _ in 0..<250 {
        if run(["sh", "-c", "ip -n \(namespace) -o link show \(link) | grep -q 'state UP'"]) == 0
        {
            return true
        }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return false
}
