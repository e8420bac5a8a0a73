import COpenSSL
import Synchronization
import CTetherSystem
import TetherCore
import TetherRTP

/// One DTLS association used only to key SRTP (RFC 5763/5764), driven by datagrams: the owner feeds
/// what arrives from the peer, sends what comes out, and calls ``handleTimer()`` when
/// ``retransmitDelaySeconds`` has passed. No sockets and no threads of its own.
///
/// OpenSSL 3.0 speaks DTLS 1.2; peers that prefer DTLS 1.3 (Chromium) fall back to it. The
/// handshake offers ECDHE-ECDSA suites, presents the certificate in both roles, requires the
/// peer's (a server asks the client for one) and accepts it only when its digest matches the
/// fingerprint the peer's description carried. Handshake flights are split into datagrams of at
/// most ``mtuBytes``; lost flights are sent again after 50 ms, doubling up to 2 s.
///
/// - Note: Not thread-safe: one owner (the session's control side) calls it; never the media path.
public final class DTLSConnection: @unchecked Sendable {
    /// Where the association is.
    public enum State: Sendable, Equatable {
        /// The handshake is under way.
        case handshaking
        /// The handshake finished and the SRTP keys were exported.
        case connected
        /// The handshake or the association failed; nothing more will come of it.
        case failed(DTLSError)
        /// Either side closed the association.
        case closed
    }

    /// What a step produced.
    public struct Output: Sendable {
        /// Datagrams to send to the peer, in order.
        public var datagrams: [[UInt8]] = []
        /// The SRTP keys, in the step that finished the handshake (once per association).
        public var keys: DTLSSRTPKeys?
    }

    /// This side's role.
    public let role: DTLSRole
    /// The largest datagram this connection sends (bytes of DTLS records, without UDP/IP headers).
    public let mtuBytes: Int
    /// Where the association is.
    public private(set) var state: State = .handshaking
    /// The SRTP protection profile the handshake chose, once connected.
    public private(set) var suite: SRTPCryptoSuite?
    /// Datagrams with handshake records (content type 22) that arrived after the handshake
    /// finished: a peer sending its last flight again, or trying a new handshake. An ICE restart
    /// that keeps the association adds none.
    /// Readable from any thread (statistics); relaxed: a counter that guards nothing.
    public var handshakeDatagramsAfterConnected: Int { handshakeDatagramsCounter.load(ordering: .relaxed) }
    private let handshakeDatagramsCounter = Atomic<Int>(0)

    private let context: OpaquePointer  // SSL_CTX *
    private let ssl: OpaquePointer  // SSL *
    private let outbound: OpaquePointer  // BIO * owned by ssl
    private let inbound: OpaquePointer  // BIO * owned by ssl
    private let certificate: DTLSCertificate
    private var started = false
    private var heardFromPeer = false

    /// The SRTP protection profiles offered, most preferred first. GCM costs a third of AES-CM
    /// with HMAC-SHA1 in Debian's libsrtp (NSS).
    public static let defaultProfiles: [SRTPCryptoSuite] = [.aeadAES128GCM, .aesCM128HMACSHA1_80]

    /// A connection in `role` that accepts the peer only with `remoteFingerprint`.
    public init(
        role: DTLSRole, certificate: DTLSCertificate, remoteFingerprint: DTLSFingerprint,
        profiles: [SRTPCryptoSuite] = DTLSConnection.defaultProfiles, mtuBytes: Int = 1200
    ) throws(DTLSError) {
        self.role = role
        self.mtuBytes = mtuBytes
        self.certificate = certificate
        let names = profiles.map { $0 == .aeadAES128GCM ? "SRTP_AEAD_AES_128_GCM" : "SRTP_AES128_CM_SHA1_80" }
        guard let context = COpenSSL_make_dtls_context(certificate.certificate, certificate.key, names.joined(separator: ":")) else {
            throw .library(operation: "DTLS context", reason: Self.lastError())
        }
        var inbound: OpaquePointer?
        var outbound: OpaquePointer?
        let digest = remoteFingerprint.digest
        let made = COpenSSL_make_dtls(
            context, role == .client ? 1 : 0, mtuBytes, remoteFingerprint.hashFunction, digest, UInt32(digest.count),
            &inbound, &outbound)
        guard let made, let inbound, let outbound else {
            SSL_CTX_free(context)
            throw .library(operation: "DTLS connection", reason: Self.lastError())
        }
        self.context = context
        self.ssl = made
        self.inbound = inbound
        self.outbound = outbound
    }

