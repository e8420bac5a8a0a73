/// An SDP session description (RFC 8866 subset) with its media sections.
///
/// ``parse(_:)`` accepts CRLF or LF line endings, blank lines and trailing
/// whitespace; ``serialized()`` writes CRLF-terminated lines in RFC 8866
/// order (v o s i u e p c b t r z a, then each m= i c b a). Unknown
/// attributes are kept verbatim. `k=` lines (obsolete) are accepted and
/// dropped. Printing a description never shows SRTP keys (the crypto
/// attributes redact themselves); ``serialized()`` does contain them.
public struct SessionDescription: Sendable, Equatable {
    /// `o=` origin.
    public var origin: SDPOrigin
    /// `s=` session name (`-` conventionally; may be empty).
    public var sessionName: String
    /// `i=` session information.
    public var information: String?
    /// `u=` URI.
    public var uri: String?
    /// `e=` email addresses.
    public var emailAddresses: [String]
    /// `p=` phone numbers.
    public var phoneNumbers: [String]
    /// Session-level `c=`.
    public var connection: SDPConnectionData?
    /// Session-level `b=` lines.
    public var bandwidths: [SDPBandwidth]
    /// `t=` lines (at least one when serialized; `t=0 0` is written if empty).
    public var timings: [SDPTiming]
    /// `z=` value, verbatim.
    public var timeZoneAdjustments: String?
    /// Session-level `a=ice-lite`.
    public var iceLite: Bool
    /// Session-level `a=ice-ufrag` (baresip puts it here).
    public var iceUfrag: String?
    /// Session-level `a=ice-pwd`.
    public var icePwd: String?
    /// Session-level `a=ice-options` tokens.
    public var iceOptions: [String]
    /// Session-level `a=end-of-candidates` (RFC 8840 allows it here too;
    /// it then applies to every media section).
    public var endOfCandidates: Bool
    /// Session-level direction attribute, the default for every media section.
    public var direction: MediaDirection?
    /// Session-level `a=fingerprint` lines Tether checks (the default for every media section).
    public var fingerprints: [DTLSFingerprint] = []
    /// Session-level `a=setup`.
    public var setup: DTLSSetup?
    /// Every other session-level attribute, verbatim and in order.
    public var attributes: [SDPAttribute]
    /// Media sections in order.
    public var media: [MediaDescription]

    /// Creates a session description.
    public init(
        origin: SDPOrigin, sessionName: String = "-", information: String? = nil, uri: String? = nil,
        emailAddresses: [String] = [], phoneNumbers: [String] = [], connection: SDPConnectionData? = nil,
        bandwidths: [SDPBandwidth] = [], timings: [SDPTiming] = [SDPTiming()], timeZoneAdjustments: String? = nil,
        iceLite: Bool = false, iceUfrag: String? = nil, icePwd: String? = nil, iceOptions: [String] = [],
        endOfCandidates: Bool = false, direction: MediaDirection? = nil, attributes: [SDPAttribute] = [], media: [MediaDescription] = []
    ) {
        self.origin = origin
        self.sessionName = sessionName
        self.information = information
        self.uri = uri
        self.emailAddresses = emailAddresses
        self.phoneNumbers = phoneNumbers
        self.connection = connection
        self.bandwidths = bandwidths
        self.timings = timings
        self.timeZoneAdjustments = timeZoneAdjustments
        self.iceLite = iceLite
        self.iceUfrag = iceUfrag
        self.icePwd = icePwd
        self.iceOptions = iceOptions
        self.endOfCandidates = endOfCandidates
        self.direction = direction
        self.attributes = attributes
        self.media = media
    }

    /// Raw value(s) of unknown session-level attributes called `name`.
    public func attributeValues(named name: String) -> [String?] {
        attributes.filter { $0.name == name }.map(\.value)
    }

    // MARK: Parsing

