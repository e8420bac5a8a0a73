import Testing
import TetherCore

/// Packets longer than a frame (a sender on a narrow path sends 40 or 60 ms a packet): each plays
/// for all its frames, a lost one is concealed for all of them and counts as one lost packet,
/// FEC rebuilds all of it, and a pause is still a pause.
struct JitterBufferPacketDurationTests {
    private let frame: UInt64 = 20_000_000

    /// What the media loop does: a pull per frame while nothing decoded is left; a packet (or
    /// FEC) of n frames covers n frame periods before the next pull. Returns what each pull
    /// gave, and the frames it covered.
    private func play(
        _ buffer: JitterBuffer, packets: [(sequence: UInt16, timestamp: UInt32, frames: Int, arrival: UInt64)], frames total: Int
    ) -> [String] {
        var out: [String] = []
        var next = 0
        var covered = 0
        var period = 0
        while period < total {
            let now = 100_000_000 + UInt64(period) * frame
            while next < packets.count, packets[next].arrival <= now {
                let p = packets[next]
                if p.frames == 0 {  // padding alone (a bandwidth probe): no audio, no frame
                    buffer.noteNonAudioPacket(sequenceNumber: p.sequence)
                    next += 1
                    continue
                }
                let payload: [UInt8] = [UInt8(truncatingIfNeeded: p.sequence), 1, 2]
                _ = payload.withUnsafeBytes {
                    buffer.insert(
                        sequenceNumber: p.sequence, rtpTimestamp: p.timestamp, payload: $0, arrivalNanoseconds: p.arrival,
                        durationSamples: 960 * p.frames)
                }
                next += 1
            }
            if covered > 0 {
                covered -= 1
                period += 1
                continue
            }
            switch buffer.pull(now: now) {
            case .packet(let s, _):
                out.append("p\(s)")
                covered = packets.first { $0.sequence == s }!.frames - 1
            case .fecFromNext(_, let samples):
                out.append("fec\(samples / 960)")
                covered = samples / 960 - 1
            case .conceal: out.append("c")
            case .silenceGap: out.append("g")
            case .insertedFrame: out.append("i")
            case .notStarted: out.append("-")
            }
            period += 1
        }
        return out
    }

    private func stream(count: Int, frames: Int, from: UInt16 = 500, skipping: Set<Int> = [], late: [Int: UInt64] = [:]) -> [(UInt16, UInt32, Int, UInt64)] {
        (0..<count).compactMap { i in
            guard !skipping.contains(i) else { return nil }
            let sent = UInt64(i * frames) * frame
            return (from &+ UInt16(i), UInt32(0xFFFF_0000) &+ UInt32(i * frames * 960), frames, sent + 5_000_000 + (late[i] ?? 0))
        }
    }

    private func buffer() -> JitterBuffer {
        JitterBuffer(configuration: .init(targetDelayMilliseconds: 80, slotCount: 16, maximumPayloadBytes: 16))
    }

    @Test func sixtyMillisecondPacketsPlayEveryFrameOnce() {
        let b = buffer()
        let played = play(b, packets: stream(count: 30, frames: 3), frames: 88)
        let packets = played.filter { $0.hasPrefix("p") }
        #expect(packets == (0..<30).map { "p\(500 + $0)" }.prefix(packets.count).map { $0 })
        #expect(packets.count >= 28)
        #expect(!played.contains("c") && !played.contains("g"), "\(played)")
        #expect(b.statistics.concealedFrames == 0 && b.statistics.latePackets == 0)
    }

    /// A lost 60 ms packet whose successor comes late: three frames concealed, one packet lost
    /// (the next packet plays in its place, no pause is made of the lost frames).
    @Test func aLostLongPacketIsConcealedForAllItsFrames() {
        let b = buffer()
        let played = play(b, packets: stream(count: 20, frames: 3, skipping: [10], late: [11: 200_000_000, 12: 200_000_000]), frames: 70)
        #expect(b.statistics.concealedFrames >= 3)
        #expect(b.statistics.silenceGapFrames == 0)
        #expect(played.contains("p511") && !played.contains("p510"))
        let afterLoss = played.drop { $0 != "p509" }.dropFirst()
        #expect(afterLoss.prefix(3).allSatisfy { $0 == "c" }, "\(played)")
    }

    /// A lost 40 ms packet whose successor is buffered: FEC rebuilds both its frames at once.
    @Test func fecRebuildsAWholeLongPacket() {
        let b = buffer()
        let played = play(b, packets: stream(count: 20, frames: 2, skipping: [8]), frames: 38)
        #expect(played.contains("fec2"), "\(played)")
        #expect(b.statistics.fecRecoveries == 1 && b.statistics.concealedFrames == 0, "\(played)")
    }

    /// Padding-only packets between the audio (Chromium's bandwidth probes once transport-cc is
    /// negotiated: its sequence numbers, the last frame's timestamp, no payload): no frame is
    /// taken for lost, nothing is concealed, no pause is made; and a frame lost right before a
    /// probe is rebuilt from the FEC of the audio after it.
    @Test(arguments: [false, true])
    func paddingPacketsAreNeitherAudioNorLoss(losesTheFrameBeforeAProbe: Bool) {
        let b = buffer()
        var packets: [(UInt16, UInt32, Int, UInt64)] = []
        var sequence: UInt16 = 0xFFF0  // across the sequence wrap
        for i in 0..<40 {
            let timestamp = UInt32(0xFFFF_0000) &+ UInt32(i * 960)
            let arrival = UInt64(i) * frame + 5_000_000
            if !losesTheFrameBeforeAProbe || i != 14 { packets.append((sequence, timestamp, 1, arrival)) }
            sequence &+= 1
            // A probe cluster after every fifth frame: three packets of padding.
            if i % 5 == 4 {
                for k in 0..<3 {
                    packets.append((sequence, timestamp, 0, arrival + UInt64(k + 1) * 1_000_000))
                    sequence &+= 1
                }
            }
        }
        let played = play(b, packets: packets, frames: 38)
        #expect(!played.contains("c") && !played.contains("g"), "\(played)")
        #expect(b.statistics.concealedFrames == 0 && b.statistics.silenceGapFrames == 0)
        #expect(b.statistics.fecRecoveries == (losesTheFrameBeforeAProbe ? 1 : 0), "\(played)")
        #expect(played.filter { $0.hasPrefix("p") }.count >= (losesTheFrameBeforeAProbe ? 32 : 33))
    }

    /// A pause in a 40 ms stream (timestamps jump, sequence numbers do not): silence, not loss.
    @Test func aPauseInALongPacketStreamIsAPause() {
        let b = buffer()
        var packets = stream(count: 10, frames: 2)
        for i in 0..<10 {  // after 10 packets, 200 ms of silence, then 10 more
            let sent = UInt64(20 + 10 + i * 2) * frame
            packets.append((510 + UInt16(i), UInt32(0xFFFF_0000) &+ UInt32((30 + i * 2) * 960), 2, sent + 5_000_000))
        }
        let played = play(b, packets: packets, frames: 48)
        #expect(b.statistics.concealedFrames == 0, "\(played)")
        #expect(b.statistics.silenceGapFrames >= 8, "\(played)")
        #expect(played.contains("p518"))
    }
}
