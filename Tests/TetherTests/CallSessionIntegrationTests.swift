import Foundation
import Testing
import TetherRealtime
import TetherTestSupport

@testable import Tether

/// Two real CallSessions over real libnice on 127.0.0.1, SRTP and Opus in between.
@Suite("CallSession over libnice on loopback", .keepsLogPerTest, .serialized)
struct CallSessionIntegrationTests {
    static let level = -12.0

    func makePair(dir: String, ptime: Int = 20) throws -> (CallSession, CallSession) {
        let opus = OpusSettings(frameDurationMilliseconds: ptime)
        let a = try CallSession(
            configuration: CallConfiguration(
                audioSource: TestSignalSource(frequencyHertz: 440, levelDBFS: Self.level), audioSink: WAVFileSink(path: dir + "/a.wav"),
                opus: opus, localAddresses: ["127.0.0.1"], rtcpIntervalSeconds: 1, statisticsIntervalSeconds: 0))
        let b = try CallSession(
            configuration: CallConfiguration(
                audioSource: TestSignalSource(frequencyHertz: 660, levelDBFS: Self.level), audioSink: WAVFileSink(path: dir + "/b.wav"),
                opus: opus, localAddresses: ["127.0.0.1"], rtcpIntervalSeconds: 1, statisticsIntervalSeconds: 0))
        return (a, b)
    }

    @Test func callEstablishesDeliversBothWaysAndCarriesTheTones() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (a, b) = try makePair(dir: dir)
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await a.start()
        try await b.start()
        let offer = try await a.makeOffer()
        let answer = try await b.acceptOffer(offer)
        try await a.applyAnswer(answer)
        let establishedA = await ra.waitFor("established", timeoutSeconds: 5)
        let establishedB = await rb.waitFor("established", timeoutSeconds: 5)
        // How fast is for `tether demo` and tether-bench to report; here only that it happens.
        #expect(establishedA != nil && establishedB != nil)

        try await Task.sleep(for: .seconds(3))
        // Round-trip time needs an SR one way and a report on it back (RTCP intervals are randomised).
        for _ in 0..<400 where a.statistics().roundTripTimeMilliseconds == nil || b.statistics().roundTripTimeMilliseconds == nil {
            try await Task.sleep(for: .milliseconds(25))
        }
        // RED is on from the call's start; a clean path releases it at the third report. Then
        // 150 more packets (3 s: the published bitrate is over a window of a second or so, so the
        // last one read began after the release).
        #expect(await waitUntil(timeoutSeconds: 20) { !a.statistics().sendsRedundantAudio && !b.statistics().sendsRedundantAudio })
        let released = a.statistics()
        #expect(await waitUntil(timeoutSeconds: 20) { a.statistics().packetsSent >= released.packetsSent + 150 })
        let sa = a.statistics()
        let sb = b.statistics()
        await a.hangUp()
        // B ends on A's RTCP BYE, by itself.
        let bEnded = await rb.waitFor("ended", timeoutSeconds: 3)
        #expect(bEnded != nil)
        #expect(rb.endReason?.cause == .remoteHangup)
        // A's own `ended` event reaches its recorder a moment after hangUp() returns: read it once
        // the stream has finished (a loaded ASan run read it too early once).
        await ra.finished()
        await rb.finished()
        #expect(ra.endReason?.cause == .localHangup)

