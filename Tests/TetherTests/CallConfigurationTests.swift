import Testing
import TetherAudio
import TetherTestSupport

@testable import Tether

@Suite("CallConfiguration and TetherError", .keepsLogPerTest)
struct CallConfigurationTests {
    static let invalid: [(String, CallConfiguration)] = [
        ("frame duration", CallConfiguration(opus: OpusSettings(frameDurationMilliseconds: 30))),
        ("bitrate", CallConfiguration(opus: OpusSettings(bitrateBitsPerSecond: 100))),
        ("no mandatory suite", CallConfiguration(srtpSuites: [.aeadAES128GCM])),
        ("duplicate suite", CallConfiguration(srtpSuites: [.aesCM128HMACSHA1_80, .aesCM128HMACSHA1_80])),
        ("jitter below a frame", CallConfiguration(jitterBufferTargetMilliseconds: 10)),
        ("jitter maximum below the start delay", {
            var c = CallConfiguration(jitterBufferTargetMilliseconds: 60)
            c.jitterBufferMaximumMilliseconds = 40
            return c
        }()),
        ("connect timeout", CallConfiguration(connectTimeoutSeconds: 0)),
        ("rtcp interval", CallConfiguration(rtcpIntervalSeconds: 0.1)),
        ("local address", CallConfiguration(localAddresses: ["localhost"])),
        ("stun name", CallConfiguration(stunServer: IceServer(address: "stun.example"))),
        ("empty cname", CallConfiguration(cname: "")),
    ]

    @Test(arguments: 0..<invalid.count)
    func invalidConfigurationThrowsCode5001(index: Int) {
        let (label, configuration) = Self.invalid[index]
        do {
            _ = try CallSession(configuration: configuration)
            Issue.record("\(label): accepted")
        } catch {
            #expect(error.code == .invalidConfiguration, "\(label)")
            #expect(error.code.rawValue == 5001)
            #expect(!error.isTerminal && !error.canRetry)
            #expect(!error.message.isEmpty)
        }
    }

    @Test func defaultConfigurationIsValidAndSessionStartsNew() throws {
        let s = try CallSession(configuration: CallConfiguration())
        #expect(s.state == .new)
    }

    @Test func errorCodesAreStableAndGrouped() {
        let codes: [(TetherError.Code, Int)] = [
            (.iceGatheringFailed, 1001), (.iceConnectionFailed, 1002), (.connectionTimeout, 1003), (.mediaTimeout, 1004),
            (.iceTransportUnavailable, 1005), (.captureDeviceFailed, 2001), (.playbackDeviceFailed, 2002),
            (.audioFileFailed, 2003), (.malformedSessionDescription, 3001), (.incompatibleSessionDescription, 3002),
            (.codecFailed, 3003), (.srtpSetupFailed, 4001), (.invalidConfiguration, 5001), (.invalidState, 5002),
            (.invalidFeedback, 5005), (.systemResourceFailed, 9001),
        ]
        for (code, raw) in codes { #expect(code.rawValue == raw) }
        #expect(Set(codes.map(\.1)).count == codes.count)
    }

    @Test func terminationReasonCarriesSIPDetails() {
        let r = CallTerminationReason(cause: .localHangup, sipCode: 487, sipPhrase: "Request Terminated")
        #expect(r.causeCode == 0)
        #expect(r.description == "local hang-up (SIP 487 Request Terminated)")
        #expect(CallState.ended(r).name == "ended")
        #expect(CallState.ended(r).isEnded)
    }

    /// Voice processing by default: all of it for a sound device's capture, nothing for files
    /// and test signals; an explicit setting wins either way.
    @Test func voiceProcessingIsOnByDefaultForSoundDevicesOnly() {
        #expect(CallConfiguration(audioSource: TestSignalSource()).effectiveVoiceProcessing == .off)
        #expect(CallConfiguration(audioSource: WAVFileSource(path: "/dev/null")).effectiveVoiceProcessing == .off)
        #expect(CallConfiguration(audioSource: PulseAudioCapture(deviceName: "mic")).effectiveVoiceProcessing == VoiceProcessingSettings())
        #expect(CallConfiguration(audioSource: ALSACapture(pcmName: "default")).effectiveVoiceProcessing == VoiceProcessingSettings())
        var device = CallConfiguration(audioSource: PulseAudioCapture(deviceName: "mic"))
        device.voiceProcessing = .off
        #expect(device.effectiveVoiceProcessing == .off)
        var file = CallConfiguration(audioSource: TestSignalSource())
        file.voiceProcessing = VoiceProcessingSettings(gainControl: false)
        #expect(file.effectiveVoiceProcessing.summary == "webrtc: AEC NS HPF")
    }
}
