/// The one error type of Tether's public API.
///
/// Every error has a stable numeric `code` (see the table in <doc:Errors>), says whether the call is
/// over (`isTerminal`) and whether calling again with the same configuration can work (`canRetry`),
/// carries a human `message` and, where there is one, the underlying `cause`.
public struct TetherError: Error, Sendable, CustomStringConvertible, Equatable {
    /// A stable error code. Codes are grouped by kind: 1xxx connection/ICE/media, 2xxx audio
    /// devices, 3xxx negotiation, 4xxx crypto, 5xxx API misuse, 9xxx internal.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        // MARK: 1xxx connection, ICE, media
        /// ICE could not gather any local candidate.
        public static let iceGatheringFailed = Code(rawValue: 1001)
        /// ICE connectivity checks failed while setting the call up.
        public static let iceConnectionFailed = Code(rawValue: 1002)
        /// No media arrived within the set-up time after negotiation.
        public static let connectionTimeout = Code(rawValue: 1003)
        /// Media stopped and could not be restored within the give-up time.
        public static let mediaTimeout = Code(rawValue: 1004)
        /// The ICE agent could not be created (bad local address, STUN/TURN server).
        public static let iceTransportUnavailable = Code(rawValue: 1005)
        /// A hold or resume re-offer got no answer within the set-up time and was withdrawn; the
        /// call stays as it was. Not terminal; retryable.
        public static let renegotiationUnanswered = Code(rawValue: 1006)

        // MARK: 2xxx audio devices and files
        /// The capture device (or source) failed; the call goes on listen-only.
        public static let captureDeviceFailed = Code(rawValue: 2001)
        /// The playback device (or sink) failed.
        public static let playbackDeviceFailed = Code(rawValue: 2002)
        /// An audio file could not be opened, read or written.
        public static let audioFileFailed = Code(rawValue: 2003)

        // MARK: 3xxx negotiation
        /// A session description is not valid SDP.
        public static let malformedSessionDescription = Code(rawValue: 3001)
        /// A session description is valid but offers nothing Tether can use (no Opus, no SRTP, no rtcp-mux …).
        public static let incompatibleSessionDescription = Code(rawValue: 3002)
        /// The Opus codec could not be set up.
        public static let codecFailed = Code(rawValue: 3003)
        /// DTMF was asked for, but the peer did not accept RFC 4733 `telephone-event`.
        public static let dtmfNotNegotiated = Code(rawValue: 3004)

        // MARK: 4xxx crypto
        /// SRTP could not be set up with the negotiated keys.
        public static let srtpSetupFailed = Code(rawValue: 4001)
        /// The peer's DTLS certificate does not match the fingerprint in its description (someone
        /// else is on the path, or the description was altered). Terminal; not retryable.
        public static let dtlsFingerprintMismatch = Code(rawValue: 4002)
        /// The DTLS handshake failed or did not finish within the set-up time. Terminal; retryable.
        public static let dtlsHandshakeFailed = Code(rawValue: 4003)

        // MARK: 5xxx API misuse
        /// The configuration is invalid.
        public static let invalidConfiguration = Code(rawValue: 5001)
        /// The call is not in a state that allows this operation.
        public static let invalidState = Code(rawValue: 5002)
        /// Both sides offered a renegotiation at once; the controlling side's offer wins (answer it).
        public static let renegotiationConflict = Code(rawValue: 5003)
        /// `sendDTMF` got a character that is not a DTMF key, a duration out of range, or more
        /// digits than its queue holds.
        public static let invalidDTMF = Code(rawValue: 5004)
        /// `submitFeedback` was given a rating outside 1…5 or a comment over 2000 characters.
        public static let invalidFeedback = Code(rawValue: 5005)

        // MARK: 9xxx internal
        /// A system resource (thread, descriptor) could not be obtained.
        public static let systemResourceFailed = Code(rawValue: 9001)

        public var description: String { String(rawValue) }
    }

    /// The stable numeric code.
    public let code: Code
    /// The call is over.
    public let isTerminal: Bool
    /// Calling again with the same configuration can work (for example after a network outage).
    public let canRetry: Bool
    /// A human-readable message. Never contains key material.
    public let message: String
    /// The underlying error, when there is one.
    public let cause: (any Error & Sendable)?

    public init(code: Code, isTerminal: Bool, canRetry: Bool, message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.isTerminal = isTerminal
        self.canRetry = canRetry
        self.message = message
        self.cause = cause
    }

    public var description: String {
        var s = "TetherError \(code.rawValue): \(message)"
        if isTerminal { s += " [terminal\(canRetry ? ", retryable" : "")]" } else if canRetry { s += " [retryable]" }
        return s
    }

    /// Errors are equal when code, flags and message are equal (causes are not compared).
    public static func == (a: TetherError, b: TetherError) -> Bool {
        a.code == b.code && a.isTerminal == b.isTerminal && a.canRetry == b.canRetry && a.message == b.message
    }
}

extension TetherError {
    static func invalidConfiguration(_ message: String) -> TetherError {
        TetherError(code: .invalidConfiguration, isTerminal: false, canRetry: false, message: message)
    }

    static func invalidState(_ message: String) -> TetherError {
        TetherError(code: .invalidState, isTerminal: false, canRetry: false, message: message)
    }
}
