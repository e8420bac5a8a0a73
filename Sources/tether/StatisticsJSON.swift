import Tether

/// Statistics as a JSON object (one `statistics` line of `tether call`).
enum StatisticsJSON {
    static func object(_ s: CallStatistics) -> [String: Any] {
        var o: [String: Any] = [
            "type": "statistics", "codec": s.codec, "payloadType": s.payloadType, "packetTimeMs": s.packetTimeMilliseconds,
            "targetBitrate": s.targetBitrateBitsPerSecond, "srtpSuite": s.srtpSuite, "srtpKeying": s.srtpKeying,
            "dtlsHandshakeDatagramsAfterSetUp": s.dtlsHandshakeDatagramsAfterSetUp,
            "direction": s.direction, "localHold": s.localHold, "remoteHold": s.remoteHold,
            "voiceProcessing": s.voiceProcessing,
            "dtmfDigitsSent": s.dtmfDigitsSent, "dtmfDigitsReceived": s.dtmfDigitsReceived,
            "dtmfPacketsSent": s.dtmfPacketsSent, "dtmfPacketsReceived": s.dtmfPacketsReceived,
            "paddingPacketsReceived": s.paddingPacketsReceived,
            "packetsSent": s.packetsSent, "bytesSent": s.bytesSent, "packetsReceived": s.packetsReceived,
            "bytesReceived": s.bytesReceived, "packetsLost": s.packetsLost, "fractionLost": s.fractionLost,
            "jitterMs": s.jitterMilliseconds, "remotePacketsLost": s.remotePacketsLost, "remoteFractionLost": s.remoteFractionLost,
            "remoteJitterMs": s.remoteJitterMilliseconds, "srtpAuthFailures": s.srtpAuthenticationFailures,
            "srtpReplayFailures": s.srtpReplayFailures, "malformedPackets": s.malformedPackets,
            "jitterBufferTargetMs": s.jitterBufferTargetMilliseconds,
            "framesInsertedForDelay": s.framesInsertedForDelay, "framesDroppedForDelay": s.framesDroppedForDelay,
            "latePackets": s.latePackets, "duplicatePackets": s.duplicatePackets, "rtcpPacketsSent": s.rtcpPacketsSent,
            "rtcpPacketsReceived": s.rtcpPacketsReceived, "sendFailures": s.sendFailures, "receiveQueueDrops": s.receiveQueueDrops,
            "framesDecoded": s.framesDecoded,
            "framesConcealed": s.framesConcealed, "concealedSamples": s.concealedSamples, "framesRecoveredByFEC": s.framesRecoveredByFEC,
            "captureOverruns": s.captureOverruns, "playbackUnderruns": s.playbackUnderruns,
            "mediaThread": s.mediaThreadScheduling, "captureDevice": s.captureDevice,
            "captureThread": s.captureThreadScheduling, "playbackDevice": s.playbackDevice,
            "playbackThread": s.playbackThreadScheduling,
            "localAddress": s.localAddress, "remoteAddress": s.remoteAddress, "seconds": s.durationSeconds,
            "disruptions": s.recovery.disruptions.count, "secondsDisrupted": s.recovery.totalDisruptedSeconds,
            "restarts": s.recovery.restartCount,
        ]
        if let rtt = s.roundTripTimeMilliseconds { o["rttMs"] = rtt }
        if let run = s.remoteMeanLossRunPackets { o["remoteMeanLossRunPackets"] = run }
        // Absent before playout and while the peer is silent (no packet has a delay then).
        if let delay = s.jitterBufferDelayMilliseconds { o["jitterBufferMs"] = delay }
        // Where the delay is: each part as this side measures it (nil parts absent).
        o["encoderLookaheadMs"] = s.encoderLookaheadMilliseconds
        o["encoderMaxBandwidth"] = s.encoderMaximumBandwidth
        if let queue = s.playbackQueueMilliseconds { o["playbackQueueMs"] = queue }
        if let device = s.captureDeviceLatencyMilliseconds { o["captureDeviceLatencyMs"] = device }
        if let device = s.playbackDeviceLatencyMilliseconds { o["playbackDeviceLatencyMs"] = device }
        if let mouthToEar = s.estimatedMouthToEarMilliseconds { o["mouthToEarEstimateMs"] = mouthToEar }
        if let mos = s.meanOpinionScore, let r = s.qualityRating {
            o["mos"] = mos
            o["rFactor"] = r
        }
        let v = s.voiceProcessingFigures
        if let erle = v.echoReturnLossEnhancementDecibels { o["echoReturnLossEnhancementDb"] = erle }
        if let delay = v.echoDelayMilliseconds { o["echoDelayMs"] = delay }
        if let p = v.speechProbability { o["speechProbability"] = p }
        if s.voiceProcessing != "off" { o["echoPresent"] = v.echoPresent }
        o["heardLossPercent"] = s.heardLossPercent
        o["fecEnabled"] = s.encoderInBandFEC
        o["fecExpectedLossPercent"] = s.encoderExpectedLossPercent
        o["encoderAdaptations"] = s.encoderAdaptations
        o["sendsRedundantAudio"] = s.sendsRedundantAudio
        o["redundantFramesPerPacket"] = s.redundantFramesPerPacket
        o["redundantFramesSent"] = s.redundantFramesSent
        o["framesRecoveredByRedundancy"] = s.framesRecoveredByRedundancy
        o["redundantCopiesTooLate"] = s.redundantCopiesTooLate
        o["redundantAudioPacketsReceived"] = s.redundantAudioPacketsReceived
        o["sendBitrate"] = s.sendBitrateBitsPerSecond
        o["receiveBitrate"] = s.receiveBitrateBitsPerSecond
        o["targetBitrate"] = s.targetBitrateBitsPerSecond
        if let estimate = s.estimatedBandwidthBitsPerSecond { o["estimatedBandwidth"] = estimate }
        o["sentPacketMs"] = s.sentPacketMilliseconds
        o["pathUse"] = s.pathUse.rawValue
        if let queue = s.queueingDelayMilliseconds { o["queueingDelayMs"] = queue }
        o["lossIsCongestion"] = s.lossIsCongestion
        o["transportFeedbackReceived"] = s.transportFeedbackReceived
        o["transportFeedbackSent"] = s.transportFeedbackSent
        return o
    }
}
