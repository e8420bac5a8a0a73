import Testing
import TetherRTP

struct RTCPReportIntervalTests {
    @Test func smallSessionUsesMinimumInterval() {
        let interval = RTCPReportInterval.interval(
            members: 2, senders: 1, rtcpBandwidthBytesPerSecond: 1000, weSent: true,
            averageRTCPSizeBytes: 100, initial: false, randomUnit: 0.5
        )
        #expect(abs(interval - 5.0 / RTCPReportInterval.compensation) < 1e-9)
    }

    @Test func initialIntervalHalvesMinimum() {
        let interval = RTCPReportInterval.interval(
            members: 2, senders: 1, rtcpBandwidthBytesPerSecond: 1000, weSent: true,
            averageRTCPSizeBytes: 100, initial: true, randomUnit: 0.5
        )
        #expect(abs(interval - 2.5 / RTCPReportInterval.compensation) < 1e-9)
    }

    @Test func largeSessionReceiverShareScalesWithMembers() {
        // Senders ≤ 25%: receivers share 75% of 1000 B/s among 999 receivers.
        let interval = RTCPReportInterval.interval(
            members: 1000, senders: 1, rtcpBandwidthBytesPerSecond: 1000, weSent: false,
            averageRTCPSizeBytes: 100, initial: false, randomUnit: 0
        )
        let deterministic = 100.0 * 999 / 750
        #expect(abs(interval - deterministic * 0.5 / RTCPReportInterval.compensation) < 1e-9)
    }
}
