import Foundation
import Tether
import TetherAudio

/// Renders two sides' statistics as a text table.
enum StatisticsTable {
    static func render(a: CallStatistics, b: CallStatistics) -> String {
        func ms(_ v: Double?) -> String { v.map { String(format: "%.1f ms", $0) } ?? "—" }
        func pct(_ v: Double) -> String { String(format: "%.1f %%", v * 100) }
        let rows: [(String, (CallStatistics) -> String)] = [
            ("codec", { "\($0.codec) pt \($0.payloadType), \($0.packetTimeMilliseconds) ms, \($0.targetBitrateBitsPerSecond / 1000) kb/s\($0.encoderMaximumBandwidth.isEmpty ? "" : ", " + $0.encoderMaximumBandwidth)" }),
            ("SRTP suite", { $0.srtpSuite }),
            ("packets sent", { "\($0.packetsSent)" }),
            ("bytes sent", { "\($0.bytesSent)" }),
            ("packets received", { "\($0.packetsReceived)" }),
            ("bytes received", { "\($0.bytesReceived)" }),
            ("packets lost (ours)", { "\($0.packetsLost)" }),
            ("delivery", { pct($0.deliveryRatio) }),
            ("lost by peer (its RTCP)", { "\($0.remotePacketsLost) (\(pct($0.remoteFractionLost)) last interval)" }),
            ("peer's loss runs (its XR), mean", { $0.remoteMeanLossRunPackets.map { String(format: "%.2f packets", $0) } ?? "–" }),
            ("jitter (ours / peer's)", { "\(ms($0.jitterMilliseconds)) / \(ms($0.remoteJitterMilliseconds))" }),
            ("round-trip time", { ms($0.roundTripTimeMilliseconds) }),
            ("RTCP sent / received", { "\($0.rtcpPacketsSent) / \($0.rtcpPacketsReceived)" }),
            ("jitter buffer now / target", { "\(ms($0.jitterBufferDelayMilliseconds)) / \(ms($0.jitterBufferTargetMilliseconds))" }),
            ("playback queue / devices (capture, playback)", { s in
                "\(ms(s.playbackQueueMilliseconds)) / \(ms(s.captureDeviceLatencyMilliseconds)), \(ms(s.playbackDeviceLatencyMilliseconds))"
            }),
            ("mouth-to-ear estimate", { ms($0.estimatedMouthToEarMilliseconds) }),
            ("frames inserted / dropped for delay", { "\($0.framesInsertedForDelay) / \($0.framesDroppedForDelay)" }),
            ("frames decoded", { "\($0.framesDecoded)" }),
            ("frames concealed / FEC", { "\($0.framesConcealed) / \($0.framesRecoveredByFEC)" }),
            ("late / duplicate packets", { "\($0.latePackets) / \($0.duplicatePackets)" }),
            ("SRTP auth / replay fails", { "\($0.srtpAuthenticationFailures) / \($0.srtpReplayFailures)" }),
            ("malformed / send failures", { "\($0.malformedPackets) / \($0.sendFailures)" }),
            ("capture overruns / playback underruns", { "\($0.captureOverruns) / \($0.playbackUnderruns)" }),
            ("bitrate sent / received", { String(format: "%.1f / %.1f kb/s", Double($0.sendBitrateBitsPerSecond) / 1000, Double($0.receiveBitrateBitsPerSecond) / 1000) }),
            ("encoder FEC / expected loss", { "\($0.encoderInBandFEC ? "on" : "off") / \($0.encoderExpectedLossPercent) % (\($0.encoderAdaptations) adaptations)" }),
            ("RED: sending / frames sent again / recovered", { "\($0.sendsRedundantAudio ? "on (\($0.redundantFramesPerPacket) back)" : "off") / \($0.redundantFramesSent) / \($0.framesRecoveredByRedundancy)" }),
            ("estimated MOS (E-model R)", { s in s.meanOpinionScore.map { String(format: "%.2f (R %.1f)", $0, s.qualityRating!) } ?? "-" }),
            ("media thread", { $0.mediaThreadScheduling }),
            ("capture device (thread)", { "\($0.captureDevice) (\($0.captureThreadScheduling))" }),
            ("voice processing", { s in
                guard s.voiceProcessing != "off" else { return "off" }
                let erle = s.voiceProcessingFigures.echoReturnLossEnhancementDecibels.map { String(format: ", ERLE %.0f dB", $0) } ?? ""
                let delay = s.voiceProcessingFigures.echoDelayMilliseconds.map { ", echo delay \($0) ms" } ?? ""
                return s.voiceProcessing + erle + delay
            }),
            ("DTMF digits sent / received", { "\($0.dtmfDigitsSent) / \($0.dtmfDigitsReceived)" }),
            ("playback device (thread)", { "\($0.playbackDevice) (\($0.playbackThreadScheduling))" }),
            ("path", { "\($0.localAddress) → \($0.remoteAddress)" }),
            ("disruptions / time disrupted", { "\($0.recovery.disruptions.count) / \(String(format: "%.2f s", $0.recovery.totalDisruptedSeconds))" }),
            ("ICE restarts offered / answered", { "\($0.recovery.restartsOffered) / \($0.recovery.restartsAnswered)" }),
        ]
        let labelWidth = rows.map { $0.0.count }.max()! + 2
        let columnWidth = max(30, rows.map { max($0.1(a).count, $0.1(b).count) }.max()! + 2)
        func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
        var out = pad("", labelWidth) + pad("A", columnWidth) + "B\n"
        out += String(repeating: "─", count: labelWidth + columnWidth * 2) + "\n"
        for (label, value) in rows {
            out += pad(label, labelWidth) + pad(value(a), columnWidth) + value(b) + "\n"
        }
        return out
    }
}

/// Checks a received WAV file for the expected tone.
enum AudioCheck {
    /// - Parameter expectedLevelDBFS: nil to report the level without judging it.
    static func describe(path: String, expectedFrequencyHertz: Double, expectedLevelDBFS: Double?) -> String {
        guard let (samples, rate) = try? WAVFile.read(path: path) else { return "unreadable" }
        // Skip the first second (call set-up, jitter-buffer start) when there is enough audio.
        let body = samples.count > rate * 2 ? Array(samples[rate...]) : samples
        guard let f = ToneAnalysis.dominantFrequencyHertz(body, sampleRateHertz: rate, searchRange: 50...4000) else { return "\(samples.count) samples, no tone found" }
        let level = ToneAnalysis.rmsDBFS(body)
        let ok = abs(f - expectedFrequencyHertz) < 5 && (expectedLevelDBFS.map { abs(level - $0) < 3 } ?? true)
        return String(
            format: "%.2f s, tone %.1f Hz (sent %.0f Hz), level %.1f dBFS%@ — %@",
            Double(samples.count) / Double(rate), f, expectedFrequencyHertz, level,
            expectedLevelDBFS.map { String(format: " (sent %.1f)", $0) } ?? "", ok ? "OK" : "MISMATCH")
    }
}
