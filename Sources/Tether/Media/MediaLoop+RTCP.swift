import TetherCodec
import TetherCore
import TetherICE
import TetherRTP
import TetherRealtime

// MARK: RTCP and rate: the peer's reports and feedback into the rate control, the encoder adapted, our reports and feedback sent
extension MediaLoop {
    func handleRTCP(_ buffer: UnsafeMutableRawBufferPointer, arrivalNanoseconds: UInt64) {
        let length: Int
        do throws(SRTPError) {
            length = try inbound.unprotectRTCP(buffer, length: buffer.count)
        } catch {
            countSRTPFailure(error)
            return
        }
        let compound: RTCPCompoundParser
        do throws(RTPParseError) {
            // Reduced-size RTCP (RFC 5506: feedback alone) is taken from any peer.
            compound = try RTCPCompoundParser(UnsafeRawBufferPointer(rebasing: buffer[0..<length]), allowReducedSize: true)
        } catch {
            stats.malformedPackets += 1
            return
        }
        stats.rtcpPacketsReceived += 1
        stats.lastMediaArrivalNanoseconds = arrivalNanoseconds
        let arrivalNTP = NTPTimestamp(unixNanoseconds: Int64(MonotonicClock.realtimeNanoseconds())).middle32
        // The report's loss and, from an XR Loss RLE block in the same compound (after it), its
        // runs: the loss adaptation takes both at once.
        let reading = peerReports.read(compound, arrivalNanoseconds: arrivalNanoseconds, arrivalNTPMiddle32: arrivalNTP)
        if reading.bye && !byeAnnounced {
            byeAnnounced = true
            setup.notify(.byeReceived)
        }
        if let block = reading.block {
            stats.peerReportedHighestSequence = block.extendedHighestSequence
            stats.peerReportArrivalNanoseconds = arrivalNanoseconds
            stats.peerReportMissesRecentPackets = missesRecentPackets(
                reportedHighest: UInt16(truncatingIfNeeded: block.extendedHighestSequence), arrivalNanoseconds: arrivalNanoseconds)
            stats.remotePacketsLost = Int(block.cumulativeLost)
            stats.remoteFractionLost = Double(block.fractionLost) / 256
            stats.remoteJitterMilliseconds = Double(block.interarrivalJitter) / Double(Self.samplesPerMillisecond)
            if let rtt = reading.roundTripSeconds { stats.roundTripTimeMilliseconds = rtt * 1000 }
        }
        stats.lossRunReportsReceived = peerReports.lossRunReports
        if let mean = peerReports.meanLossRunPackets { stats.remoteMeanLossRunPackets = mean }
        // Transport-cc feedback about our packets: each packet's arrival (or loss) to the rate
        // control, then its decision.
        if let body = reading.transportFeedback, setup.transportWideSequenceID != nil {
            stats.transportFeedbackReceived += 1
            sendHistory.readFeedback(body: body) { result in
                rateController.packetReported(
                    sentNanoseconds: result.sentNanoseconds, bytes: result.bytes, arrivalMicroseconds: result.arrivalMicroseconds)
            }
            if let decision = rateController.feedbackEnded(now: arrivalNanoseconds) { apply(decision, now: arrivalNanoseconds) }
        }
        if let fractionLost = reading.fractionLost,
            let decision = rateController.reportReceived(
                fractionLost: fractionLost, lossRuns: reading.lossRuns.map { ($0.lost, $0.lossRuns) },
                roundTripSeconds: reading.roundTripSeconds, now: arrivalNanoseconds)
        {
            apply(decision, now: arrivalNanoseconds)
        }
        noteRateState(now: arrivalNanoseconds)
    }

    /// Frames of `frameMilliseconds` in a packet of `milliseconds`, one to `maximum` (what the
    /// gathering buffer holds).
    static func frames(inPacketOf milliseconds: Int, frameMilliseconds: Int, maximum: Int) -> Int {
        min(maximum, max(1, milliseconds / frameMilliseconds))
    }

    /// Takes a rate-control decision: the encoder's settings, RED, and the packet duration
    /// (from the next packet on).
    private func apply(_ decision: SendRateController.Decision, now: UInt64) {
        let frames = Self.frames(
            inPacketOf: decision.frameMilliseconds, frameMilliseconds: Int(frameNanoseconds / 1_000_000), maximum: maximumFramesPerPacket)
        if frames != nextFramesPerPacket {
            nextFramesPerPacket = frames
            stats.packetMilliseconds = decision.frameMilliseconds
            log.post(
                RealtimeLogRecord(
                    event: MediaLogEvent.packetDurationChanged.rawValue, nanoseconds: now, a: Int64(decision.frameMilliseconds),
                    b: Int64(decision.budgetBitsPerSecond), c: Int64(decision.sendBitsPerSecond)))
        }
        if decision.settings != lastAppliedSettings { applyEncoderSettings(decision.settings) }
    }

