import Testing
@testable import TetherCore

@Suite("SDPError")
struct SDPErrorTests {
    @Test func descriptionsNameTheProblem() {
        #expect(SDPError.malformedLine(number: 3, line: "m=audio x", reason: "bad port").description
            == "SDP line 3 is malformed (bad port): \"m=audio x\"")
        #expect(SDPError.missingRequiredLine("o=").description == "SDP is missing the required o= line")
        #expect(SDPError.unsupportedProfile("UDP/TLS/RTP/SAVPF").description.contains("UDP/TLS/RTP/SAVPF"))
        #expect(SDPError.noSupportedCrypto(offered: []).description == "no a=crypto lines (SDES-SRTP is required)")
        #expect(SDPError.noSupportedCrypto(offered: ["AES_CM_128_HMAC_SHA1_32", "F8_128_HMAC_SHA1_80"]).description
            == "none of the offered SRTP crypto suites is supported: AES_CM_128_HMAC_SHA1_32, F8_128_HMAC_SHA1_80")
        #expect(SDPError.audioRejected.description == "audio stream rejected (port 0)")
    }

    @Test func malformedLinesAreStoredWithInlineKeysRedacted() {
        let text = "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nt=0 0\r\nkey inline:\(Fixtures.remoteKey80Base64)|2^31\r\n"
        let error = #expect(throws: SDPError.self) { try SessionDescription.parse(text) }
        guard case let .malformedLine(number, line, _) = error else {
            Issue.record("expected malformedLine, got \(String(describing: error))")
            return
        }
        #expect(number == 5)
        #expect(line == "key inline:<redacted>|2^31")
        #expect(!(error?.description.contains(Fixtures.remoteKey80Base64) ?? true))
    }

    @Test func redactionHandlesSeveralKeysAndMixedCase() {
        let redacted = SDPError.redactingKeyMaterial("x INLINE:abc;inline:def|1:1 tail")
        #expect(redacted == "x INLINE:<redacted>;inline:<redacted>|1:1 tail")
    }
}
