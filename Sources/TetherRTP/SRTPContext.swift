import CSRTP
import Glibc

/// One direction of SRTP and SRTCP protection (libsrtp2 session with one key-sharing stream).
///
/// Outbound contexts protect what we send with our key; inbound contexts verify and decrypt
/// what the peer sends with its key. Not thread-safe: the media loop owns both.
///
/// Debian's libsrtp2 is built on NSS and allocates on every packet (about 14 malloc/free for
/// AES_CM_128_HMAC_SHA1_80, 5 for AEAD_AES_128_GCM), so keep it off device threads.
///
/// An inbound context accepts any SSRC, and libsrtp keeps one stream (keys, replay window,
/// rollover counter) for each SSRC whose packet authenticated. It keeps at most
/// ``maximumInboundStreams``: a packet that adds one more removes the stream used least
/// recently, so a peer that invents SSRCs cannot grow the context without bound.
public final class SRTPContext: @unchecked Sendable {
    /// Which way packets go through this context.
    public enum Direction: Sendable { case outbound, inbound }

    /// The suite in use.
    public let suite: SRTPCryptoSuite
    /// The direction.
    public let direction: Direction
    private var session: srtp_t?

    /// Most SSRCs an inbound context keeps a stream for (the peer's media source and its RTCP
    /// sender, a source it moves to, and room to spare).
    public static let maximumInboundStreams = 8
    /// The SSRCs an inbound context has streams for, and when each was last used (a count of
    /// packets unprotected): `maximumInboundStreams` of each, allocated in `init`.
    private let streamSSRCs: UnsafeMutablePointer<UInt32>
    private let streamLastUse: UnsafeMutablePointer<UInt64>
    private var streamCount = 0
    private var useClock: UInt64 = 0
    /// Streams removed to make room for a new SSRC.
    public private(set) var streamsEvicted = 0

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
        streamSSRCs = .allocate(capacity: Self.maximumInboundStreams)
        streamSSRCs.initialize(repeating: 0, count: Self.maximumInboundStreams)
        streamLastUse = .allocate(capacity: Self.maximumInboundStreams)
        streamLastUse.initialize(repeating: 0, count: Self.maximumInboundStreams)
    }

    deinit {
        // srtp_dealloc zeroes the session keys before freeing them.
        if let session { srtp_dealloc(session) }
        streamSSRCs.deallocate()
        streamLastUse.deallocate()
    }

    /// SSRCs the inbound context holds a stream for now, at most ``maximumInboundStreams``.
    public var inboundStreamCount: Int { streamCount }

    /// The slot of `ssrc` among the known streams, or -1.
    @inline(__always)
    private func streamSlot(_ ssrc: UInt32) -> Int {
        var index = 0
        while index < streamCount {
            if streamSSRCs[index] == ssrc { return index }
            index += 1
        }
        return -1
    }

    /// After a packet from `ssrc` was unprotected (libsrtp then holds a stream for it): marks
    /// it used, or takes it in, removing the least recently used stream when all are taken.
    @inline(__always)
    private func noteInboundStream(_ ssrc: UInt32, slot: Int) {
        useClock &+= 1
        if slot >= 0 {
            streamLastUse[slot] = useClock
            return
        }
        var target = streamCount
        if streamCount == Self.maximumInboundStreams {
            target = 0
            for index in 1..<streamCount where streamLastUse[index] < streamLastUse[target] { target = index }
            _ = srtp_remove_stream(session, streamSSRCs[target].bigEndian)
            streamsEvicted += 1
        } else {
            streamCount += 1
        }
        streamSSRCs[target] = ssrc
        streamLastUse[target] = useClock
    }

    /// The big-endian 32-bit word at `offset` of `buffer` (an SSRC in a header).
    @inline(__always)
    private static func word(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(buffer[offset]) << 24 | UInt32(buffer[offset + 1]) << 16 | UInt32(buffer[offset + 2]) << 8 | UInt32(buffer[offset + 3])
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
        // Too short for a header: what libsrtp itself answers.
        guard length >= 12, buffer.count >= length else { throw SRTPError(status: srtp_err_status_bad_param, operation: "srtp_unprotect") }
        let ssrc = Self.word(buffer, at: 8)
        let slot = streamSlot(ssrc)
        var len = Int32(length)
        let status = srtp_unprotect(session, buffer.baseAddress, &len)
        guard status == srtp_err_status_ok else { throw SRTPError(status: status, operation: "srtp_unprotect") }
        noteInboundStream(ssrc, slot: slot)
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
        guard length >= 8, buffer.count >= length else { throw SRTPError(status: srtp_err_status_bad_param, operation: "srtp_unprotect_rtcp") }
        let ssrc = Self.word(buffer, at: 4)
        let slot = streamSlot(ssrc)
        var len = Int32(length)
        let status = srtp_unprotect_rtcp(session, buffer.baseAddress, &len)
        guard status == srtp_err_status_ok else { throw SRTPError(status: status, operation: "srtp_unprotect_rtcp") }
        noteInboundStream(ssrc, slot: slot)
        return Int(len)
    }
}
