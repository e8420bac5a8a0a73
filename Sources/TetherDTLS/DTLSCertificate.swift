import COpenSSL
import Synchronization
import TetherCore

/// A self-signed ECDSA P-256 certificate and its key, as WebRTC endpoints use for DTLS-SRTP.
///
/// Making one costs a key generation, so a process makes one (``shared()``) and every call reuses
/// it, as browsers do; its ``fingerprint`` goes into every description. The key never leaves the
/// OpenSSL object that holds it.
public final class DTLSCertificate: @unchecked Sendable {
    let key: OpaquePointer  // EVP_PKEY *
    let certificate: OpaquePointer  // X509 *
    /// `sha-256` digest of the DER certificate, for `a=fingerprint`.
    public let fingerprint: DTLSFingerprint

    private static let sharedCertificate = Mutex<DTLSCertificate?>(nil)

    /// The process's certificate, made on first use (valid 30 days from then).
    public static func shared() throws(DTLSError) -> DTLSCertificate {
        // Held across generation (a few milliseconds, once): a second caller waits for the first.
        let result: Result<DTLSCertificate, DTLSError> = sharedCertificate.withLock { slot in
            if let slot { return .success(slot) }
            do throws(DTLSError) {
                let made = try DTLSCertificate(commonName: "Tether", validDays: 30)
                slot = made
                return .success(made)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Makes a new key and self-signed certificate (tests use fresh ones to play a stranger).
    public init(commonName: String = "Tether", validDays: Int = 30) throws(DTLSError) {
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        guard COpenSSL_make_certificate(commonName, validDays, &key, &certificate) == 1, let key, let certificate else {
            throw .library(operation: "certificate generation", reason: DTLSConnection.lastError())
        }
        var digest = [UInt8](repeating: 0, count: 32)
        guard COpenSSL_sha256_fingerprint(certificate, &digest) == 1,
            let fingerprint = try? DTLSFingerprint(hashFunction: "sha-256", digest: digest)
        else {
            X509_free(certificate)
            EVP_PKEY_free(key)
            throw .library(operation: "X509_digest", reason: DTLSConnection.lastError())
        }
        self.key = key
        self.certificate = certificate
        self.fingerprint = fingerprint
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }
}
