import Testing
import TetherCore

/// Calls far longer than a test can last in real time, driven by a manual clock: the
/// timestamps and counters a continuous stream carries for days, across every 2³² wrap of the
/// RTP timestamp, and a peer that pushes the playout point forward as fast as it can.
@Suite struct JitterBufferLongCallTests {
    /// Nanoseconds in an hour.
    static let hour: UInt64 = 3_600_000_000_000

    /// A continuous stream at `frameMilliseconds` per packet for `hours`, one packet and one
    /// pull per frame period, from RTP timestamp `firstTimestamp`: every frame plays.
    private func playContinuously(
        hours: UInt64, frameMilliseconds: Int, firstTimestamp: UInt32, adaptive: Bool
    ) -> JitterBufferStatistics {
        let frameSamples = 48 * frameMilliseconds
        var configuration = JitterBuffer.Configuration(
            frameSamples: frameSamples, targetDelayMilliseconds: 2 * frameMilliseconds, slotCount: 8, maximumPayloadBytes: 4,
            reanchorThresholdMilliseconds: 10 * frameMilliseconds)
        configuration.adaptiveTarget = adaptive
        configuration.maximumDelayMilliseconds = 4 * frameMilliseconds
        let buffer = JitterBuffer(configuration: configuration)
        let frameNanoseconds = UInt64(frameMilliseconds) * 1_000_000
        let frames = hours * Self.hour / frameNanoseconds
        var now: UInt64 = 1_000_000_000
        var sequence: UInt16 = 0x8000
        var timestamp = firstTimestamp
        let payload: [UInt8] = [1, 2, 3]
        payload.withUnsafeBytes { bytes in
            for frame in 0..<frames {
                // A little arrival jitter (0–3 ms, periodic), so the delay estimate has work to do.
                let jitter = (frame % 4) * 1_000_000
                _ = buffer.insert(sequenceNumber: sequence, rtpTimestamp: timestamp, payload: bytes, arrivalNanoseconds: now + jitter)
                _ = buffer.pull(now: now + jitter + 1)
                sequence &+= 1
                timestamp &+= UInt32(frameSamples)
                now += frameNanoseconds
            }
        }
        return buffer.statistics
    }

    /// 120 hours of 120 ms frames (Opus's longest) from just before a timestamp wrap: the
    /// extended timestamp passes 2³² five times and 9.22 × 10⁹, where timestamp × 10⁹ no longer
    /// fits in 64 bits (28.5 hours into a stream that started here).
    @Test func aStreamOfFiveDaysPlaysEveryFrame() {
        let statistics = playContinuously(hours: 120, frameMilliseconds: 120, firstTimestamp: 0xFFFF_0000, adaptive: true)
        let frames = 120 * 3_600_000 / 120
        #expect(statistics.packetsInserted == frames)
        #expect(statistics.framesPlayed >= frames - 3)
        #expect(statistics.concealedFrames == 0)
        #expect(statistics.reanchors == 0)
        #expect(statistics.playoutDelayMilliseconds != nil)
    }

    /// The same with a fixed target, at 60 ms frames from timestamp 0 for 60 hours (the
    /// overflow point from 0 is 53 hours).
    @Test func aFixedTargetStreamOfSixtyHoursPlaysEveryFrame() {
        let statistics = playContinuously(hours: 60, frameMilliseconds: 60, firstTimestamp: 0, adaptive: false)
        let frames = 60 * 3_600_000 / 60
        #expect(statistics.framesPlayed >= frames - 3)
        #expect(statistics.concealedFrames == 0)
    }

    /// A peer that keeps every slot filled as far ahead as the buffer accepts, so each packet
    /// overflows it and drags the playout point forward: the timeline runs many times faster
    /// than the clock. The buffer keeps working (and the media-time arithmetic does not trap)
    /// however far the timestamps get.
    @Test func aPeerRacingTheTimelineAheadNeverTrapsTheBuffer() {
        var configuration = JitterBuffer.Configuration(slotCount: 4, maximumPayloadBytes: 4)
        configuration.adaptiveTarget = true
        let buffer = JitterBuffer(configuration: configuration)
        var now: UInt64 = 1_000_000_000
        var sequence: UInt16 = 1
        var timestamp: UInt32 = 0xF000_0000
        let payload: [UInt8] = [9]
        // Playout starts on an ordinary first packet.
        payload.withUnsafeBytes { _ = buffer.insert(sequenceNumber: sequence, rtpTimestamp: timestamp, payload: $0, arrivalNanoseconds: now) }
        now += 50_000_000
        guard case .packet = buffer.pull(now: now) else {
            Issue.record("playout did not start")
            return
        }
        // Then packets 187.5 ms apart in media time, 1 ms apart in arrival: four fill the slots
        // (inside the 1 s re-anchor threshold of the playout point), and each one after drops
        // the oldest and moves the playout point past it. 1.2 million packets carry the
        // extended timestamp 1.08 × 10¹⁰ samples on (62 hours of media in 20 minutes).
        let step: UInt32 = 9_000
        let packets = 1_200_000
        var extended = Int64(timestamp)
        payload.withUnsafeBytes { bytes in
            for index in 0..<packets {
                sequence &+= 1
                timestamp &+= step
                extended += Int64(step)
                now += 1_000_000
                _ = buffer.insert(sequenceNumber: sequence, rtpTimestamp: timestamp, payload: bytes, arrivalNanoseconds: now)
                if index % 8 == 0 { _ = buffer.pull(now: now) }
            }
        }
        #expect(extended > 10_000_000_000)
        let statistics = buffer.statistics
        #expect(statistics.packetsInserted == packets + 1)
        #expect(statistics.overflowDrops > packets / 2)
        #expect(statistics.reanchors == 0)
    }
}
