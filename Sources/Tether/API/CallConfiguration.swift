import CoreMetrics
import Glibc
import Logging
import TetherAudio
import TetherCore
import TetherCodec
import TetherICE
import TetherRTP

/// Opus settings for a call (48 kHz mono; frame duration 10, 20, 40 or 60 ms).
public typealias OpusSettings = OpusConfiguration
/// A STUN or TURN server.
public typealias IceServer = ICEServer
/// An SRTP crypto suite.
public typealias SRTPSuite = SRTPCryptoSuite
/// Reconnection timers and limits (disruption threshold, renewal delay, retries, give-up).
public typealias ReconnectionPolicy = TetherCore.ReconnectionPolicy

/// Everything a `CallSession` needs, checked by `validate()` when the session is created.
public struct CallConfiguration: Sendable {
    /// Where the microphone audio comes from (a test signal, a WAV file, a device).
    public var audioSource: any AudioSource
    /// Where the peer's audio goes (a WAV file, a device, nowhere).
    public var audioSink: any AudioSink
    /// Opus encoder settings; `frameDurationMilliseconds` is also the RTP packet time.
    public var opus: OpusSettings
    /// Local IP addresses for host candidates; empty uses every interface but loopback.
    /// Put `127.0.0.1` here for calls on one machine.
    public var localAddresses: [String]
    /// STUN server for server-reflexive candidates.
    public var stunServer: IceServer?
    /// TURN server for relayed candidates, reached over UDP, TCP or TLS (its `transport`).
    public var turnServer: IceServer?
    /// ICE consent freshness (RFC 7675): consent checks on the selected pair every 4–6 s, and
    /// nothing sent on it once the peer stops answering them or refuses one (403); the call
    /// then renews its path (cause "peer withdrew consent"). Off by default: Debian 12's
    /// libnice (0.1.21) withdraws consent 10 s after the last answered check, not the RFC's 30 s
    /// (fixed in libnice 0.1.22), which under 20 % random loss both ways sends a call into
    /// renewal every minute or so (the fault matrix's 90 s loss row left `established` seven
    /// times). Peers' consent checks are answered either way, as browsers require.
    public var consentFreshness: Bool = false
    /// Trickle ICE (RFC 8838/8840): the offer, and the answer to an offer that advertises
    /// trickle, leave at once with the candidates found so far (host candidates, in
    /// milliseconds) and `a=ice-options:trickle`; each later candidate, and then the end of
    /// candidates, comes as a `CallEvent.localCandidate` to deliver to the peer. A slow or
    /// unreachable STUN or TURN server then no longer delays the call's set-up. Turn it on where
    /// the signaling carries candidates and the peer takes them (browsers, Tether): the offer
    /// itself cannot ask. A peer whose answer does not advertise trickle gets the candidates the
    /// offer lacked in a re-offer (same ICE session, no restart) once gathering ends. An offer
    /// without `ice-options:trickle` is answered in full either way, and the peer's trickled
    /// candidates (`addRemoteCandidate(_:)`) are always taken. An ICE restart on fresh candidates
    /// trickles too when the peer's last description advertised trickle (an interface switch is
    /// then not held up by a server that does not answer either).
    public var trickleICE: Bool = false
    /// SRTP suites to offer, most preferred first. Must include `AES_CM_128_HMAC_SHA1_80`.
    public var srtpSuites: [SRTPSuite]
    /// Jitter-buffer playout delay in milliseconds (at least one frame): how long the first
    /// packet waits, and the whole delay when `adaptiveJitterBuffer` is off.
    public var jitterBufferTargetMilliseconds: Int
    /// Whether the jitter buffer follows the arrivals' jitter (the default): the delay becomes
    /// what the 99th-percentile packet needs, plus a frame while packets are lost so FEC can be
    /// used, changed by one frame at a time at quiet moments.
    public var adaptiveJitterBuffer: Bool = true
    /// Upper bound of the adaptive jitter-buffer delay, in milliseconds.
    public var jitterBufferMaximumMilliseconds: Int = 200
    /// Whether a lost frame that FEC cannot rebuild is concealed (Opus PLC fading into comfort
    /// noise, the default) or played as silence (only for comparisons such as the quality bench).
    /// Whether FEC is sent and used at all is `opus.inBandFEC`.
    public var concealsLoss: Bool = true
    /// When each packet also carries the frames before it as RFC 2198 redundant audio (only
    /// with a peer that negotiated RED; without it nothing is ever sent twice).
    public enum Redundancy: String, Sendable, CaseIterable {
        /// Never (RED the peer sends is still received).
        case off
        /// From the first packet until the peer's first reports show the path is not lossy (a
        /// clean path: about 2.5 s), then two frames back under heavy loss reported by the peer
        /// (a sustained 10 % or more, or 5 % in runs, until under 5 %, or 3 % in runs; see
        /// `LossAdaptation`): about three times the payload (120 kb/s at the default 32; five
        /// times with four frames back on long loss runs), most of the loss gone. Under lighter
        /// loss one frame back, instead of in-band FEC (twice the payload).
        case underHeavyLoss = "heavy-loss"
        /// Whatever the loss (as Chromium does when RED is its first codec), inside the rate
        /// control's budget: from the first packet where the start budget has room for it, else
        /// as soon as the estimate does (about two seconds into a call on a wide path); on a path
        /// too narrow for it, not at all.
        case always
    }

