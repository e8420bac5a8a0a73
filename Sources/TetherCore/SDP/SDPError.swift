import Foundation

/// Everything that can go wrong while parsing an SDP session description
/// (RFC 8866) or negotiating Tether's single SDES-SRTP/Opus audio stream
/// (RFC 3264 offer/answer).
///
/// Syntax problems carry the 1-based line number and the offending line.
/// No case, and no ``description``, ever contains SRTP key material: any
/// `inline:` key in a reported line is replaced with `<redacted>` when the
/// error is created.
public enum SDPError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A line could not be parsed. `number` is 1-based; `line` is the text of
    /// the line with trailing whitespace removed (and keys redacted).
    case malformedLine(number: Int, line: String, reason: String)
    /// A mandatory session-level line is absent; the payload names it (`"v="`,
    /// `"o="`, `"s="`, `"t="`).
    case missingRequiredLine(String)
    /// `v=` is present but is not `v=0`.
    case unsupportedVersion
    /// The description has no `m=audio` section.
    case noAudioMedia
    /// The audio section's transport protocol is not an SRTP one (`RTP/SAVP`, `RTP/SAVPF`,
    /// `UDP/TLS/RTP/SAVP`, `UDP/TLS/RTP/SAVPF`), e.g. plain `RTP/AVP`.
    case unsupportedProfile(String)
    /// The audio section offers no `opus/48000/2` payload type.
    case noOpus
    /// Neither the audio section nor the session carries both `a=ice-ufrag`
    /// and `a=ice-pwd`.
    case missingICECredentials
    /// An ICE candidate (RFC 8839 §5.1) could not be parsed. `line` is the
    /// candidate text as given.
    case invalidCandidate(line: String, reason: String)
    /// None of the offered `a=crypto` suites is one we hold a key for.
    /// `offered` lists the offered suite names in offer order (empty when the
    /// offer has no `a=crypto` lines at all).
    case noSupportedCrypto(offered: [String])
    /// An `a=crypto` attribute (RFC 4568) is malformed: bad base64, wrong
    /// key||salt length for its suite, bad lifetime/MKI … The reason never
    /// contains key material.
    case invalidCrypto(reason: String)
    /// The audio section lacks `a=rtcp-mux` (RFC 5761); Tether only runs one
    /// ICE component.
    case rtcpMuxRequired
    /// An answer contradicts the offer it answers.
    case answerDoesNotMatchOffer(reason: String)
    /// The audio section has port 0, i.e. the stream is rejected/disabled.
    case audioRejected
    /// A DTLS-SRTP section (`UDP/TLS/RTP/SAVP(F)`, or an answer choosing DTLS) carries no
    /// `a=fingerprint` with a hash function Tether checks (sha-256, sha-384, sha-512).
    case missingFingerprint
    /// `a=setup` has a value Tether cannot use here (`holdconn`, or anything unknown).
    case unsupportedDTLSSetup(String)
    /// The description offers neither keying this side accepts: `offered` names what it had.
    case noSupportedKeying(offered: String)

    /// A human-readable message; never contains key material.
    public var description: String {
        switch self {
        case let .malformedLine(number, line, reason):
            return "SDP line \(number) is malformed (\(Self.excerpt(reason, limit: 200))): \"\(Self.excerpt(line))\""
        case let .missingRequiredLine(line):
            return "SDP is missing the required \(line) line"
        case .unsupportedVersion:
            return "SDP version is not 0"
        case .noAudioMedia:
            return "SDP has no m=audio section"
        case let .unsupportedProfile(profile):
            return "audio transport profile \(Self.excerpt(profile)) is not supported (need RTP/SAVP, RTP/SAVPF or UDP/TLS/RTP/SAVPF)"
        case .noOpus:
            return "audio section does not offer opus/48000/2"
        case .missingICECredentials:
            return "no a=ice-ufrag/a=ice-pwd at media or session level"
        case let .invalidCandidate(line, reason):
            return "invalid ICE candidate (\(Self.excerpt(reason, limit: 200))): \"\(Self.excerpt(line))\""
        case let .noSupportedCrypto(offered):
            if offered.isEmpty { return "no a=crypto lines (SDES-SRTP is required)" }
            return "none of the offered SRTP crypto suites is supported: \(Self.excerpt(offered.joined(separator: ", ")))"
        case let .invalidCrypto(reason):
            return "invalid a=crypto attribute: \(Self.excerpt(reason, limit: 200))"
        case .rtcpMuxRequired:
            return "a=rtcp-mux is required"
        case let .answerDoesNotMatchOffer(reason):
            return "SDP answer does not match our offer: \(Self.excerpt(reason, limit: 200))"
        case .audioRejected:
            return "audio stream rejected (port 0)"
        case .missingFingerprint:
            return "DTLS-SRTP needs an a=fingerprint with sha-256, sha-384 or sha-512"
        case let .unsupportedDTLSSetup(value):
            return "a=setup:\(Self.excerpt(value, limit: 40)) is not supported (actpass, active or passive)"
        case let .noSupportedKeying(offered):
            return "no SRTP keying this side accepts: the description has \(Self.excerpt(offered, limit: 80))"
        }
    }

    /// Builds `.malformedLine` with any inline SRTP key in `line` redacted, and the line cut to
    /// what a message can quote (a hostile description's megabyte line is not kept).
    static func malformed(_ number: Int, _ line: Substring, _ reason: String) -> SDPError {
        .malformedLine(number: number, line: quotable(line), reason: reason)
    }

    /// A line of the peer's text as an error keeps it: at most ``quotedBytesKept`` bytes, with any
    /// inline SRTP key redacted (whatever line the key was put on).
    static func quotable(_ line: some StringProtocol) -> String {
        let kept = line.utf8.count > quotedBytesKept ? line.prefix(quotedBytesKept) : line[...]
        return redactingKeyMaterial(String(kept))
    }

    /// How much of a quoted line an error keeps (more than `excerpt` shows, so the cut is visible).
    static let quotedBytesKept = 1024

    /// Text taken from a description, as messages quote it: any inline SRTP key redacted (a
    /// peer's mangled line may carry one anywhere, even inside another field), control
    /// characters, quotes and backslashes escaped (a quoted line cannot break a log line or a
    /// terminal), and at most `limit` bytes of UTF-8 (about 120 by default), with "…" where it
    /// was cut.
    public static func excerpt(_ text: some StringProtocol, limit: Int = 120) -> String {
        var out = ""
        var bytes = 0
        let redacted = redactingKeyMaterial(String(text.prefix(limit * 4 + 64)))
        for scalar in redacted.unicodeScalars {
            let piece: String
            switch scalar {
            case "\r": piece = "\\r"
            case "\n": piece = "\\n"
            case "\t": piece = "\\t"
            case "\"": piece = "\\\""
            case "\\": piece = "\\\\"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
                    piece = "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    piece = String(scalar)
                }
            }
            let size = piece.utf8.count
            guard bytes + size <= limit else { return out + "…" }
            out += piece
            bytes += size
        }
        return out
    }

    /// Replaces whatever follows each `inline:` (case-insensitive) up to the
    /// next whitespace, `;` or `|` with `<redacted>`.
    static func redactingKeyMaterial(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        while let range = rest.range(of: "inline:", options: .caseInsensitive) {
            result += rest[rest.startIndex..<range.upperBound]
            result += "<redacted>"
            var index = range.upperBound
            while index < rest.endIndex, !" \t;|".contains(rest[index]) {
                index = rest.index(after: index)
            }
            rest = rest[index...]
        }
        result += rest
        return result
    }
}

/// Internal error used by the field-level parsers; the line-level parser turns
/// it into ``SDPError/malformedLine(number:line:reason:)``.
struct SDPFieldError: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}
