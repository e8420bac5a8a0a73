/// Computes the randomized RTCP transmission interval (RFC 3550 §6.3.1 and A.7).
///
/// Sans-IO: the caller supplies the random draw, so results are deterministic.
public enum RTCPReportInterval {
    /// RFC 3550 minimum interval between reports, in seconds.
    public static let defaultMinimumSeconds = 5.0
    /// e − 3/2: compensates for timer reconsideration converging below the mean.
    public static let compensation = 2.718_281_828_459_045 - 1.5

    /// Returns the next RTCP transmission interval in seconds.
    /// - Parameters:
    ///   - members: session members including ourselves (≥ 1).
    ///   - senders: members that sent RTP recently.
    ///   - rtcpBandwidthBytesPerSecond: RTCP bandwidth (usually 5% of the session
    ///     bandwidth), bytes per second.
    ///   - weSent: true if we sent RTP since the second-to-last report.
    ///   - averageRTCPSizeBytes: running average compound size, including UDP/IP
    ///     overhead, bytes.
    ///   - initial: true before our first report (halves the minimum).
    ///   - randomUnit: a uniform random draw in [0, 1); the interval is scaled by
    ///     randomUnit + 0.5.
    ///   - minimumSeconds: minimum interval, seconds (5 s per RFC 3550).
    public static func interval(
        members: Int,
        senders: Int,
        rtcpBandwidthBytesPerSecond: Double,
        weSent: Bool,
        averageRTCPSizeBytes: Double,
        initial: Bool,
        randomUnit: Double,
        minimumSeconds: Double = defaultMinimumSeconds
    ) -> Double {
        let minimum = initial ? minimumSeconds / 2 : minimumSeconds
        var bandwidth = rtcpBandwidthBytesPerSecond
        var participants = Double(Swift.max(members, 1))
        if Double(senders) <= Double(members) * 0.25 {
            if weSent {
                bandwidth *= 0.25
                participants = Double(Swift.max(senders, 1))
            } else {
                bandwidth *= 0.75
                participants = Double(Swift.max(members - senders, 1))
            }
        }
        var deterministic = bandwidth > 0 ? averageRTCPSizeBytes * participants / bandwidth : minimum
        if deterministic < minimum { deterministic = minimum }
        let unit = Swift.min(Swift.max(randomUnit, 0), 1)
        return deterministic * (unit + 0.5) / compensation
    }
}