    /// When RED is sent (the default: under heavy loss).
    public var redundancy: Redundancy = .underHeavyLoss
    /// Time from negotiation to the first decoded media before the call fails, in seconds.
    public var connectTimeoutSeconds: Double
    /// Mean interval between RTCP reports, in seconds (randomised ±50 % per RFC 3550). The
    /// default 1 s (about 100 bytes a second each way, a two-party call) lets the sender's loss
    /// adaptation react within a second or two, and keeps the round-trip time fresh.
    public var rtcpIntervalSeconds: Double
    /// Interval between `.statistics` events, in seconds; 0 disables them.
    public var statisticsIntervalSeconds: Double
    /// RTCP canonical name; random per call when nil.
    public var cname: String?
    /// When media counts as disrupted, when to renew it, how often to retry, when to give up.
    public var reconnection: ReconnectionPolicy
    /// Whether the call must have a working capture device at start (otherwise it goes on
    /// listen-only, sending silence, with a 2001 error event).
    public var requiresCapture: Bool = false
    /// Voice processing on the capture path (echo cancellation against what is played, noise
    /// suppression, gain control, high-pass filter; see `VoiceProcessingSettings`). nil:
    /// automatic — all of it (`VoiceProcessingSettings()`) when the capture is a sound device
    /// (`AudioSource.isSoundDevice`), nothing for files and test signals, so benches and quality
    /// comparisons hear exactly what was sent.
    public var voiceProcessing: VoiceProcessingSettings? = nil

    /// The voice processing this configuration runs (`voiceProcessing`, or the automatic choice).
    public var effectiveVoiceProcessing: VoiceProcessingSettings {
        voiceProcessing ?? VoiceProcessingSettings().forCapture(from: audioSource)
    }
    /// How our offers key SRTP: SDES (`a=crypto`, `RTP/SAVP`), DTLS-SRTP (`a=fingerprint`,
    /// `UDP/TLS/RTP/SAVPF`, what WebRTC endpoints require), or both (`RTP/SAVPF` with both; the
    /// answer picks). Answers follow the offer, whichever keying it uses.
    public var keying: Keying = .sdes
    /// Whether DTMF (RFC 4733 `telephone-event`) is offered and accepted: offers carry it at
    /// 48000 and 8000 Hz, answers take the offer's. Off: `sendDTMF` throws 3004.
    public var dtmf: Bool = true
    /// Whether RFC 2198 redundant audio (`red/48000/2` over Opus) is offered and accepted: RED the
    /// peer sends is always received (its copies fill lost frames); RED is sent only under heavy
    /// loss (`redundancy`). Off, or with a peer that has no RED (baresip, most SIP
    /// phones), nothing is ever sent twice.
    public var redundantAudio: Bool = true
    /// Whether what we send follows the path's bandwidth (`SendRateController`): the Opus
    /// bitrate, the packet duration (20, 40 or 60 ms), FEC and RED decided together inside an
    /// estimate of the bandwidth — from transport-wide congestion control feedback where the peer
    /// negotiates it (offered with `a=extmap` and `a=rtcp-fb … transport-cc`, as Chromium does),
    /// else from its receiver reports (round-trip time over its minimum, loss). Loss that comes
    /// with a growing queue is answered by sending less, never with redundancy. Off: the loss
    /// adaptation's settings whatever the path (the behaviour before rate control).
    public var rateControl: Bool = true

