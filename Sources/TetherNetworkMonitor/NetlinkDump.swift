import CTetherNet
import Glibc

/// A one-shot rtnetlink dump of links and addresses on the calling thread's network namespace.
enum NetlinkDump {
    /// Dumps links, then addresses, on a fresh unsubscribed socket.
    /// - Parameter timeoutMilliseconds: limit for each of the two dumps.
    static func snapshot(timeoutMilliseconds: Int = 2000) throws(NetworkMonitorError) -> (addresses: [InterfaceAddress], links: [LinkState]) {
        let fd = CTetherNet_netlink_route_open(0, 1 << 20)
        guard fd >= 0 else { throw .systemCall("socket(NETLINK_ROUTE)", errno: errno) }
        defer { close(fd) }
        var links: [LinkState] = []
        for event in try dump(fd: fd, type: NetlinkABI.getLink, sequence: 1, timeoutMilliseconds: timeoutMilliseconds) {
            if case .newLink(let link) = event { links.append(link) }
        }
        var addresses: [InterfaceAddress] = []
        let names = Dictionary(links.map { ($0.interfaceIndex, $0.interfaceName) }, uniquingKeysWith: { $1 })
        for event in try dump(fd: fd, type: NetlinkABI.getAddress, sequence: 2, timeoutMilliseconds: timeoutMilliseconds) {
            if case .newAddress(var address) = event {
                if let name = names[address.interfaceIndex] ?? nil { address.interfaceName = name }
                addresses.append(address)
            }
        }
        return (addresses, links)
    }

    private static func dump(
        fd: Int32, type: UInt16, sequence: UInt32, timeoutMilliseconds: Int
    ) throws(NetworkMonitorError) -> [NetlinkEvent] {
        guard CTetherNet_netlink_request_dump(fd, type, sequence) == 0 else {
            throw .systemCall("sendto(NETLINK_ROUTE dump)", errno: errno)
        }
        let deadline = CTetherNet_monotonic_nanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var events: [NetlinkEvent] = []
        while true {
            var truncated: Int32 = 0
            let length = buffer.withUnsafeMutableBytes {
                CTetherNet_netlink_receive(fd, $0.baseAddress, $0.count, &truncated)
            }
            if length < 0 {
                let code = errno
                guard code == EAGAIN || code == EWOULDBLOCK else { throw .systemCall("recvmsg(NETLINK_ROUTE)", errno: code) }
                let now = CTetherNet_monotonic_nanoseconds()
                guard now < deadline else { throw .dumpTimedOut(milliseconds: timeoutMilliseconds) }
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&pfd, 1, Int32((deadline - now + 999_999) / 1_000_000))
                continue
            }
            let parsed = buffer.withUnsafeBytes { NetlinkMessageParser.parse(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
            for event in parsed {
                switch event {
                case .done(let doneSequence) where doneSequence == sequence:
                    return events
                case .error(let code, let errorSequence) where errorSequence == sequence && code != 0:
                    throw .dumpFailed(code: code)
                default:
                    events.append(event)
                }
            }
        }
    }
}
