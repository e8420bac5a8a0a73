import CSRTP

/// A failure reported by libsrtp2.
public enum SRTPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The authentication tag did not verify (tampered, or wrong key).
    case authenticationFailed
    /// The packet index was seen before, or is older than the replay window.
    case replayed
    /// The key material has the wrong length for the suite.
    case badKeyLength(expectedBytes: Int, actualBytes: Int)
    /// The output buffer lacks room for the SRTP trailer.
    case bufferTooSmall
    /// Any other libsrtp2 status (`srtp_err_status_t`).
    case library(status: Int32, operation: StaticString)

    init(status: srtp_err_status_t, operation: StaticString) {
        switch status {
        case srtp_err_status_auth_fail: self = .authenticationFailed
        case srtp_err_status_replay_fail, srtp_err_status_replay_old: self = .replayed
        default: self = .library(status: Int32(bitPattern: status.rawValue), operation: operation)
        }
    }

    public var description: String {
        switch self {
        case .authenticationFailed: "SRTP authentication failed"
        case .replayed: "SRTP replay check failed"
        case .badKeyLength(let e, let a): "SRTP master key and salt must be \(e) bytes, got \(a)"
        case .bufferTooSmall: "SRTP buffer too small for the trailer"
        case .library(let s, let op): "\(op) failed with libsrtp2 status \(s)"
        }
    }

    public static func == (a: Self, b: Self) -> Bool {
        switch (a, b) {
        case (.authenticationFailed, .authenticationFailed), (.replayed, .replayed), (.bufferTooSmall, .bufferTooSmall):
            true
        case (.badKeyLength(let x, let y), .badKeyLength(let u, let v)): x == u && y == v
        case (.library(let s, _), .library(let t, _)): s == t
        default: false
        }
    }
}
