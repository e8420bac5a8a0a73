import Glibc

/// A UDP socket on 127.0.0.1 that takes every request and never answers: a STUN or TURN server
/// out of reach, which libnice gives up on only after its retransmissions (about 2 s). Closed
/// when released.
public final class SilentUDPServer: Sendable {
    private let fd: Int32
    /// The port it listens on (chosen by the kernel).
    public let port: UInt16

    /// - Throws: `SilentUDPServer.Failure` when no socket can be bound.
    public init() throws(Failure) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = fd >= 0 && withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        port = UInt16(bigEndian: address.sin_port)
        guard bound else {
            if fd >= 0 { close(fd) }
            throw Failure(errno: errno)
        }
    }

    deinit { close(fd) }

    /// Binding a UDP socket on 127.0.0.1 failed with `errno`.
    public struct Failure: Error, Sendable {
        public let errno: Int32
    }
}
