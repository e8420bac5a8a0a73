import Foundation

/// An ICE candidate as carried in `a=candidate` (RFC 8839 §5.1):
///
///     <foundation> <component-id> <transport> <priority> <address> <port>
///         typ <type> [raddr <address>] [rport <port>] *(<ext-name> <ext-value>)
///
/// Parse with ``parse(_:)`` (the `candidate:` / `a=candidate:` prefix is
/// optional) and write back with ``serialized()``.
public struct ICECandidate: Sendable, Equatable, CustomStringConvertible {
    /// Candidate transport. Only UDP is used by Tether; others are kept and
    /// marked so the negotiator can skip them.
    public enum TransportProtocol: Sendable, Equatable {
        /// UDP (written `UDP` or `udp`).
        case udp
        /// Any other transport (e.g. `TCP`), kept as written.
        case other(String)

        /// Whether this is UDP.
        public var isUDP: Bool { self == .udp }

        /// Token as serialized (`UDP` for UDP).
        public var name: String {
            switch self {
            case .udp: "UDP"
            case let .other(name): name
            }
        }

        init(token: Substring) {
            self = token.uppercased() == "UDP" ? .udp : .other(String(token))
        }
    }

    /// Candidate type (RFC 8445 §5.1.1).
    public enum CandidateType: Sendable, Equatable {
        /// Host candidate.
        case host
        /// Server-reflexive candidate.
        case srflx
        /// Peer-reflexive candidate.
        case prflx
        /// Relayed (TURN) candidate.
        case relay
        /// Unknown type token, kept as written.
        case other(String)

        /// Token as written after `typ`.
        public var name: String {
            switch self {
            case .host: "host"
            case .srflx: "srflx"
            case .prflx: "prflx"
            case .relay: "relay"
            case let .other(name): name
            }
        }

        init(token: Substring) {
            switch token.lowercased() {
            case "host": self = .host
            case "srflx": self = .srflx
            case "prflx": self = .prflx
            case "relay": self = .relay
            default: self = .other(String(token))
            }
        }
    }

    /// What kind of connection address the candidate carries.
    public enum AddressKind: Sendable, Equatable {
        /// Dotted-quad IPv4 literal.
        case ipv4
        /// IPv6 literal.
        case ipv6
        /// A host name, e.g. an mDNS `….local` name; must be resolved first.
        case hostname
    }

    /// One extension attribute pair (`generation 0`, `network-id 1`, …).
    public struct Extension: Sendable, Equatable {
        /// Extension attribute name.
        public var name: String
        /// Extension attribute value.
        public var value: String

        /// Creates an extension pair.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Foundation: 1–32 ice-chars.
    public var foundation: String
    /// Component ID, 1…256 (1 = RTP; with rtcp-mux the only one used).
    public var componentID: UInt16
    /// Transport protocol.
    public var transport: TransportProtocol
    /// Priority (RFC 8445 §5.1.2), unitless.
    public var priority: UInt32
    /// Connection address: IPv4/IPv6 literal or host name, kept as written.
    public var address: String
    /// UDP/TCP port number.
    public var port: UInt16
    /// Candidate type.
    public var type: CandidateType
    /// `raddr` — related address, if present.
    public var relatedAddress: String?
    /// `rport` — related port number, if present.
    public var relatedPort: UInt16?
    /// Extension attributes in the order written.
    public var extensions: [Extension]

    /// Creates a candidate.
    public init(
        foundation: String, componentID: UInt16 = 1, transport: TransportProtocol = .udp,
        priority: UInt32, address: String, port: UInt16, type: CandidateType,
        relatedAddress: String? = nil, relatedPort: UInt16? = nil, extensions: [Extension] = []
    ) {
        self.foundation = foundation
        self.componentID = componentID
        self.transport = transport
        self.priority = priority
        self.address = address
        self.port = port
        self.type = type
        self.relatedAddress = relatedAddress
        self.relatedPort = relatedPort
        self.extensions = extensions
    }

