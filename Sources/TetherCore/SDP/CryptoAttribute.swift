import Foundation

/// SRTP crypto suites that can appear in an SDES `a=crypto` line
/// (RFC 4568 §6.2, RFC 6188, RFC 7714).
public enum SDPCryptoSuite: Sendable, Hashable, CustomStringConvertible {
    /// AES-128 counter mode, HMAC-SHA1 with an 80-bit tag (RFC 4568).
    case AES_CM_128_HMAC_SHA1_80
    /// AES-128 counter mode, HMAC-SHA1 with a 32-bit tag (RFC 4568).
    case AES_CM_128_HMAC_SHA1_32
    /// AES-128 GCM (RFC 7714).
    case AEAD_AES_128_GCM
    /// AES-256 GCM (RFC 7714).
    case AEAD_AES_256_GCM
    /// AES-256 counter mode, HMAC-SHA1 with an 80-bit tag (RFC 6188).
    case AES_256_CM_HMAC_SHA1_80
    /// Any other suite name, kept as written; its key length is not checked.
    case unknown(String)

    /// Parses a suite name (case-insensitively for the known suites).
    public init(name: String) {
        switch name.uppercased() {
        case "AES_CM_128_HMAC_SHA1_80": self = .AES_CM_128_HMAC_SHA1_80
        case "AES_CM_128_HMAC_SHA1_32": self = .AES_CM_128_HMAC_SHA1_32
        case "AEAD_AES_128_GCM": self = .AEAD_AES_128_GCM
        case "AEAD_AES_256_GCM": self = .AEAD_AES_256_GCM
        case "AES_256_CM_HMAC_SHA1_80": self = .AES_256_CM_HMAC_SHA1_80
        default: self = .unknown(name)
        }
    }

    /// The suite name as written in SDP.
    public var name: String {
        switch self {
        case .AES_CM_128_HMAC_SHA1_80: "AES_CM_128_HMAC_SHA1_80"
        case .AES_CM_128_HMAC_SHA1_32: "AES_CM_128_HMAC_SHA1_32"
        case .AEAD_AES_128_GCM: "AEAD_AES_128_GCM"
        case .AEAD_AES_256_GCM: "AEAD_AES_256_GCM"
        case .AES_256_CM_HMAC_SHA1_80: "AES_256_CM_HMAC_SHA1_80"
        case let .unknown(name): name
        }
    }

    /// Whether the suite is one of the known cases.
    public var isKnown: Bool {
        if case .unknown = self { return false }
        return true
    }

    /// Master key length in bytes, `nil` for unknown suites.
    public var masterKeyLengthBytes: Int? {
        switch self {
        case .AES_CM_128_HMAC_SHA1_80, .AES_CM_128_HMAC_SHA1_32, .AEAD_AES_128_GCM: 16
        case .AES_256_CM_HMAC_SHA1_80, .AEAD_AES_256_GCM: 32
        case .unknown: nil
        }
    }

    /// Master salt length in bytes (112 bits for CM, 96 bits for GCM), `nil`
    /// for unknown suites.
    public var masterSaltLengthBytes: Int? {
        switch self {
        case .AES_CM_128_HMAC_SHA1_80, .AES_CM_128_HMAC_SHA1_32, .AES_256_CM_HMAC_SHA1_80: 14
        case .AEAD_AES_128_GCM, .AEAD_AES_256_GCM: 12
        case .unknown: nil
        }
    }

    /// Length in bytes of the decoded `inline:` key||salt: 30, 30, 28, 44 or
    /// 46; `nil` for unknown suites.
    public var keyAndSaltLengthBytes: Int? {
        guard let key = masterKeyLengthBytes, let salt = masterSaltLengthBytes else { return nil }
        return key + salt
    }

    /// Same as ``name``.
    public var description: String { name }
}

