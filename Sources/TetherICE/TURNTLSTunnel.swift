import CTetherTLSTunnel

/// TURN over TLS (`turns:`, RFC 8656 §3.1) for one ICE transport: a loopback listener that libnice
/// is given as a TURN-over-TCP server, each of whose connections is carried to the real server
/// over TLS, leaving from the address libnice's connection came from.
///
/// libnice 0.1.21 has a TURN-TLS relay type, but it speaks TLS only in its Google and Microsoft
/// compatibility modes (a fixed "pseudo-SSL" greeting); in RFC 5245 mode it sends TURN over plain
/// TCP. The server's certificate is verified against the system's trusted certificates (or a PEM
/// file) and the server's name (or, without one, its IP address).
public final class TURNTLSTunnel: @unchecked Sendable {
    private let handle: OpaquePointer

    /// The loopback address and port libnice connects to.
    public let listenAddress: String
    public let listenPort: UInt16

    /// Starts the tunnel's listener and thread.
    /// - Throws: `.invalidServer` when the server is not an IP literal, `.turnTLSUnavailable` when
    ///   the trusted certificates cannot be loaded or the listener cannot be opened.
    public init(server: ICEServer, handshakeTimeoutSeconds: Int = 10) throws(ICETransportError) {
        var error = [CChar](repeating: 0, count: 256)
        let started: OpaquePointer? = server.address.withCString { address in
            (server.serverName ?? "").withCString { name in
                (server.trustedCertificatesPath ?? "").withCString { ca in
                    var options = CTetherTLSTunnelOptions(
                        server_address: address, server_port: server.port, server_name: name, ca_file: ca,
                        handshake_timeout_seconds: Int32(clamping: handshakeTimeoutSeconds))
                    return CTetherTLSTunnel_start(&options, &error, error.count)
                }
            }
        }
        guard let started else {
            let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if message.contains("not an IP literal") { throw .invalidServer(server.address) }
            throw .turnTLSUnavailable(message)
        }
        handle = started
        listenAddress = String(cString: CTetherTLSTunnel_listen_address(started))
        listenPort = CTetherTLSTunnel_listen_port(started)
    }

    deinit { CTetherTLSTunnel_stop(handle) }

    /// TLS sessions established with the server so far.
    public var sessions: Int { Int(clamping: CTetherTLSTunnel_sessions(handle)) }
    /// Connections that failed: connect, handshake, a refused certificate, the server closing.
    public var failures: Int { Int(clamping: CTetherTLSTunnel_failures(handle)) }
    /// Connections open now.
    public var openConnections: Int { Int(CTetherTLSTunnel_open_connections(handle)) }
    /// Bytes carried to and from the server so far (TURN framing included, TLS's not).
    public var bytesCarried: (sent: UInt64, received: UInt64) {
        (CTetherTLSTunnel_bytes_sent(handle), CTetherTLSTunnel_bytes_received(handle))
    }
    /// The protocol version and cipher of the newest session (`TLSv1.3 TLS_AES_256_GCM_SHA384`).
    public var lastSession: String? { text(CTetherTLSTunnel_last_session) }
    /// Why the newest failed connection failed.
    public var lastFailure: String? { text(CTetherTLSTunnel_last_error) }

    private func text(_ read: (OpaquePointer?, UnsafeMutablePointer<CChar>?, Int) -> Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard read(handle, &buffer, buffer.count) != 0 else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