    /// Kind of ``address``.
    public var addressKind: AddressKind {
        if address.contains(":") { return .ipv6 }
        let octets = address.split(separator: ".", omittingEmptySubsequences: false)
        if octets.count == 4, octets.allSatisfy({ !$0.isEmpty && $0.count <= 3 && UInt8($0) != nil }) {
            return .ipv4
        }
        return .hostname
    }

    /// Value of the first extension attribute called `name`.
    public func extensionValue(_ name: String) -> String? {
        extensions.first(where: { $0.name == name })?.value
    }

    /// The `generation` extension (Chrome/libwebrtc), if present and numeric.
    public var generation: UInt32? { extensionValue("generation").flatMap { UInt32($0) } }

    /// Parses a candidate from its attribute value. Accepts an optional
    /// `candidate:` or `a=candidate:` prefix and trailing whitespace/CRLF.
    public static func parse(_ text: String) throws(SDPError) -> ICECandidate {
        func fail(_ reason: String) -> SDPError { .invalidCandidate(line: SDPError.quotable(text), reason: reason) }

        var body = Substring(text)
        while let last = body.last, last.isWhitespace { body = body.dropLast() }
        body = body.drop(while: { $0 == " " || $0 == "\t" })
        if body.hasPrefix("a=") { body = body.dropFirst(2) }
        if body.lowercased().hasPrefix("candidate:") { body = body.dropFirst("candidate:".count) }

        let tokens = body.sdpTokens
        guard tokens.count >= 8 else {
            throw fail("expected at least 8 fields (foundation component transport priority address port typ type), found \(tokens.count)")
        }
        let foundation = tokens[0]
        guard (1...32).contains(foundation.count),
              foundation.unicodeScalars.allSatisfy({ $0.isASCIIAlphanumeric || $0 == "+" || $0 == "/" }) else {
            throw fail("foundation \(foundation) is not 1–32 ice-chars")
        }
        guard let component = UInt16(tokens[1]), (1...256).contains(component) else {
            throw fail("component id \(tokens[1]) is not a number 1…256")
        }
        guard let priority = UInt32(tokens[3]) else { throw fail("priority \(tokens[3]) is not a 32-bit number") }
        let address = tokens[4]
        guard let port = UInt16(tokens[5]) else { throw fail("port \(tokens[5]) is not a number 0…65535") }
        guard tokens[6].lowercased() == "typ" else { throw fail("expected \"typ\", found \(tokens[6])") }

        var candidate = ICECandidate(
            foundation: String(foundation), componentID: component, transport: TransportProtocol(token: tokens[2]),
            priority: priority, address: String(address), port: port, type: CandidateType(token: tokens[7]))

        var index = 8
        while index < tokens.count {
            let name = tokens[index]
            guard index + 1 < tokens.count else { throw fail("attribute \(name) has no value") }
            let value = tokens[index + 1]
            switch name {
            case "raddr" where candidate.extensions.isEmpty:
                candidate.relatedAddress = String(value)
            case "rport" where candidate.extensions.isEmpty:
                guard let relatedPort = UInt16(value) else { throw fail("rport \(value) is not a number 0…65535") }
                candidate.relatedPort = relatedPort
            default:
                candidate.extensions.append(Extension(name: String(name), value: String(value)))
            }
            index += 2
        }
        return candidate
    }

    /// The attribute value without the `candidate:` prefix, e.g.
    /// `1 1 UDP 2130706431 192.0.2.1 50000 typ host`.
    public func serialized() -> String {
        var text = "\(foundation) \(componentID) \(transport.name) \(priority) \(address) \(port) typ \(type.name)"
        if let relatedAddress { text += " raddr \(relatedAddress)" }
        if let relatedPort { text += " rport \(relatedPort)" }
        for item in extensions { text += " \(item.name) \(item.value)" }
        return text
    }

    /// `candidate:` followed by ``serialized()`` (the trickle/WebRTC form).
    public var description: String { "candidate:" + serialized() }
}

extension Unicode.Scalar {
    var isASCIIAlphanumeric: Bool {
        ("a"..."z").contains(self) || ("A"..."Z").contains(self) || ("0"..."9").contains(self)
    }
}