/// `a=crypto` key lifetime (RFC 4568 §6.1): a packet count written either in
/// decimal or as a power of two.
public enum SRTPKeyLifetime: Sendable, Equatable {
    /// A decimal packet count, e.g. `1048576`.
    case packets(UInt64)
    /// `2^exponent` packets, e.g. `2^31`.
    case powerOfTwoPackets(exponent: UInt8)

    /// The lifetime in packets, `nil` if it does not fit in 64 bits.
    public var packetCount: UInt64? {
        switch self {
        case let .packets(count): count
        case let .powerOfTwoPackets(exponent): exponent < 64 ? UInt64(1) << UInt64(exponent) : nil
        }
    }

    var serialized: String {
        switch self {
        case let .packets(count): "\(count)"
        case let .powerOfTwoPackets(exponent): "2^\(exponent)"
        }
    }
}

/// Master Key Identifier of an `a=crypto` key (RFC 4568 §6.1): `<value>:<length>`.
public struct SRTPMasterKeyIdentifier: Sendable, Equatable {
    /// MKI value (decimal in SDP).
    public var value: UInt64
    /// Length in bytes of the MKI field carried in each SRTP packet, 1…128.
    public var lengthBytes: UInt8

    /// Creates an MKI.
    public init(value: UInt64, lengthBytes: UInt8) {
        self.value = value
        self.lengthBytes = lengthBytes
    }
}

/// One `inline:<base64 key||salt>[|lifetime][|MKI:length]` key parameter.
///
/// `description`, `debugDescription` and the reflection mirror redact the
/// key bytes, so printing or `dump`ing this value never leaks the key.
public struct SRTPKeyParameter: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The decoded concatenated master key and master salt. Secret: wiped from memory when the
    /// last copy goes away.
    public var keyAndSalt: SecretBytes
    /// Optional key lifetime.
    public var lifetime: SRTPKeyLifetime?
    /// Optional master key identifier.
    public var mki: SRTPMasterKeyIdentifier?

    /// Creates a key parameter (length is checked by ``CryptoAttribute``).
    public init(keyAndSalt: some Collection<UInt8>, lifetime: SRTPKeyLifetime? = nil, mki: SRTPMasterKeyIdentifier? = nil) {
        self.keyAndSalt = keyAndSalt as? SecretBytes ?? SecretBytes(keyAndSalt)
        self.lifetime = lifetime
        self.mki = mki
    }

    /// The master key part for `suite`, `nil` if the suite is unknown or the
    /// length does not match.
    public func masterKey(for suite: SDPCryptoSuite) -> SecretBytes? {
        guard let keyLength = suite.masterKeyLengthBytes, keyAndSalt.count == suite.keyAndSaltLengthBytes else { return nil }
        return SecretBytes(keyAndSalt[..<keyLength])
    }

    /// The master salt part for `suite`, `nil` if the suite is unknown or the
    /// length does not match.
    public func masterSalt(for suite: SDPCryptoSuite) -> SecretBytes? {
        guard let keyLength = suite.masterKeyLengthBytes, keyAndSalt.count == suite.keyAndSaltLengthBytes else { return nil }
        return SecretBytes(keyAndSalt[keyLength...])
    }

    /// Redacted: `inline:<redacted 30 bytes>|2^31|1:1`.
    public var description: String { redactedText }
    /// Redacted, same as ``description``.
    public var debugDescription: String { redactedText }
    /// Mirror without the key bytes.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "keyAndSalt": "<redacted \(keyAndSalt.count) bytes>",
            "lifetime": lifetime as Any,
            "mki": mki as Any,
        ])
    }

    var redactedText: String { "inline:<redacted \(keyAndSalt.count) bytes>" + suffix }

    var serialized: String {
        // Standard base64 with '=' padding.
        "inline:" + keyAndSalt.withUnsafeBytes { Data($0).base64EncodedString() } + suffix
    }

    private var suffix: String {
        var text = ""
        if let lifetime { text += "|" + lifetime.serialized }
        if let mki { text += "|\(mki.value):\(mki.lengthBytes)" }
        return text
    }
}

