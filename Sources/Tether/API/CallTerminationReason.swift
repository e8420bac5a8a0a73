/// Why a call ended.
public struct CallTerminationReason: Sendable, Equatable, CustomStringConvertible {
    /// The kind of ending.
    public enum Cause: Int, Sendable, Equatable, CustomStringConvertible {
        /// This side hung up.
        case localHangup = 0
        /// The peer hung up (RTCP BYE received, or the embedder said so).
        case remoteHangup = 1
        /// ICE could not connect while setting the call up.
        case connectionFailed = 2
        /// No media within the set-up time.
        case connectionTimeout = 3
        /// Media was lost and could not be restored in time.
        case mediaTimeout = 4
        /// A terminal error (see `error`).
        case error = 5

        public var description: String {
            switch self {
            case .localHangup: "local hang-up"
            case .remoteHangup: "remote hang-up"
            case .connectionFailed: "connection failed"
            case .connectionTimeout: "connection timeout"
            case .mediaTimeout: "media timeout"
            case .error: "error"
            }
        }
    }

    /// The kind of ending.
    public var cause: Cause
    /// `cause` as a stable number (the table in <doc:Errors>).
    public var causeCode: Int { cause.rawValue }
    /// A SIP status code the embedder supplied (for example 487), if any.
    public var sipCode: Int?
    /// The SIP reason phrase the embedder supplied, if any.
    public var sipPhrase: String?
    /// The terminal error, when the call ended because of one.
    public var error: TetherError?

    public init(cause: Cause, sipCode: Int? = nil, sipPhrase: String? = nil, error: TetherError? = nil) {
        self.cause = cause
        self.sipCode = sipCode
        self.sipPhrase = sipPhrase
        self.error = error
    }

    public var description: String {
        var s = cause.description
        if let sipCode { s += " (SIP \(sipCode)\(sipPhrase.map { " " + $0 } ?? ""))" }
        if let error { s += ": \(error.message)" }
        return s
    }
}
