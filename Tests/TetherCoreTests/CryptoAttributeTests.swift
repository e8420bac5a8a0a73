import Foundation
import Testing
@testable import TetherCore

@Suite("CryptoAttribute (RFC 4568 SDES)")
struct CryptoAttributeTests {
    @Test func parsesSuiteTagAndKey() throws {
        let crypto = try CryptoAttribute.parse("1 AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey80Base64)")
        #expect(crypto.tag == 1)
        #expect(crypto.suite == .AES_CM_128_HMAC_SHA1_80)
        #expect(crypto.keyParameters.count == 1)
        #expect(crypto.keyAndSalt == Fixtures.bytes(Fixtures.remoteKey80Base64))
        #expect(crypto.keyAndSalt.count == 30)
        #expect(crypto.keyParameters[0].lifetime == nil)
        #expect(crypto.keyParameters[0].mki == nil)
        #expect(crypto.sessionParameters.isEmpty)
    }

    @Test func parsesLifetimeMKISeveralKeysAndSessionParameters() throws {
        let text = "a=crypto:7 AES_CM_128_HMAC_SHA1_32 inline:\(Fixtures.remoteKey32Base64)|2^20|1:4;"
            + "inline:\(Fixtures.remoteKey80Base64)|1048576|2:4 KDR=23 UNENCRYPTED_SRTCP"
        let crypto = try CryptoAttribute.parse(text)
        #expect(crypto.tag == 7)
        #expect(crypto.suite == .AES_CM_128_HMAC_SHA1_32)
        #expect(crypto.keyParameters.count == 2)
        #expect(crypto.keyParameters[0].lifetime == .powerOfTwoPackets(exponent: 20))
        #expect(crypto.keyParameters[0].lifetime?.packetCount == 1_048_576)
        #expect(crypto.keyParameters[0].mki == SRTPMasterKeyIdentifier(value: 1, lengthBytes: 4))
        #expect(crypto.keyParameters[1].lifetime == .packets(1_048_576))
        #expect(crypto.keyParameters[1].mki == SRTPMasterKeyIdentifier(value: 2, lengthBytes: 4))
        #expect(crypto.keyParameters[1].keyAndSalt == Fixtures.bytes(Fixtures.remoteKey80Base64))
        #expect(crypto.sessionParameters == ["KDR=23", "UNENCRYPTED_SRTCP"])
        #expect(crypto.serialized() == String(text.dropFirst("a=crypto:".count)))
    }

    @Test func mkiWithoutLifetimeIsAccepted() throws {
        let crypto = try CryptoAttribute.parse("1 AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey80Base64)|1:1")
        #expect(crypto.keyParameters[0].lifetime == nil)
        #expect(crypto.keyParameters[0].mki == SRTPMasterKeyIdentifier(value: 1, lengthBytes: 1))
    }

    @Test(arguments: [
        ("AES_CM_128_HMAC_SHA1_80", Fixtures.remoteKey80Base64, 30),
        ("AES_CM_128_HMAC_SHA1_32", Fixtures.remoteKey32Base64, 30),
        ("AEAD_AES_128_GCM", Fixtures.gcm128Base64, 28),
        ("AES_256_CM_HMAC_SHA1_80", Fixtures.aes256Base64, 46),
        ("AEAD_AES_256_GCM", Fixtures.gcm256Base64, 44),
    ])
    func acceptsTheRightKeyLengthPerSuite(suiteName: String, key: String, length: Int) throws {
        let crypto = try CryptoAttribute.parse("3 \(suiteName) inline:\(key)")
        #expect(crypto.suite.name == suiteName)
        #expect(crypto.suite.isKnown)
        #expect(crypto.keyAndSalt.count == length)
        #expect(crypto.suite.keyAndSaltLengthBytes == length)
        let masterKey = try #require(crypto.keyParameters[0].masterKey(for: crypto.suite))
        let masterSalt = try #require(crypto.keyParameters[0].masterSalt(for: crypto.suite))
        #expect(Array(masterKey) + Array(masterSalt) == crypto.keyAndSalt)
        #expect(masterKey.count == crypto.suite.masterKeyLengthBytes)
    }

