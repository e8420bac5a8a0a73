import Foundation
@testable import TetherCore

/// Shared SDP samples and key material for the SDP tests.
enum Fixtures {
    // Realistic SDES keys (random bytes, base64 as they appear on the wire).
    /// 30 bytes: AES_CM_128_HMAC_SHA1_32 key||salt.
    static let remoteKey32Base64 = "wLyDOVtQxavvJa59fCpDSM+8kEjpPnTTIkBqMS3Q"
    /// 30 bytes: AES_CM_128_HMAC_SHA1_80 key||salt.
    static let remoteKey80Base64 = "wD8VeEmImzk5XpTU1gRjdZIjIYBZdZzmCFyV0AEz"
    /// 28 bytes: AEAD_AES_128_GCM key||salt.
    static let gcm128Base64 = "RvvIzASaaO/DBgJinNQ9yp7TTTNmhBzwj0Sedg=="
    /// 29 bytes: wrong for every suite.
    static let wrong29Base64 = "kw+o/5I+6umoLdyJjj/8QkIFuXugjYieAhpJQaI="
    /// 46 bytes: AES_256_CM_HMAC_SHA1_80 key||salt.
    static let aes256Base64 = "8E87DK3ekzh1Mi7rCElf6TWCBvPygmS2YTw6ncikgxXbNud881cC8xytQoxpLQ=="
    /// 44 bytes: AEAD_AES_256_GCM key||salt.
    static let gcm256Base64 = "AQfiFTKos8f3lkWxTZNsjCHb2lbAesPkAeYmXLPpUNGceykcAlBukHfAFZs="

    static func bytes(_ base64: String) -> [UInt8] { [UInt8](Data(base64Encoded: base64)!) }

