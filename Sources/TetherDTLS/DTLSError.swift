/// What can go wrong with DTLS-SRTP keying (RFC 5763/5764).
public enum DTLSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// OpenSSL could not make the certificate, the context or the connection (`operation` names
    /// the step, `reason` is OpenSSL's error text).
    case library(operation: String, reason: String)
    /// The peer's certificate does not have the digest of the fingerprint in its description:
    /// someone else answered, or the description was altered.
    case fingerprintMismatch
    /// The handshake failed (an alert, a protocol error); `reason` is OpenSSL's text.
    case handshakeFailed(reason: String)
    /// The handshake did not finish within the given time.
    case handshakeTimedOut(seconds: Double)
    /// The handshake finished without agreeing on an SRTP protection profile Tether implements.
    case noSRTPProfile
    /// The peer closed the association (close_notify).
    case closedByPeer

    public var description: String {
        switch self {
        case let .library(operation, reason): "OpenSSL \(operation) failed: \(reason)"
        case .fingerprintMismatch: "the peer's DTLS certificate does not match the fingerprint in its description"
        case let .handshakeFailed(reason): "DTLS handshake failed: \(reason)"
        case let .handshakeTimedOut(seconds): "DTLS handshake did not finish within \(seconds) s"
        case .noSRTPProfile: "DTLS handshake agreed on no SRTP protection profile (AES_CM_128_HMAC_SHA1_80 or AEAD_AES_128_GCM)"
        case .closedByPeer: "the peer closed the DTLS association"
        }
    }
}
