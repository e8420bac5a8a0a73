/// The SRTP crypto suites Tether implements (RFC 4568 and RFC 7714 names).
public enum SRTPCryptoSuite: String, Sendable, CaseIterable, Equatable {
    /// AES-128 counter mode with an 80-bit HMAC-SHA1 tag: required, always offered.
    case aesCM128HMACSHA1_80 = "AES_CM_128_HMAC_SHA1_80"
    /// AES-128 in Galois/counter mode with a 16-byte tag (RFC 7714): offered, cheaper here.
    case aeadAES128GCM = "AEAD_AES_128_GCM"

    /// Length of the master key followed by the master salt, in bytes.
    public var masterKeyAndSaltBytes: Int {
        switch self {
        case .aesCM128HMACSHA1_80: 30
        case .aeadAES128GCM: 28
        }
    }

    /// Bytes SRTP adds to an RTP packet (authentication tag), and the SRTCP trailer adds 4 more.
    public var rtpOverheadBytes: Int {
        switch self {
        case .aesCM128HMACSHA1_80: 10
        case .aeadAES128GCM: 16
        }
    }
}
