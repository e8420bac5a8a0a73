import CTetherNet
import Foundation
import Glibc
import TetherFaults

/// A UDP socket on 127.0.0.1 playing one ICE agent in relay tests.
final class TestPeer {
    let fd: Int32
    let port: UInt16

    init() throws {
        var bound: UInt16 = 0
        fd = CTetherNet_udp4_open(0x7F00_0001, 0, 1 << 20, &bound)
        guard fd >= 0 else { throw UDPRelayError.systemCall("udp4_open", errno: errno) }
        port = bound
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8], toPort port: UInt16) {
        let sent = bytes.withUnsafeBytes { CTetherNet_udp4_send(fd, $0.baseAddress, $0.count, 0x7F00_0001, port) }
        precondition(sent == bytes.count, "send failed: errno \(errno)")
    }

    func send(sequence: UInt32, toPort port: UInt16, padding: Int = 0) {
        var bytes = withUnsafeBytes(of: sequence.bigEndian, Array.init)
        bytes += [UInt8](repeating: 0xA5, count: padding)
        send(bytes, toPort: port)
    }

    /// Waits up to `timeoutMilliseconds` for one datagram.
    func receive(timeoutMilliseconds: Int32 = 2000) -> (bytes: [UInt8], source: UDPRelayEndpoint)? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = CTetherNet_monotonic_nanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            var address: UInt32 = 0
            var port: UInt16 = 0
            var truncated: Int32 = 0
            let length = buffer.withUnsafeMutableBytes {
                CTetherNet_udp4_receive(fd, $0.baseAddress, $0.count, &address, &port, &truncated)
            }
            if length >= 0 {
                return (Array(buffer[0..<length]), UDPRelayEndpoint(address: address, port: port))
            }
            let now = CTetherNet_monotonic_nanoseconds()
            guard now < deadline else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            _ = poll(&pfd, 1, Int32((deadline - now + 999_999) / 1_000_000))
        }
    }

    /// Receives datagrams carrying a big-endian UInt32 sequence number until `timeoutMilliseconds`
    /// pass without one.
    func receiveSequences(quietMilliseconds: Int32) -> [UInt32] {
        var sequences: [UInt32] = []
        while let (bytes, _) = receive(timeoutMilliseconds: quietMilliseconds) {
            sequences.append(Self.sequence(of: bytes))
        }
        return sequences
    }

    /// Whatever is already pending, without waiting.
    func drainPending() -> [UInt32] {
        receiveSequences(quietMilliseconds: 0)
    }

    static func sequence(of bytes: [UInt8]) -> UInt32 {
        bytes.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }
}

/// Waits (polling every millisecond) until `condition` holds or `timeoutSeconds` pass.
func waitUntil(timeoutSeconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = CTetherNet_monotonic_nanoseconds() + UInt64(timeoutSeconds * 1e9)
    while !condition() {
        if CTetherNet_monotonic_nanoseconds() > deadline { return false }
        usleep(1000)
    }
    return true
}