/// An SDES `a=crypto` attribute (RFC 4568 §9.1):
///
///     a=crypto:<tag> <crypto-suite> <key-params> [<session-params>]
///
/// Construction and parsing validate that every key decodes to exactly the
/// key||salt length of a known suite. `description`, `debugDescription` and
/// the reflection mirror redact key material; ``serialized()`` is the only
/// way to obtain the wire form (which contains the key).
public struct CryptoAttribute: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// Tag (1–9 decimal digits) identifying this line within the media section.
    public let tag: UInt32
    /// Crypto suite.
    public let suite: SDPCryptoSuite
    /// One or more keys (several only with MKIs).
    public let keyParameters: [SRTPKeyParameter]
    /// Session parameters (e.g. `KDR=24`, `UNENCRYPTED_SRTCP`), as written.
    public let sessionParameters: [String]

    /// Creates and validates a crypto attribute.
    /// - Throws: ``SDPError/invalidCrypto(reason:)`` for a tag over 9 digits,
    ///   no keys, or a key||salt whose length does not fit the suite.
    public init(
        tag: UInt32, suite: SDPCryptoSuite, keyParameters: [SRTPKeyParameter], sessionParameters: [String] = []
    ) throws(SDPError) {
        guard tag <= 999_999_999 else { throw .invalidCrypto(reason: "tag \(tag) has more than 9 digits") }
        guard !keyParameters.isEmpty else { throw .invalidCrypto(reason: "no key parameters") }
        for key in keyParameters {
            if let expected = suite.keyAndSaltLengthBytes, key.keyAndSalt.count != expected {
                throw .invalidCrypto(reason: "\(suite.name) needs a \(expected)-byte key||salt, got \(key.keyAndSalt.count) bytes")
            }
            if key.keyAndSalt.isEmpty { throw .invalidCrypto(reason: "empty key") }
            if let mki = key.mki, !(1...128).contains(mki.lengthBytes) {
                throw .invalidCrypto(reason: "MKI length \(mki.lengthBytes) bytes is outside 1…128")
            }
        }
        self.tag = tag
        self.suite = suite
        self.keyParameters = keyParameters
        self.sessionParameters = sessionParameters
    }

    /// Convenience for a single key without lifetime/MKI.
    public init(tag: UInt32, suite: SDPCryptoSuite, keyAndSalt: some Collection<UInt8>) throws(SDPError) {
        try self.init(tag: tag, suite: suite, keyParameters: [SRTPKeyParameter(keyAndSalt: keyAndSalt)])
    }

    /// The first key's key||salt (the one used without MKI). Secret.
    public var keyAndSalt: SecretBytes { keyParameters[0].keyAndSalt }

    /// Returns a copy with another tag (used when answering with the
    /// offerer's tag).
    public func withTag(_ newTag: UInt32) throws(SDPError) -> CryptoAttribute {
        try CryptoAttribute(tag: newTag, suite: suite, keyParameters: keyParameters, sessionParameters: sessionParameters)
    }

    /// Parses the attribute value `<tag> <suite> <key-params> [<session-params>]`.
    /// A leading `crypto:` or `a=crypto:` is accepted.
    /// - Throws: ``SDPError/invalidCrypto(reason:)``; the reason never
    ///   contains key material.
    public static func parse(_ text: String) throws(SDPError) -> CryptoAttribute {
        var body = Substring(text)
        while let last = body.last, last.isWhitespace { body = body.dropLast() }
        body = body.drop(while: { $0 == " " || $0 == "\t" })
        if body.hasPrefix("a=") { body = body.dropFirst(2) }
        if body.lowercased().hasPrefix("crypto:") { body = body.dropFirst("crypto:".count) }

        let fields = body.sdpTokens
        guard fields.count >= 3 else {
            throw .invalidCrypto(reason: "expected <tag> <crypto-suite> <key-params>, found \(fields.count) fields")
        }
        guard fields[0].count <= 9, let tag = UInt32(fields[0]) else {
            throw .invalidCrypto(reason: "tag \(fields[0]) is not 1–9 digits")
        }
        let suite = SDPCryptoSuite(name: String(fields[1]))
        var keys: [SRTPKeyParameter] = []
        for keyParam in fields[2].split(separator: ";") {
            keys.append(try parseKeyParameter(keyParam, suite: suite))
        }
        return try CryptoAttribute(
            tag: tag, suite: suite, keyParameters: keys, sessionParameters: fields[3...].map(String.init))
    }

    private static func parseKeyParameter(_ text: Substring, suite: SDPCryptoSuite) throws(SDPError) -> SRTPKeyParameter {
        guard text.lowercased().hasPrefix("inline:") else {
            throw .invalidCrypto(reason: "key method is not inline:")
        }
        let parts = text.dropFirst("inline:".count).split(separator: "|", omittingEmptySubsequences: false)
        var base64 = String(parts[0])
        guard !base64.isEmpty else { throw .invalidCrypto(reason: "empty inline key") }
        // Some stacks drop the '=' padding; restore it before decoding.
        if base64.count % 4 != 0 { base64 += String(repeating: "=", count: 4 - base64.count % 4) }
        guard var decoded = Data(base64Encoded: base64) else {
            throw .invalidCrypto(reason: "\(suite.name) key is not valid base64")
        }
        var key = SRTPKeyParameter(keyAndSalt: SecretBytes(decoded))
        decoded.resetBytes(in: 0..<decoded.count)  // the only other copy this parse made
        guard parts.count <= 3 else { throw .invalidCrypto(reason: "too many | separated key fields") }
        for (position, part) in parts.dropFirst().enumerated() {
            if let colon = part.firstIndex(of: ":") {
                guard let value = UInt64(part[..<colon]), let length = UInt8(part[part.index(after: colon)...]),
                      (1...128).contains(length) else {
                    throw .invalidCrypto(reason: "MKI \(part) is not <value>:<length 1…128>")
                }
                key.mki = SRTPMasterKeyIdentifier(value: value, lengthBytes: length)
            } else {
                guard position == 0 else { throw .invalidCrypto(reason: "lifetime must precede the MKI") }
                if part.hasPrefix("2^") {
                    guard let exponent = UInt8(part.dropFirst(2)) else {
                        throw .invalidCrypto(reason: "lifetime \(part) is not 2^<number>")
                    }
                    key.lifetime = .powerOfTwoPackets(exponent: exponent)
                } else {
                    guard let count = UInt64(part) else { throw .invalidCrypto(reason: "lifetime \(part) is not a number") }
                    key.lifetime = .packets(count)
                }
            }
        }
        return key
    }

    /// The attribute value as written after `a=crypto:`. Contains the key:
    /// only put it on the wire, never in logs.
    public func serialized() -> String {
        var text = "\(tag) \(suite.name) " + keyParameters.map(\.serialized).joined(separator: ";")
        for parameter in sessionParameters { text += " \(parameter)" }
        return text
    }

    /// Redacted form, e.g. `crypto:1 AES_CM_128_HMAC_SHA1_80 inline:<redacted 30 bytes>`.
    public var description: String {
        var text = "crypto:\(tag) \(suite.name) " + keyParameters.map(\.redactedText).joined(separator: ";")
        for parameter in sessionParameters { text += " \(parameter)" }
        return text
    }

    /// Redacted, same as ``description``.
    public var debugDescription: String { description }

    /// Mirror without key bytes.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "tag": tag,
            "suite": suite,
            "keyParameters": keyParameters.map(\.redactedText),
            "sessionParameters": sessionParameters,
        ])
    }
}