        // ≥ 95 % of packets delivered both ways, by both our count and the senders' counts.
        #expect(sa.packetsSent > 100 && sb.packetsSent > 100)
        #expect(Double(sb.packetsReceived) >= 0.95 * Double(sa.packetsSent - 10))
        #expect(Double(sa.packetsReceived) >= 0.95 * Double(sb.packetsSent - 10))
        #expect(sa.deliveryRatio >= 0.95 && sb.deliveryRatio >= 0.95)
        #expect(sa.srtpAuthenticationFailures == 0 && sb.srtpAuthenticationFailures == 0)
        #expect(sa.malformedPackets == 0 && sb.malformedPackets == 0)
        // Nothing is sent before a pair is selected, so a clean call has no send failure at all.
        #expect(sa.sendFailures == 0 && sb.sendFailures == 0, "send failures: A \(sa.sendFailures), B \(sb.sendFailures)")
        #expect(sa.rtcpPacketsReceived >= 1 && sb.rtcpPacketsReceived >= 1)
        #expect(sa.codec == "opus/48000/2" && sa.srtpSuite == "AES_CM_128_HMAC_SHA1_80")
        #expect(sa.encoderMaximumBandwidth == "wideband" && sb.encoderMaximumBandwidth == "wideband")
        // A plausible value in milliseconds (a unit or NTP-format slip would be off by orders of
        // magnitude); the margin holds on a loaded 2-core machine.
        let rtt = try #require(sa.roundTripTimeMilliseconds)
        #expect(rtt >= 0 && rtt < 250)
        // A clean loopback call rates as good or better on the E-model (R ≈ 93 less ~2 for
        // ~65 ms; on a loaded machine the jitter buffer grows, and with it the delay); a unit or
        // format slip in its inputs would land near 1.
        let mos = try #require(sa.meanOpinionScore)
        #expect(mos > 4.0 && mos <= 4.5, "MOS \(mos), R \(sa.qualityRating ?? -1)")
        let oneWay = try #require(sa.estimatedOneWayDelayMilliseconds)
        #expect(oneWay > 20 && oneWay < 250, "one-way delay \(oneWay) ms")
        #expect(sa.heardLossPercent < 5)
        // Payload bitrates: what the encoder makes (32 kb/s target, VBR) arrives at the same rate
        // (RED stayed off since its release).
        #expect(sa.redundantFramesSent == released.redundantFramesSent)
        #expect(sa.sendBitrateBitsPerSecond > 8_000 && sa.sendBitrateBitsPerSecond < 64_000, "sent \(sa.sendBitrateBitsPerSecond) b/s")
        #expect(abs(sb.receiveBitrateBitsPerSecond - sa.sendBitrateBitsPerSecond) < sa.sendBitrateBitsPerSecond / 5)

