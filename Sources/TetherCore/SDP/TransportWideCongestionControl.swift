/// Transport-wide congestion control in a description, as Chromium offers it:
/// `a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01` (each
/// packet's transport-wide sequence number, RFC 8285 one-byte extension 3) and
/// `a=rtcp-fb:111 transport-cc` (the receiver reports each packet's arrival). Negotiated when both
/// are in the offer and the answer: then each side stamps its packets and reports the other's.
public enum TransportWideCongestionControl {
    /// The header extension's URI.
    public static let extensionURI = "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01"
    /// The extension ID Tether offers (Chromium's).
    public static let defaultExtensionID: UInt8 = 3

    /// The one-byte extension ID the section maps the transport-wide sequence number to, when it
    /// also asks for transport-cc feedback on `payloadType` (or on every format, `*`); nil otherwise.
    static func extensionID(in section: MediaDescription, payloadType: UInt8) -> UInt8? {
        let feedback = section.attributeValues(named: "rtcp-fb").contains { value in
            let tokens = (value ?? "").sdpTokens
            return tokens.count >= 2 && (tokens[0] == "*" || tokens[0] == Substring("\(payloadType)")) && tokens[1] == "transport-cc"
        }
        guard feedback else { return nil }
        for value in section.attributeValues(named: "extmap") {
            let tokens = (value ?? "").sdpTokens
            guard tokens.count >= 2, tokens[1] == Substring(extensionURI) else { continue }
            // `3` or `3/sendrecv`; one-byte IDs only (1…14).
            guard let id = UInt8(tokens[0].split(separator: "/").first ?? ""), (1...14).contains(id) else { continue }
            return id
        }
        return nil
    }

    /// The attributes that offer or accept it with `id` for `payloadType`.
    static func attributes(id: UInt8, payloadType: UInt8) -> [SDPAttribute] {
        [SDPAttribute(name: "extmap", value: "\(id) \(extensionURI)"), SDPAttribute(name: "rtcp-fb", value: "\(payloadType) transport-cc")]
    }
}

extension SessionDescription {
    /// The session-level `b=` cap (see ``MediaDescription/receiveBandwidthLimitBitsPerSecond``).
    public var receiveBandwidthLimitBitsPerSecond: Int? { bandwidths.receiveLimitBitsPerSecond }
}

extension MediaDescription {
    /// The peer's cap on what it receives from us, bits per second with every header: `b=AS` (kb/s,
    /// headers included), or `b=TIAS` (bits/s above IP and UDP; their 28 bytes at 50 packets a
    /// second added). nil when it gives neither.
    public var receiveBandwidthLimitBitsPerSecond: Int? { bandwidths.receiveLimitBitsPerSecond }
}

extension [SDPBandwidth] {
    var receiveLimitBitsPerSecond: Int? {
        var limit: Int?
        for bandwidth in self {
            let amount = Int(Swift.min(bandwidth.amount, UInt64(Int32.max)))
            switch bandwidth.type.uppercased() {
            case "AS": limit = Swift.min(limit ?? .max, amount * 1000)
            case "TIAS": limit = Swift.min(limit ?? .max, amount + 28 * 8 * 50)
            default: break
            }
        }
        return limit
    }
}
