import TetherCore
import TetherRealtime

/// A snapshot of a call's media statistics.
public struct CallStatistics: Sendable, Equatable {
    // MARK: Codec
    /// Codec in SDP form, e.g. `opus/48000/2`.
    public var codec: String
    /// RTP payload type used for Opus.
    public var payloadType: Int
    /// Packet time in milliseconds.
    public var packetTimeMilliseconds: Int
    /// Target Opus bitrate in bits per second.
    public var targetBitrateBitsPerSecond: Int
    /// The widest band the encoder codes (`OpusConfiguration.Bandwidth`'s raw value: `wideband`
    /// by default, narrower when the peer's `maxplaybackrate` asks; empty before media).
    public var encoderMaximumBandwidth: String = ""
    /// The negotiated SRTP suite.
    public var srtpSuite: String
    /// How SRTP was keyed: `SDES` or `DTLS-SRTP` (empty before negotiation).
    public var srtpKeying: String = ""
    /// With DTLS-SRTP: datagrams carrying handshake records that arrived after the handshake
    /// (a peer's repeated last flight or a new handshake; ICE restarts add none).
    public var dtlsHandshakeDatagramsAfterSetUp: Int = 0

    // MARK: Sending
    /// RTP packets sent.
    public var packetsSent: Int
    /// RTP payload bytes sent (RFC 3550 octet count).
    public var bytesSent: Int
    /// RTCP compound packets sent.
    public var rtcpPacketsSent: Int
    /// Datagrams that could not be handed to ICE (queue full or no path yet).
    public var sendFailures: Int

    // MARK: Receiving
    /// Valid RTP packets received.
    public var packetsReceived: Int
    /// RTP payload bytes received.
    public var bytesReceived: Int
    /// Packets lost by our count (expected − received, RFC 3550 A.3).
    public var packetsLost: Int
    /// Fraction lost in the last RTCP interval by our count, 0…1.
    public var fractionLost: Double
    /// Interarrival jitter by our count, in milliseconds (RFC 3550 A.8).
    public var jitterMilliseconds: Double
    /// RTCP compound packets received.
    public var rtcpPacketsReceived: Int
    /// Duplicated RTP packets.
    public var duplicatePackets: Int

    // MARK: Peer's view (from its RTCP reports about our stream)
    /// Packets the peer reports lost of ours (cumulative).
    public var remotePacketsLost: Int
    /// Fraction of ours the peer lost in its last interval, 0…1.
    public var remoteFractionLost: Double
    /// Jitter the peer measures on our stream, in milliseconds.
    public var remoteJitterMilliseconds: Double
    /// The mean run of consecutive losses among our packets, in packets (1: every loss alone;
    /// 3: bursts of three), from the peer's RTCP XR Loss RLE blocks over the call; nil when the
    /// peer sends none (only a peer asked with `a=rtcp-xr:pkt-loss-rle` that supports it — a
    /// Tether — does) or has lost nothing. Bursty loss switches RED on sooner (see
    /// `LossAdaptation`).
    public var remoteMeanLossRunPackets: Double? = nil
    /// Round-trip time from RTCP LSR/DLSR, in milliseconds; nil until measured.
    public var roundTripTimeMilliseconds: Double?

    // MARK: Faults
    /// Packets dropped because SRTP authentication failed.
    public var srtpAuthenticationFailures: Int
    /// Packets dropped by the SRTP replay check.
    public var srtpReplayFailures: Int
    /// Packets dropped because they were malformed (bad RTP/RTCP, wrong payload type or SSRC, undecodable Opus).
    public var malformedPackets: Int
    /// Datagrams dropped because the receive queue was full.
    public var receiveQueueDrops: Int

    // MARK: Playout
    /// Current jitter-buffer delay in milliseconds: how long after its arrival the fastest
    /// recent packet is played (later packets wait less). `nil` before playout and while the peer
    /// is silent (nothing buffered for half a second: an outage, hold): no packet has a delay then.
    public var jitterBufferDelayMilliseconds: Double?
    /// The delay the jitter buffer aims at, in milliseconds (adaptive: from the arrivals' jitter
    /// and the loss; fixed: the configured value).
    public var jitterBufferTargetMilliseconds: Double
    /// Frames the adaptive jitter buffer inserted (concealment at quiet moments) to lengthen its delay.
    public var framesInsertedForDelay: Int
    /// Frames the jitter buffer dropped to shorten its delay (excess delay, sender clock drift).
    public var framesDroppedForDelay: Int
    /// Frames decoded from real packets.
    public var framesDecoded: Int
    /// Frames concealed (Opus PLC).
    public var framesConcealed: Int
    /// Of `framesConcealed`, those played in a pause of the peer's stream with nothing lost
    /// (DTX, a peer holding the call): the jitter buffer tells them once the stream resumes
    /// with no sequence number missing. An outage's frames stay loss.
    public var framesInSilenceGaps: Int = 0
    /// Frames rebuilt from the next packet's in-band FEC.
    public var framesRecoveredByFEC: Int
    /// Lost frames filled in from the redundant copy a later packet carried (RFC 2198 RED).
    public var framesRecoveredByRedundancy: Int = 0
    /// RED copies that arrived after the frame they copy was due, missing (concealed or rebuilt
    /// from FEC): copies a longer jitter-buffer hold would have used (a frame may count twice).
    public var redundantCopiesTooLate: Int = 0
    /// RED packets received (in `packetsReceived` too).
    public var redundantAudioPacketsReceived: Int = 0
    /// Packets that arrived after their playout time.
    public var latePackets: Int

