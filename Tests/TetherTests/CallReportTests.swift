import Foundation
import Testing
import TetherTestSupport

@testable import Tether

/// The call report's recorder, fed by hand (sans-IO): what it keeps of events and samples, and
/// the document it makes.
@Suite("Call report", .keepsLogPerTest)
struct CallReportTests {
    func statistics(seconds: Double) -> CallStatistics {
        var s = CallStatistics(
            codec: "opus/48000/2", payloadType: 111, packetTimeMilliseconds: 20, targetBitrateBitsPerSecond: 32_000, srtpSuite: "AES_CM_128_HMAC_SHA1_80",
            packetsSent: 1000, bytesSent: 80_000, rtcpPacketsSent: 20, sendFailures: 0, packetsReceived: 900, bytesReceived: 72_000,
            packetsLost: 100, fractionLost: 0.1, jitterMilliseconds: 3, rtcpPacketsReceived: 20, duplicatePackets: 0, remotePacketsLost: 0,
            remoteFractionLost: 0, remoteJitterMilliseconds: 0, roundTripTimeMilliseconds: 40, srtpAuthenticationFailures: 0,
            srtpReplayFailures: 0, malformedPackets: 2, receiveQueueDrops: 0, jitterBufferDelayMilliseconds: 60, jitterBufferTargetMilliseconds: 60,
            framesInsertedForDelay: 0, framesDroppedForDelay: 0, framesDecoded: 950, framesConcealed: 30, framesRecoveredByFEC: 20,
            framesRecoveredByRedundancy: 50, redundantAudioPacketsReceived: 0, latePackets: 0, captureOverruns: 0, playbackUnderruns: 1,
            encoderExpectedLossPercent: 0, encoderInBandFEC: false, encoderAdaptations: 0, redundantFramesSent: 0, redundantFramesPerPacket: 0,
            sendBitrateBitsPerSecond: 0, receiveBitrateBitsPerSecond: 0, mediaThreadScheduling: "", captureDevice: "", captureThreadScheduling: "",
            playbackDevice: "", playbackThreadScheduling: "", localAddress: "", remoteAddress: "", durationSeconds: seconds, recovery: CallRecovery())
        s.recovery.disruptions = [
            CallRecovery.Disruption(startSeconds: 10.0004, endSeconds: 14.5, cause: "media silence", attempts: 2, outcome: "renewed after 2 attempts")
        ]
        s.recovery.totalDisruptedSeconds = 4.4996
        s.recovery.restartsOffered = 2
        return s
    }

    @Test func theReportHoldsTheCallsCourseAndAQualitySummary() throws {
        let started = Date(timeIntervalSince1970: 1_800_000_000)
        var r = CallReportRecorder(callId: "c-1", startedAt: started)
        r.record(.stateChanged(from: .new, to: .connecting, secondsSinceStart: 0.1), atSeconds: 0.1, wallClock: started)
        r.record(.candidatePairSelected(local: "10.0.0.1:5000", remote: "10.0.0.2:6000", localType: "host", remoteType: "srflx"), atSeconds: 0.2501, wallClock: started)
        r.record(.stateChanged(from: .connecting, to: .established, secondsSinceStart: 0.3), atSeconds: 0.3, wallClock: started)
        r.record(.audioDevice(.capture, .moved(deviceName: "usb")), atSeconds: 5, wallClock: started)
        r.record(.stateChanged(from: .established, to: .mediaDisrupted, secondsSinceStart: 11), atSeconds: 11, wallClock: started)
        r.record(.stateChanged(from: .mediaDisrupted, to: .established, secondsSinceStart: 14.5), atSeconds: 14.5, wallClock: started)
        // Samples: jitter 1…20 ms, RTT 40, one without an RTT yet.
        for i in 1...20 {
            var s = statistics(seconds: Double(i))
            s.jitterMilliseconds = Double(i)
            if i == 1 { s.roundTripTimeMilliseconds = nil }
            r.sample(s)
        }
        let ended = started.addingTimeInterval(30)
        let reason = CallTerminationReason(cause: .remoteHangup, sipCode: 200, sipPhrase: "OK")
        r.record(.stateChanged(from: .established, to: .ended(reason), secondsSinceStart: 30.25), atSeconds: 30.25, wallClock: ended)

        let report = r.report(statistics(seconds: 31), state: .ended(reason))
        #expect(report.version == CallReport.formatVersion && report.callId == "c-1" && report.state == "ended")
        #expect(report.startedAt == started && report.endedAt == ended)
        #expect(report.setUpSeconds == 0.3 && report.durationSeconds == 30.25 && report.connectedSeconds == 29.95)
        #expect(report.end == CallReport.End(cause: "remote hang-up", causeCode: 1, sipCode: 200, sipPhrase: "OK", errorCode: nil, errorMessage: nil, retryable: nil))
        #expect(report.paths == [CallReport.Path(atSeconds: 0.25, local: "10.0.0.1:5000", remote: "10.0.0.2:6000", localType: "host", remoteType: "srflx")])
        let change = try #require(report.deviceChanges.first)
        #expect(report.deviceChanges.count == 1 && change.atSeconds == 5 && change.direction == "capture" && change.event == "moved")
        #expect(change.device == "usb" && change.message == nil)
        #expect(report.disruptions == [CallReport.Disruption(startSeconds: 10, endSeconds: 14.5, cause: "media silence", attempts: 2, outcome: "renewed after 2 attempts")])
        #expect(report.totalDisruptedSeconds == 4.5 && report.iceRestarts == CallReport.ICERestarts(offered: 2, answered: 0))
        let q = report.quality
        #expect(q.lossPercent == 10 && q.packetsLost == 100 && q.framesPlayed == 1000)
        #expect(q.rebuiltPercent == 7 && q.concealedPercent == 3)  // (20 FEC + 50 RED) and 30 of 1000 played
        #expect(q.heardLossPercent == 3)  // 100 lost − 70 rebuilt, of 1000 expected
        // A pause of the peer's stream (DTX, hold) is neither concealment nor play.
        var paused = statistics(seconds: 31)
        paused.framesConcealed = 530
        paused.framesInSilenceGaps = 500
        let afterPause = r.report(paused, state: .ended(reason)).quality
        #expect(afterPause.concealedPercent == 3 && afterPause.framesPlayed == 1000)
        #expect(q.jitterMilliseconds == CallReport.Percentiles(p50: 10, p95: 19, samples: 20))
        #expect(q.roundTripTimeMilliseconds == CallReport.Percentiles(p50: 40, p95: 40, samples: 19))
        #expect(q.jitterBufferDelayMilliseconds?.p95 == 60 && q.meanOpinionScoreMean != nil && q.meanOpinionScoreMin != nil)
        #expect(q.playbackUnderruns == 1 && q.malformedPackets == 2)

        // Codable: the JSON decodes back to the same report.
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        #expect(try decoder.decode(CallReport.self, from: encoder.encode(report)) == report)
    }