    /// The DTLS certificate of this call; nil: the process's own (made once, as browsers do).
    /// A device that keeps its identity across restarts passes a stored one.
    public var dtlsCertificate: DTLSCertificate?

    /// How offers key SRTP.
    public enum Keying: String, Sendable, CaseIterable {
        /// SDES (RFC 4568): keys in the descriptions.
        case sdes
        /// DTLS-SRTP (RFC 5763/5764): a handshake on the media path exports the keys.
        case dtls
        /// Both offered; the answerer chooses.
        case both
    }

    /// The call's identifier, in every log message (metadata `call-id`) and in the call's report:
    /// the embedder's own (a SIP Call-ID, a database key), 1…255 bytes; nil: a random UUID.
    public var callId: String?

    /// Where the call's log messages go: this logger with the call id added as metadata
    /// (`call-id`), at its own level (the default: `Logger(label: "tether")`, whatever backend
    /// the process bootstrapped, swift-log's stderr handler at `.info` if none). Levels:
    /// `debug` for descriptions, candidates, encoder adaptations and re-keying; `info` for the
    /// call's progress (states, the selected pair, first media, hold); `notice` for what the
    /// reconnection does (disruption, ICE restarts, network changes, a new remote source);
    /// `warning` for what degrades the call without ending it (device failures, dropped packets,
    /// the peer not receiving us, non-terminal errors); `error` for what ends it. Nothing is
    /// logged per packet or from a realtime thread, and no key material is ever logged: not the
    /// descriptions (their `a=crypto` lines carry keys), only what they negotiated.
    public var logger: Logger = Logger(label: "tether")

    /// Where the call's metrics go (`CallMetrics` lists them: calls active and ended, give-ups,
    /// disruptions, ICE restarts, packets, loss); nil: the process's `MetricsSystem.factory`,
    /// a no-op until the embedder bootstraps a backend (swift-metrics).
    public var metricsFactory: (any MetricsFactory)?
    /// Dimensions added to every metric of the call (a tenant, a trunk; a call id only where the
    /// backend copes with one series per call).
    public var metricsDimensions: [(String, String)] = []

    /// Whether to watch the local addresses and links (rtnetlink) and re-gather candidates with
    /// an ICE restart when an address the call uses goes away or a link goes down.
    public var followsNetworkChanges: Bool

    public init(
        audioSource: any AudioSource = TestSignalSource(), audioSink: any AudioSink = DiscardSink(),
        opus: OpusSettings = OpusSettings(), localAddresses: [String] = [], stunServer: IceServer? = nil,
        turnServer: IceServer? = nil, srtpSuites: [SRTPSuite] = [.aesCM128HMACSHA1_80, .aeadAES128GCM],
        jitterBufferTargetMilliseconds: Int = 40, connectTimeoutSeconds: Double = 15, rtcpIntervalSeconds: Double = 1,
        statisticsIntervalSeconds: Double = 1, cname: String? = nil, reconnection: ReconnectionPolicy = ReconnectionPolicy(),
        followsNetworkChanges: Bool = true
    ) {
        self.audioSource = audioSource
        self.audioSink = audioSink
        self.opus = opus
        self.localAddresses = localAddresses
        self.stunServer = stunServer
        self.turnServer = turnServer
        self.srtpSuites = srtpSuites
        self.jitterBufferTargetMilliseconds = jitterBufferTargetMilliseconds
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.rtcpIntervalSeconds = rtcpIntervalSeconds
        self.statisticsIntervalSeconds = statisticsIntervalSeconds
        self.cname = cname
        self.reconnection = reconnection
        self.followsNetworkChanges = followsNetworkChanges
    }

