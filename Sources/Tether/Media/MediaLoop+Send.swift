import Synchronization
import TetherAudio
import TetherCodec
import TetherCore
import TetherICE
import TetherRTP
import TetherRealtime

// MARK: Send: captured (or synthetic) frames encoded, packetized with RED when on, protected and handed to the transport
extension MediaLoop {
    func sendCaptured(now: UInt64) {
        if captureActive.load(ordering: .acquiring) {
            syntheticFrameAt = 0
            while setup.captureRing.readAll(into: pcm) {
                // Voice processing on what the microphone gave (echo cancelled against what was
                // played), before mute or hold replace it. The rings' fill levels place this
                // frame against what is played; until the echo delay is measured, a device
                // period each way is assumed.
                if let processor = setup.voiceProcessor {
                    processor.processCapture(
                        pcm,
                        timing: CaptureTiming(
                            playbackQueuedSamples: setup.playbackRing.availableToRead,
                            captureQueuedSamples: setup.captureRing.availableToRead,
                            expectedEchoDelayMilliseconds: 2 * Int(frameNanoseconds / 1_000_000)))
                }
                sendFrame(now: now)
            }
            return
        }
        // No capture device (muted, listen-only): keep sending silence on our own clock, so the
        // peer's media-loss detector stays quiet and the RTP clock keeps running.
        if syntheticFrameAt == 0 || now > syntheticFrameAt + 10 * frameNanoseconds {
            _ = setup.captureRing.discard(setup.captureRing.availableToRead)
            syntheticFrameAt = now
        }
        while now >= syntheticFrameAt {
            pcm.update(repeating: 0)
            sendFrame(now: now)
            syntheticFrameAt += frameNanoseconds
        }
    }

    /// Sends the frame in `pcm`: encoded, packetized, protected and queued — alone, or gathered
    /// with the next ones into a longer packet when the rate control asks for one.
    private func sendFrame(now: UInt64) {
        // On hold (sendonly from the peer's side / inactive): keep the clock, send nothing.
        // Muted: the microphone's frame is replaced by silence, so packets (and the peer's
        // liveness view of us) keep flowing.
        if muted.load(ordering: .relaxed) { pcm.update(repeating: 0) }
        // No candidate pair yet (or the stream is being replaced): nothing could leave, so nothing
        // is encoded, protected or counted; the clock runs on, and the next packet that goes
        // carries the marker, as after a DTX pause.
        let sending = sendsMedia.load(ordering: .relaxed)
        guard sending, setup.transport.hasPath else {
            if !sending { dropDTMF() }
            framesGathered = 0
            rtpTimestamp &+= UInt32(frameSamples)
            lastFrameWasDTX = true
            return
        }
        // A DTMF event replaces this frame's audio (and the frames gathered for a longer packet);
        // the audio clock runs on beneath it, and the audio that follows starts a talkspurt
        // (marker), as after a DTX pause.
        if let event = nextTelephoneEvent() {
            framesGathered = 0
            sendTelephoneEvent(event, now: now)
            rtpTimestamp &+= UInt32(frameSamples)
            lastFrameWasDTX = true
            return
        }
        // The packet's duration changes only between packets; RED packets are one frame long.
        if framesGathered == 0 {
            framesPerPacket = nextFramesPerPacket
            packetTimestamp = rtpTimestamp
        }
        let frames = redundancyInUse == nil ? framesPerPacket : 1
        guard frames > 1 else {
            sendPacket(pcm.baseAddress!, frames: 1, timestamp: rtpTimestamp, now: now)
            rtpTimestamp &+= UInt32(frameSamples)
            return
        }
        (packetPCM.baseAddress! + framesGathered * frameSamples).update(from: pcm.baseAddress!, count: frameSamples)
        framesGathered += 1
        rtpTimestamp &+= UInt32(frameSamples)
        guard framesGathered == frames else { return }
        framesGathered = 0
        sendPacket(packetPCM.baseAddress!, frames: frames, timestamp: packetTimestamp, now: now)
    }

    /// Bytes of RTP header our packets carry: 12, and 8 more with the transport-wide sequence.
    private var headerLength: Int {
        RTPHeader.fixedHeaderLength + (setup.transportWideSequenceID != nil ? TransportWideSequence.headerBytes : 0)
    }

    /// Writes `header` at the start of `packet`, with the transport-wide sequence extension when
    /// negotiated (stamped in the send history with the packet's size on the wire above UDP:
    /// `payloadBytes` after the header, and the SRTP tag). Returns the header's length.
    func writeHeader(_ header: RTPHeader, payloadBytes: Int, now: UInt64) -> Int {
        _ = header.write(to: packet)
        guard let id = setup.transportWideSequenceID else { return RTPHeader.fixedHeaderLength }
        let length = headerLength
        let sequence = sendHistory.stamp(bytes: length + payloadBytes + outbound.suite.rtpOverheadBytes, sentNanoseconds: now)
        TransportWideSequence.setExtensionBit(in: packet)
        TransportWideSequence.write(sequence, id: id, into: packet, at: RTPHeader.fixedHeaderLength)
        return length
    }

