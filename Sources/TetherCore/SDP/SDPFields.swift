import Foundation

/// Media stream direction (RFC 8866 §6.7, RFC 3264 §5.1/§6.1), always
/// expressed from the point of view of the party that wrote it.
public enum MediaDirection: String, Sendable, CaseIterable, Equatable {
    /// Send and receive (the default when no direction attribute is present).
    case sendrecv
    /// Send only.
    case sendonly
    /// Receive only.
    case recvonly
    /// Neither send nor receive.
    case inactive

    /// Creates the direction that sends/receives as given.
    public init(sending: Bool, receiving: Bool) {
        switch (sending, receiving) {
        case (true, true): self = .sendrecv
        case (true, false): self = .sendonly
        case (false, true): self = .recvonly
        case (false, false): self = .inactive
        }
    }

    /// Whether the writer of this direction sends media.
    public var isSending: Bool { self == .sendrecv || self == .sendonly }
    /// Whether the writer of this direction receives media.
    public var isReceiving: Bool { self == .sendrecv || self == .recvonly }
    /// The same stream seen from the peer's side (sendonly ↔ recvonly).
    public var reversed: MediaDirection { MediaDirection(sending: isReceiving, receiving: isSending) }
}

/// SDP address type (`IP4` or `IP6`).
public enum SDPAddressType: String, Sendable, Equatable {
    /// IPv4 (`IP4`).
    case ip4 = "IP4"
    /// IPv6 (`IP6`).
    case ip6 = "IP6"

    /// Guesses the address type of a literal: `IP6` if it contains `:`.
    public init(guessingFrom address: String) {
        self = address.contains(":") ? .ip6 : .ip4
    }

    init(parsing token: Substring) throws(SDPFieldError) {
        guard let value = SDPAddressType(rawValue: token.uppercased()) else {
            throw SDPFieldError("address type \(token) is not IP4 or IP6")
        }
        self = value
    }
}

/// `c=` connection data (RFC 8866 §5.7): `IN IP4 203.0.113.7`.
public struct SDPConnectionData: Sendable, Equatable {
    /// Network type, normally `IN`.
    public var networkType: String
    /// Address type.
    public var addressType: SDPAddressType
    /// Connection address as written, possibly an FQDN or carrying a
    /// `/ttl[/count]` multicast suffix.
    public var address: String

    /// Creates connection data; the address type defaults to a guess from
    /// the address literal.
    public init(networkType: String = "IN", addressType: SDPAddressType? = nil, address: String) {
        self.networkType = networkType
        self.addressType = addressType ?? SDPAddressType(guessingFrom: address)
        self.address = address
    }

    init(parsing value: Substring) throws(SDPFieldError) {
        let fields = value.sdpTokens
        guard fields.count == 3 else {
            throw SDPFieldError("expected <nettype> <addrtype> <address>, found \(fields.count) fields")
        }
        self.networkType = String(fields[0])
        self.addressType = try SDPAddressType(parsing: fields[1])
        self.address = String(fields[2])
    }

    var serialized: String { "\(networkType) \(addressType.rawValue) \(address)" }
}

/// `o=` origin (RFC 8866 §5.2).
public struct SDPOrigin: Sendable, Equatable {
    /// User name, `-` when not meaningful.
    public var username: String
    /// Numeric session identifier.
    public var sessionID: UInt64
    /// Session version; bumped on every re-offer that changes the session.
    public var sessionVersion: UInt64
    /// Network type, normally `IN`.
    public var networkType: String
    /// Address type.
    public var addressType: SDPAddressType
    /// Unicast address (or FQDN) of the machine that created the session.
    public var address: String

    /// Creates an origin; the address type defaults to a guess from `address`.
    public init(
        username: String = "-", sessionID: UInt64, sessionVersion: UInt64,
        networkType: String = "IN", addressType: SDPAddressType? = nil, address: String
    ) {
        self.username = username
        self.sessionID = sessionID
        self.sessionVersion = sessionVersion
        self.networkType = networkType
        self.addressType = addressType ?? SDPAddressType(guessingFrom: address)
        self.address = address
    }

