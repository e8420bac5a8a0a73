import Synchronization
import TetherCodec
import TetherCore
import TetherRTP
import TetherRealtime

// MARK: Receive: datagrams drained from the ring, re-keying, SRTP, RTP and RED into the jitter buffer
extension MediaLoop {
    func drainReceived() {
        while let _ = setup.receiveRing.pop({ buffer, arrival in handleDatagram(buffer, arrivalNanoseconds: arrival) }) {}
        stats.receiveQueueDrops = setup.receiveRing.droppedBecauseFull + setup.receiveRing.droppedBecauseOversize
    }

    /// Replaces SRTP in both directions from the next pass on (the session re-keyed).
    /// - Note: Control thread. The media thread takes the contexts over (one retain and release
    ///   per re-key, never per packet); contexts handed over twice before a pass: the newer wins.
    func replaceKeys(_ keys: SRTPContextPair) {
        let box = Unmanaged.passRetained(keys).toOpaque()
        if let older = pendingKeys.exchange(box, ordering: .acquiringAndReleasing) {
            Unmanaged<SRTPContextPair>.fromOpaque(older).release()
        }
    }

    /// Takes over contexts `replaceKeys` handed over. A relaxed load per pass while none wait;
    /// the reference counting happens here, once per re-key.
    /// - Note: Media thread only.
    @inline(__always)
    func adoptPendingKeys() {
        guard pendingKeys.load(ordering: .relaxed) != nil,
            let box = pendingKeys.exchange(nil, ordering: .acquiringAndReleasing)
        else { return }
        let pair = Unmanaged<SRTPContextPair>.fromOpaque(box).takeRetainedValue()
        keys = pair
        outbound = pair.outbound
        inbound = pair.inbound
        acceptsNewSource = true
        log.post(RealtimeLogRecord(event: MediaLogEvent.keysReplaced.rawValue, nanoseconds: MonotonicClock.nanoseconds()))
    }

    /// The first packet of another source after a re-key (the call moved to another device):
    /// reception and playout start over for it; loss counted so far is kept.
    private func switchSource(to ssrc: UInt32, now: UInt64) {
        log.post(
            RealtimeLogRecord(
                event: MediaLogEvent.sourceSwitched.rawValue, nanoseconds: now, a: Int64(remoteSSRC ?? 0), b: Int64(ssrc)))
        lostBeforeSourceChange += Int(reception.cumulativeLost)
        reception = ReceptionStatistics()
        jitterBuffer.restartStream()
        decodedCount = 0
        dtmfReceiver?.reset()
        alternateDTMFReceiver?.reset()
        remoteSSRC = ssrc
        peerReports.peerSourceChanged()
        // The new source's transport-wide sequence starts wherever its sender's does.
        feedbackRecorder?.reset()
    }

    private func handleDatagram(_ buffer: UnsafeMutableRawBufferPointer, arrivalNanoseconds: UInt64) {
        switch RTPPacketClassifier.classify(UnsafeRawBufferPointer(buffer)) {
        case .rtp: handleRTP(buffer, arrivalNanoseconds: arrivalNanoseconds)
        case .rtcp: handleRTCP(buffer, arrivalNanoseconds: arrivalNanoseconds)
        case .invalid: stats.malformedPackets += 1
        }
    }

    func countSRTPFailure(_ error: SRTPError) {
        switch error {
        case .authenticationFailed: stats.srtpAuthenticationFailures += 1
        case .replayed: stats.srtpReplayFailures += 1
        default: stats.malformedPackets += 1
        }
    }