    /// Encodes `frames` frames at `samples`, packetizes (with RED's earlier frames when it is on:
    /// one-frame packets only), protects and queues the packet with RTP timestamp `timestamp`.
    private func sendPacket(_ samples: UnsafePointer<Int16>, frames: Int, timestamp: UInt32, now: UInt64) {
        let header = headerLength
        // With RED the frame is encoded into the history and the payload built around it;
        // otherwise straight into the packet.
        let red = frames == 1 ? redundancyInUse : nil
        let frameSlot = (newestHistorySlot + 1) % Self.historySlots
        let encodeInto: UnsafeMutableRawBufferPointer
        if red == nil {
            encodeInto = UnsafeMutableRawBufferPointer(rebasing: packet[header..<(header + Self.maximumOpusPacketBytes)])
        } else {
            historyLengths[frameSlot] = 0  // its old frame is being overwritten
            encodeInto = historySlot(frameSlot, length: Self.maximumOpusPacketBytes)
        }
        let opusBytes: Int
        do throws(OpusCodecError) {
            opusBytes = try setup.encoder.encode(samples, samples: frames * frameSamples, into: encodeInto)
        } catch {
            return
        }
        // A 1–2 byte Opus packet is a DTX frame: nothing to send this period.
        if opusBytes <= 2 && setup.encoder.configuration.discontinuousTransmission {
            lastFrameWasDTX = true
            return
        }
        var payloadType = setup.payloadType
        var payloadBytes = opusBytes
        if let red {
            payloadBytes = redundantPayload(red, frameSlot: frameSlot, opusBytes: opusBytes, into: UnsafeMutableRawBufferPointer(rebasing: packet[header..<1500]))
            payloadType = red.payloadType
        }
        let h = RTPHeader(
            marker: lastFrameWasDTX, payloadType: payloadType, sequenceNumber: sequenceNumber,
            timestamp: timestamp, ssrc: localSSRC)
        _ = writeHeader(h, payloadBytes: payloadBytes, now: now)
        lastFrameWasDTX = false
        var length = header + payloadBytes
        do throws(SRTPError) {
            length = try outbound.protectRTP(packet, length: length)
        } catch {
            localSendFailures += 1
            return
        }
        _ = transmit(length: length, payloadBytes: payloadBytes, timestamp: timestamp, now: now)
    }

    /// Writes the RED payload for the frame in history slot `frameSlot` into `out`: the earlier frames as
    /// redundant blocks, oldest first (up to `redundantFramesInUse`; each only when it was the
    /// frame that many periods before this one: not across a DTX pause, an event or a gap), then
    /// this one; remembers this frame for the next packets. Returns the payload's length (fewer
    /// blocks, down to this frame alone, when they cannot be described or do not fit).
    private func redundantPayload(_ red: RedundantAudioFormat, frameSlot: Int, opusBytes: Int, into out: UnsafeMutableRawBufferPointer) -> Int {
        let primary = UnsafeRawBufferPointer(historySlot(frameSlot, length: opusBytes))
        var blocks = 0
        var back = min(LossAdaptation.maximumRedundantFrames, redundantFramesInUse)
        while back >= 1 {
            let earlier = (frameSlot + Self.historySlots - back) % Self.historySlots
            let length = historyLengths[earlier]
            if length > 0, rtpTimestamp &- historyTimestamps[earlier] == UInt32(back * frameSamples) {
                redundantBlock[blocks] = RedundantAudioPayload.Source(
                    payloadType: red.blockPayloadType, timestampOffset: UInt32(back * frameSamples),
                    bytes: UnsafeRawBufferPointer(historySlot(earlier, length: length)))
                blocks += 1
            }
            back -= 1
        }
        // The newest blocks are kept when not all fit: drop from the oldest, down to the primary
        // alone (which always fits).
        // (No local function here: one capturing `blocks`, a var, allocates a box per packet in
        // a debug build — the allocation test caught it.)
        var first = 0
        var written: Int?
        while true {
            written = RedundantAudioPayload.write(
                primaryPayloadType: red.blockPayloadType, primary: primary,
                redundant: UnsafeBufferPointer(rebasing: redundantBlock[first..<blocks]), into: out)
            if written != nil || first == blocks { break }
            first += 1
        }
        if written != nil { stats.redundantFramesSent += blocks - first }
        historyLengths[frameSlot] = opusBytes
        historyTimestamps[frameSlot] = rtpTimestamp
        newestHistorySlot = frameSlot
        return written ?? 0
    }

    /// The first `length` bytes of RED history slot `index`.
    private func historySlot(_ index: Int, length: Int) -> UnsafeMutableRawBufferPointer {
        let start = index * Self.maximumOpusPacketBytes
        return UnsafeMutableRawBufferPointer(rebasing: history[start..<(start + length)])
    }

    /// Hands the protected RTP packet in `packet` to the transport and moves the sender state on
    /// (history, sequence number, the RTP time of `now` for sender reports). Returns whether it left.
    func transmit(length: Int, payloadBytes: Int, timestamp: UInt32, now: UInt64) -> Bool {
        // Counted as sent when the kernel took it, or (through libnice) when libnice does; a
        // refusal is counted by the transport, and a send with no path (the pair withdrawn since
        // `hasPath`) is a lost packet, not a failure.
        var left = false
        switch setup.transport.send(UnsafeRawBufferPointer(rebasing: packet[0..<length]), kind: .rtp(payloadBytes: payloadBytes)) {
        case .sent:
            directRTPPackets += 1
            directRTPPayloadBytes += payloadBytes
            sentAnything = true
            left = true
        case .queued:
            sentAnything = true
            left = true
        case .queueFull, .noPath, .failed:
            break
        }
        sentHistory[sentHistoryCount % Self.sentHistoryCapacity] = (now, sequenceNumber)
        sentHistoryCount &+= 1
        lastSentRTPTimestamp = timestamp
        lastSentAtNanoseconds = now
        sequenceNumber &+= 1
        return left
    }
}