        // The received audio is the peer's tone: right frequency and level.
        for (file, expected) in [("/a.wav", 660.0), ("/b.wav", 440.0)] {
            let (samples, rate) = try WAVFile.read(path: dir + file)
            #expect(rate == 48_000)
            #expect(samples.count > rate * 2)
            // From 0.5 s after the tone first arrives (the sink starts before ICE connects, and
            // on a loaded machine the first audio can be late), to just before the hang-up.
            let first = try #require(
                stride(from: 0, to: samples.count - 960, by: 960).first {
                    ToneAnalysis.rmsDBFS(Array(samples[$0..<($0 + 960)])) > -30
                })
            let body = Array(samples[(first + rate / 2)..<(samples.count - rate / 4)])
            let f = try #require(ToneAnalysis.dominantFrequencyHertz(body, sampleRateHertz: rate, searchRange: 100...2000))
            #expect(abs(f - expected) < 2, "\(file): \(f) Hz, expected \(expected)")
            let level = ToneAnalysis.rmsDBFS(body)
            #expect(abs(level - Self.level) < 1.5, "\(file): \(level) dBFS")
            // And nothing else: the other tone is at least 30 dB down.
            let other = expected == 660 ? 440.0 : 660.0
            let own = ToneAnalysis.goertzelPower(body, frequencyHertz: expected, sampleRateHertz: rate)
            let leak = ToneAnalysis.goertzelPower(body, frequencyHertz: other, sampleRateHertz: rate)
            #expect(10 * log10(own / max(leak, 1e-12)) > 30)
        }
    }

    @Test func gcmSuiteIsNegotiatedWhenTheOffererPrefersIt() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try CallSession(
            configuration: CallConfiguration(
                localAddresses: ["127.0.0.1"], srtpSuites: [.aeadAES128GCM, .aesCM128HMACSHA1_80], statisticsIntervalSeconds: 0))
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        #expect(b.statistics().srtpSuite == "AEAD_AES_128_GCM")
        await a.hangUp()
        await b.hangUp()
    }

    /// Tether says how wide what it sends is (`sprop-maxcapturerate`), codes wideband by default,
    /// and sends a peer that plays at most 8 kHz (`maxplaybackrate=8000`) nothing wider than
    /// narrowband.
    @Test func aPeerThatPlaysAtMost8kHzIsSentNarrowband() async throws {
        let a = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let ra = EventRecorder(a)
        try await a.start()
        try await b.start()
        let offer = try await a.makeOffer()
        let fmtp = try #require(offer.split(separator: "\r\n").first { $0.hasPrefix("a=fmtp:111 ") })
        #expect(fmtp.contains("sprop-maxcapturerate=16000"), "\(fmtp)")
        let answer = try await b.acceptOffer(offer)
        let narrowed = answer.replacingOccurrences(of: "a=fmtp:111 ", with: "a=fmtp:111 maxplaybackrate=8000;")
        #expect(narrowed != answer)
        try await a.applyAnswer(narrowed)
        #expect(await ra.waitFor("established", timeoutSeconds: 5) != nil)
        #expect(a.statistics().encoderMaximumBandwidth == "narrowband")
        #expect(b.statistics().encoderMaximumBandwidth == "wideband")
        await a.hangUp()
        await b.hangUp()
    }

    @Test func peerThatNeverSendsMediaEndsTheCallWithARetryableTimeout() async throws {
        let a = try CallSession(
            configuration: CallConfiguration(localAddresses: ["127.0.0.1"], connectTimeoutSeconds: 1, statisticsIntervalSeconds: 0))
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let ra = EventRecorder(a)
        try await a.start()  // B never starts: ICE connects but no media flows to A.
        try await a.applyAnswer(try await b.acceptOffer(try await a.makeOffer()))
        #expect(await ra.waitFor("ended", timeoutSeconds: 5) != nil)
        let reason = try #require(ra.endReason)
        #expect(reason.cause == .connectionTimeout)
        #expect(reason.error?.code == .connectionTimeout)
        #expect(reason.error?.isTerminal == true && reason.error?.canRetry == true)
        #expect(ra.recordedErrors.contains { $0.code == .connectionTimeout })
        await b.hangUp()
    }

    @Test func malformedAndIncompatibleDescriptionsThrowTypedErrors() async throws {
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"]))
        await #expect(throws: TetherError.self) { _ = try await b.acceptOffer("this is not SDP") }
        do {
            _ = try await b.acceptOffer(
                "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 RTP/SAVP 0\r\na=rtpmap:0 PCMU/8000\r\n")
            Issue.record("an offer without Opus was accepted")
        } catch {
            #expect(error.code == .incompatibleSessionDescription)
            #expect(!error.isTerminal && !error.canRetry)
        }
        do {
            _ = try await b.acceptOffer("v=0\r\no=broken\r\ns=-\r\nt=0 0\r\n")
            Issue.record("a malformed offer was accepted")
        } catch {
            #expect(error.code == .malformedSessionDescription)
        }
        // Nothing was lost: the session can still take a good offer.
        #expect(b.state == .new)
        let a = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"]))
        let answer = try await b.acceptOffer(try await a.makeOffer())
        #expect(answer.contains("a=crypto:"))
        await a.hangUp()
        await b.hangUp()
    }

    @Test func operationsOutOfOrderAreInvalidState() async throws {
        let a = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"]))
        do {
            try await a.applyAnswer("v=0\r\n")
            Issue.record("applyAnswer without an offer succeeded")
        } catch {
            #expect(error.code == .invalidState)
        }
        _ = try await a.makeOffer()
        do {
            _ = try await a.makeOffer()
            Issue.record("a second offer succeeded")
        } catch {
            #expect(error.code == .invalidState)
        }
        await a.hangUp()
        #expect(a.state.isEnded)
        do {
            try await a.start()
            Issue.record("start after hang-up succeeded")
        } catch {
            #expect(error.code == .invalidState)
        }
    }
}

