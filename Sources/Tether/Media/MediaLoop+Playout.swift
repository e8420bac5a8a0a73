import TetherAudio
import TetherCodec
import TetherCore
import TetherICE
import TetherRTP
import TetherRealtime

// MARK: Playout: frames decoded, rebuilt or concealed for the playback ring; bitrates and the published counters
extension MediaLoop {
    func fillPlayback(now: UInt64) {
        // Decode as late as the device allows: keep what it asked to have queued (two requests
        // for PulseAudio, a period for ALSA), or two frames for a device that takes whole frames
        // on its own clock. A frame appended on top of that is what the ring holds at most.
        let asked = setup.playbackDemand.queuedSamples
        let wanted = asked > 0 ? min(asked, setup.playbackRing.capacity - frameSamples) : 2 * frameSamples
        while setup.playbackRing.availableToRead < wanted, setup.playbackRing.availableToWrite >= frameSamples {
            // What a frame's first sample waits behind in the ring (the playback queue).
            let ahead = Double(setup.playbackRing.availableToRead) * 1000 / Double(Self.clockRateHertz)
            playbackQueueMilliseconds = playbackQueueMilliseconds < 0 ? ahead : playbackQueueMilliseconds + (ahead - playbackQueueMilliseconds) / 16
            let frame = decodeNextFrame(now: now)
            // What is played is the echo canceller's reference, with the silence the device
            // played before it where the ring ran dry.
            setup.voiceProcessor?.analyzePlayback(UnsafeBufferPointer(frame), silencePlayedSamples: setup.playbackDemand.silenceSamples)
            _ = setup.playbackRing.writeAll(UnsafeBufferPointer(frame))
        }
    }

    private func decodeNextFrame(now: UInt64) -> UnsafeMutableBufferPointer<Int16> {
        let frame = renderNextFrame(now: now)
        lastFrameQuiet = Self.isQuiet(UnsafeBufferPointer(frame))
        return frame
    }

    private func renderNextFrame(now: UInt64) -> UnsafeMutableBufferPointer<Int16> {
        // What a longer packet decoded to beyond its first frame goes first.
        if decodedCount >= frameSamples { return takeDecoded() }
        decodedCount = 0
        switch jitterBuffer.pull(now: now, atQuietMoment: lastFrameQuiet) {
        case .notStarted:
            return silence
        case .packet(_, let payload):
            do throws(OpusCodecError) {
                let samples = try setup.decoder.decodeFrame(payload, into: decoded, frameSamples: frameSamples)
                concealmentFade.decoded()
                stats.framesDecoded += samples / frameSamples
                stats.lastDecodedNanoseconds = now
                if !announcedFirstMedia {
                    announcedFirstMedia = true
                    setup.notify(.firstMediaDecoded)
                }
                decodedOffset = 0
                decodedCount = samples
                return takeDecoded()
            } catch {
                stats.malformedPackets += 1
                return conceal()
            }
        case .fecFromNext(let payload, let lostSamples):
            // Rebuilt only when the next packet really holds LBRR for this frame (a peer whose
            // encoder has FEC off sends none; libopus would conceal, and so do we, counted so).
            // The lost packet may have been longer than a frame: FEC rebuilds all of it.
            guard setup.usesFEC, OpusPacket.hasLBRR(payload) else { return conceal() }
            let samples = min(decoded.count, max(frameSamples, lostSamples / frameSamples * frameSamples))
            do throws(OpusCodecError) {
                _ = try setup.decoder.decodeFEC(from: payload, into: UnsafeMutableBufferPointer(rebasing: decoded[0..<samples]))
                concealmentFade.decoded()
                stats.framesRecoveredByFEC += samples / frameSamples
                decodedOffset = 0
                decodedCount = samples
                return takeDecoded()
            } catch {
                return conceal()
            }
        case .insertedFrame:
            stats.framesInsertedForDelay += 1
            return synthesize()
        case .conceal, .silenceGap:
            return conceal()
        }
    }