    init(parsing value: Substring) throws(SDPFieldError) {
        let fields = value.sdpTokens
        guard fields.count == 6 else {
            throw SDPFieldError("expected 6 fields <username> <sess-id> <sess-version> <nettype> <addrtype> <address>, found \(fields.count)")
        }
        guard let id = UInt64(fields[1]) else { throw SDPFieldError("session id \(fields[1]) is not a number") }
        guard let version = UInt64(fields[2]) else { throw SDPFieldError("session version \(fields[2]) is not a number") }
        self.username = String(fields[0])
        self.sessionID = id
        self.sessionVersion = version
        self.networkType = String(fields[3])
        self.addressType = try SDPAddressType(parsing: fields[4])
        self.address = String(fields[5])
    }

    var serialized: String {
        "\(username) \(sessionID) \(sessionVersion) \(networkType) \(addressType.rawValue) \(address)"
    }
}

/// `b=` bandwidth line (RFC 8866 §5.8), e.g. `AS:64`.
public struct SDPBandwidth: Sendable, Equatable {
    /// Bandwidth type (`AS`, `CT`, `TIAS`, …).
    public var type: String
    /// Amount: kilobits per second for `AS`/`CT`, bits per second for `TIAS`
    /// (RFC 3890).
    public var amount: UInt64

    /// Creates a bandwidth line.
    public init(type: String, amount: UInt64) {
        self.type = type
        self.amount = amount
    }

    init(parsing value: Substring) throws(SDPFieldError) {
        guard let colon = value.firstIndex(of: ":"), let amount = UInt64(value[value.index(after: colon)...]) else {
            throw SDPFieldError("expected <bwtype>:<bandwidth>")
        }
        self.type = String(value[..<colon])
        self.amount = amount
    }

    var serialized: String { "\(type):\(amount)" }
}

/// `t=` timing line (RFC 8866 §5.9) plus its `r=` repeat lines.
public struct SDPTiming: Sendable, Equatable {
    /// Start time in NTP seconds (0 = unbounded).
    public var startTimeNTPSeconds: UInt64
    /// Stop time in NTP seconds (0 = unbounded).
    public var stopTimeNTPSeconds: UInt64
    /// Raw `r=` values following this `t=` line.
    public var repeats: [String]

    /// Creates a timing line; `t=0 0` by default.
    public init(startTimeNTPSeconds: UInt64 = 0, stopTimeNTPSeconds: UInt64 = 0, repeats: [String] = []) {
        self.startTimeNTPSeconds = startTimeNTPSeconds
        self.stopTimeNTPSeconds = stopTimeNTPSeconds
        self.repeats = repeats
    }

    init(parsing value: Substring) throws(SDPFieldError) {
        let fields = value.sdpTokens
        guard fields.count == 2, let start = UInt64(fields[0]), let stop = UInt64(fields[1]) else {
            throw SDPFieldError("expected <start-time> <stop-time> as numbers")
        }
        self.init(startTimeNTPSeconds: start, stopTimeNTPSeconds: stop)
    }
}

/// An attribute kept verbatim: `a=<name>` or `a=<name>:<value>`.
public struct SDPAttribute: Sendable, Equatable {
    /// Attribute name (text before the first `:`).
    public var name: String
    /// Attribute value (text after the first `:`), `nil` for property
    /// attributes such as `a=rtcp-rsize`.
    public var value: String?

    /// Creates a raw attribute.
    public init(name: String, value: String? = nil) {
        self.name = name
        self.value = value
    }

    init(parsing text: Substring) {
        if let colon = text.firstIndex(of: ":") {
            name = String(text[..<colon])
            value = String(text[text.index(after: colon)...])
        } else {
            name = String(text)
            value = nil
        }
    }

    var serialized: String {
        if let value { return "\(name):\(value)" }
        return name
    }
}

/// Transport protocol of an `m=` line.
public enum SDPMediaProtocol: Sendable, Equatable, CustomStringConvertible {
    /// `RTP/AVP` — plain RTP, not accepted by Tether.
    case rtpAVP
    /// `RTP/AVPF` — plain RTP with feedback, not accepted by Tether.
    case rtpAVPF
    /// `RTP/SAVP` — SRTP (SDES keys); Tether's profile.
    case rtpSAVP
    /// `RTP/SAVPF` — SRTP with feedback (SDES keys); accepted by Tether.
    case rtpSAVPF
    /// `UDP/TLS/RTP/SAVP` — DTLS-SRTP.
    case udpTLSRTPSAVP
    /// `UDP/TLS/RTP/SAVPF` — DTLS-SRTP with feedback (WebRTC).
    case udpTLSRTPSAVPF
    /// Anything else, kept as written.
    case other(String)