@Suite("CallSession lifetime", .keepsLogPerTest)
struct CallSessionLifetimeTests {
    @Test func sessionDroppedMidCallStopsItsMediaThreads() async throws {
        let b = try CallSession(
            configuration: CallConfiguration(localAddresses: ["127.0.0.1"], connectTimeoutSeconds: 5, statisticsIntervalSeconds: 0))
        let rb = EventRecorder(b)
        try await b.start()
        do {
            let a = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
            try await a.start()
            try await a.applyAnswer(try await b.acceptOffer(try await a.makeOffer()))
            #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        }
        // A is gone (no hang-up): its media stopped, so B's statistics stop growing. Wait until two
        // reads 300 ms apart agree (a loaded machine may take a while to tear A down), then check
        // nothing more arrives for another 500 ms.
        var first = b.statistics().packetsReceived
        var settled = false
        for _ in 0..<17 where !settled {
            try await Task.sleep(for: .milliseconds(300))
            let now = b.statistics().packetsReceived
            settled = now == first
            first = now
        }
        #expect(settled, "B still receives 5 s after A was dropped")
        try await Task.sleep(for: .milliseconds(500))
        #expect(b.statistics().packetsReceived == first)
        await b.hangUp()
        #expect(await rb.waitFor("ended", timeoutSeconds: 2) != nil)
        #expect(rb.endReason?.cause == .localHangup)
    }
}

@Suite("CallSession media direction", .keepsLogPerTest)
struct CallSessionDirectionTests {
    @Test func answererToASendOnlyOfferReceivesButSendsNoRTP() async throws {
        let a = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let b = try CallSession(
            configuration: CallConfiguration(localAddresses: ["127.0.0.1"], rtcpIntervalSeconds: 1, statisticsIntervalSeconds: 0))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await a.start()
        try await b.start()
        let offer = try await a.makeOffer()
        #expect(offer.contains("a=sendrecv"))
        // The offer as B sees it says A only sends (as on hold): B answers recvonly and must stay silent.
        let answer = try await b.acceptOffer(offer.replacingOccurrences(of: "a=sendrecv", with: "a=sendonly"))
        #expect(answer.contains("a=recvonly"))
        try await a.applyAnswer(answer)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        // A receives nothing by negotiation: a working path is what establishes it, not a decoded frame.
        #expect(await ra.waitFor("established", timeoutSeconds: 5) != nil)
        try await Task.sleep(for: .seconds(1))
        let sa = a.statistics()
        let sb = b.statistics()
        #expect(sa.packetsSent > 20 && sb.packetsReceived > 20)
        #expect(sb.packetsSent == 0 && sa.packetsReceived == 0)
        #expect(sb.rtcpPacketsSent >= 1)  // RTCP still flows from the receive-only side
        await a.hangUp()
        await b.hangUp()
    }
}

@Suite("CallSession mute and devices", .keepsLogPerTest)
struct CallSessionMuteTests {
    @Test func muteReleasesTheCaptureDeviceAndThePeerSeesNoDisruption() async throws {
        let source = TestSignalSource(frequencyHertz: 440)
        let a = try CallSession(
            configuration: CallConfiguration(audioSource: source, localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        await a.setMuted(true)
        let framesAtMute = source.statistics.framesTransferred
        let receivedAtMute = b.statistics().packetsReceived
        // Packets (encoded silence) keep flowing: 100 of them (2 s, twice the disruption
        // threshold) reach the peer, which never sees a disruption…
        #expect(await waitUntil(timeoutSeconds: 20) { b.statistics().packetsReceived - receivedAtMute > 100 })
        #expect(!rb.stateNames.contains("mediaDisrupted"))
        // …while the capture device, closed, produced nothing more.
        #expect(source.statistics.framesTransferred <= framesAtMute + 1)
        await a.setMuted(false)
        #expect(await waitUntil(timeoutSeconds: 10) { source.statistics.framesTransferred > framesAtMute + 10 })
        await a.hangUp()
        await b.hangUp()
    }

    @Test func captureThatCannotOpenIsRefusedWhenTheConfigurationRequiresCapture() async throws {
        var configuration = CallConfiguration(
            audioSource: WAVFileSource(path: "/nonexistent/tether.wav"), localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        configuration.requiresCapture = true
        let a = try CallSession(configuration: configuration)
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        try await a.start()
        try await b.start()
        let answer = try await b.acceptOffer(try await a.makeOffer())
        await #expect {
            try await a.applyAnswer(answer)
        } throws: { error in
            (error as? TetherError)?.code == .captureDeviceFailed && (error as? TetherError)?.isTerminal == false
        }
        await a.hangUp()
        await b.hangUp()
    }

    @Test func captureThatCannotOpenGoesListenOnlyWithAnErrorEvent() async throws {
        let a = try CallSession(
            configuration: CallConfiguration(
                audioSource: WAVFileSource(path: "/nonexistent/tether.wav"), localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await rb.waitFor("established", timeoutSeconds: 5) != nil)
        #expect(await ra.waitFor("established", timeoutSeconds: 5) != nil)
        let error = ra.recordedErrors.first { $0.code == .captureDeviceFailed }
        #expect(error != nil && error?.isTerminal == false)
        try await Task.sleep(for: .seconds(1.5))
        #expect(!rb.stateNames.contains("mediaDisrupted"))  // listen-only still sends silence
        #expect(b.statistics().packetsReceived > 50)
        await a.hangUp()
        await b.hangUp()
    }
}