    deinit {
        COpenSSL_free_dtls(ssl)
        SSL_CTX_free(context)
    }

    /// Starts the handshake: a client's first flight (ClientHello); nothing for a server.
    public func start() -> Output {
        guard !started else { return Output() }
        started = true
        guard role == .client else { return Output() }
        return advance()
    }

    /// Feeds one datagram from the peer (its first byte is 20…63, RFC 7983).
    public func receive(_ datagram: UnsafeRawBufferPointer) -> Output {
        switch state {
        case .failed, .closed: return Output()
        case .handshaking, .connected: break
        }
        started = true
        guard datagram.count > 0 else { return Output() }
        // A new association begins with a handshake record: anything before it is a late record
        // of an association this one replaced (the peer's certificate changed), not for us.
        if !heardFromPeer {
            guard datagram[0] == 22 else { return Output() }
            heardFromPeer = true
        }
        if state == .connected && datagram[0] == 22 { handshakeDatagramsCounter.add(1, ordering: .relaxed) }
        _ = BIO_write(inbound, datagram.baseAddress, Int32(datagram.count))
        return advance()
    }

    /// Feeds one datagram from the peer.
    public func receive(_ datagram: [UInt8]) -> Output {
        datagram.withUnsafeBytes { receive($0) }
    }

    /// Seconds until ``handleTimer()`` should run (a flight to send again), or nil.
    public var retransmitDelaySeconds: Double? {
        guard state == .handshaking || state == .connected else { return nil }
        let us = COpenSSL_dtls_timeout_us(ssl)
        return us < 0 ? nil : Double(us) / 1_000_000
    }

    /// Sends the last flight again when its timer has expired (OpenSSL's own clock decides).
    public func handleTimer() -> Output {
        guard state == .handshaking || state == .connected else { return Output() }
        if COpenSSL_dtls_handle_timeout(ssl) < 0 {
            return fail(.handshakeFailed(reason: "too many retransmissions (\(Self.lastError()))"))
        }
        var output = Output()
        output.datagrams = drainDatagrams()
        return output
    }

    /// Closes the association: a close_notify alert to send.
    public func close() -> Output {
        guard state == .handshaking || state == .connected else { return Output() }
        if state == .connected { _ = SSL_shutdown(ssl) }
        state = .closed
        var output = Output()
        output.datagrams = drainDatagrams()
        return output
    }

    /// Tests only: starts a renegotiation from this side (as a peer that allows it would), so
    /// that a test can check the other side refuses it. Returns the ClientHello to deliver.
    func renegotiateForTesting() -> Output {
        guard state == .connected, COpenSSL_renegotiate_for_testing(ssl) == 1 else { return Output() }
        var output = Output()
        output.datagrams = drainDatagrams()
        return output
    }

    // MARK: - Driving OpenSSL

    private func advance() -> Output {
        var output = Output()
        if state == .handshaking {
            ERR_clear_error()
            let result = SSL_do_handshake(ssl)
            if result == 1 {
                output.datagrams = drainDatagrams()
                switch exportKeys() {
                case let .success(keys):
                    state = .connected
                    output.keys = keys
                case let .failure(error):
                    var failed = fail(error)
                    failed.datagrams = output.datagrams + failed.datagrams
                    return failed
                }
            } else {
                let code = SSL_get_error(ssl, result)
                if code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE {
                    let error: DTLSError =
                        COpenSSL_fingerprint_mismatch(ssl) == 1
                        ? .fingerprintMismatch : .handshakeFailed(reason: Self.lastError())
                    state = .failed(error)
                }
                output.datagrams = drainDatagrams()
                return output
            }
        }
        // Connected: read whatever came (retransmitted flights are answered inside, alerts seen).
        var scratch = [UInt8](repeating: 0, count: 2048)
        while state == .connected {
            ERR_clear_error()
            let n = scratch.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 { continue }  // application data: Tether carries none over DTLS; dropped
            let code = SSL_get_error(ssl, n)
            if code == SSL_ERROR_ZERO_RETURN {
                state = .failed(.closedByPeer)
            } else if code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE {
                state = .failed(.handshakeFailed(reason: Self.lastError()))
            }
            break
        }
        output.datagrams += drainDatagrams()
        return output
    }

