import Testing
@testable import TetherCore

@Suite("MediaDescription")
struct MediaDescriptionTests {
    private func parseMedia(_ mediaLines: String) throws -> MediaDescription {
        let text = "v=0\no=- 1 1 IN IP4 10.0.0.1\ns=-\nt=0 0\n" + mediaLines
        return try SessionDescription.parse(text).media[0]
    }

    @Test func opusIsFoundByRtpmapCaseInsensitivelyAndInFormatOrder() throws {
        let media = try parseMedia("""
            m=audio 4000 RTP/SAVPF 0 100 101
            a=rtpmap:0 PCMU/8000
            a=rtpmap:101 opus/48000/2
            a=rtpmap:100 OPUS/48000/2
            """)
        #expect(media.transportProtocol == .rtpSAVPF)
        #expect(media.opusPayloadType == 100)
        #expect(media.rtpMap(forPayloadType: 100)?.isEncoding("opus") == true)
        #expect(media.rtpMap(forPayloadType: 100)?.encodingName == "OPUS")
    }

    @Test func opusMustBe48000HzStereoMapping() throws {
        let media = try parseMedia("""
            m=audio 4000 RTP/SAVP 96 97
            a=rtpmap:96 opus/48000
            a=rtpmap:97 opus/16000/2
            """)
        #expect(media.opusPayloadType == nil)
    }

    @Test func parsesTransportProtocolsPortCountAndRtcp() throws {
        let media = try parseMedia("""
            m=audio 49170/2 RTP/AVP 0
            c=IN IP6 2001:db8::7
            a=rtcp:53020 IN IP4 126.16.64.4
            a=ptime:20.0
            a=maxptime:120
            """)
        #expect(media.port == 49_170)
        #expect(media.portCount == 2)
        #expect(media.transportProtocol == .rtpAVP)
        #expect(media.connection == SDPConnectionData(addressType: .ip6, address: "2001:db8::7"))
        #expect(media.rtcp == RTCPAttribute(port: 53_020, connection: SDPConnectionData(address: "126.16.64.4")))
        #expect(media.ptimeMilliseconds == 20)
        #expect(media.maxPtimeMilliseconds == 120)
        #expect(SDPMediaProtocol(name: "UDP/TLS/RTP/SAVPF") == .udpTLSRTPSAVPF)
        #expect(SDPMediaProtocol(name: "TCP/MRCPv2") == .other("TCP/MRCPv2"))
        #expect(SDPMediaProtocol.rtpSAVPF.isSDESSRTP)
        #expect(!SDPMediaProtocol.udpTLSRTPSAVPF.isSDESSRTP)
    }

    @Test func fmtpKeepsParameterOrderAndBareTokens() throws {
        let media = try parseMedia("""
            m=audio 4000 RTP/SAVP 111 63 101
            a=fmtp:111 useinbandfec=1; minptime=10 ;stereo=1
            a=fmtp:63 111/111
            a=fmtp:101 0-16
            """)
        #expect(media.formatParameters(forPayloadType: 111).map(\.name) == ["useinbandfec", "minptime", "stereo"])
        #expect(media.formatParameters(forPayloadType: 111)[1].value == "10")
        #expect(media.formatParameters(forPayloadType: 63) == [FormatParameter(name: "111/111", value: nil)])
        #expect(media.formatParameters(forPayloadType: 101) == [FormatParameter(name: "0-16", value: nil)])
    }

    @Test func unknownAttributesAreKeptVerbatimAndInOrder() throws {
        let media = try parseMedia("""
            m=audio 4000 RTP/SAVP 111
            a=rtcp-fb:111 transport-cc
            a=rtcp-rsize
            a=ssrc:1001 cname:4TOk42mSjXCkVIa6
            a=x-weird::double:colon
            """)
        #expect(media.attributes == [
            SDPAttribute(name: "rtcp-fb", value: "111 transport-cc"),
            SDPAttribute(name: "rtcp-rsize", value: nil),
            SDPAttribute(name: "ssrc", value: "1001 cname:4TOk42mSjXCkVIa6"),
            SDPAttribute(name: "x-weird", value: ":double:colon"),
        ])
        #expect(media.attributeValues(named: "ssrc") == ["1001 cname:4TOk42mSjXCkVIa6"])
        var lines: [String] = []
        media.appendLines(to: &lines)
        #expect(lines.suffix(4) == [
            "a=rtcp-fb:111 transport-cc", "a=rtcp-rsize", "a=ssrc:1001 cname:4TOk42mSjXCkVIa6", "a=x-weird::double:colon",
        ])
    }

    @Test func directionReversalAndConstruction() {
        #expect(MediaDirection.sendonly.reversed == .recvonly)
        #expect(MediaDirection.recvonly.reversed == .sendonly)
        #expect(MediaDirection.sendrecv.reversed == .sendrecv)
        #expect(MediaDirection.inactive.reversed == .inactive)
        #expect(MediaDirection(sending: true, receiving: false) == .sendonly)
        #expect(MediaDirection.recvonly.isReceiving && !MediaDirection.recvonly.isSending)
    }

    @Test func attributeWithoutRequiredValueIsMalformed() {
        #expect(throws: SDPError.malformedLine(number: 6, line: "a=ice-ufrag", reason: "a=ice-ufrag needs a value")) {
            try parseMedia("m=audio 4000 RTP/SAVP 111\na=ice-ufrag")
        }
    }
}
