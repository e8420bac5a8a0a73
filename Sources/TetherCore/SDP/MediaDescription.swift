/// One media section (`m=` line and the lines up to the next `m=`), RFC 8866
/// §5.14. Typed fields cover what Tether's audio stream needs; every other
/// attribute is kept verbatim in ``attributes`` so a parse/serialize round
/// trip preserves it.
public struct MediaDescription: Sendable, Equatable {
    /// Media type: `audio`, `video`, `application`, …
    public var media: String
    /// Transport port number (0 = stream rejected/disabled; 9 = "discard",
    /// common with ICE/trickle).
    public var port: UInt16
    /// The `/<number of ports>` suffix of the port field, if present.
    public var portCount: UInt16?
    /// Transport protocol, e.g. `RTP/SAVP`.
    public var transportProtocol: SDPMediaProtocol
    /// Media formats in preference order; RTP payload types as decimal text.
    public var formats: [String]
    /// `i=` media title.
    public var information: String?
    /// Media-level `c=` line.
    public var connection: SDPConnectionData?
    /// Media-level `b=` lines.
    public var bandwidths: [SDPBandwidth]
    /// `a=rtpmap` lines.
    public var rtpMaps: [RTPMapAttribute]
    /// `a=fmtp` lines whose format is an RTP payload type.
    public var formatParameters: [FormatParametersAttribute]
    /// `a=ptime`: packet duration in milliseconds.
    public var ptimeMilliseconds: UInt32?
    /// `a=maxptime`: longest packet duration in milliseconds.
    public var maxPtimeMilliseconds: UInt32?
    /// `a=rtcp-mux` present (RFC 5761).
    public var rtcpMux: Bool
    /// `a=rtcp` (RFC 3605).
    public var rtcp: RTCPAttribute?
    /// Media-level `a=ice-ufrag`.
    public var iceUfrag: String?
    /// Media-level `a=ice-pwd`.
    public var icePwd: String?
    /// Media-level `a=ice-options` tokens (e.g. `trickle`).
    public var iceOptions: [String]
    /// `a=candidate` lines in order.
    public var candidates: [ICECandidate]
    /// `a=end-of-candidates` present (RFC 8840).
    public var endOfCandidates: Bool
    /// `a=crypto` lines in order (RFC 4568).
    public var crypto: [CryptoAttribute]
    /// Explicit direction attribute; `nil` when absent (see
    /// ``effectiveDirection(sessionDirection:)``).
    public var direction: MediaDirection?
    /// `a=mid`.
    public var mid: String?
    /// `a=fingerprint` lines with a hash function Tether checks, in order (RFC 8122); others are
    /// kept in ``attributes``.
    public var fingerprints: [DTLSFingerprint]
    /// `a=setup` (RFC 4145 / RFC 8842).
    public var setup: DTLSSetup?
    /// Every other attribute, verbatim and in order.
    public var attributes: [SDPAttribute]

    /// Creates a media section.
    public init(
        media: String = "audio", port: UInt16, portCount: UInt16? = nil,
        transportProtocol: SDPMediaProtocol = .rtpSAVP, formats: [String],
        information: String? = nil, connection: SDPConnectionData? = nil, bandwidths: [SDPBandwidth] = [],
        rtpMaps: [RTPMapAttribute] = [], formatParameters: [FormatParametersAttribute] = [],
        ptimeMilliseconds: UInt32? = nil, maxPtimeMilliseconds: UInt32? = nil,
        rtcpMux: Bool = false, rtcp: RTCPAttribute? = nil,
        iceUfrag: String? = nil, icePwd: String? = nil, iceOptions: [String] = [],
        candidates: [ICECandidate] = [], endOfCandidates: Bool = false,
        crypto: [CryptoAttribute] = [], direction: MediaDirection? = nil, mid: String? = nil,
        fingerprints: [DTLSFingerprint] = [], setup: DTLSSetup? = nil, attributes: [SDPAttribute] = []
    ) {
        self.media = media
        self.port = port
        self.portCount = portCount
        self.transportProtocol = transportProtocol
        self.formats = formats
        self.information = information
        self.connection = connection
        self.bandwidths = bandwidths
        self.rtpMaps = rtpMaps
        self.formatParameters = formatParameters
        self.ptimeMilliseconds = ptimeMilliseconds
        self.maxPtimeMilliseconds = maxPtimeMilliseconds
        self.rtcpMux = rtcpMux
        self.rtcp = rtcp
        self.iceUfrag = iceUfrag
        self.icePwd = icePwd
        self.iceOptions = iceOptions
        self.candidates = candidates
        self.endOfCandidates = endOfCandidates
        self.crypto = crypto
        self.direction = direction
        self.mid = mid
        self.fingerprints = fingerprints
        self.setup = setup
        self.attributes = attributes
    }