    /// Parses an SDP text.
    /// - Throws: ``SDPError/missingRequiredLine(_:)`` when the first line is
    ///   not `v=` or `o=`/`s=`/`t=` is absent, ``SDPError/unsupportedVersion``,
    ///   ``SDPError/malformedLine(number:line:reason:)`` for syntax problems,
    ///   ``SDPError/invalidCandidate(line:reason:)`` and
    ///   ``SDPError/invalidCrypto(reason:)`` for bad candidate/crypto lines.
    public static func parse(_ text: String) throws(SDPError) -> SessionDescription {
        var lines: [(number: Int, text: Substring)] = []
        let rawLines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }
        for (offset, raw) in rawLines.enumerated() {
            var line = raw
            while let last = line.last, last.isWhitespace { line = line.dropLast() }
            if !line.isEmpty { lines.append((offset + 1, line)) }
        }

        guard let first = lines.first, first.text.hasPrefix("v=") else { throw .missingRequiredLine("v=") }
        guard first.text.dropFirst(2).trimmingSDPWhitespace == "0" else { throw .unsupportedVersion }

        var origin: SDPOrigin?
        var sessionName: String?
        var session = SessionDescription(origin: SDPOrigin(sessionID: 0, sessionVersion: 0, address: "0.0.0.0"), timings: [])
        var currentMedia: MediaDescription?

        for (number, line) in lines.dropFirst() {
            let chars = Array(line.prefix(2))
            guard chars.count == 2, chars[1] == "=", chars[0].isASCII, chars[0].isLetter else {
                throw .malformed(number, line, "expected <type>=<value>")
            }
            let type = chars[0]
            let value = line.dropFirst(2)
            func field<T>(_ body: () throws(SDPFieldError) -> T) throws(SDPError) -> T {
                do throws(SDPFieldError) { return try body() } catch { throw SDPError.malformed(number, line, error.reason) }
            }

            if type == "m" {
                if let finished = currentMedia { session.media.append(finished) }
                currentMedia = try field { () throws(SDPFieldError) in try MediaDescription(parsingMediaLine: value) }
                continue
            }

            if var media = currentMedia {
                switch type {
                case "i": media.information = String(value)
                case "c": media.connection = try field { () throws(SDPFieldError) in try SDPConnectionData(parsing: value) }
                case "b": media.bandwidths.append(try field { () throws(SDPFieldError) in try SDPBandwidth(parsing: value) })
                case "k": break
                case "a": try media.apply(attribute: value, number: number, line: line)
                case "v", "o", "s", "u", "e", "p", "t", "r", "z":
                    throw .malformed(number, line, "\(type)= is not allowed in a media section")
                default:
                    throw .malformed(number, line, "unknown line type \(type)=")
                }
                currentMedia = media
                continue
            }

            switch type {
            case "v":
                throw .malformed(number, line, "duplicate v= line")
            case "o":
                guard origin == nil else { throw .malformed(number, line, "duplicate o= line") }
                origin = try field { () throws(SDPFieldError) in try SDPOrigin(parsing: value) }
            case "s":
                guard sessionName == nil else { throw .malformed(number, line, "duplicate s= line") }
                sessionName = String(value.trimmingSDPWhitespace)
            case "i": session.information = String(value)
            case "u": session.uri = String(value)
            case "e": session.emailAddresses.append(String(value))
            case "p": session.phoneNumbers.append(String(value))
            case "c": session.connection = try field { () throws(SDPFieldError) in try SDPConnectionData(parsing: value) }
            case "b": session.bandwidths.append(try field { () throws(SDPFieldError) in try SDPBandwidth(parsing: value) })
            case "t": session.timings.append(try field { () throws(SDPFieldError) in try SDPTiming(parsing: value) })
            case "r":
                guard !session.timings.isEmpty else { throw .malformed(number, line, "r= without a preceding t=") }
                session.timings[session.timings.count - 1].repeats.append(String(value))
            case "z": session.timeZoneAdjustments = String(value)
            case "k": break
            case "a": try session.applySessionAttribute(value, number: number, line: line)
            default:
                throw .malformed(number, line, "unknown line type \(type)=")
            }
        }
        if let finished = currentMedia { session.media.append(finished) }

