import Testing
import TetherCore

private func at(_ milliseconds: UInt64) -> MonotonicInstant { MonotonicInstant(milliseconds: milliseconds) }

@Suite("MediaLivenessDetector")
struct MediaLivenessDetectorTests {
    @Test func nothingReceivedOrExpectedIsNeverDisrupted() {
        let detector = MediaLivenessDetector()
        #expect(detector.inboundDisruptionDeadline() == nil)
        #expect(detector.silenceStart == nil)
        #expect(!detector.isInboundDisrupted(now: at(1_000_000)))
        #expect(detector.inboundSilenceSeconds(now: at(5_000)) == 0)
        #expect(!detector.isOutboundDisrupted)
    }

    @Test func inboundIsDisruptedExactlyAtTheThresholdAfterTheLastPacket() {
        var detector = MediaLivenessDetector()
        detector.inboundPacket(at: at(1_000))
        detector.inboundPacket(at: at(1_020))
        #expect(detector.inboundDisruptionDeadline() == at(2_020))
        #expect(detector.inboundSilenceSeconds(now: at(1_520)) == 0.5)
        #expect(!detector.isInboundDisrupted(now: MonotonicInstant(nanoseconds: 2_019_999_999)))
        #expect(detector.isInboundDisrupted(now: at(2_020)))
    }

    @Test func packetsEveryFourHundredMillisecondsOfDTXNeverDisrupt() {
        var detector = MediaLivenessDetector()
        for k: UInt64 in 0...100 {
            #expect(!detector.isInboundDisrupted(now: at(400 * k)) || k == 0)
            detector.inboundPacket(at: at(400 * k))
        }
        #expect(detector.inboundDisruptionDeadline() == at(41_000))
    }

    @Test func decodedFramesDoNotCountAsArrivals() {
        var detector = MediaLivenessDetector()
        detector.inboundPacket(at: at(1_000))
        detector.inboundMediaDecoded(at: at(1_040))
        #expect(detector.lastMediaDecoded == at(1_040))
        #expect(detector.inboundDisruptionDeadline() == at(2_000))
    }

    @Test func onHoldUsesTheLongerThresholdAndRTCPKeepsItAlive() {
        var detector = MediaLivenessDetector()
        detector.inboundPacket(at: at(2_980))
        detector.peerSendsMedia(false, at: at(3_000))
        #expect(detector.silenceStart == at(3_000))
        #expect(detector.inboundDisruptionDeadline() == at(15_000))
        detector.inboundPacket(at: at(8_000))  // RTCP
        #expect(!detector.isInboundDisrupted(now: at(19_999)))
        #expect(detector.isInboundDisrupted(now: at(20_000)))
    }

    @Test func comingOffHoldGivesAFullNormalThresholdFromTheChange() {
        var detector = MediaLivenessDetector()
        detector.peerSendsMedia(false, at: at(0))
        detector.inboundPacket(at: at(5_000))
        detector.peerSendsMedia(true, at: at(9_000))
        #expect(detector.inboundDisruptionDeadline() == at(10_000))
        detector.peerSendsMedia(true, at: at(9_500))  // no change: no restart
        #expect(detector.inboundDisruptionDeadline() == at(10_000))
    }

    @Test func reportsStuckForFourSecondsMeanOneWayAudio() {
        var detector = MediaLivenessDetector()
        detector.peerReport(extendedHighestSequenceReceived: 100, at: at(1_000))
        detector.peerReport(extendedHighestSequenceReceived: 150, at: at(2_000))  // baseline 150 at 2 s
        detector.peerReport(extendedHighestSequenceReceived: 150, at: at(3_000))
        detector.peerReport(extendedHighestSequenceReceived: 150, at: at(5_999))
        #expect(!detector.isOutboundDisrupted)
        detector.peerReport(extendedHighestSequenceReceived: 150, at: at(6_000))
        #expect(detector.isOutboundDisrupted)
        #expect(detector.outboundStallStart == at(2_000))
        detector.peerReport(extendedHighestSequenceReceived: 151, at: at(7_000))
        #expect(!detector.isOutboundDisrupted)
        #expect(detector.outboundStallStart == nil)
    }

    /// One report showing the peer missing everything we sent a round trip before it (the driver
    /// checks that against what it sent) is one-way audio at once; a later report that advances
    /// and misses nothing ends it.
    @Test func oneReportMissingRecentPacketsMeansOneWayAudioAtOnce() {
        var detector = MediaLivenessDetector()
        detector.peerReport(extendedHighestSequenceReceived: 100, at: at(1_000))
        detector.peerReport(extendedHighestSequenceReceived: 140, missesRecentPackets: true, at: at(2_000))
        #expect(detector.isOutboundDisrupted)
        detector.peerReport(extendedHighestSequenceReceived: 140, missesRecentPackets: true, at: at(2_600))
        #expect(detector.isOutboundDisrupted)
        detector.peerReport(extendedHighestSequenceReceived: 190, at: at(3_100))
        #expect(!detector.isOutboundDisrupted)
        // Not sending: no verdict either way.
        detector.weSendMedia(false, at: at(3_200))
        detector.peerReport(extendedHighestSequenceReceived: 190, missesRecentPackets: true, at: at(3_300))
        #expect(!detector.isOutboundDisrupted)
    }

    @Test func twoReportsFiveSecondsApartAreEnoughButOneIsNot() {
        var detector = MediaLivenessDetector()
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(0))
        #expect(!detector.isOutboundDisrupted)
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(5_000))
        #expect(detector.isOutboundDisrupted)
    }

    @Test func notSendingClearsAndPausesTheOutboundCheck() {
        var detector = MediaLivenessDetector()
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(0))
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(5_000))
        #expect(detector.isOutboundDisrupted)
        detector.weSendMedia(false, at: at(6_000))
        #expect(!detector.isOutboundDisrupted)
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(20_000))
        #expect(!detector.isOutboundDisrupted)
        detector.weSendMedia(true, at: at(21_000))
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(22_000))  // new baseline
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(25_999))
        #expect(!detector.isOutboundDisrupted)
        detector.peerReport(extendedHighestSequenceReceived: 7, at: at(26_000))
        #expect(detector.isOutboundDisrupted)
    }

    @Test func customPolicyThresholdsAreUsed() {
        var detector = MediaLivenessDetector(policy: ReconnectionPolicy(
            disruptionThresholdSeconds: 0.25, onHoldDisruptionThresholdSeconds: 6, outboundStallSeconds: 2,
            outboundStallReports: 3))
        detector.inboundPacket(at: at(100))
        #expect(detector.inboundDisruptionDeadline() == at(350))
        detector.peerReport(extendedHighestSequenceReceived: 1, at: at(0))
        detector.peerReport(extendedHighestSequenceReceived: 1, at: at(3_000))
        #expect(!detector.isOutboundDisrupted)  // only 2 of 3 reports
        detector.peerReport(extendedHighestSequenceReceived: 1, at: at(3_100))
        #expect(detector.isOutboundDisrupted)
    }
}