    /// The formats that are RTP payload types (0…127), in order.
    public var payloadTypes: [UInt8] {
        formats.compactMap { UInt8($0) }.filter { $0 <= 127 }
    }

    /// The rtpmap for `payloadType`, if any.
    public func rtpMap(forPayloadType payloadType: UInt8) -> RTPMapAttribute? {
        rtpMaps.first(where: { $0.payloadType == payloadType })
    }

    /// The fmtp parameters for `payloadType` (empty if none).
    public func formatParameters(forPayloadType payloadType: UInt8) -> [FormatParameter] {
        formatParameters.first(where: { $0.payloadType == payloadType })?.parameters ?? []
    }

    /// The first payload type in the format list mapped to `opus/48000/2`.
    public var opusPayloadType: UInt8? {
        payloadTypes.first(where: { rtpMap(forPayloadType: $0)?.isOpus == true })
    }

    /// The Opus view of the fmtp parameters for `payloadType`.
    public func opusParameters(forPayloadType payloadType: UInt8) -> OpusParameters {
        OpusParameters(formatParameters: formatParameters(forPayloadType: payloadType))
    }

    /// The direction in force: the media-level attribute, else the
    /// session-level one, else `sendrecv` (RFC 8866 §6.7).
    public func effectiveDirection(sessionDirection: MediaDirection? = nil) -> MediaDirection {
        direction ?? sessionDirection ?? .sendrecv
    }

    /// Raw value(s) of unknown attributes called `name`.
    public func attributeValues(named name: String) -> [String?] {
        attributes.filter { $0.name == name }.map(\.value)
    }

    /// Whether an unknown attribute called `name` is present (e.g. `rtcp-rsize`).
    public func hasAttribute(_ name: String) -> Bool {
        attributes.contains { $0.name == name }
    }

    // MARK: Parsing

    init(parsingMediaLine value: Substring) throws(SDPFieldError) {
        let fields = value.sdpTokens
        guard fields.count >= 4 else {
            throw SDPFieldError("expected <media> <port> <proto> <fmt> ..., found \(fields.count) fields")
        }
        let portField = fields[1].split(separator: "/", omittingEmptySubsequences: false)
        guard portField.count <= 2, let port = UInt16(portField[0]) else {
            throw SDPFieldError("port \(fields[1]) is not a number 0…65535")
        }
        var portCount: UInt16?
        if portField.count == 2 {
            guard let count = UInt16(portField[1]) else { throw SDPFieldError("port count \(portField[1]) is not a number") }
            portCount = count
        }
        self.init(
            media: String(fields[0]), port: port, portCount: portCount,
            transportProtocol: SDPMediaProtocol(name: String(fields[2])), formats: fields[3...].map(String.init))
    }

    /// Applies one `a=` line inside this media section.
    mutating func apply(attribute text: Substring, number: Int, line: Substring) throws(SDPError) {
        let attribute = SDPAttribute(parsing: text)
        let value = Substring(attribute.value ?? "")
        func field<T>(_ body: () throws(SDPFieldError) -> T) throws(SDPError) -> T {
            do throws(SDPFieldError) { return try body() } catch { throw SDPError.malformed(number, line, error.reason) }
        }
        func requireValue() throws(SDPError) -> String {
            let trimmed = value.trimmingSDPWhitespace
            guard !trimmed.isEmpty else { throw SDPError.malformed(number, line, "a=\(attribute.name) needs a value") }
            return String(trimmed)
        }
        switch attribute.name {
        case "rtpmap":
            rtpMaps.append(try field { () throws(SDPFieldError) in try RTPMapAttribute(parsing: value) })
        case "fmtp":
            if let fmtp = FormatParametersAttribute(parsing: value) {
                formatParameters.append(fmtp)
            } else {
                attributes.append(attribute)
            }
        case "ptime":
            ptimeMilliseconds = try field { () throws(SDPFieldError) in try parseMilliseconds(value) }
        case "maxptime":
            maxPtimeMilliseconds = try field { () throws(SDPFieldError) in try parseMilliseconds(value) }
        case "rtcp-mux":
            rtcpMux = true
        case "rtcp":
            rtcp = try field { () throws(SDPFieldError) in try RTCPAttribute(parsing: value) }
        case "ice-ufrag":
            iceUfrag = try requireValue()
        case "ice-pwd":
            icePwd = try requireValue()
        case "ice-options":
            iceOptions = value.sdpTokens.map(String.init)
        case "candidate":
            candidates.append(try ICECandidate.parse(String(line)))
        case "end-of-candidates":
            endOfCandidates = true
        case "crypto":
            do throws(SDPError) {
                crypto.append(try CryptoAttribute.parse(String(value)))
            } catch {
                if case let .invalidCrypto(reason) = error { throw .invalidCrypto(reason: "line \(number): \(reason)") }
                throw error
            }
        case "sendrecv", "sendonly", "recvonly", "inactive":
            direction = MediaDirection(rawValue: attribute.name)
        case "mid":
            mid = try requireValue()
        case "fingerprint":
            if let parsed = try Self.parseFingerprint(value, number: number, line: line) {
                fingerprints.append(parsed)
            } else {
                attributes.append(attribute)
            }
        case "setup":
            let text = try requireValue()
            guard let parsed = DTLSSetup(rawValue: text.lowercased()) else {
                throw SDPError.malformed(number, line, "a=setup must be actpass, active, passive or holdconn")
            }
            setup = parsed
        default:
            attributes.append(attribute)
        }
    }

