import Testing
@testable import TetherCore

@Suite("OpusParameters (RFC 7587 fmtp)")
struct OpusParametersTests {
    @Test func readsEveryKnownParameterWithItsUnit() {
        let parameters = OpusParameters(formatParameters: [
            .init(name: "maxplaybackrate", value: "16000"),
            .init(name: "sprop-maxcapturerate", value: "24000"),
            .init(name: "maxaveragebitrate", value: "32000"),
            .init(name: "minptime", value: "10"),
            .init(name: "stereo", value: "1"),
            .init(name: "sprop-stereo", value: "0"),
            .init(name: "cbr", value: "1"),
            .init(name: "useinbandfec", value: "1"),
            .init(name: "usedtx", value: "0"),
        ])
        #expect(parameters.maxPlaybackRateHz == 16_000)
        #expect(parameters.spropMaxCaptureRateHz == 24_000)
        #expect(parameters.maxAverageBitrateBitsPerSecond == 32_000)
        #expect(parameters.minPtimeMilliseconds == 10)
        #expect(parameters.stereo == true)
        #expect(parameters.spropStereo == false)
        #expect(parameters.cbr == true)
        #expect(parameters.useInbandFEC == true)
        #expect(parameters.useDTX == false)
        #expect(parameters.otherParameters.isEmpty)
    }

    @Test func absentParametersStayNilAndUnknownOnesAreKeptInOrder() {
        let parameters = OpusParameters(formatParameters: [
            .init(name: "x-google-min-bitrate", value: "20"),
            .init(name: "USEINBANDFEC", value: "1"),
            .init(name: "stereo", value: "yes"),
            .init(name: "ptime", value: "20"),
        ])
        #expect(parameters.useInbandFEC == true)
        #expect(parameters.stereo == nil)
        #expect(parameters.useDTX == nil)
        #expect(parameters.maxAverageBitrateBitsPerSecond == nil)
        #expect(parameters.otherParameters == [
            .init(name: "x-google-min-bitrate", value: "20"),
            .init(name: "stereo", value: "yes"),
            .init(name: "ptime", value: "20"),
        ])
    }

    @Test func writesKnownParametersInAFixedOrderThenUnknownOnes() {
        let parameters = OpusParameters(
            maxPlaybackRateHz: 48_000, maxAverageBitrateBitsPerSecond: 64_000, minPtimeMilliseconds: 10,
            stereo: false, useInbandFEC: true, useDTX: true,
            otherParameters: [.init(name: "x-custom", value: "a")])
        let fmtp = FormatParametersAttribute(payloadType: 111, parameters: parameters.formatParameters)
        #expect(fmtp.serialized == "111 minptime=10;useinbandfec=1;usedtx=1;stereo=0;maxplaybackrate=48000;maxaveragebitrate=64000;x-custom=a")
        #expect(OpusParameters(formatParameters: parameters.formatParameters) == parameters)
        #expect(OpusParameters().formatParameters.isEmpty)
    }

    @Test func readsOpusParametersFromAParsedMediaSection() throws {
        let sdp = try SessionDescription.parse(Fixtures.firefoxOffer)
        let audio = sdp.media[0]
        let opus = audio.opusParameters(forPayloadType: 109)
        #expect(opus.maxPlaybackRateHz == 48_000)
        #expect(opus.stereo == true)
        #expect(opus.useInbandFEC == true)
        #expect(opus.minPtimeMilliseconds == nil)
    }
}