    private func fail(_ error: DTLSError) -> Output {
        state = .failed(error)
        var output = Output()
        output.datagrams = drainDatagrams()
        return output
    }

    /// What OpenSSL wrote, as datagrams: records split at their headers (13 bytes, length at 11)
    /// and packed in order into datagrams of at most `mtuBytes`.
    private func drainDatagrams() -> [[UInt8]] {
        let pending = Int(COpenSSL_bio_pending(outbound))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let read = bytes.withUnsafeMutableBytes { Int(BIO_read(outbound, $0.baseAddress, Int32(pending))) }
        guard read > 0 else { return [] }
        return Self.packRecords(bytes[0..<read], mtuBytes: mtuBytes)
    }

    /// Splits a run of DTLS records and packs them into datagrams of at most `mtuBytes` (a record
    /// longer than that goes alone).
    static func packRecords(_ bytes: ArraySlice<UInt8>, mtuBytes: Int) -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        var current: [UInt8] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            var end = bytes.endIndex
            if bytes.endIndex - i >= 13 {
                let length = Int(bytes[i + 11]) << 8 | Int(bytes[i + 12])
                end = min(bytes.endIndex, i + 13 + length)
            }
            let record = bytes[i..<end]
            if !current.isEmpty && current.count + record.count > mtuBytes {
                datagrams.append(current)
                current = []
            }
            current += record
            i = end
        }
        if !current.isEmpty { datagrams.append(current) }
        return datagrams
    }

    private func exportKeys() -> Result<DTLSSRTPKeys, DTLSError> {
        let suite: SRTPCryptoSuite
        switch COpenSSL_selected_srtp_profile(ssl) {
        case 0x0001: suite = .aesCM128HMACSHA1_80
        case 0x0007: suite = .aeadAES128GCM
        default: return .failure(.noSRTPProfile)
        }
        self.suite = suite
        let keyBytes = 16
        let saltBytes = suite.masterKeyAndSaltBytes - keyBytes
        let total = 2 * (keyBytes + saltBytes)
        let material = UnsafeMutableRawBufferPointer.allocate(byteCount: total, alignment: 16)
        defer {
            CTetherSystem_wipe(material.baseAddress!, total)
            material.deallocate()
        }
        guard COpenSSL_export_srtp_keys(ssl, material.baseAddress!.assumingMemoryBound(to: UInt8.self), total) == 1 else {
            return .failure(.library(operation: "SSL_export_keying_material", reason: Self.lastError()))
        }
        // RFC 5764 §4.2: client key, server key, client salt, server salt.
        let base = UnsafeRawBufferPointer(material)
        let clientKey = UnsafeRawBufferPointer(rebasing: base[0..<keyBytes])
        let serverKey = UnsafeRawBufferPointer(rebasing: base[keyBytes..<2 * keyBytes])
        let clientSalt = UnsafeRawBufferPointer(rebasing: base[2 * keyBytes..<2 * keyBytes + saltBytes])
        let serverSalt = UnsafeRawBufferPointer(rebasing: base[2 * keyBytes + saltBytes..<total])
        let client = SRTPKeyMaterial(suite: suite, key: clientKey, salt: clientSalt)
        let server = SRTPKeyMaterial(suite: suite, key: serverKey, salt: serverSalt)
        return .success(
            role == .client
                ? DTLSSRTPKeys(suite: suite, local: client, remote: server)
                : DTLSSRTPKeys(suite: suite, local: server, remote: client))
    }

    static func lastError() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        COpenSSL_last_error(&buffer, buffer.count)
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The SRTP keys a DTLS handshake exported (RFC 5764 §4.2), already assigned to directions.
public struct DTLSSRTPKeys: Sendable {
    /// The protection profile agreed.
    public let suite: SRTPCryptoSuite
    /// What this side protects its packets with.
    public let local: SRTPKeyMaterial
    /// What the peer protects its packets with.
    public let remote: SRTPKeyMaterial
}