    /// Deterministic pseudo-random key bytes for our own side.
    static func key(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: Int(seed) &* 31 &+ $0 &* 97 &+ 13) }
    }

    static let localKey80 = key(30, seed: 7)
    static let localKeyGCM = key(28, seed: 9)

    static func localParameters(
        direction: MediaDirection = .sendrecv, crypto: [CryptoAttribute]? = nil
    ) throws -> LocalAudioParameters {
        LocalAudioParameters(
            sessionID: 4_242_424_242, sessionVersion: 1, originAddress: "10.0.0.5",
            iceUfrag: "tthr", icePwd: "Qm9vdHN0cmFwUGFzc3dvcmQx",
            candidates: [
                ICECandidate(foundation: "1", priority: 2_130_706_431, address: "10.0.0.5", port: 40_000, type: .host),
                ICECandidate(
                    foundation: "2", priority: 1_694_498_815, address: "198.51.100.20", port: 40_000, type: .srflx,
                    relatedAddress: "10.0.0.5", relatedPort: 40_000),
            ],
            endOfCandidates: true,
            crypto: try crypto ?? [
                CryptoAttribute(tag: 1, suite: .AES_CM_128_HMAC_SHA1_80, keyAndSalt: localKey80),
                CryptoAttribute(tag: 2, suite: .AEAD_AES_128_GCM, keyAndSalt: localKeyGCM),
            ],
            direction: direction)
    }

    /// A baresip-style offer: ICE credentials at session level, several crypto lines.
    static let baresipOffer = """
        v=0
        o=- 1234567890 2839047 IN IP4 192.168.1.20
        s=-
        c=IN IP4 192.168.1.20
        t=0 0
        a=tool:baresip 3.10.1
        a=ice-ufrag:Xa8K
        a=ice-pwd:c2f6a3bb4e0c9d8e7f6a5b4c
        m=audio 10000 RTP/SAVP 96 0 8 101
        b=AS:128
        a=rtpmap:96 opus/48000/2
        a=fmtp:96 stereo=1;sprop-stereo=1
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:101 telephone-event/8000
        a=fmtp:101 0-15
        a=sendrecv
        a=label:1
        a=rtcp-mux
        a=ptime:20
        a=crypto:1 AES_CM_128_HMAC_SHA1_32 inline:\(remoteKey32Base64)
        a=crypto:2 AES_CM_128_HMAC_SHA1_80 inline:\(remoteKey80Base64)
        a=crypto:3 AES_256_CM_HMAC_SHA1_80 inline:\(aes256Base64)
        a=candidate:1 1 UDP 2130706431 192.168.1.20 10000 typ host
        a=candidate:2 1 UDP 1694498815 203.0.113.50 10000 typ srflx raddr 192.168.1.20 rport 10000
        a=candidate:3 1 TCP 1010827519 192.168.1.20 9 typ host tcptype active
        a=candidate:1 2 UDP 2130706430 192.168.1.20 10001 typ host
        a=end-of-candidates

        """.replacingOccurrences(of: "\n", with: "\r\n")

    /// A Chrome-shaped WebRTC offer (DTLS-SRTP, BUNDLE, ssrc lines, mDNS candidate).
    static let chromeOffer = """
        v=0
        o=- 4611731400430051336 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0
        a=extmap-allow-mixed
        a=msid-semantic: WMS stream1
        m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:3348148302 1 udp 2122260223 192.168.1.34 56143 typ host generation 0 network-id 1
        a=candidate:1510613869 1 udp 1686052607 198.51.100.9 56143 typ srflx raddr 192.168.1.34 rport 56143 generation 0 network-id 1
        a=candidate:2999745851 1 tcp 1518280447 192.168.1.34 9 typ host tcptype active generation 0 network-id 1
        a=candidate:4233069003 1 udp 2122262783 2001:db8::5 57522 typ host generation 0 ufrag EsAw network-id 2
        a=candidate:842163049 1 udp 2122194687 3f2a9c41-5b1e-4d0c-8f2e-0a1b2c3d4e5f.local 59001 typ host generation 0 network-id 3
        a=ice-ufrag:EsAw
        a=ice-pwd:P2uYro0UCOQ4zxjKXaWCBui1
        a=ice-options:trickle
        a=fingerprint:sha-256 D2:FA:0E:C3:22:59:5E:14:95:69:92:3D:13:B4:84:24:2C:C2:A2:C0:3E:FD:34:8E:5E:EA:6F:AF:52:CE:E6:0F
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=sendrecv
        a=msid:stream1 track1
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        a=ssrc:1001 cname:4TOk42mSjXCkVIa6
        a=ssrc:1001 msid:stream1 track1

        """.replacingOccurrences(of: "\n", with: "\r\n")

    /// A Firefox-shaped offer: session-level fingerprint, uppercase UDP, RTP/SAVPF-less DTLS profile.
    static let firefoxOffer = """
        v=0
        o=mozilla...THIS_IS_SDPARTA-99.0 5012345678901234567 0 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=fingerprint:sha-256 8B:87:09:8A:5D:C2:F3:33:EF:C5:B1:F6:84:3A:3D:D6:A3:E2:9C:17:4C:E7:46:3B:1B:CE:84:98:DD:8E:AF:7B
        a=group:BUNDLE 0
        a=ice-options:trickle
        a=msid-semantic:WMS *
        m=audio 9 UDP/TLS/RTP/SAVPF 109 9 0 8 101
        c=IN IP4 0.0.0.0
        a=candidate:0 1 UDP 2122252543 192.168.1.77 61234 typ host
        a=candidate:1 1 UDP 1686052863 198.51.100.77 61234 typ srflx raddr 192.168.1.77 rport 61234
        a=end-of-candidates
        a=sendrecv
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1
        a=fmtp:101 0-15
        a=ice-pwd:4d7c2f1a9b3e8d6c5f0a1b2c3d4e5f60
        a=ice-ufrag:a1b2c3d4
        a=mid:0
        a=msid:{5b3e1c2a-0000-4000-8000-000000000001} {5b3e1c2a-0000-4000-8000-000000000002}
        a=rtcp-mux
        a=rtpmap:109 opus/48000/2
        a=rtpmap:9 G722/8000/1
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:101 telephone-event/8000/1
        a=setup:actpass
        a=ssrc:2655508255 cname:{6f1b3c1e-0000-4000-8000-000000000003}

        """
}