    // MARK: Devices and threads
    /// Capture frames dropped because the media loop fell behind.
    public var captureOverruns: Int
    /// Playback frames played as silence because no audio was ready.
    public var playbackUnderruns: Int

    // MARK: Where the delay is (the parts of mouth-to-ear this side adds)
    /// The encoder's look-ahead in milliseconds (libopus reports it: 6.5 for the VoIP application
    /// at 48 kHz): how far a frame's audio is delayed inside the encoder.
    public var encoderLookaheadMilliseconds: Double = 0
    /// The playback queue: how much decoded audio waits in Tether's ring ahead of each frame
    /// handed to playback, in milliseconds (a moving average). The device asks for it: two of
    /// PulseAudio's requests, one ALSA period, two frames for virtual devices. `nil` before
    /// playout.
    public var playbackQueueMilliseconds: Double?
    /// The capture device's latency, in milliseconds, as the device reports it (PulseAudio's
    /// stream latency, ALSA's delay): from the microphone until Tether reads the samples. `nil`
    /// for devices that report none (virtual and file devices).
    public var captureDeviceLatencyMilliseconds: Double?
    /// The playback device's latency, in milliseconds, as the device reports it: from a sample
    /// handed to the device until it sounds. `nil` for devices that report none.
    public var playbackDeviceLatencyMilliseconds: Double?
    /// The loss the encoder currently protects against (OPUS_SET_PACKET_LOSS_PERC), adapted to
    /// the peer's reports.
    public var encoderExpectedLossPercent: Int
    /// Whether the encoder currently sends in-band FEC.
    public var encoderInBandFEC: Bool
    /// Times the encoder was reconfigured for the reported loss.
    public var encoderAdaptations: Int
    /// Frames sent again, inside later packets' RED payloads (a frame carried by the next two
    /// packets counts twice).
    public var redundantFramesSent: Int
    /// How many earlier frames each packet currently carries (0 while RED is off; 1 or 2).
    public var redundantFramesPerPacket: Int = 0
    /// Whether each packet currently also carries earlier frames (RFC 2198 RED, negotiated and
    /// switched on by heavy loss the peer reports).
    public var sendsRedundantAudio: Bool { redundantFramesPerPacket > 0 }
    /// DTMF (RFC 4733): digits sent and received, and telephone-event packets sent and received
    /// (in `packetsSent`/`packetsReceived` too).
    public var dtmfDigitsSent: Int = 0
    public var dtmfDigitsReceived: Int = 0
    public var dtmfPacketsSent: Int = 0
    public var dtmfPacketsReceived: Int = 0
    /// RTP packets of padding alone the peer sent (Chromium probes the path's bandwidth with them
    /// once transport-cc is negotiated; in `packetsReceived` too, reported in the transport-cc
    /// feedback, never taken for audio or loss).
    public var paddingPacketsReceived: Int = 0
    /// The negotiated direction from our side (`sendrecv`, `sendonly`, `recvonly`, `inactive`),
    /// and who holds the call (RFC 3264 §8.4): we (`localHold`), the peer (`remoteHold`).
    public var direction: String = "sendrecv"
    public var localHold: Bool = false
    public var remoteHold: Bool = false
    /// Voice processing on the capture path: what runs (`VoiceProcessingSettings.summary`, e.g.
    /// "webrtc: AEC NS AGC HPF", or "off") and its figures (echo return loss enhancement, the
    /// echo delay the canceller found, speech probability).
    public var voiceProcessing: String = "off"
    public var voiceProcessingFigures = VoiceProcessingStatistics()
    /// RTP payload bits per second sent and received over the last whole second.
    public var sendBitrateBitsPerSecond: Int
    public var receiveBitrateBitsPerSecond: Int
    /// Scheduling the media thread got (`SCHED_FIFO` or `SCHED_OTHER`).
    public var mediaThreadScheduling: String
    /// The capture device (its display name, for example "PulseAudio capture (mic.monitor)").
    public var captureDevice: String
    /// Scheduling the capture device thread got (`SCHED_FIFO`, `SCHED_OTHER`, or not started).
    public var captureThreadScheduling: String
    /// The playback device.
    public var playbackDevice: String
    /// Scheduling the playback device thread got.
    public var playbackThreadScheduling: String