    @Test(arguments: [
        ("AES_CM_128_HMAC_SHA1_80", Fixtures.gcm128Base64, 28),
        ("AEAD_AES_128_GCM", Fixtures.remoteKey80Base64, 30),
        ("AES_256_CM_HMAC_SHA1_80", Fixtures.gcm256Base64, 44),
        ("AEAD_AES_256_GCM", Fixtures.aes256Base64, 46),
        ("AES_CM_128_HMAC_SHA1_32", Fixtures.wrong29Base64, 29),
    ])
    func rejectsAWrongKeyLengthForTheSuite(suiteName: String, key: String, actual: Int) {
        let error = #expect(throws: SDPError.self) { try CryptoAttribute.parse("1 \(suiteName) inline:\(key)") }
        guard case let .invalidCrypto(reason) = error else {
            Issue.record("expected invalidCrypto, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("got \(actual) bytes"))
        #expect(reason.contains(suiteName))
        #expect(!reason.contains(key))
    }

    @Test func rejectsBadBase64() {
        #expect(throws: SDPError.invalidCrypto(reason: "AES_CM_128_HMAC_SHA1_80 key is not valid base64")) {
            try CryptoAttribute.parse("1 AES_CM_128_HMAC_SHA1_80 inline:not*base64*at*all*but*40*chars*long*x")
        }
    }

    @Test func rejectsOtherMalformedLines() {
        #expect(throws: SDPError.self) { try CryptoAttribute.parse("1 AES_CM_128_HMAC_SHA1_80") }
        #expect(throws: SDPError.self) { try CryptoAttribute.parse("x AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey80Base64)") }
        #expect(throws: SDPError.self) { try CryptoAttribute.parse("1234567890 AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey80Base64)") }
        #expect(throws: SDPError.self) { try CryptoAttribute.parse("1 AES_CM_128_HMAC_SHA1_80 uri:\(Fixtures.remoteKey80Base64)") }
        #expect(throws: SDPError.self) { try CryptoAttribute.parse("1 AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey80Base64)|2^x") }
        #expect(throws: SDPError.self) { try CryptoAttribute.parse("1 AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey80Base64)|1:0") }
        #expect(throws: SDPError.self) { try CryptoAttribute(tag: 1, suite: .AEAD_AES_128_GCM, keyAndSalt: Fixtures.key(30, seed: 1)) }
    }

    @Test func acceptsKeysWithoutBase64Padding() throws {
        let unpadded = String(Fixtures.gcm128Base64.dropLast(2))
        let crypto = try CryptoAttribute.parse("2 AEAD_AES_128_GCM inline:\(unpadded)")
        #expect(crypto.keyAndSalt == Fixtures.bytes(Fixtures.gcm128Base64))
        #expect(crypto.serialized() == "2 AEAD_AES_128_GCM inline:\(Fixtures.gcm128Base64)")
    }

    @Test func unknownSuiteIsKeptWithoutLengthCheck() throws {
        let crypto = try CryptoAttribute.parse("4 AES_192_CM_HMAC_SHA1_80 inline:\(Fixtures.wrong29Base64)")
        #expect(crypto.suite == .unknown("AES_192_CM_HMAC_SHA1_80"))
        #expect(!crypto.suite.isKnown)
        #expect(crypto.keyAndSalt.count == 29)
        #expect(crypto.suite.keyAndSaltLengthBytes == nil)
    }

    @Test func serializationRoundTripsThroughParse() throws {
        let original = try CryptoAttribute(
            tag: 12, suite: .AES_256_CM_HMAC_SHA1_80,
            keyParameters: [SRTPKeyParameter(keyAndSalt: Fixtures.key(46, seed: 3), lifetime: .powerOfTwoPackets(exponent: 31))])
        let text = original.serialized()
        #expect(text.hasPrefix("12 AES_256_CM_HMAC_SHA1_80 inline:"))
        #expect(text.hasSuffix("|2^31"))
        #expect(try CryptoAttribute.parse(text) == original)
    }

    @Test func descriptionsAndMirrorsNeverContainKeyMaterial() throws {
        let crypto = try CryptoAttribute.parse(
            "1 AES_CM_128_HMAC_SHA1_80 inline:\(Fixtures.remoteKey80Base64)|2^31|1:1")
        let keyBytes = crypto.keyAndSalt
        var dumped = ""
        dump(crypto, to: &dumped)
        var dumpedKey = ""
        dump(crypto.keyParameters[0], to: &dumpedKey)
        let renderings = [
            crypto.description, crypto.debugDescription, String(describing: crypto), String(reflecting: crypto),
            "\(crypto)", "\([crypto])", dumped, dumpedKey, String(describing: crypto.keyParameters[0]),
            String(reflecting: crypto.keyParameters),
        ]
        for text in renderings {
            #expect(!text.contains(Fixtures.remoteKey80Base64))
            #expect(!text.contains("\(keyBytes[0]), \(keyBytes[1]), \(keyBytes[2])"))
            #expect(text.contains("redacted"))
        }
        #expect(crypto.description == "crypto:1 AES_CM_128_HMAC_SHA1_80 inline:<redacted 30 bytes>|2^31|1:1")
    }
}