    /// The next frame of what was decoded ahead.
    private func takeDecoded() -> UnsafeMutableBufferPointer<Int16> {
        let frame = UnsafeMutableBufferPointer(rebasing: decoded[decodedOffset..<(decodedOffset + frameSamples)])
        decodedOffset += frameSamples
        decodedCount -= frameSamples
        return frame
    }

    /// A lost, missing or malformed frame: concealed (or silence when concealment is off).
    private func conceal() -> UnsafeMutableBufferPointer<Int16> {
        stats.framesConcealed += 1
        return setup.concealsLoss ? synthesize() : silence
    }

    /// One frame of Opus packet-loss concealment, fading into comfort noise over long runs.
    private func synthesize() -> UnsafeMutableBufferPointer<Int16> {
        do throws(OpusCodecError) {
            _ = try setup.decoder.conceal(into: pcm)
            concealmentFade.concealed(pcm)
            return pcm
        } catch {
            return silence
        }
    }

    /// Quiet: RMS below −40 dBFS (speech pauses, comfort noise, silence).
    private static func isQuiet(_ frame: UnsafeBufferPointer<Int16>) -> Bool {
        var energy: Int64 = 0
        for sample in frame {
            energy &+= Int64(sample) * Int64(sample)
        }
        // (32768 × 10^(−40/20))² ≈ 107 374 per sample.
        return energy < 107_374 * Int64(frame.count)
    }

    /// Send and receive bitrates of the RTP payload (the encoder's output, as RTCP's octet
    /// counts) over the last whole second, updated once a second.
    func updateBitrates(now: UInt64) {
        refreshSentCounts()
        if bitrateWindowStart == 0 {
            bitrateWindowStart = now
            bytesSentAtWindowStart = stats.bytesSent
            bytesReceivedAtWindowStart = stats.bytesReceived
            return
        }
        guard now >= bitrateWindowStart, now - bitrateWindowStart >= 1_000_000_000 else { return }
        let elapsed = now - bitrateWindowStart
        let seconds = Double(elapsed) / 1e9
        stats.sendBitrateBitsPerSecond = Int(Double(8 * (stats.bytesSent - bytesSentAtWindowStart)) / seconds)
        stats.receiveBitrateBitsPerSecond = Int(Double(8 * (stats.bytesReceived - bytesReceivedAtWindowStart)) / seconds)
        bitrateWindowStart = now
        bytesSentAtWindowStart = stats.bytesSent
        bytesReceivedAtWindowStart = stats.bytesReceived
    }

    /// Sets the sent counts in `stats`: the direct sends the kernel took and what libnice sent
    /// from the queue.
    func refreshSentCounts() {
        let queued = setup.transport.libniceSent
        stats.packetsSent = directRTPPackets + queued.rtpPackets
        stats.bytesSent = directRTPPayloadBytes + queued.rtpPayloadBytes
        stats.rtcpPacketsSent = directRTCPPackets + queued.rtcpPackets
    }

    /// Publishes the counters for `statistics()` readers.
    func publish() {
        refreshSentCounts()
        stats.packetsLost = lostBeforeSourceChange + Int(reception.cumulativeLost)
        stats.jitterMilliseconds = Double(reception.interarrivalJitter) / Double(Self.samplesPerMillisecond)
        stats.sendFailures = localSendFailures + setup.transport.sendFailureCount + setup.transport.sendQueueDropCount
        if let processor = setup.voiceProcessor { stats.voice = processor.statistics() }
        let jb = jitterBuffer.statistics
        stats.jitterBufferDelayMilliseconds = jb.playoutDelayMilliseconds.map(Double.init)
        stats.jitterBufferTargetMilliseconds = Double(jb.targetDelayMilliseconds)
        stats.framesDroppedForDelay = jb.driftDrops
        stats.redundantCopiesTooLate = jb.redundantCopiesTooLate
        stats.silenceGapFrames = jb.silenceGapFrames
        stats.playbackQueueMilliseconds = playbackQueueMilliseconds >= 0 ? playbackQueueMilliseconds : nil
        counters.write(stats)
    }
}
