import CSRTP
import Glibc

/// One direction of SRTP and SRTCP protection (libsrtp2 session with one key-sharing stream).
///
/// Outbound contexts protect what we send with our key; inbound contexts verify and decrypt
/// what the peer sends with its key. Not thread-safe: the media loop owns both.
///
/// Debian's libsrtp2 is built on NSS and allocates on every packet (about 14 malloc/free for
/// AES_CM_128_HMAC_SHA1_80, 5 for AEAD_AES_128_GCM), so keep it off device threads.
public final class SRTPContext: @unchecked Sendable {
    /// Which way packets go through this context.
    public enum Direction: Sendable { case outbound, inbound }

    /// The suite in use.
    public let suite: SRTPCryptoSuite
    /// The direction.
    public let direction: Direction
    private var session: srtp_t?

    /// Bytes a caller must leave free after an RTP packet for `protectRTP`.
    public static let maximumRTPTrailerBytes = Int(SRTP_MAX_TRAILER_LEN)
    /// Bytes a caller must leave free after an RTCP packet for `protectRTCP`.
    public static let maximumRTCPTrailerBytes = Int(SRTP_MAX_TRAILER_LEN) + 4

    private static let libraryReady: Bool = srtp_init() == srtp_err_status_ok

    /// Creates a context.
    /// - Parameter replayWindowPackets: replay-protection window (64 … 32768); only inbound uses it.
    public init(direction: Direction, key: SRTPKeyMaterial, replayWindowPackets: Int = 1024) throws(SRTPError) {
        guard Self.libraryReady else { throw .library(status: Int32(srtp_err_status_init_fail.rawValue), operation: "srtp_init") }
        self.suite = key.suite
        self.direction = direction
        var s: srtp_t?
        let status = key.withUnsafeBytes { raw in
            CSRTP_create_session(
                &s, key.suite == .aeadAES128GCM ? CSRTP_SUITE_AEAD_AES_128_GCM : CSRTP_SUITE_AES_CM_128_HMAC_SHA1_80,
                direction == .outbound ? 1 : 0, raw.baseAddress!.assumingMemoryBound(to: UInt8.self),
                UInt(replayWindowPackets))
        }
        guard status == srtp_err_status_ok, let s else { throw SRTPError(status: status, operation: "srtp_create") }
        session = s
    }

    deinit {
        // srtp_dealloc zeroes the session keys before freeing them.
        if let session { srtp_dealloc(session) }
    }

    /// Protects the RTP packet of `length` bytes at the start of `buffer` in place.
    /// - Returns: the SRTP packet length.
    /// - Note: Media loop only.
    @inline(__always)
    public func protectRTP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        guard buffer.count >= length + Self.maximumRTPTrailerBytes else { throw .bufferTooSmall }
        var len = Int32(length)
        let status = srtp_protect(session, buffer.baseAddress, &len)
        guard status == srtp_err_status_ok else { throw SRTPError(status: status, operation: "srtp_protect") }
        return Int(len)
    }

    /// Verifies and decrypts the SRTP packet of `length` bytes in `buffer` in place.
    /// - Returns: the RTP packet length.
    /// - Note: Media loop only.
    @inline(__always)
    public func unprotectRTP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        var len = Int32(length)
        let status = srtp_unprotect(session, buffer.baseAddress, &len)
        guard status == srtp_err_status_ok else { throw SRTPError(status: status, operation: "srtp_unprotect") }
        return Int(len)
    }

    /// Protects the RTCP compound packet of `length` bytes in `buffer` in place.
    /// - Note: Media loop only.
    public func protectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        guard buffer.count >= length + Self.maximumRTCPTrailerBytes else { throw .bufferTooSmall }
        var len = Int32(length)
        let status = srtp_protect_rtcp(session, buffer.baseAddress, &len)
        guard status == srtp_err_status_ok else { throw SRTPError(status: status, operation: "srtp_protect_rtcp") }
        return Int(len)
    }

    /// Verifies and decrypts the SRTCP packet of `length` bytes in `buffer` in place.
    /// - Note: Media loop only.
    public func unprotectRTCP(_ buffer: UnsafeMutableRawBufferPointer, length: Int) throws(SRTPError) -> Int {
        var len = Int32(length)
        let status = srtp_unprotect_rtcp(session, buffer.baseAddress, &len)
        guard status == srtp_err_status_ok else { throw SRTPError(status: status, operation: "srtp_unprotect_rtcp") }
        return Int(len)
    }
}