    /// A flapping network or device cannot grow the report without bound.
    @Test func pathAndDeviceEntriesAreBounded() {
        var r = CallReportRecorder(callId: "c-2", startedAt: Date())
        for i in 0..<(CallReportRecorder.maximumEntries + 50) {
            r.record(.candidatePairSelected(local: "a:\(i)", remote: "b", localType: "host", remoteType: "host"), atSeconds: Double(i), wallClock: Date())
            r.record(.audioDevice(.playback, .recovered(deviceName: "d")), atSeconds: Double(i), wallClock: Date())
        }
        #expect(r.paths.count == CallReportRecorder.maximumEntries && r.deviceChanges.count == CallReportRecorder.maximumEntries)
    }

    /// The diagnosis: each category on its own evidence, none on a clean call.
    @Test func findingsNameWhatTheFiguresShow() {
        let started = Date()
        var clean = CallReportRecorder(callId: "c", startedAt: started)
        clean.record(.stateChanged(from: .connecting, to: .established, secondsSinceStart: 0.3), atSeconds: 0.3, wallClock: started)
        var s = statistics(seconds: 60)
        s.packetsLost = 10  // 1 %, all rebuilt
        s.framesConcealed = 5
        s.playbackUnderruns = 0
        s.recovery = CallRecovery()
        clean.sample(s)
        #expect(clean.report(s, state: .established).findings == [])

        // Lossy, disrupted, late, with the peer not receiving us and the microphone failing.
        var bad = clean
        bad.record(.audioDevice(.capture, .failed(.deviceUnavailable(name: "mic", reason: "gone"))), atSeconds: 20, wallClock: started)
        var t = statistics(seconds: 60)  // 100 lost − 70 rebuilt of 1000 expected: 3 % heard
        t.recovery.outboundDisruptions = 1
        t.jitterBufferDelayMilliseconds = 400
        bad.sample(t)
        // Echo heard and barely removed, in ten samples (nine would not do).
        t.voiceProcessingFigures.echoPresent = true
        t.voiceProcessingFigures.echoReturnLossEnhancementDecibels = 4
        for _ in 0..<9 { bad.sample(t) }
        #expect(!bad.report(t, state: .established).findings.contains { $0.issue == .echo })
        bad.sample(t)
        let findings = bad.report(t, state: .established).findings
        #expect(findings.map(\.issue) == [.oneWayAudio, .choppyAudio, .highLatency, .echo])
        #expect(findings[3].evidence.contains("10 one-second samples") && findings[3].evidence.contains("median of 4.0 dB"))
        #expect(findings[0].evidence.contains("stopped receiving our media 1 time") && findings[0].evidence.contains("capture device failed at 20.0 s"))
        #expect(findings[1].evidence.contains("3.0 % of packets lost and not rebuilt") && findings[1].evidence.contains("4.5 s without media"))
        #expect(findings[2].evidence.contains("mouth-to-ear"))

        // Never established: no audio, with the end's cause.
        var never = CallReportRecorder(callId: "n", startedAt: started)
        let reason = CallTerminationReason(cause: .connectionFailed)
        never.record(.stateChanged(from: .connecting, to: .ended(reason), secondsSinceStart: 9), atSeconds: 9, wallClock: started)
        var u = statistics(seconds: 9)
        u.packetsReceived = 0
        u.packetsLost = 0
        u.recovery = CallRecovery()
        #expect(never.report(u, state: .ended(reason)).findings == [CallReport.Finding(issue: .noAudio, evidence: "the call never carried media (ended: connection failed)")])
    }

    @Test func percentilesAreExactToTheMillisecond() {
        var h = MillisecondHistogram()
        #expect(h.percentiles == nil)
        for v in [5.0, 1, 3, 2, 4, 2500, -3, .nan] { h.add(v) }
        // 0 (−3 clamped), 1, 2, 3, 4, 5, 2000 (2500 clamped); NaN not counted.
        #expect(h.count == 7)
        #expect(h.percentile(0.5) == 3 && h.percentile(0.95) == 2000 && h.percentile(0) == 0)
    }
}
