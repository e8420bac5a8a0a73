/// A STUN or TURN server, by IP address (libnice takes literals; resolve names first).
public struct ICEServer: Sendable, Equatable {
    /// How Tether reaches a TURN server (the relayed candidates are UDP either way).
    public enum Transport: String, Sendable, Equatable, CaseIterable {
        /// TURN over UDP (RFC 8656), the default.
        case udp
        /// TURN over TCP to the server (RFC 8656 §3.1; the relayed side stays UDP): for networks that block
        /// UDP, where only a TCP connection to the server gets out.
        case tcp
        /// TURN over TLS on TCP (`turns:`, RFC 8656 §3.1; the relayed side stays UDP), usually on
        /// port 443: for networks where only HTTPS gets out. The server's certificate is verified
        /// against ``ICEServer/trustedCertificatesPath`` (or the system's store) and
        /// ``ICEServer/serverName`` (or, without one, the address).
        case tls
    }

    /// IPv4 or IPv6 literal.
    public var address: String
    /// Port (UDP or TCP, per ``transport``).
    public var port: UInt16
    /// TURN username (ignored for STUN).
    public var username: String
    /// TURN password (ignored for STUN). Never logged.
    public var password: String
    /// How a TURN server is reached (ignored for STUN, which is UDP).
    public var transport: Transport
    /// For TURN over TLS: the name the server's certificate must carry, also sent as SNI (the
    /// name of the `turns:` URL that ``address`` was resolved from). Nil: the certificate must
    /// carry ``address`` as an IP address.
    public var serverName: String?
    /// For TURN over TLS: a PEM file of the certificates to trust. Nil: the system's store
    /// (`/etc/ssl/certs`).
    public var trustedCertificatesPath: String?

    public init(
        address: String, port: UInt16 = 3478, username: String = "", password: String = "", transport: Transport = .udp,
        serverName: String? = nil, trustedCertificatesPath: String? = nil
    ) {
        self.address = address
        self.port = port
        self.username = username
        self.password = password
        self.transport = transport
        self.serverName = serverName
        self.trustedCertificatesPath = trustedCertificatesPath
    }
}

/// How the ICE agent is set up for one call.
public struct ICETransportConfiguration: Sendable, Equatable {
    /// Whether this agent is controlling (RFC 8445 §6.1.1: the offerer is).
    public var controlling: Bool
    /// Local IP addresses to gather host candidates on; empty means every interface but loopback.
    /// Give `127.0.0.1` here to use loopback (tests, the demo).
    public var localAddresses: [String]
    /// STUN server for server-reflexive candidates.
    public var stunServer: ICEServer?
    /// TURN server for relayed candidates (over UDP, TCP or TLS).
    public var turnServer: ICEServer?
    /// ICE consent freshness (RFC 7675): a consent check on the selected pair every 4–6 s, and
    /// nothing sent on it once the peer has not answered one for a while, or refused one (403).
    /// It keeps a call from sending to an address that no longer wants its packets. libnice
    /// 0.1.21 (Debian 12) gives up on consent 10 s after the last answered check (the RFC and
    /// libnice 0.1.22 say 30 s); peers' checks are answered either way.
    public var consentFreshness: Bool

    public init(
        controlling: Bool, localAddresses: [String] = [], stunServer: ICEServer? = nil, turnServer: ICEServer? = nil,
        consentFreshness: Bool = false
    ) {
        self.controlling = controlling
        self.localAddresses = localAddresses
        self.stunServer = stunServer
        self.turnServer = turnServer
        self.consentFreshness = consentFreshness
    }
}
