import CTetherSystem
import Glibc

/// SRTP master key and salt, held in memory Tether allocates and wipes.
///
/// Generated from the system CSPRNG (`getrandom(2)`). Its description never shows the key.
/// The bytes are wiped with `explicit_bzero` when the last reference goes away.
public final class SRTPKeyMaterial: @unchecked Sendable, CustomStringConvertible, Equatable {
    /// The suite the key is for.
    public let suite: SRTPCryptoSuite
    private let bytes: UnsafeMutableRawBufferPointer

    /// Fresh random key material for `suite`.
    public static func generate(for suite: SRTPCryptoSuite) -> SRTPKeyMaterial {
        let key = SRTPKeyMaterial(suite: suite)
        if CTetherSystem_fill_random(key.bytes.baseAddress!, key.bytes.count) != 0 {
            fatalError("getrandom failed: the system CSPRNG is unavailable")
        }
        return key
    }

    /// Key material received from the peer (for example decoded from an a=crypto line).
    public init(suite: SRTPCryptoSuite, keyAndSalt: some Collection<UInt8>) throws(SRTPError) {
        guard keyAndSalt.count == suite.masterKeyAndSaltBytes else {
            throw .badKeyLength(expectedBytes: suite.masterKeyAndSaltBytes, actualBytes: keyAndSalt.count)
        }
        self.suite = suite
        bytes = .allocate(byteCount: suite.masterKeyAndSaltBytes, alignment: 16)
        _ = bytes.initializeMemory(as: UInt8.self, from: keyAndSalt)
    }

    private init(suite: SRTPCryptoSuite) {
        self.suite = suite
        bytes = .allocate(byteCount: suite.masterKeyAndSaltBytes, alignment: 16)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        CTetherSystem_wipe(bytes.baseAddress!, bytes.count)
        bytes.deallocate()
    }

    /// Calls `body` with the raw key and salt. Do not copy them out longer than needed.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(bytes))
    }

    /// Redacted: never shows key material.
    public var description: String { "SRTPKeyMaterial(\(suite.rawValue), <redacted>)" }

    public static func == (a: SRTPKeyMaterial, b: SRTPKeyMaterial) -> Bool {
        a.suite == b.suite && a.bytes.count == b.bytes.count && memcmp(a.bytes.baseAddress!, b.bytes.baseAddress!, a.bytes.count) == 0
    }
}

extension SRTPKeyMaterial {
    /// Key material assembled from a master key and a master salt held elsewhere (a DTLS
    /// exporter's output), copied straight into wiped storage without an intermediate array.
    public convenience init(suite: SRTPCryptoSuite, key: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer) {
        precondition(key.count + salt.count == suite.masterKeyAndSaltBytes, "key and salt lengths do not fit \(suite.rawValue)")
        self.init(suite: suite)
        bytes.copyMemory(from: key)
        UnsafeMutableRawBufferPointer(rebasing: bytes[key.count...]).copyMemory(from: salt)
    }
}