    private func handleRTP(_ buffer: UnsafeMutableRawBufferPointer, arrivalNanoseconds: UInt64) {
        // A datagram too short for an RTP header is not worth libsrtp's time.
        guard buffer.count >= RTPHeader.fixedHeaderLength else {
            stats.malformedPackets += 1
            return
        }
        // A packet already received (the peer's redundant copy, or a network duplicate) is
        // dropped before SRTP, whose replay check would refuse it anyway (the header is clear).
        let clearSequence = UInt16(buffer[2]) << 8 | UInt16(buffer[3])
        let clearSSRC = UInt32(buffer[8]) << 24 | UInt32(buffer[9]) << 16 | UInt32(buffer[10]) << 8 | UInt32(buffer[11])
        if clearSSRC == remoteSSRC && reception.hasReceived(sequenceNumber: clearSequence) {
            stats.duplicatePackets += 1
            return
        }
        // Another source than the peer's is dropped unread (it would fail the SSRC check after
        // SRTP anyway), unless a re-key made room for a new one: libsrtp would keep a stream
        // for every SSRC a peer invents.
        if let remoteSSRC, clearSSRC != remoteSSRC, !acceptsNewSource {
            stats.malformedPackets += 1
            return
        }
        let length: Int
        do throws(SRTPError) {
            length = try inbound.unprotectRTP(buffer, length: buffer.count)
        } catch {
            countSRTPFailure(error)
            return
        }
        let plain = UnsafeRawBufferPointer(rebasing: buffer[0..<length])
        let header: RTPHeader
        var isEvent = false
        var isRedundant = false
        do throws(RTPParseError) {
            header = try RTPHeader.parse(plain)
            if acceptsNewSource {
                acceptsNewSource = false
                if let current = remoteSSRC, header.ssrc != current { switchSource(to: header.ssrc, now: arrivalNanoseconds) }
            }
            isEvent = dtmfReceiver != nil
                && (header.payloadType == telephoneEventPayloadType || (alternateDTMFReceiver != nil && header.payloadType == alternateEventPayloadType))
            isRedundant = !isEvent && setup.redundantAudio?.payloadType == header.payloadType
            try header.validate(expectedPayloadType: isEvent || isRedundant ? header.payloadType : setup.payloadType, expectedSSRC: remoteSSRC)
        } catch {
            stats.malformedPackets += 1
            return
        }
        if remoteSSRC == nil {
            remoteSSRC = header.ssrc
            log.post(RealtimeLogRecord(event: MediaLogEvent.firstMediaReceived.rawValue, nanoseconds: arrivalNanoseconds, a: Int64(header.ssrc)))
        }
        // Transport-cc: every packet's arrival, for the feedback the peer's sender adapts to.
        if let recorder = feedbackRecorder, let id = setup.transportWideSequenceID,
            let transportSequence = TransportWideSequence.read(from: plain, header: header, id: id)
        {
            recorder.record(sequence: transportSequence, arrivalNanoseconds: arrivalNanoseconds)
        }
        // Arrival in RTP units: nanoseconds × samples per millisecond / 1 000 000, mod 2^32.
        let perMillisecond = UInt64(Self.samplesPerMillisecond)
        let arrivalUnits = UInt32(
            truncatingIfNeeded: arrivalNanoseconds / 1_000_000 &* perMillisecond &+ (arrivalNanoseconds % 1_000_000) &* perMillisecond / 1_000_000)
        // An event update carries its event's start, not its sampling instant, and a padding
        // packet the last frame's: no jitter sample from either.
        let kind = reception.packetReceived(
            sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, arrivalRTPUnits: arrivalUnits,
            updatesJitter: !isEvent && header.payloadLength > 0)
        stats.lastMediaArrivalNanoseconds = arrivalNanoseconds
        if kind == .duplicate {
            stats.duplicatePackets += 1
            return
        }
        stats.packetsReceived += 1
        stats.bytesReceived += header.payloadLength
        let payload = UnsafeRawBufferPointer(rebasing: plain[header.payloadOffset..<(header.payloadOffset + header.payloadLength)])
        if payload.isEmpty {
            // Padding only (a sender probing the path's bandwidth: Chromium does, once
            // transport-cc is negotiated): its arrival went to the feedback above, and its
            // sequence number is no lost frame.
            stats.paddingPacketsReceived += 1
            jitterBuffer.noteNonAudioPacket(sequenceNumber: header.sequenceNumber)
            return
        }
        if isEvent {
            // DTMF: to the receiver; the jitter buffer only learns that this sequence number was
            // no audio, so the frames the event replaced play as a gap, not as loss.
            guard let event = TelephoneEventPayload(parsing: payload) else {
                stats.malformedPackets += 1
                return
            }
            stats.dtmfPacketsReceived += 1
            jitterBuffer.noteNonAudioPacket(sequenceNumber: header.sequenceNumber)
            if header.payloadType == telephoneEventPayloadType {
                dtmfReceiver?.receive(event, timestamp: header.timestamp, now: arrivalNanoseconds)
            } else {
                alternateDTMFReceiver?.receive(event, timestamp: header.timestamp, now: arrivalNanoseconds)
            }
            forwardReceivedDigits()
            return
        }
        if isRedundant {
            insertRedundantAudio(payload, header: header, arrivalNanoseconds: arrivalNanoseconds)
            return
        }
        let outcome = jitterBuffer.insert(
            sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp, payload: payload,
            arrivalNanoseconds: arrivalNanoseconds, durationSamples: OpusPacket.sampleCount(of: payload))
        if outcome == .late { stats.latePackets += 1 }
    }

