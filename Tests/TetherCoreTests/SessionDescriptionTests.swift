import Testing
@testable import TetherCore

@Suite("SessionDescription parsing and serialization")
struct SessionDescriptionTests {
    @Test func parsesBaresipOfferSessionAndMediaFields() throws {
        let sdp = try SessionDescription.parse(Fixtures.baresipOffer)

        #expect(sdp.origin == SDPOrigin(
            username: "-", sessionID: 1_234_567_890, sessionVersion: 2_839_047, networkType: "IN",
            addressType: .ip4, address: "192.168.1.20"))
        #expect(sdp.sessionName == "-")
        #expect(sdp.connection == SDPConnectionData(networkType: "IN", addressType: .ip4, address: "192.168.1.20"))
        #expect(sdp.timings == [SDPTiming(startTimeNTPSeconds: 0, stopTimeNTPSeconds: 0)])
        #expect(sdp.iceUfrag == "Xa8K")
        #expect(sdp.icePwd == "c2f6a3bb4e0c9d8e7f6a5b4c")
        #expect(sdp.attributes == [SDPAttribute(name: "tool", value: "baresip 3.10.1")])

        #expect(sdp.media.count == 1)
        let audio = sdp.media[0]
        #expect(audio.media == "audio")
        #expect(audio.port == 10_000)
        #expect(audio.transportProtocol == .rtpSAVP)
        #expect(audio.formats == ["96", "0", "8", "101"])
        #expect(audio.payloadTypes == [96, 0, 8, 101])
        #expect(audio.bandwidths == [SDPBandwidth(type: "AS", amount: 128)])
        #expect(audio.rtpMap(forPayloadType: 96) == RTPMapAttribute(
            payloadType: 96, encodingName: "opus", clockRateHz: 48_000, channelCount: 2))
        #expect(audio.rtpMap(forPayloadType: 0) == RTPMapAttribute(
            payloadType: 0, encodingName: "PCMU", clockRateHz: 8_000, channelCount: nil))
        #expect(audio.formatParameters(forPayloadType: 96) == [
            FormatParameter(name: "stereo", value: "1"), FormatParameter(name: "sprop-stereo", value: "1"),
        ])
        #expect(audio.formatParameters(forPayloadType: 101) == [FormatParameter(name: "0-15", value: nil)])
        #expect(audio.direction == .sendrecv)
        #expect(audio.rtcpMux)
        #expect(audio.ptimeMilliseconds == 20)
        #expect(audio.crypto.map(\.tag) == [1, 2, 3])
        #expect(audio.crypto.map(\.suite) == [.AES_CM_128_HMAC_SHA1_32, .AES_CM_128_HMAC_SHA1_80, .AES_256_CM_HMAC_SHA1_80])
        #expect(audio.crypto[1].keyAndSalt == Fixtures.bytes(Fixtures.remoteKey80Base64))
        #expect(audio.candidates.count == 4)
        #expect(audio.candidates[2].transport == .other("TCP"))
        #expect(audio.endOfCandidates)
        #expect(audio.iceUfrag == nil)
        #expect(audio.attributes == [SDPAttribute(name: "label", value: "1")])
    }

    @Test func roundTripOfBaresipOfferIsLossless() throws {
        let parsed = try SessionDescription.parse(Fixtures.baresipOffer)
        let reparsed = try SessionDescription.parse(parsed.serialized())
        #expect(reparsed == parsed)
        #expect(reparsed.serialized() == parsed.serialized())
    }

    @Test func roundTripOfBrowserDescriptionsKeepsUnknownAttributes() throws {
        for text in [Fixtures.chromeOffer, Fixtures.firefoxOffer] {
            let parsed = try SessionDescription.parse(text)
            let serialized = parsed.serialized()
            let reparsed = try SessionDescription.parse(serialized)
            #expect(reparsed == parsed)
            #expect(serialized.contains("a=fingerprint:sha-256 "))
            #expect(serialized.contains("a=setup:actpass\r\n"))
            #expect(serialized.contains("a=group:BUNDLE 0\r\n"))
        }
    }

    @Test func serializationWritesCRLFLinesInRFC8866Order() throws {
        let parsed = try SessionDescription.parse(Fixtures.baresipOffer)
        let text = parsed.serialized()
        #expect(text.hasSuffix("\r\n"))
        #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\n"))
        let types = text.split(separator: "\r\n").map { String($0.prefix(2)) }
        #expect(Array(types.prefix(5)) == ["v=", "o=", "s=", "c=", "t="])
        let firstMedia = try #require(types.firstIndex(of: "m="))
        #expect(types[firstMedia + 1] == "b=")
        #expect(types[5..<firstMedia].allSatisfy { $0 == "a=" })
        #expect(types[(firstMedia + 2)...].allSatisfy { $0 == "a=" })
        #expect(text.hasPrefix("v=0\r\no=- 1234567890 2839047 IN IP4 192.168.1.20\r\ns=-\r\n"))
        #expect(text.contains("m=audio 10000 RTP/SAVP 96 0 8 101\r\nb=AS:128\r\n"))
    }

    @Test func acceptsLFLineEndingsBlankLinesAndTrailingWhitespace() throws {
        let crlf = try SessionDescription.parse(Fixtures.baresipOffer)
        let sloppy = Fixtures.baresipOffer
            .replacingOccurrences(of: "\r\n", with: " \t\n")
            .replacingOccurrences(of: "t=0 0", with: "t=0 0\n")
        #expect(try SessionDescription.parse(sloppy) == crlf)
    }

    @Test func sessionLevelDirectionIsTheDefaultForMedia() throws {
        let text = """
            v=0
            o=- 1 1 IN IP6 2001:db8::1
            s=
            t=0 0
            a=recvonly
            m=audio 5004 RTP/AVP 0
            """
        let sdp = try SessionDescription.parse(text)
        #expect(sdp.origin.addressType == .ip6)
        #expect(sdp.sessionName == "")
        #expect(sdp.direction == .recvonly)
        #expect(sdp.media[0].direction == nil)
        #expect(sdp.media[0].effectiveDirection(sessionDirection: sdp.direction) == .recvonly)
        #expect(sdp.media[0].effectiveDirection() == .sendrecv)
        #expect(try SessionDescription.parse(sdp.serialized()) == sdp)
    }

    @Test func missingVersionLineIsReported() {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "v=0\r\n", with: "")
        #expect(throws: SDPError.missingRequiredLine("v=")) { try SessionDescription.parse(text) }
        #expect(throws: SDPError.missingRequiredLine("v=")) { try SessionDescription.parse("") }
    }

    @Test func versionOtherThanZeroIsUnsupported() {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "v=0", with: "v=1")
        #expect(throws: SDPError.unsupportedVersion) { try SessionDescription.parse(text) }
    }

    @Test(arguments: [("o=", "o=- 1234567890 2839047 IN IP4 192.168.1.20"), ("s=", "s=-"), ("t=", "t=0 0")])
    func missingMandatorySessionLineIsReported(name: String, line: String) {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: line + "\r\n", with: "")
        #expect(throws: SDPError.missingRequiredLine(name)) { try SessionDescription.parse(text) }
    }

    @Test func badOriginLineReportsLineNumberAndText() {
        let text = Fixtures.baresipOffer.replacingOccurrences(
            of: "o=- 1234567890 2839047 IN IP4 192.168.1.20", with: "o=- abc 2839047 IN IP4 192.168.1.20")
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(text) }
        guard case let .malformedLine(number, line, reason) = error else {
            Issue.record("expected malformedLine, got \(String(describing: error))")
            return
        }
        #expect(number == 2)
        #expect(line == "o=- abc 2839047 IN IP4 192.168.1.20")
        #expect(reason.contains("session id"))

        let short = Fixtures.baresipOffer.replacingOccurrences(
            of: "o=- 1234567890 2839047 IN IP4 192.168.1.20", with: "o=- 1234567890 2839047 IN IP4")
        let shortError = #expect(throws: SDPError.self) { try SessionDescription.parse(short) }
        guard case .malformedLine(2, "o=- 1234567890 2839047 IN IP4", _) = shortError else {
            Issue.record("expected malformedLine at line 2, got \(String(describing: shortError))")
            return
        }
    }

    /// A hostile megabyte line is quoted in at most ~120 bytes, with control characters escaped
    /// (a message cannot flood a log or break a terminal), and the error keeps no more than 1 KiB.
    @Test func aHugeOrControlCharacterLineIsQuotedShortAndEscaped() {
        let huge = "o=- x\u{1B}[2J\u{07}" + String(repeating: "A", count: 1_000_000)
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "o=- 1234567890 2839047 IN IP4 192.168.1.20", with: huge)
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(text) }
        let message = error.map(String.init(describing:)) ?? ""
        #expect(message.utf8.count < 400, "message of \(message.utf8.count) bytes")
        #expect(message.contains("…"))
        #expect(message.contains("\\u{1b}[2J\\u{7}"), "\(message)")
        #expect(!message.unicodeScalars.contains { $0.value < 0x20 })
        if case let .malformedLine(_, line, _) = error { #expect(line.utf8.count <= 4 * SDPError.quotedBytesKept) }
        // Short text is quoted whole; quotes, backslashes and line breaks escaped.
        #expect(SDPError.excerpt("a=x \"q\" \\ \r\n") == #"a=x \"q\" \\ \r\n"#)
        #expect(SDPError.excerpt(String(repeating: "é", count: 100), limit: 10) == "ééééé…")
    }

    @Test func mediaLineWithNonNumericPortIsMalformed() {
        let text = Fixtures.baresipOffer.replacingOccurrences(
            of: "m=audio 10000 RTP/SAVP", with: "m=audio port RTP/SAVP")
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(text) }
        guard case let .malformedLine(number, line, _) = error else {
            Issue.record("expected malformedLine, got \(String(describing: error))")
            return
        }
        #expect(number == 9)
        #expect(line == "m=audio port RTP/SAVP 96 0 8 101")
    }

    @Test func rtpmapWithoutClockRateIsMalformed() {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: "a=rtpmap:96 opus/48000/2", with: "a=rtpmap:96 opus")
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(text) }
        guard case let .malformedLine(number, line, reason) = error else {
            Issue.record("expected malformedLine, got \(String(describing: error))")
            return
        }
        #expect(number == 11)
        #expect(line == "a=rtpmap:96 opus")
        #expect(reason == "rtpmap without clock rate")
    }

    @Test func unknownLineTypeAndMissingEqualsAreMalformed() {
        let unknown = Fixtures.baresipOffer.replacingOccurrences(of: "s=-\r\n", with: "s=-\r\nq=what\r\n")
        #expect(throws: SDPError.malformedLine(number: 4, line: "q=what", reason: "unknown line type q=")) {
            try SessionDescription.parse(unknown)
        }
        let noEquals = Fixtures.baresipOffer.replacingOccurrences(of: "a=label:1", with: "label 1")
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(noEquals) }
        guard case .malformedLine(18, "label 1", _) = error else {
            Issue.record("expected malformedLine at 18, got \(String(describing: error))")
            return
        }
    }

    @Test func candidateWithMissingFieldsIsReportedWithItsLine() {
        let text = Fixtures.baresipOffer.replacingOccurrences(
            of: "a=candidate:1 1 UDP 2130706431 192.168.1.20 10000 typ host", with: "a=candidate:1 1 UDP 2130706431 192.168.1.20")
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(text) }
        guard case let .invalidCandidate(line, _) = error else {
            Issue.record("expected invalidCandidate, got \(String(describing: error))")
            return
        }
        #expect(line == "a=candidate:1 1 UDP 2130706431 192.168.1.20")
    }

    @Test func cryptoWithBadBase64IsInvalidCryptoWithoutLeakingTheKey() {
        let broken = "wD8VeEmImzk5XpTU1gRj!ZIjIYBZdZzmCFyV0AEz"
        let text = Fixtures.baresipOffer.replacingOccurrences(of: Fixtures.remoteKey80Base64, with: broken)
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(text) }
        guard case let .invalidCrypto(reason) = error else {
            Issue.record("expected invalidCrypto, got \(String(describing: error))")
            return
        }
        #expect(reason.hasPrefix("line 22:"))
        #expect(reason.contains("base64"))
        #expect(!reason.contains(broken))
        #expect(!(error?.description.contains("wD8VeEm") ?? true))
    }

    @Test func cryptoWithWrongKeyLengthIsInvalidCrypto() {
        let text = Fixtures.baresipOffer.replacingOccurrences(of: Fixtures.remoteKey80Base64, with: Fixtures.wrong29Base64)
        #expect(throws: SDPError.invalidCrypto(
            reason: "line 22: AES_CM_128_HMAC_SHA1_80 needs a 30-byte key||salt, got 29 bytes")) {
            try SessionDescription.parse(text)
        }
    }

    @Test func printingADescriptionNeverShowsKeys() throws {
        let sdp = try SessionDescription.parse(Fixtures.baresipOffer)
        var dumped = ""
        dump(sdp, to: &dumped)
        for text in [String(describing: sdp), String(reflecting: sdp), dumped] {
            #expect(!text.contains(Fixtures.remoteKey80Base64))
            #expect(!text.contains(String(describing: Fixtures.bytes(Fixtures.remoteKey80Base64))))
            #expect(!text.contains("\(Fixtures.bytes(Fixtures.remoteKey80Base64)[0]), \(Fixtures.bytes(Fixtures.remoteKey80Base64)[1])"))
        }
        #expect(String(describing: sdp).contains("<redacted 30 bytes>"))
        // The wire form, of course, carries the key.
        #expect(sdp.serialized().contains("inline:\(Fixtures.remoteKey80Base64)"))
    }

    /// Found by fuzzing (Fuzz/regressions/sdp/repeated-rtpmap-wrote-its-fmtp-twice).
    @Test func aRepeatedRtpmapWritesItsFmtpOnceSoSerializingIsStable() throws {
        let text = Fixtures.baresipOffer.replacingOccurrences(
            of: "a=rtpmap:96 opus/48000/2\r\n", with: "a=rtpmap:96 opus/48000/2\r\na=rtpmap:96 opus/48000/2\r\n")
        let sdp = try SessionDescription.parse(text)
        let written = sdp.serialized()
        #expect(written.components(separatedBy: "a=fmtp:96 ").count == 2)
        #expect(try SessionDescription.parse(written).serialized() == written)
    }

    /// Found by fuzzing: a key on a line that is not an a=crypto line (a mangled description) is
    /// redacted wherever an error quotes it, in the quoted line and in the reason.
    @Test func aKeyOnAnotherLineIsRedactedInEveryErrorThatQuotesIt() {
        let key = Fixtures.remoteKey80Base64
        for line in [
            "a=candidate:0 1 UDP 2122252543 192.16SHA1_32 inline:\(key)",
            "a=candidate:150386inline:\(key) 1 udp 2122260224 127.0.0.1 60643 typ host",
        ] {
            let text = Fixtures.baresipOffer.replacingOccurrences(of: "a=end-of-candidates", with: line)
            do {
                _ = try SessionDescription.parse(text)
                Issue.record("\(line) parsed")
            } catch {
                #expect(!error.description.contains(key.prefix(8)), "\(error.description)")
                #expect(error.description.contains("inline:<redacted>"))
                // The error value itself keeps the line redacted, not only its message.
                if case let .invalidCandidate(quoted, _) = error { #expect(!quoted.contains(key.prefix(8))) }
            }
        }
    }

}