    /// The rate control's view into the statistics (and a log record when its state changes).
    /// (Read in place: the estimator is a value of a few kilobytes, not copied per packet.)
    private func noteRateState(now: UInt64) {
        guard setup.rateControl else { return }
        stats.estimatedBandwidthBitsPerSecond = Int(rateController.estimator.estimateBitsPerSecond)
        stats.queueDelayMilliseconds = rateController.estimator.queueMilliseconds
        stats.congestionLoss = rateController.estimator.lossIsCongestion
        let (use, code): (CallStatistics.PathUse, Int64) = switch rateController.estimator.usage {
        case .normal: (.normal, 0)
        case .overusing: (.overusing, 1)
        case .underusing: (.underusing, 2)
        }
        if use != stats.pathUse {
            stats.pathUse = use
            log.post(
                RealtimeLogRecord(
                    event: MediaLogEvent.congestionChanged.rawValue, nanoseconds: now, a: code,
                    b: Int64(rateController.budgetBitsPerSecond), c: Int64(rateController.estimator.queueMilliseconds)))
        }
    }

    /// Reconfigures the encoder for the loss the peer reports (a few opus_encoder_ctl calls).
    private func applyEncoderSettings(_ settings: LossAdaptation.Settings) {
        lastAppliedSettings = settings
        var c = setup.encoder.configuration
        c.expectedLossPercent = settings.expectedLossPercent
        c.inBandFEC = settings.inBandFEC
        c.bitrateBitsPerSecond = settings.bitrateBitsPerSecond
        do throws(OpusCodecError) {
            try setup.encoder.apply(c)
        } catch {
            return
        }
        stats.encoderExpectedLossPercent = settings.expectedLossPercent
        let framesBefore = redundancyInUse != nil ? redundantFramesInUse : 0
        let fecBefore = stats.encoderInBandFEC
        redundancyInUse = settings.redundancy ? setup.redundantAudio : nil
        redundantFramesInUse = settings.redundantFrames
        let now = MonotonicClock.nanoseconds()
        log.post(
            RealtimeLogRecord(
                event: MediaLogEvent.encoderAdapted.rawValue, nanoseconds: now, a: Int64(rateController.lossAdaptation.estimatedLossPercent),
                b: Int64(settings.expectedLossPercent), c: Int64(settings.bitrateBitsPerSecond)))
        let framesNow = redundancyInUse != nil ? redundantFramesInUse : 0
        if framesNow != framesBefore || settings.inBandFEC != fecBefore {
            log.post(
                RealtimeLogRecord(
                    event: MediaLogEvent.redundancyChanged.rawValue, nanoseconds: now, a: Int64(framesNow), b: settings.inBandFEC ? 1 : 0))
        }
        stats.encoderRedundantFrames = redundancyInUse != nil ? redundantFramesInUse : 0
        stats.encoderInBandFEC = settings.inBandFEC
        stats.encoderBitrateBitsPerSecond = settings.bitrateBitsPerSecond
        stats.encoderAdaptations += 1
    }

    /// Whether a report that arrived at `arrivalNanoseconds` shows the peer missing every packet
    /// we sent more than a round trip plus 300 ms before (its highest sequence received is older
    /// than the newest such packet). Fifteen packets in a row lost by chance is vanishingly
    /// unlikely even at 20 % loss, so one such report means the peer does not receive us.
    /// - Note: Media thread; no allocation.
    private func missesRecentPackets(reportedHighest: UInt16, arrivalNanoseconds: UInt64) -> Bool {
        let rtt = stats.roundTripTimeMilliseconds > 0 ? UInt64(stats.roundTripTimeMilliseconds * 1_000_000) : 200_000_000
        let margin = rtt + 300_000_000
        guard arrivalNanoseconds > margin else { return false }
        let cutoff = arrivalNanoseconds - margin
        // The newest packet sent at or before the cutoff.
        let stored = min(sentHistoryCount, Self.sentHistoryCapacity)
        var index = 0
        while index < stored {
            let entry = sentHistory[(sentHistoryCount - 1 - index) % Self.sentHistoryCapacity]
            if entry.at <= cutoff {
                return Int16(bitPattern: entry.sequence &- reportedHighest) > 0
            }
            index += 1
        }
        return false
    }