    /// Parses a protocol token (case-insensitively for the known ones).
    public init(name: String) {
        switch name.uppercased() {
        case "RTP/AVP": self = .rtpAVP
        case "RTP/AVPF": self = .rtpAVPF
        case "RTP/SAVP": self = .rtpSAVP
        case "RTP/SAVPF": self = .rtpSAVPF
        case "UDP/TLS/RTP/SAVP": self = .udpTLSRTPSAVP
        case "UDP/TLS/RTP/SAVPF": self = .udpTLSRTPSAVPF
        default: self = .other(name)
        }
    }

    /// The protocol token as written in SDP.
    public var name: String {
        switch self {
        case .rtpAVP: "RTP/AVP"
        case .rtpAVPF: "RTP/AVPF"
        case .rtpSAVP: "RTP/SAVP"
        case .rtpSAVPF: "RTP/SAVPF"
        case .udpTLSRTPSAVP: "UDP/TLS/RTP/SAVP"
        case .udpTLSRTPSAVPF: "UDP/TLS/RTP/SAVPF"
        case let .other(name): name
        }
    }

    /// Whether this is an SRTP profile keyed with SDES `a=crypto`
    /// (`RTP/SAVP` or `RTP/SAVPF`).
    public var isSDESSRTP: Bool { self == .rtpSAVP || self == .rtpSAVPF }

    /// Whether this is a DTLS-SRTP profile (`UDP/TLS/RTP/SAVP` or `UDP/TLS/RTP/SAVPF`). WebRTC
    /// endpoints also key `RTP/SAVPF` with DTLS when a fingerprint is present.
    public var isDTLSSRTP: Bool { self == .udpTLSRTPSAVP || self == .udpTLSRTPSAVPF }

    /// Whether this is an SRTP profile of either keying.
    public var isSRTP: Bool { isSDESSRTP || isDTLSSRTP }

    /// Same as ``name``.
    public var description: String { name }
}

/// `a=rtpmap:<payload type> <encoding name>/<clock rate>[/<channels>]`.
public struct RTPMapAttribute: Sendable, Equatable {
    /// RTP payload type, 0…127.
    public var payloadType: UInt8
    /// Encoding name as written (compare with ``isEncoding(_:)``, which is
    /// case-insensitive).
    public var encodingName: String
    /// RTP clock rate in Hz.
    public var clockRateHz: UInt32
    /// Number of audio channels, `nil` when omitted (meaning 1).
    public var channelCount: UInt8?

    /// Creates an rtpmap.
    public init(payloadType: UInt8, encodingName: String, clockRateHz: UInt32, channelCount: UInt8? = nil) {
        self.payloadType = payloadType
        self.encodingName = encodingName
        self.clockRateHz = clockRateHz
        self.channelCount = channelCount
    }

    /// Whether the encoding name equals `name`, ignoring case.
    public func isEncoding(_ name: String) -> Bool {
        encodingName.caseInsensitiveCompare(name) == .orderedSame
    }

    /// Whether this maps Opus as RFC 7587 requires: `opus/48000/2`.
    public var isOpus: Bool { isEncoding("opus") && clockRateHz == 48_000 && channelCount == 2 }

    init(parsing value: Substring) throws(SDPFieldError) {
        let fields = value.sdpTokens
        guard fields.count == 2 else { throw SDPFieldError("expected <payload type> <encoding name>/<clock rate>[/<channels>]") }
        self.payloadType = try parsePayloadType(fields[0])
        let parts = fields[1].split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, !parts[1].isEmpty else { throw SDPFieldError("rtpmap without clock rate") }
        guard parts.count <= 3 else { throw SDPFieldError("too many / separated fields in rtpmap encoding") }
        guard !parts[0].isEmpty else { throw SDPFieldError("rtpmap without encoding name") }
        guard let rate = UInt32(parts[1]), rate > 0 else { throw SDPFieldError("rtpmap clock rate \(parts[1]) is not a positive number") }
        self.encodingName = String(parts[0])
        self.clockRateHz = rate
        if parts.count == 3 {
            guard let channels = UInt8(parts[2]), channels > 0 else {
                throw SDPFieldError("rtpmap channel count \(parts[2]) is not a positive number")
            }
            self.channelCount = channels
        } else {
            self.channelCount = nil
        }
    }

    var serialized: String {
        var text = "\(payloadType) \(encodingName)/\(clockRateHz)"
        if let channelCount { text += "/\(channelCount)" }
        return text
    }
}

