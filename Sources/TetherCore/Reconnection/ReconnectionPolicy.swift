/// Timers and limits of call reconnection, shared by ``MediaLivenessDetector`` and
/// ``ReconnectStateMachine``.
///
/// Every duration is in seconds and measured from real events the caller reports (packet
/// arrivals, decoded frames, ICE and signalling events), never from a clock the core reads.
/// Check a policy with ``validate()`` before handing it to the machine (which traps on an
/// invalid policy).
public struct ReconnectionPolicy: Sendable, Equatable {
    /// Inbound silence, in seconds, after which media counts as disrupted while the peer is
    /// supposed to send media: no RTP or RTCP packet from the peer for this long.
    /// Our own mute and the peer's DTX never trip it, because packets keep flowing (Opus DTX
    /// still sends a frame at least every 0.4 s).
    public var disruptionThresholdSeconds: Double
    /// Inbound silence, in seconds, after which media counts as disrupted while the peer is not
    /// supposed to send media (on hold: its direction is recvonly or inactive). Only RTCP is
    /// expected then, every 2.5–5 s, and RTCP alone keeps the call alive.
    public var onHoldDisruptionThresholdSeconds: Double
    /// How long, in seconds, media must stay disrupted after entering `mediaDisrupted` before an
    /// ICE restart is started (ICE failure and local network changes start one at once). Short:
    /// a restart costs the path in use nothing (it keeps carrying media if it comes back), and
    /// a path that died for good (the direct route gone, only a relay left) is replaced within
    /// a second of the detection. The short wait lets a repair already under way land first (a
    /// path probe answered from a rebound NAT mapping).
    public var renewalDelaySeconds: Double
    /// How long, in seconds, one renewal attempt may take to bring decoded media back before it
    /// is abandoned (measured from the instant the machine asks for the restart).
    public var renewalAttemptTimeoutSeconds: Double
    /// Pause, in seconds, between the end of the first failed attempt and the next attempt.
    public var firstRetryDelaySeconds: Double
    /// Factor (dimensionless, at least 1) applied to the pause after each further failed attempt.
    public var retryDelayMultiplier: Double
    /// Upper bound, in seconds, of the pause between attempts.
    public var maximumRetryDelaySeconds: Double
    /// Budget, in seconds, from the start of a disruption (the last inbound packet before the
    /// silence) to giving up and ending the call with a retryable media-timeout error.
    public var giveUpSeconds: Double
    /// Minimum span, in seconds, of peer receiver reports showing no progress on our stream
    /// before outbound media counts as disrupted (one-way audio).
    public var outboundStallSeconds: Double
    /// Minimum number of consecutive peer receiver reports (the first included) carrying the
    /// same extended highest sequence number before outbound media counts as disrupted.
    public var outboundStallReports: Int
    /// Inbound silence, in seconds, after which the media path is probed with an ICE
    /// connectivity check, and the interval between probes while the silence lasts (0: never).
    /// Well below the disruption threshold: a rebound NAT mapping is repaired by the probe
    /// before the call counts as disrupted (see ``PathProbeSchedule``).
    public var pathProbeSeconds: Double
    /// How long, in seconds, the peer's media may establish the call while our ICE has selected
    /// no pair to send on, before the path is renewed (``ReconnectStateMachine`` cause
    /// `noSendPath`): the peer's checks succeeded and ours did not (their responses were lost),
    /// so the peer hears nothing. On a working path our own check's answer arrives with the
    /// peer's first media (both follow the peer's check by a round trip); a lost check is sent
    /// again after 500 ms and libnice gives up on the pair after ~2 s. One second covers the first
    /// retransmission and a round trip; an unneeded renewal costs nothing while nothing can be
    /// sent anyway.
    public var sendPathGraceSeconds: Double

