import Testing
import TetherRTP

struct NTPTimestampTests {
    @Test func unixEpochMapsToNTPSeconds2208988800() {
        let ntp = NTPTimestamp(unixNanoseconds: 0)
        #expect(ntp.seconds == 2_208_988_800)
        #expect(ntp.fraction == 0)
        #expect(ntp.rawValue == 0x83AA_7E80_0000_0000)
    }

    @Test func halfSecondIsHalfTheFraction() {
        let ntp = NTPTimestamp(unixNanoseconds: 1_500_000_000)
        #expect(ntp.seconds == 0x83AA_7E81)
        #expect(ntp.fraction == 0x8000_0000)
        #expect(ntp.middle32 == 0x7E81_8000)
        #expect(NTPTimestamp.middle32(of: ntp.rawValue) == 0x7E81_8000)
    }

    @Test func negativeUnixTimeFloorsSeconds() {
        let ntp = NTPTimestamp(unixNanoseconds: -500_000_000)
        #expect(ntp.seconds == 2_208_988_799)
        #expect(ntp.fraction == 0x8000_0000)
    }

    @Test func unixNanosecondsRoundTripInBothEras() {
        // 2024-06-01 and 2040-07-18 (NTP era 1, seconds wrapped).
        for unixNanoseconds: Int64 in [1_717_200_000_123_456_789, 2_100_000_000_987_654_321] {
            let ntp = NTPTimestamp(unixNanoseconds: unixNanoseconds)
            #expect(abs(ntp.unixNanoseconds - unixNanoseconds) <= 1)
        }
        #expect(NTPTimestamp(unixNanoseconds: 2_100_000_000 * 1_000_000_000).seconds == 14_021_504)
    }

    @Test func roundTripTimeMatchesRFC3550Example() {
        // RFC 3550 §6.4.1 figure: A = 46864.500 s, LSR = 46853.125 s, DLSR = 5.250 s.
        let rtt = NTPTimestamp.roundTripTime(
            arrivalNTPMiddle32: 0xB710_8000, lastSenderReport: 0xB705_2000, delaySinceLastSenderReport: 0x0005_4000
        )
        #expect(rtt == 6.125)
    }

    @Test func roundTripTimeHandlesMiddle32Wrap() {
        let rtt = NTPTimestamp.roundTripTime(
            arrivalNTPMiddle32: 0x0000_1000, lastSenderReport: 0xFFFF_F000, delaySinceLastSenderReport: 0x1000
        )
        #expect(rtt == 0.0625)
    }

    @Test func roundTripTimeIsNilWithoutSenderReportOrWhenNegative() {
        #expect(NTPTimestamp.roundTripTime(arrivalNTPMiddle32: 0xB710_8000, lastSenderReport: 0, delaySinceLastSenderReport: 0) == nil)
        #expect(NTPTimestamp.roundTripTime(arrivalNTPMiddle32: 0x0001_0000, lastSenderReport: 0x0000_8000, delaySinceLastSenderReport: 0x0000_8001) == nil)
        #expect(NTPTimestamp.roundTripTime(arrivalNTPMiddle32: 0x0000_8000, lastSenderReport: 0x0001_0000, delaySinceLastSenderReport: 0) == nil)
        #expect(NTPTimestamp.roundTripTime(arrivalNTPMiddle32: 0x0001_0000, lastSenderReport: 0x0000_8000, delaySinceLastSenderReport: 0x0000_8000) == 0)
    }

    @Test func delaySinceLastSenderReportConvertsNanosecondsTo65536ths() {
        #expect(NTPTimestamp.delaySinceLastSenderReport(nanoseconds: 1_500_000_000) == 0x0001_8000)
        #expect(NTPTimestamp.delaySinceLastSenderReport(nanoseconds: 5_250_000_000) == 0x0005_4000)
        #expect(NTPTimestamp.delaySinceLastSenderReport(nanoseconds: 1_000_000) == 65)  // 65.536 truncated
        #expect(NTPTimestamp.delaySinceLastSenderReport(nanoseconds: 0) == 0)
        #expect(NTPTimestamp.delaySinceLastSenderReport(nanoseconds: -5) == 0)
        #expect(NTPTimestamp.delaySinceLastSenderReport(nanoseconds: Int64.max) == UInt32.max)
    }

    @Test func senderInfoMiddle32MatchesTimestamp() {
        let ntp = NTPTimestamp(seconds: 0xB710_1234, fraction: 0x5678_9ABC)
        let info = RTCPSenderInfo(ntpTimestamp: ntp.rawValue, rtpTimestamp: 0, senderPacketCount: 0, senderOctetCount: 0)
        #expect(info.ntpMiddle32 == 0x1234_5678)
        #expect(ntp.middle32 == 0x1234_5678)
        #expect(NTPTimestamp(seconds: 1, fraction: 0) < NTPTimestamp(seconds: 1, fraction: 1))
    }
}