/// One `name=value` (or bare `name`) entry of an `a=fmtp` line.
public struct FormatParameter: Sendable, Equatable {
    /// Parameter name as written.
    public var name: String
    /// Parameter value, `nil` for a bare token such as telephone-event's `0-16`.
    public var value: String?

    /// Creates a parameter.
    public init(name: String, value: String?) {
        self.name = name
        self.value = value
    }

    var serialized: String {
        if let value { return "\(name)=\(value)" }
        return name
    }
}

/// `a=fmtp:<payload type> <param>;<param>…` with the parameters in the order
/// they were written.
public struct FormatParametersAttribute: Sendable, Equatable {
    /// RTP payload type, 0…127.
    public var payloadType: UInt8
    /// The parameters, order preserved.
    public var parameters: [FormatParameter]

    /// Creates an fmtp attribute.
    public init(payloadType: UInt8, parameters: [FormatParameter]) {
        self.payloadType = payloadType
        self.parameters = parameters
    }

    /// Parses `<pt> key=value;key=value`; returns `nil` when the format is
    /// not an RTP payload type (such fmtp lines are kept as raw attributes).
    init?(parsing value: Substring) {
        let trimmed = value.drop(while: { $0 == " " || $0 == "\t" })
        let formatEnd = trimmed.firstIndex(where: { $0 == " " || $0 == "\t" }) ?? trimmed.endIndex
        guard let payloadType = try? parsePayloadType(trimmed[..<formatEnd]) else { return nil }
        self.payloadType = payloadType
        var parameters: [FormatParameter] = []
        for item in trimmed[formatEnd...].split(separator: ";") {
            let entry = item.trimmingSDPWhitespace
            guard !entry.isEmpty else { continue }
            if let equals = entry.firstIndex(of: "=") {
                parameters.append(FormatParameter(
                    name: String(entry[..<equals].trimmingSDPWhitespace),
                    value: String(entry[entry.index(after: equals)...].trimmingSDPWhitespace)))
            } else {
                parameters.append(FormatParameter(name: String(entry), value: nil))
            }
        }
        self.parameters = parameters
    }

    var serialized: String {
        "\(payloadType) " + parameters.map(\.serialized).joined(separator: ";")
    }
}

/// `a=rtcp:<port> [<nettype> <addrtype> <address>]` (RFC 3605).
public struct RTCPAttribute: Sendable, Equatable {
    /// UDP port number for RTCP.
    public var port: UInt16
    /// Optional RTCP address.
    public var connection: SDPConnectionData?

    /// Creates an rtcp attribute.
    public init(port: UInt16, connection: SDPConnectionData? = nil) {
        self.port = port
        self.connection = connection
    }

    init(parsing value: Substring) throws(SDPFieldError) {
        let fields = value.sdpTokens
        guard let first = fields.first, let port = UInt16(first) else { throw SDPFieldError("rtcp port is not a number") }
        self.port = port
        if fields.count == 1 {
            connection = nil
        } else if fields.count == 4 {
            connection = try SDPConnectionData(parsing: Substring(fields[1...].joined(separator: " ")))
        } else {
            throw SDPFieldError("expected <port> [<nettype> <addrtype> <address>]")
        }
    }

    var serialized: String {
        if let connection { return "\(port) \(connection.serialized)" }
        return "\(port)"
    }
}

// MARK: - Helpers

func parsePayloadType(_ text: Substring) throws(SDPFieldError) -> UInt8 {
    guard let value = UInt8(text), value <= 127 else {
        throw SDPFieldError("payload type \(text) is not a number 0…127")
    }
    return value
}

/// Parses a millisecond count such as `20` (or the tolerated `20.0`).
func parseMilliseconds(_ text: Substring) throws(SDPFieldError) -> UInt32 {
    let trimmed = text.trimmingSDPWhitespace
    if let value = UInt32(trimmed) { return value }
    if let value = Double(trimmed), value.isFinite, value >= 0, value < Double(UInt32.max) {
        return UInt32(value.rounded())
    }
    throw SDPFieldError("\(text) is not a number of milliseconds")
}

extension StringProtocol {
    /// Fields separated by runs of spaces/tabs.
    var sdpTokens: [SubSequence] {
        split(whereSeparator: { $0 == " " || $0 == "\t" })
    }
}

extension Substring {
    var trimmingSDPWhitespace: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