    // MARK: Rate control
    /// The bandwidth the rate control reckons the path gives our stream, in bits per second with
    /// every header (IP, UDP, RTP, SRTP): what it sends within. nil when rate control is off
    /// (`CallConfiguration.rateControl`) or before media.
    public var estimatedBandwidthBitsPerSecond: Int?
    /// How long the packets we send are now, in milliseconds: 20, or 40 and 60 on a narrow path
    /// (fewer headers a second).
    public var sentPacketMilliseconds: Int = 20
    /// The path's queue as the rate control sees it.
    public var pathUse: PathUse = .normal
    /// The queueing delay the rate control measures, in milliseconds: the one-way delay over its
    /// minimum (with transport-cc), or the round-trip time over its minimum (receiver reports
    /// only). nil when rate control is off.
    public var queueingDelayMilliseconds: Double?
    /// Whether the loss the peer reports now comes with a queue: congestion's, answered by sending
    /// less (no redundancy is added for it).
    public var lossIsCongestion: Bool = false
    /// Transport-wide congestion control feedback packets received from the peer (about our
    /// packets) and sent to it (about its packets); 0 when not negotiated.
    public var transportFeedbackReceived: Int = 0
    public var transportFeedbackSent: Int = 0

    /// The path's use as the rate control judges it from the queueing delay.
    public enum PathUse: String, Sendable, Equatable, Codable, BitwiseCopyable {
        /// The queue is steady: the rate may grow.
        case normal
        /// The queue grows: the rate drops.
        case overusing
        /// The queue drains: the rate holds.
        case underusing
    }

    // MARK: Transport
    /// Selected local `address:port`, empty until ICE selects a pair.
    public var localAddress: String
    /// Selected remote `address:port`.
    public var remoteAddress: String
    /// Seconds since the session was created.
    public var durationSeconds: Double

    // MARK: Recovery
    /// Every disruption, the restarts made and how each ended.
    public var recovery: CallRecovery

    /// Samples (48 kHz) played from concealment rather than decoded or rebuilt audio.
    public var concealedSamples: Int { framesConcealed * packetTimeMilliseconds * 48 }

    /// Loss the listener hears, in percent: packets lost and not rebuilt from FEC or a redundant
    /// copy, over the packets expected.
    public var heardLossPercent: Double {
        let expected = packetsReceived + max(0, packetsLost)
        guard expected > 0 else { return 0 }
        return 100 * Double(max(0, packetsLost - framesRecoveredByFEC - framesRecoveredByRedundancy)) / Double(expected)
    }

    /// One-way delay the call adds on the network, in the jitter buffer and in the codec, in
    /// milliseconds: half the round-trip time, the jitter buffer's delay, one packet and the
    /// encoder's look-ahead (the peer's assumed equal to ours). Device buffering and the playback
    /// queue are not included (`estimatedMouthToEarMilliseconds` adds them). `nil` while the
    /// jitter buffer has no delay figure (before playout, the peer silent).
    public var estimatedOneWayDelayMilliseconds: Double? {
        jitterBufferDelayMilliseconds.map {
            (roundTripTimeMilliseconds ?? 0) / 2 + $0 + Double(packetTimeMilliseconds) + encoderLookaheadMilliseconds
        }
    }

    /// Estimated mouth-to-ear delay of what this side hears, in milliseconds: the one-way delay
    /// (`estimatedOneWayDelayMilliseconds`) plus this side's playback queue and playback device,
    /// and the peer's capture device taken as equal to ours. A device that reports no latency
    /// (virtual and file devices) counts as none. `nil` while the one-way delay is.
    public var estimatedMouthToEarMilliseconds: Double? {
        estimatedOneWayDelayMilliseconds.map {
            $0 + (playbackQueueMilliseconds ?? 0) + (playbackDeviceLatencyMilliseconds ?? 0)
                + (captureDeviceLatencyMilliseconds ?? 0)
        }
    }