    /// Throws `TetherError` (code 5001) naming the first problem.
    public func validate() throws(TetherError) {
        if let problem = opus.validationProblem { throw .invalidConfiguration("opus: \(problem)") }
        if !srtpSuites.contains(.aesCM128HMACSHA1_80) {
            throw .invalidConfiguration("srtpSuites must include AES_CM_128_HMAC_SHA1_80 (RFC 4568 mandatory suite)")
        }
        if Set(srtpSuites).count != srtpSuites.count { throw .invalidConfiguration("srtpSuites lists a suite twice") }
        if jitterBufferTargetMilliseconds < opus.frameDurationMilliseconds || jitterBufferTargetMilliseconds > 1000 {
            throw .invalidConfiguration(
                "jitterBufferTargetMilliseconds \(jitterBufferTargetMilliseconds) must be between one frame (\(opus.frameDurationMilliseconds)) and 1000")
        }
        if jitterBufferMaximumMilliseconds < jitterBufferTargetMilliseconds || jitterBufferMaximumMilliseconds > 1000 {
            throw .invalidConfiguration(
                "jitterBufferMaximumMilliseconds \(jitterBufferMaximumMilliseconds) must be between jitterBufferTargetMilliseconds (\(jitterBufferTargetMilliseconds)) and 1000")
        }
        if !(connectTimeoutSeconds > 0 && connectTimeoutSeconds <= 300) {
            throw .invalidConfiguration("connectTimeoutSeconds \(connectTimeoutSeconds) must be in (0, 300]")
        }
        if !(rtcpIntervalSeconds >= 0.5 && rtcpIntervalSeconds <= 60) {
            throw .invalidConfiguration("rtcpIntervalSeconds \(rtcpIntervalSeconds) must be in [0.5, 60]")
        }
        if !(statisticsIntervalSeconds >= 0 && statisticsIntervalSeconds <= 3600) {
            throw .invalidConfiguration("statisticsIntervalSeconds \(statisticsIntervalSeconds) must be in [0, 3600]")
        }
        for a in localAddresses where !Self.isIPLiteral(a) {
            throw .invalidConfiguration("local address '\(a)' is not an IPv4 or IPv6 literal")
        }
        for (label, server) in [("stunServer", stunServer), ("turnServer", turnServer)] {
            if let server, !Self.isIPLiteral(server.address) {
                throw .invalidConfiguration("\(label) '\(server.address)' is not an IP literal (resolve names first)")
            }
        }
        if let turn = turnServer, turn.transport == .tls {
            if let name = turn.serverName, name.isEmpty || name.utf8.count > 253 {
                throw .invalidConfiguration("turnServer.serverName must be 1…253 bytes")
            }
            if let path = turn.trustedCertificatesPath, access(path, R_OK) != 0 {
                throw .invalidConfiguration("turnServer.trustedCertificatesPath '\(path)' cannot be read")
            }
        }
        if let problem = reconnection.validate() { throw .invalidConfiguration("reconnection: \(problem)") }
        if let cname, cname.isEmpty || cname.utf8.count > 255 {
            throw .invalidConfiguration("cname must be 1…255 bytes")
        }
        if let callId, callId.isEmpty || callId.utf8.count > 255 {
            throw .invalidConfiguration("callId must be 1…255 bytes")
        }
    }

    static func isIPLiteral(_ s: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, s, &v4) == 1 || inet_pton(AF_INET6, s, &v6) == 1
    }
}
