import CTetherNet

/// An IPv4 address and UDP port, as the relay sees its peers.
public struct UDPRelayEndpoint: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The IPv4 address in host byte order (`0x7F00_0001` is 127.0.0.1).
    public var address: UInt32
    /// The UDP port.
    public var port: UInt16

    /// Creates an endpoint from a host-byte-order IPv4 address and a port.
    public init(address: UInt32, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// Creates an endpoint from dotted-quad text such as `"127.0.0.1"`.
    /// - Throws: ``UDPRelayError/invalidAddress(_:)`` when the text is not an IPv4 address.
    public init(address text: String, port: UInt16) throws(UDPRelayError) {
        var value: UInt32 = 0
        guard CTetherNet_ipv4_parse(text, &value) == 0 else { throw .invalidAddress(text) }
        self.init(address: value, port: port)
    }

    /// Parses `"a.b.c.d:port"`.
    /// - Throws: ``UDPRelayError/invalidAddress(_:)`` when malformed.
    public init(parsing text: String) throws(UDPRelayError) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw .invalidAddress(text)
        }
        try self.init(address: String(text[..<colon]), port: port)
    }

    /// The dotted-quad address text.
    public var addressText: String {
        "\(address >> 24).\((address >> 16) & 0xFF).\((address >> 8) & 0xFF).\(address & 0xFF)"
    }

    /// `"a.b.c.d:port"`.
    public var description: String { "\(addressText):\(port)" }
}