    /// An RFC 2198 RED payload: its primary goes to the jitter buffer as the packet's own frame,
    /// then each redundant Opus block fills the hole of the frame it copies, if there is one. A
    /// block's sequence number is the packet's minus the frames between them (its timestamp
    /// offset over its own duration: one packet per frame, as RED senders send). A payload that is
    /// not RED, or whose primary is not our Opus, is malformed and dropped whole; blocks of
    /// another payload type, or whose offset is not a whole number of their frames, are skipped.
    private func insertRedundantAudio(_ payload: UnsafeRawBufferPointer, header: RTPHeader, arrivalNanoseconds: UInt64) {
        let red: RedundantAudioPayload
        do throws(RedundantAudioPayload.ParseError) {
            red = try RedundantAudioPayload(parsing: payload)
        } catch {
            stats.malformedPackets += 1
            return
        }
        guard red.primary.payloadType == setup.payloadType else {
            stats.malformedPackets += 1
            return
        }
        stats.redundantAudioPacketsReceived += 1
        if !red.primary.range.isEmpty {
            let primary = UnsafeRawBufferPointer(rebasing: payload[red.primary.range])
            let outcome = jitterBuffer.insert(
                sequenceNumber: header.sequenceNumber, rtpTimestamp: header.timestamp,
                payload: primary, arrivalNanoseconds: arrivalNanoseconds, durationSamples: OpusPacket.sampleCount(of: primary))
            if outcome == .late { stats.latePackets += 1 }
        }
        var deepest = 0
        var deepestCarriesFEC = false
        for index in 0..<red.redundantCount {
            let block = red.redundant(index)
            let bytes = UnsafeRawBufferPointer(rebasing: payload[block.range])
            guard block.payloadType == setup.payloadType, block.timestampOffset > 0,
                let samples = OpusPacket.sampleCount(of: bytes), Int(block.timestampOffset) % samples == 0
            else { continue }
            // At most 16383 / 120 frames back: the jitter buffer refuses what is too far behind.
            let back = UInt16(Int(block.timestampOffset) / samples)
            if Int(back) > deepest {
                deepest = Int(back)
                deepestCarriesFEC = OpusPacket.hasLBRR(bytes)
            }
            if jitterBuffer.insertRedundant(
                sequenceNumber: header.sequenceNumber &- back, rtpTimestamp: header.timestamp &- block.timestampOffset,
                payload: bytes, arrivalNanoseconds: arrivalNanoseconds)
            {
                stats.framesRecoveredByRedundancy += 1
            }
        }
        jitterBuffer.noteRedundancy(framesBack: deepest, oldestCarriesFEC: deepestCarriesFEC, now: arrivalNanoseconds)
    }
}