    /// Transmission rating R of the simplified E-model (ITU-T G.107) from the estimated one-way
    /// delay and the heard loss (over the call so far).
    ///
    /// It rates audio being heard from the peer, so it is `nil` when there is none: before media
    /// has been received, and while the peer is silent (during a disruption, on hold), when the
    /// jitter buffer has had nothing to play for half a second. A disruption is reported by the
    /// call's state and `recovery`, not by a low score; the packets lost during it count in the
    /// heard loss once media resumes (their gap is seen then).
    public var qualityRating: Double? {
        guard packetsReceived > 0, let delay = estimatedOneWayDelayMilliseconds else { return nil }
        return EModel.opus.rating(oneWayDelayMilliseconds: delay, lossPercent: heardLossPercent)
    }

    /// Estimated MOS (1…4.5) from `qualityRating`; `nil` when that is (no audio being heard).
    public var meanOpinionScore: Double? { qualityRating.map(EModel.meanOpinionScore(rating:)) }

    /// Fraction of the packets the peer sent that we received, 0…1 (1 when nothing was expected).
    public var deliveryRatio: Double {
        let expected = packetsReceived + max(0, packetsLost)
        return expected == 0 ? 1 : Double(packetsReceived) / Double(expected)
    }
}

/// What the media loop publishes (trivially copyable so it crosses threads through a seqlock).
struct MediaCounters: BitwiseCopyable {
    var packetsSent = 0
    var bytesSent = 0
    var rtcpPacketsSent = 0
    var sendFailures = 0
    var packetsReceived = 0
    var bytesReceived = 0
    var packetsLost = 0
    var fractionLost = 0.0
    var jitterMilliseconds = 0.0
    var rtcpPacketsReceived = 0
    var duplicatePackets = 0
    var remotePacketsLost = 0
    var remoteFractionLost = 0.0
    var remoteJitterMilliseconds = 0.0
    var remoteMeanLossRunPackets = -1.0
    /// XR Loss RLE blocks about our stream received (each with a report).
    var lossRunReportsReceived = 0
    var roundTripTimeMilliseconds = -1.0
    var srtpAuthenticationFailures = 0
    var srtpReplayFailures = 0
    var malformedPackets = 0
    var receiveQueueDrops = 0
    var jitterBufferDelayMilliseconds: Double? = nil
    var jitterBufferTargetMilliseconds = 0.0
    var framesInsertedForDelay = 0
    var framesDroppedForDelay = 0
    var framesDecoded = 0
    var framesConcealed = 0
    var framesRecoveredByFEC = 0
    var framesRecoveredByRedundancy = 0
    var redundantCopiesTooLate = 0
    var silenceGapFrames = 0
    var redundantAudioPacketsReceived = 0
    var latePackets = 0
    var playbackQueueMilliseconds: Double? = nil
    /// Monotonic instant of the last valid RTP or RTCP packet, 0 before any.
    var lastMediaArrivalNanoseconds: UInt64 = 0
    /// Monotonic instant of the last frame decoded from a real packet, 0 before any.
    var lastDecodedNanoseconds: UInt64 = 0
    /// The peer's latest report about our stream: its extended highest sequence received.
    var peerReportedHighestSequence: UInt32 = 0
    /// Monotonic arrival instant of that report, 0 before any.
    var peerReportArrivalNanoseconds: UInt64 = 0
    /// That report shows the peer missing every packet we sent more than a round trip and 300 ms
    /// before it arrived: what we send does not reach it (one-way audio), from one report.
    var peerReportMissesRecentPackets = false
    /// The encoder's settings: as negotiated at first, then as the loss adaptation sets them.
    var encoderExpectedLossPercent = 0
    var encoderInBandFEC = false
    var encoderBitrateBitsPerSecond = 0
    var encoderAdaptations = 0
    /// Earlier frames each packet carries (RED; 0: off).
    var encoderRedundantFrames = 0
    var redundantFramesSent = 0
    var sendBitrateBitsPerSecond = 0
    var receiveBitrateBitsPerSecond = 0
    /// RFC 4733: digits whose events were sent, telephone-event packets sent and received,
    /// digits received.
    var dtmfDigitsSent = 0
    var dtmfPacketsSent = 0
    var dtmfPacketsReceived = 0
    var dtmfDigitsReceived = 0
    /// RTP packets of padding alone (bandwidth probes), in `packetsReceived` too.
    var paddingPacketsReceived = 0
    /// The voice processing's figures (when it runs).
    var voice = VoiceProcessingStatistics()
    /// The rate control: the estimate it sends within (0: rate control off), the packet
    /// duration, the queueing delay it sees, whether the loss now is congestion's, and its
    /// judgement of the path.
    var estimatedBandwidthBitsPerSecond = 0
    var packetMilliseconds = 20
    var queueDelayMilliseconds = 0.0
    var congestionLoss = false
    var pathUse = CallStatistics.PathUse.normal
    /// Transport-cc feedback packets received from the peer, and sent to it.
    var transportFeedbackReceived = 0
    var transportFeedbackSent = 0
}