        guard let origin else { throw .missingRequiredLine("o=") }
        guard let sessionName else { throw .missingRequiredLine("s=") }
        guard !session.timings.isEmpty else { throw .missingRequiredLine("t=") }
        session.origin = origin
        session.sessionName = sessionName
        return session
    }

    private mutating func applySessionAttribute(_ text: Substring, number: Int, line: Substring) throws(SDPError) {
        let attribute = SDPAttribute(parsing: text)
        func requireValue() throws(SDPError) -> String {
            let trimmed = Substring(attribute.value ?? "").trimmingSDPWhitespace
            guard !trimmed.isEmpty else { throw SDPError.malformed(number, line, "a=\(attribute.name) needs a value") }
            return String(trimmed)
        }
        switch attribute.name {
        case "ice-lite": iceLite = true
        case "ice-ufrag": iceUfrag = try requireValue()
        case "ice-pwd": icePwd = try requireValue()
        case "ice-options": iceOptions = (attribute.value ?? "").sdpTokens.map(String.init)
        case "end-of-candidates": endOfCandidates = true
        case "sendrecv", "sendonly", "recvonly", "inactive": direction = MediaDirection(rawValue: attribute.name)
        case "fingerprint":
            if let parsed = try MediaDescription.parseFingerprint(Substring(attribute.value ?? ""), number: number, line: line) {
                fingerprints.append(parsed)
            } else {
                attributes.append(attribute)
            }
        case "setup":
            guard let parsed = DTLSSetup(rawValue: try requireValue().lowercased()) else {
                throw SDPError.malformed(number, line, "a=setup must be actpass, active, passive or holdconn")
            }
            setup = parsed
        default: attributes.append(attribute)
        }
    }

    // MARK: Serialization

    /// The SDP text: CRLF-terminated lines in RFC 8866 order. Contains SRTP
    /// keys — send it, don't log it.
    public func serialized() -> String {
        var lines = ["v=0", "o=\(origin.serialized)", "s=\(sessionName.isEmpty ? " " : sessionName)"]
        if let information { lines.append("i=\(information)") }
        if let uri { lines.append("u=\(uri)") }
        for email in emailAddresses { lines.append("e=\(email)") }
        for phone in phoneNumbers { lines.append("p=\(phone)") }
        if let connection { lines.append("c=\(connection.serialized)") }
        for bandwidth in bandwidths { lines.append("b=\(bandwidth.serialized)") }
        for timing in timings.isEmpty ? [SDPTiming()] : timings {
            lines.append("t=\(timing.startTimeNTPSeconds) \(timing.stopTimeNTPSeconds)")
            for repeatValue in timing.repeats { lines.append("r=\(repeatValue)") }
        }
        if let timeZoneAdjustments { lines.append("z=\(timeZoneAdjustments)") }
        if iceLite { lines.append("a=ice-lite") }
        if let iceUfrag { lines.append("a=ice-ufrag:\(iceUfrag)") }
        if let icePwd { lines.append("a=ice-pwd:\(icePwd)") }
        if !iceOptions.isEmpty { lines.append("a=ice-options:" + iceOptions.joined(separator: " ")) }
        if endOfCandidates { lines.append("a=end-of-candidates") }
        for fingerprint in fingerprints { lines.append("a=fingerprint:\(fingerprint.attributeValue)") }
        if let setup { lines.append("a=setup:\(setup.rawValue)") }
        if let direction { lines.append("a=\(direction.rawValue)") }
        for attribute in attributes { lines.append("a=\(attribute.serialized)") }
        for section in media { section.appendLines(to: &lines) }
        return lines.map { $0 + "\r\n" }.joined()
    }
}