    /// Parses an `a=fingerprint` value: nil for a well-formed one whose hash function Tether does
    /// not check (`sha-1`: kept verbatim, as a peer may list several); malformed ones throw.
    static func parseFingerprint(_ value: Substring, number: Int, line: Substring) throws(SDPError) -> DTLSFingerprint? {
        do throws(DTLSFingerprintError) {
            return try DTLSFingerprint(attributeValue: String(value))
        } catch {
            if case .unsupportedHashFunction = error { return nil }
            throw SDPError.malformed(number, line, error.description)
        }
    }

    /// The fingerprints in force: this section's, else the session's (RFC 8122 §5 allows both).
    public func effectiveFingerprints(in session: SessionDescription) -> [DTLSFingerprint] {
        fingerprints.isEmpty ? session.fingerprints : fingerprints
    }

    /// The setup in force: this section's, else the session's.
    public func effectiveSetup(in session: SessionDescription) -> DTLSSetup? {
        setup ?? session.setup
    }

    // MARK: Serialization

    func appendLines(to lines: inout [String]) {
        var mField = "m=\(media) \(port)"
        if let portCount { mField += "/\(portCount)" }
        mField += " \(transportProtocol.name)"
        for format in formats { mField += " \(format)" }
        lines.append(mField)
        if let information { lines.append("i=\(information)") }
        if let connection { lines.append("c=\(connection.serialized)") }
        for bandwidth in bandwidths { lines.append("b=\(bandwidth.serialized)") }
        if let mid { lines.append("a=mid:\(mid)") }
        // Each a=fmtp once, after the first a=rtpmap of its payload type (a peer may repeat an
        // a=rtpmap; writing the fmtp under each copy would grow the description on every round).
        var writtenFMTP = Set<Int>()
        for map in rtpMaps {
            lines.append("a=rtpmap:\(map.serialized)")
            for (index, fmtp) in formatParameters.enumerated() where fmtp.payloadType == map.payloadType && !writtenFMTP.contains(index) {
                lines.append("a=fmtp:\(fmtp.serialized)")
                writtenFMTP.insert(index)
            }
        }
        for (index, fmtp) in formatParameters.enumerated() where !writtenFMTP.contains(index) {
            lines.append("a=fmtp:\(fmtp.serialized)")
        }
        if let ptimeMilliseconds { lines.append("a=ptime:\(ptimeMilliseconds)") }
        if let maxPtimeMilliseconds { lines.append("a=maxptime:\(maxPtimeMilliseconds)") }
        if let rtcp { lines.append("a=rtcp:\(rtcp.serialized)") }
        if rtcpMux { lines.append("a=rtcp-mux") }
        if let iceUfrag { lines.append("a=ice-ufrag:\(iceUfrag)") }
        if let icePwd { lines.append("a=ice-pwd:\(icePwd)") }
        if !iceOptions.isEmpty { lines.append("a=ice-options:" + iceOptions.joined(separator: " ")) }
        for candidate in candidates { lines.append("a=candidate:\(candidate.serialized())") }
        if endOfCandidates { lines.append("a=end-of-candidates") }
        for item in crypto { lines.append("a=crypto:\(item.serialized())") }
        for fingerprint in fingerprints { lines.append("a=fingerprint:\(fingerprint.attributeValue)") }
        if let setup { lines.append("a=setup:\(setup.rawValue)") }
        if let direction { lines.append("a=\(direction.rawValue)") }
        for attribute in attributes { lines.append("a=\(attribute.serialized)") }
    }
}