    /// Creates a policy; every parameter has the documented Tether default.
    public init(
        disruptionThresholdSeconds: Double = 1.0,
        onHoldDisruptionThresholdSeconds: Double = 12.0,
        renewalDelaySeconds: Double = 0.25,
        renewalAttemptTimeoutSeconds: Double = 6.0,
        firstRetryDelaySeconds: Double = 1.0,
        retryDelayMultiplier: Double = 2.0,
        maximumRetryDelaySeconds: Double = 8.0,
        giveUpSeconds: Double = 50.0,
        outboundStallSeconds: Double = 4.0,
        outboundStallReports: Int = 2,
        pathProbeSeconds: Double = 0.2,
        sendPathGraceSeconds: Double = 1.0
    ) {
        self.disruptionThresholdSeconds = disruptionThresholdSeconds
        self.onHoldDisruptionThresholdSeconds = onHoldDisruptionThresholdSeconds
        self.renewalDelaySeconds = renewalDelaySeconds
        self.renewalAttemptTimeoutSeconds = renewalAttemptTimeoutSeconds
        self.firstRetryDelaySeconds = firstRetryDelaySeconds
        self.retryDelayMultiplier = retryDelayMultiplier
        self.maximumRetryDelaySeconds = maximumRetryDelaySeconds
        self.giveUpSeconds = giveUpSeconds
        self.outboundStallSeconds = outboundStallSeconds
        self.outboundStallReports = outboundStallReports
        self.pathProbeSeconds = pathProbeSeconds
        self.sendPathGraceSeconds = sendPathGraceSeconds
    }

    /// Longest duration accepted for any setting, in seconds (one day).
    public static let maximumDurationSeconds: Double = 86_400

    /// Describes the first problem with this policy, or returns `nil` when it is usable.
    ///
    /// Rules: every duration is finite and at most ``maximumDurationSeconds``; the thresholds,
    /// the attempt timeout, the first retry pause, the outbound stall span, the send-path grace
    /// and the give-up budget are positive (the renewal delay and the path probe interval may be 0); the multiplier is at least 1; the first retry
    /// pause is not above the maximum; both disruption thresholds are shorter than the give-up
    /// budget; and at least 2 reports are needed to call outbound media stalled.
    public func validate() -> String? {
        let durations: [(String, Double)] = [
            ("disruptionThresholdSeconds", disruptionThresholdSeconds),
            ("onHoldDisruptionThresholdSeconds", onHoldDisruptionThresholdSeconds),
            ("renewalDelaySeconds", renewalDelaySeconds),
            ("renewalAttemptTimeoutSeconds", renewalAttemptTimeoutSeconds),
            ("firstRetryDelaySeconds", firstRetryDelaySeconds),
            ("maximumRetryDelaySeconds", maximumRetryDelaySeconds),
            ("giveUpSeconds", giveUpSeconds),
            ("outboundStallSeconds", outboundStallSeconds),
            ("pathProbeSeconds", pathProbeSeconds),
            ("sendPathGraceSeconds", sendPathGraceSeconds),
        ]
        for (name, value) in durations {
            guard value.isFinite, value >= 0, value <= Self.maximumDurationSeconds else {
                return "\(name) must be between 0 and \(Self.maximumDurationSeconds) seconds (got \(value))"
            }
            if value == 0 && name != "renewalDelaySeconds" && name != "pathProbeSeconds" {
                return "\(name) must be positive"
            }
        }
        guard retryDelayMultiplier.isFinite, retryDelayMultiplier >= 1 else {
            return "retryDelayMultiplier must be at least 1 (got \(retryDelayMultiplier))"
        }
        guard firstRetryDelaySeconds <= maximumRetryDelaySeconds else {
            return "firstRetryDelaySeconds (\(firstRetryDelaySeconds)) must not exceed maximumRetryDelaySeconds (\(maximumRetryDelaySeconds))"
        }
        guard disruptionThresholdSeconds < giveUpSeconds else {
            return "disruptionThresholdSeconds (\(disruptionThresholdSeconds)) must be shorter than giveUpSeconds (\(giveUpSeconds))"
        }
        guard onHoldDisruptionThresholdSeconds < giveUpSeconds else {
            return "onHoldDisruptionThresholdSeconds (\(onHoldDisruptionThresholdSeconds)) must be shorter than giveUpSeconds (\(giveUpSeconds))"
        }
        guard outboundStallReports >= 2 else {
            return "outboundStallReports must be at least 2 (got \(outboundStallReports))"
        }
        return nil
    }

    /// The pause, in seconds, after renewal attempt number `attempt` (1-based) has failed:
    /// `firstRetryDelaySeconds × retryDelayMultiplier^(attempt − 1)`, capped at
    /// `maximumRetryDelaySeconds`. With the defaults: 1, 2, 4, 8, 8, … s.
    public func retryDelaySeconds(afterAttempt attempt: Int) -> Double {
        var delay = firstRetryDelaySeconds
        var step = 1
        while step < attempt && delay < maximumRetryDelaySeconds {
            delay *= retryDelayMultiplier
            step += 1
        }
        return min(delay, maximumRetryDelaySeconds)
    }
}
