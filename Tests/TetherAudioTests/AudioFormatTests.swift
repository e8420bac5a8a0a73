import Testing
import TetherAudio

@Suite("AudioFormat")
struct AudioFormatTests {
    @Test("defaults are 48 kHz mono 20 ms frames of 960 samples")
    func defaults() {
        let format = AudioFormat()
        #expect(format.sampleRateHertz == 48_000)
        #expect(format.channelCount == 1)
        #expect(format.frameDurationMilliseconds == 20)
        #expect(format.samplesPerFrame == 960)
        #expect(format.frameDurationNanoseconds == 20_000_000)
    }

    @Test("samples per frame follow rate and duration", arguments: [
        (8_000, 10, 1, 80), (16_000, 20, 1, 320), (48_000, 60, 1, 2_880), (44_100, 40, 1, 1_764), (48_000, 10, 2, 960),
    ])
    func samplesPerFrame(rateHertz: Int, milliseconds: Int, channels: Int, expected: Int) {
        let format = AudioFormat(sampleRateHertz: rateHertz, channelCount: channels, frameDurationMilliseconds: milliseconds)
        #expect(format.samplesPerFrame == expected)
        #expect(format.samplesPerChannelPerFrame == expected / channels)
    }

    @Test("an unsupported frame duration stops the process")
    func unsupportedFrameDurationTraps() async {
        await #expect(processExitsWith: .failure) {
            _ = AudioFormat(frameDurationMilliseconds: 25)
        }
    }
}
