/// A certificate fingerprint as carried by `a=fingerprint` (RFC 8122 §5): a hash function name and
/// the digest of the DER certificate, written as upper-case hex pairs joined by colons.
///
/// Tether makes `sha-256` fingerprints and accepts `sha-256`, `sha-384` and `sha-512` from peers
/// (the digest length must match the function). Comparison ignores the case of the name.
public struct DTLSFingerprint: Sendable, Hashable, CustomStringConvertible {
    /// The hash function as named in the IANA "Hash Function Textual Names" registry, lower case
    /// (`sha-256`).
    public let hashFunction: String
    /// The digest bytes.
    public let digest: [UInt8]

    /// Digest lengths in bytes of the hash functions Tether checks.
    public static let supportedHashFunctions: [String: Int] = ["sha-256": 32, "sha-384": 48, "sha-512": 64]

    /// A fingerprint from its parts. Throws when the function is unknown or the length is wrong.
    public init(hashFunction: String, digest: [UInt8]) throws(DTLSFingerprintError) {
        let name = hashFunction.lowercased()
        guard let length = Self.supportedHashFunctions[name] else { throw .unsupportedHashFunction(hashFunction) }
        guard digest.count == length else { throw .wrongDigestLength(hashFunction: name, expectedBytes: length, actualBytes: digest.count) }
        self.hashFunction = name
        self.digest = digest
    }

    /// Parses the value of an `a=fingerprint` attribute: `sha-256 AB:CD:…`.
    public init(attributeValue: String) throws(DTLSFingerprintError) {
        let parts = attributeValue.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard parts.count == 2 else { throw .malformed("expected \"<hash-function> <hex pairs>\"") }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(64)
        for pair in parts[1].split(separator: ":", omittingEmptySubsequences: false) {
            guard pair.count == 2, let byte = UInt8(pair, radix: 16) else {
                throw .malformed("fingerprint bytes must be two hex digits each, separated by colons")
            }
            bytes.append(byte)
        }
        try self.init(hashFunction: String(parts[0]), digest: bytes)
    }

    /// The attribute value: `sha-256 AB:CD:…` (upper-case hex, RFC 8122).
    public var attributeValue: String { hashFunction + " " + hexPairs }

    /// The digest as upper-case hex pairs joined by colons.
    public var hexPairs: String {
        let digits: [Character] = Array("0123456789ABCDEF")
        var s = ""
        s.reserveCapacity(digest.count * 3)
        for (i, b) in digest.enumerated() {
            if i > 0 { s.append(":") }
            s.append(digits[Int(b >> 4)])
            s.append(digits[Int(b & 0x0f)])
        }
        return s
    }

    public var description: String { attributeValue }
}

/// Why an `a=fingerprint` value was refused.
public enum DTLSFingerprintError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The value is not `<hash-function> <hex pairs>`.
    case malformed(String)
    /// The hash function is not one Tether checks (`sha-1` and `md5` are refused: RFC 8122 §5
    /// requires a function at least as strong as the certificate's signature).
    case unsupportedHashFunction(String)
    /// The digest's length does not match its hash function.
    case wrongDigestLength(hashFunction: String, expectedBytes: Int, actualBytes: Int)

    public var description: String {
        switch self {
        case let .malformed(reason): "malformed fingerprint: \(reason)"
        case let .unsupportedHashFunction(name): "fingerprint hash function \(name.prefix(32)) is not supported (sha-256, sha-384, sha-512)"
        case let .wrongDigestLength(name, expected, actual): "\(name) fingerprint has \(actual) bytes, expected \(expected)"
        }
    }
}