    /// Sends transport-cc feedback about the peer's packets since the last: alone when the peer
    /// takes reduced-size RTCP, else after a receiver report and our CNAME.
    func sendTransportFeedback(_ recorder: TransportFeedbackRecorder, now: UInt64) {
        guard setup.transport.hasPath, let remoteSSRC else { return }
        var length = 0
        if !setup.reducedSizeRTCP {
            do throws(RTCPWriteError) {
                length = try rtcpWriter.write(
                    into: rtcpBuffer, ssrc: localSSRC, senderInfo: nil,
                    reportBlocks: UnsafeBufferPointer(rebasing: reportBlock[0..<0]), bye: .omitted)
            } catch {
                return
            }
        }
        guard let written = recorder.writeFeedback(into: rtcpBuffer, at: length, senderSSRC: localSSRC, mediaSSRC: remoteSSRC) else { return }
        length += written
        do throws(SRTPError) {
            let protected = try outbound.protectRTCP(rtcpBuffer, length: length)
            if setup.transport.send(UnsafeRawBufferPointer(rebasing: rtcpBuffer[0..<protected]), kind: .rtcp) == .sent {
                directRTCPPackets += 1
            }
            stats.transportFeedbackSent += 1
        } catch {
            localSendFailures += 1
        }
    }

    /// When our next transport-cc feedback is due (nil: none to send).
    func feedbackDue() -> UInt64? {
        guard let recorder = feedbackRecorder else { return nil }
        return feedbackSchedule.due(
            unreported: recorder.unreportedPackets,
            interval: TransportFeedbackSchedule.interval(receivingBitsPerSecond: stats.receiveBitrateBitsPerSecond))
    }

    func sendRTCP(now: UInt64, bye: Bool) {
        // Nowhere to send: no report is made (making one would start a new reporting interval).
        guard setup.transport.hasPath else { return }
        var senderInfo: RTCPSenderInfo?
        refreshSentCounts()
        if sentAnything {
            // The RTP time that corresponds to `now`: the last sent timestamp plus elapsed samples.
            let elapsedSamples = (now &- lastSentAtNanoseconds) &* UInt64(Self.samplesPerMillisecond) / 1_000_000
            senderInfo = RTCPSenderInfo(
                ntpTimestamp: NTPTimestamp(unixNanoseconds: Int64(MonotonicClock.realtimeNanoseconds())).rawValue,
                rtpTimestamp: lastSentRTPTimestamp &+ UInt32(truncatingIfNeeded: elapsedSamples),
                senderPacketCount: UInt32(truncatingIfNeeded: stats.packetsSent),
                senderOctetCount: UInt32(truncatingIfNeeded: stats.bytesSent))
        }
        var block: RTCPReportBlock?
        if let remoteSSRC {
            let dlsr =
                peerReports.lastSenderReportArrivalNanoseconds == 0
                ? 0 : NTPTimestamp.delaySinceLastSenderReport(nanoseconds: Int64(bitPattern: now &- peerReports.lastSenderReportArrivalNanoseconds))
            let b = reception.makeReportBlock(
                ssrc: remoteSSRC, lastSenderReport: peerReports.lastSenderReportMiddle32, delaySinceLastSenderReport: dlsr)
            stats.fractionLost = Double(b.fractionLost) / 256
            block = b
        }
        var blockCount = 0
        if let block {
            reportBlock[0] = block
            blockCount = 1
        }
        var length: Int
        do throws(RTCPWriteError) {
            length = try rtcpWriter.write(
                into: rtcpBuffer, ssrc: localSSRC, senderInfo: senderInfo,
                reportBlocks: UnsafeBufferPointer(rebasing: reportBlock[0..<blockCount]),
                bye: bye ? .included(reason: nil) : .omitted)
        } catch {
            return
        }
        // The peer asked which of its packets arrived: those since the last report (the
        // reception window's 128 at most), after the report in the same compound.
        if setup.sendsLossRunLength, !bye, let remoteSSRC, let packets = reception.packetsSinceLossReport(),
            let written = RTCPExtendedReport.writeLossRunLength(
                into: rtcpBuffer, at: length, reporterSSRC: localSSRC, sourceSSRC: remoteSSRC, packets: packets)
        {
            length += written
            reception.lossReportSent()
        }
        lastReportAtNanoseconds = now
        do throws(SRTPError) {
            let protected = try outbound.protectRTCP(rtcpBuffer, length: length)
            if setup.transport.send(UnsafeRawBufferPointer(rebasing: rtcpBuffer[0..<protected]), kind: .rtcp) == .sent {
                directRTCPPackets += 1
            }
        } catch {
            localSendFailures += 1
        }
    }
}
