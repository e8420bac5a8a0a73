import Testing
import TetherCore

/// The jitter buffer's adaptive delay, on a manual clock: packets arrive at given instants and
/// the sink pulls every 20 ms of its own clock.
@Suite("Jitter buffer: adaptive delay")
struct AdaptiveJitterBufferTests {
    static let frameNs: UInt64 = 20_000_000
    static let t0: UInt64 = 1_000_000_000

    static func buffer(_ change: (inout JitterBuffer.Configuration) -> Void = { _ in }) -> JitterBuffer {
        var c = JitterBuffer.Configuration(targetDelayMilliseconds: 40)
        c.adaptiveTarget = true
        change(&c)
        return JitterBuffer(configuration: c)
    }

    /// One packet: index `i` of a 20 ms stream (sequence 1000 + i, timestamp 90 000 + 960 i).
    struct Arrival {
        var index: Int
        var at: UInt64
        /// The sequence number's offset from 1000 when it is not `index` (a DTX pause skips
        /// timestamps, not sequence numbers).
        var sequence: Int? = nil
    }

    /// What the pulls returned, counted.
    struct Outcome {
        var played = 0, fec = 0, concealed = 0, gaps = 0, inserted = 0, notStarted = 0
        /// Played packet indices in order.
        var order: [Int] = []
    }

    /// Feeds `arrivals` (any order of instants) and pulls at `firstPull + k × pullInterval` until
    /// `end`; `quiet(k)` tells whether pull k is at a quiet moment.
    static func run(
        _ jb: JitterBuffer, _ arrivals: [Arrival], firstPull: UInt64 = t0 + 5_000_000,
        pullInterval: UInt64 = frameNs, end: UInt64, quiet: (Int) -> Bool = { _ in true }
    ) -> Outcome {
        let sorted = arrivals.sorted { $0.at < $1.at }
        var next = 0
        var outcome = Outcome()
        var pull = 0
        let payload: [UInt8] = [1, 2, 3]
        while firstPull + UInt64(pull) * pullInterval <= end {
            let now = firstPull + UInt64(pull) * pullInterval
            while next < sorted.count && sorted[next].at <= now {
                let a = sorted[next]
                _ = payload.withUnsafeBytes {
                    jb.insert(
                        sequenceNumber: UInt16(truncatingIfNeeded: 1000 + (a.sequence ?? a.index)),
                        rtpTimestamp: UInt32(truncatingIfNeeded: 90_000 + a.index * 960), payload: $0, arrivalNanoseconds: a.at)
                }
                next += 1
            }
            switch jb.pull(now: now, atQuietMoment: quiet(pull)) {
            case .notStarted: outcome.notStarted += 1
            case .packet(let sequence, _):
                outcome.played += 1
                outcome.order.append(Int(sequence) - 1000)
            case .fecFromNext: outcome.fec += 1
            case .conceal: outcome.concealed += 1
            case .silenceGap: outcome.gaps += 1
            case .insertedFrame: outcome.inserted += 1
            }
            pull += 1
        }
        return outcome
    }

    /// A 20 ms stream from `t0` with per-packet lateness in milliseconds.
    static func stream(count: Int, start: UInt64 = t0, interval: UInt64 = frameNs, lateMilliseconds: (Int) -> UInt64 = { _ in 0 }) -> [Arrival] {
        (0..<count).map { Arrival(index: $0, at: start + UInt64($0) * interval + lateMilliseconds($0) * 1_000_000) }
    }

    @Test func aCleanPathSettlesWithinAFrameOfAFewMilliseconds() {
        let jb = Self.buffer()
        // ±1 ms of scheduling noise, 10 s.
        let arrivals = Self.stream(count: 500) { UInt64(($0 * 7) % 3) }
        let o = Self.run(jb, arrivals, end: Self.t0 + 500 * Self.frameNs)
        let s = jb.statistics
        #expect(s.targetDelayMilliseconds == 6)  // 2 ms of spread + 4 ms guard
        let delay = s.playoutDelayMilliseconds ?? -1  // nil would be a defect here: the stream is playing
        #expect(delay >= 6 && delay < 6 + 20)
        #expect(s.driftDrops == 1)  // the 40 ms start came down once
        #expect(o.concealed == 0 && o.inserted == 0 && s.latePackets == 0)
        // Pulls come 3–5 ms after arrivals, short of the 6 ms wanted: a packet waits a frame more.
        #expect(s.meanWaitMilliseconds > 20 && s.meanWaitMilliseconds < 6 + 20)
        #expect(o.order == Array(o.order.sorted()))
    }

    @Test func aBurstThenASteadyStreamDrainsToTheTarget() {
        let jb = Self.buffer()
        var arrivals = (0..<10).map { Arrival(index: $0, at: Self.t0) }  // 200 ms of audio at once
        arrivals += (10..<500).map { Arrival(index: $0, at: Self.t0 + UInt64($0 - 9) * Self.frameNs) }
        let o = Self.run(jb, arrivals, end: Self.t0 + 490 * Self.frameNs)
        let s = jb.statistics
        #expect(s.targetDelayMilliseconds == 4)  // the burst left the window
        let delay = s.playoutDelayMilliseconds ?? -1  // nil would be a defect here: the stream is playing
        #expect(delay >= 0 && delay < 4 + 20)
        #expect(s.driftDrops >= 8)
        #expect(s.latePackets == 0 && o.concealed == 0)
    }

    @Test func jitteryArrivalsRaiseTheDelayToCoverThem() {
        let jb = Self.buffer()
        // Lateness 0…60 ms, evenly spread, for 20 s.
        let arrivals = Self.stream(count: 1000) { UInt64(($0 * 37) % 61) }
        let o = Self.run(jb, arrivals, end: Self.t0 + 1000 * Self.frameNs)
        let s = jb.statistics
        // The 99th percentile of 0…60 ms is 59–60 ms, plus the 4 ms guard.
        #expect(s.targetDelayMilliseconds >= 63 && s.targetDelayMilliseconds <= 64)
        let delay = s.playoutDelayMilliseconds ?? -1  // nil would be a defect here: the stream is playing
        #expect(delay >= s.targetDelayMilliseconds && delay < s.targetDelayMilliseconds + 20)
        #expect(o.inserted >= 1)
        // After the estimate settles, about the 1 % tail arrives too late.
        #expect(Double(o.concealed + s.latePackets) < 0.03 * 1000)
    }

    @Test func adjustmentsWaitForQuietMoments() {
        // Continuous sound: the excess start delay may only go after the patience (8 s).
        let loud = Self.buffer()
        let arrivals = Self.stream(count: 450)
        _ = Self.run(loud, arrivals, end: Self.t0 + 400 * Self.frameNs, quiet: { _ in false })  // 8.0 s
        #expect(loud.statistics.driftDrops == 0)
        _ = Self.run(loud, Array(arrivals[401...]), firstPull: Self.t0 + 401 * Self.frameNs + 5_000_000, end: Self.t0 + 450 * Self.frameNs, quiet: { _ in false })
        #expect(loud.statistics.driftDrops == 1)

        // Quiet moments allowed: the drop comes after the 500 ms it must last.
        let quiet = Self.buffer()
        _ = Self.run(quiet, Self.stream(count: 40), end: Self.t0 + 40 * Self.frameNs)
        #expect(quiet.statistics.driftDrops == 1)

        // Jitter rising during continuous sound: no frame is inserted, though the delay is short.
        let rising = Self.buffer()
        let late = Self.stream(count: 300) { $0 < 100 ? 0 : UInt64(($0 * 37) % 61) }
        let o = Self.run(rising, late, end: Self.t0 + 300 * Self.frameNs, quiet: { _ in false })
        #expect(o.inserted == 0)
        #expect(rising.statistics.insertedFrames == 0)
    }

    @Test func aLatePacketsExtraDelayIsKeptForAWhile() {
        let jb = Self.buffer()
        // Steady, but packet 200 comes 25 ms late: playout holds a frame for it.
        let arrivals = Self.stream(count: 700) { $0 == 200 ? 25 : 0 }
        _ = Self.run(jb, arrivals, end: Self.t0 + 199 * Self.frameNs)
        let before = jb.statistics
        #expect(before.driftDrops == 2)  // the 40 ms start came down to 5 ms
        // 4.8 s after the late packet the frame it added is still there…
        _ = Self.run(jb, Array(arrivals[200...]), firstPull: Self.t0 + 200 * Self.frameNs + 5_000_000, end: Self.t0 + 440 * Self.frameNs)
        let held = jb.statistics
        #expect(held.concealedFrames == 1 && held.latePackets == 0)  // held for, then played
        #expect(held.driftDrops == before.driftDrops)
        #expect((held.playoutDelayMilliseconds ?? -1) >= (before.playoutDelayMilliseconds ?? 1000) + 19)
        // …and goes once 5 s have passed without another.
        _ = Self.run(jb, Array(arrivals[441...]), firstPull: Self.t0 + 441 * Self.frameNs + 5_000_000, end: Self.t0 + 600 * Self.frameNs)
        #expect(jb.statistics.driftDrops == before.driftDrops + 1)
    }

    @Test func lossKeepsAFrameMoreSoTheSuccessorsFECIsUsed() {
        func run(lookahead: Bool) -> Outcome {
            let jb = Self.buffer { $0.lossLookahead = lookahead }
            // One packet in 50 lost (one a second), steady arrivals, 20 s.
            let arrivals = Self.stream(count: 1000).filter { $0.index % 50 != 25 }
            return Self.run(jb, arrivals, end: Self.t0 + 990 * Self.frameNs)
        }
        let with = run(lookahead: true)
        let without = run(lookahead: false)
        // 20 losses: with the lookahead all but the first are rebuilt from FEC.
        #expect(with.fec >= 19 && with.concealed <= 1)
        // Without it the delay shrinks back between losses, so the successor is still in flight.
        #expect(without.fec <= 2 && without.concealed >= 18)
        #expect(with.played + with.fec + with.concealed >= 970)
    }

    /// Each packet also carries copies of the two frames before it (RED, two back), and packets
    /// go missing three in a row. Told the copies' depth, the buffer keeps two frames more while
    /// packets are lost (three with FEC's), so the packet after a burst has arrived when the
    /// burst's frames are due: its copies fill the last two, the FEC inside the older copy the
    /// first. Not told, it keeps FEC's one frame, and the copies come too late for two of the three.
    /// What a RED stream two frames back gives through the buffer: 25 s of packets, each with
    /// copies of the two frames before it, `lost` deciding which never arrive; `note` is called
    /// after each arrival (to tell the buffer the copies' depth, or not).
    struct RedundantRun { var fec = 0, concealed = 0, recovered = 0, tooLate = 0, maximumTarget = 0 }
    static func redundantStream(lost: (Int) -> Bool, note: (JitterBuffer, UInt64) -> Void) -> RedundantRun {
        let jb = buffer()
        let payload: [UInt8] = [1, 2, 3]
        var run = RedundantRun()
        var next = 0
        for pull in 0..<1240 {
            let now = t0 + 5_000_000 + UInt64(pull) * frameNs
            while next < 1250 && t0 + UInt64(next) * frameNs <= now {
                let i = next
                next += 1
                if lost(i) { continue }
                let at = t0 + UInt64(i) * frameNs
                payload.withUnsafeBytes { bytes in
                    _ = jb.insert(
                        sequenceNumber: UInt16(truncatingIfNeeded: 1000 + i), rtpTimestamp: UInt32(90_000 + i * 960),
                        payload: bytes, arrivalNanoseconds: at)
                    for back in [2, 1] where i >= back {
                        jb.insertRedundant(
                            sequenceNumber: UInt16(truncatingIfNeeded: 1000 + i - back), rtpTimestamp: UInt32(90_000 + (i - back) * 960),
                            payload: bytes, arrivalNanoseconds: at)
                    }
                }
                note(jb, at)
            }
            switch jb.pull(now: now) {
            case .fecFromNext: run.fec += 1
            case .conceal: run.concealed += 1
            default: break
            }
            if pull >= 100 { run.maximumTarget = max(run.maximumTarget, jb.statistics.targetDelayMilliseconds) }
        }
        run.recovered = jb.statistics.redundantRecoveries
        run.tooLate = jb.statistics.redundantCopiesTooLate
        return run
    }

    /// Each packet also carries copies of the two frames before it (RED, two back), and packets
    /// go missing three in a row. Told the copies' depth, the buffer keeps two frames more while
    /// packets are lost (three with FEC's), so the packet after a burst has arrived when the
    /// burst's frames are due: its copies fill the last two, the FEC inside the older copy the
    /// first. Not told, it keeps FEC's one frame, and the copies come too late for two of the three.
    @Test func redundantCopiesTwoBackKeepTwoFramesMoreWhilePacketsAreLost() {
        // A burst of three every second (from the second second).
        let lost: (Int) -> Bool = { i in i >= 50 && i % 50 < 3 }
        let told = Self.redundantStream(lost: lost) { jb, at in jb.noteRedundancy(framesBack: 2, oldestCarriesFEC: true, now: at) }
        let untold = Self.redundantStream(lost: lost) { _, _ in }
        // 23 bursts (69 frames): after the first, every frame is rebuilt (two copies and one FEC each).
        #expect(told.concealed <= 3, "\(told)")
        #expect(told.fec >= 22 && told.recovered >= 44, "\(told)")
        #expect(told.tooLate <= 6, "\(told)")  // the first burst's, before the depth was known
        // Without the depth only the burst's last frame's copy (and FEC) come in time; the
        // middle frame's one copy (in the packet after the burst, 40 ms after the frame was
        // due) comes too late and is counted so — one per burst (the first frame's copies were
        // all in lost packets: nothing to count).
        #expect(untold.concealed >= 40, "\(untold)")
        #expect(untold.tooLate >= 20, "\(untold)")
    }

    /// RED two back whose copies carry no FEC (a Tether sender turns FEC off while it sends RED):
    /// the buffer keeps the two frames the copies reach back to, not a third for FEC that is not
    /// there — 20 ms less delay while packets are lost, and bursts of two still rebuilt whole.
    /// Copies that carry FEC keep the third.
    @Test func redundantCopiesWithoutFECKeepNoFrameForIt() {
        // A burst of two every second (from the second second).
        let lost: (Int) -> Bool = { i in i >= 50 && i % 50 < 2 }
        let without = Self.redundantStream(lost: lost) { jb, at in jb.noteRedundancy(framesBack: 2, oldestCarriesFEC: false, now: at) }
        let with = Self.redundantStream(lost: lost) { jb, at in jb.noteRedundancy(framesBack: 2, oldestCarriesFEC: true, now: at) }
        #expect(with.maximumTarget - without.maximumTarget == 20, "with FEC \(with), without \(without)")
        // 24 bursts of two (48 frames): rebuilt from the copies but for the first burst's (before
        // any loss, the buffer kept no frame for them) — the same with FEC's frame or without.
        #expect(without.concealed <= 3 && without.recovered >= 45, "with FEC \(with), without \(without)")
        #expect(with.concealed == without.concealed)
    }

    @Test func aFasterSenderIsFollowedByDroppingFrames() {
        let jb = Self.buffer()
        // The sender's clock runs 0.5 % fast: a packet every 19.9 ms, for 60 s of the receiver's clock.
        let arrivals = Self.stream(count: 3010, interval: 19_900_000)
        let o = Self.run(jb, arrivals, end: Self.t0 + 2980 * Self.frameNs)
        let s = jb.statistics
        // 0.5 % of 60 s is 300 ms: about 15 frames to drop (plus the start's one).
        #expect(s.driftDrops >= 14 && s.driftDrops <= 17)
        let delay = s.playoutDelayMilliseconds ?? -1  // nil would be a defect here: the stream is playing
        #expect(delay >= 0 && delay < s.targetDelayMilliseconds + 20)
        #expect(o.concealed == 0 && s.latePackets == 0)
    }

    @Test func aSlowerSenderIsFollowedByInsertingFrames() {
        let jb = Self.buffer()
        let arrivals = Self.stream(count: 3000, interval: 20_100_000)  // 0.5 % slow
        let o = Self.run(jb, arrivals, end: Self.t0 + 3000 * Self.frameNs)
        let s = jb.statistics
        // 300 ms to make up: inserted at quiet moments (all are quiet here), never an underflow.
        #expect(o.inserted >= 13 && o.inserted <= 16)
        #expect(o.concealed == 0 && s.latePackets == 0)
        #expect(o.order == Array(o.order.sorted()))
    }

    @Test func reorderingDuplicatesAndLatePacketsUnderAnAdaptiveDelay() {
        let jb = Self.buffer()
        var arrivals: [Arrival] = []
        for i in 0..<500 where i != 300 {
            // Pairs swapped: each even packet arrives 1 ms after its odd successor.
            let at = i % 2 == 0 ? Self.t0 + UInt64(i + 1) * Self.frameNs + 1_000_000 : Self.t0 + UInt64(i) * Self.frameNs
            arrivals.append(Arrival(index: i, at: at))
            if i % 50 == 0 { arrivals.append(Arrival(index: i, at: at + 2_000_000)) }  // a duplicate
        }
        arrivals.append(Arrival(index: 300, at: Self.t0 + 330 * Self.frameNs))  // 600 ms late
        let o = Self.run(jb, arrivals, end: Self.t0 + 495 * Self.frameNs)
        let s = jb.statistics
        #expect(o.order == Array(o.order.sorted()))
        #expect(s.duplicatePackets == 9 && s.latePackets <= 2)
        // The reordering reads as loss at first (FEC is used), then the delay covers it: 21 ms
        // of lateness, 4 ms of guard, a frame of lookahead for the "losses".
        #expect(o.concealed + o.fec <= 3)
        #expect(s.targetDelayMilliseconds <= 25 + 20)
        #expect(o.played >= 490)
    }

    @Test func aDTXPauseKeepsItsTimingAndDoesNotMoveTheDelay() {
        let jb = Self.buffer()
        // 5 s of speech, a 2 s pause (timestamps skip 100 frames, sequence numbers do not), 5 s more.
        let arrivals = Self.stream(count: 600).filter { $0.index < 250 || $0.index >= 350 }.map {
            Arrival(index: $0.index, at: $0.at, sequence: $0.index < 250 ? $0.index : $0.index - 100)
        }
        let o = Self.run(jb, arrivals, end: Self.t0 + 590 * Self.frameNs)
        let s = jb.statistics
        // While the buffer is empty it cannot tell a pause from loss and conceals; the next
        // packet shows a pause, and the frames are counted as such.
        #expect(o.gaps + o.concealed == 100)
        #expect(s.silenceGapFrames == 100 && s.concealedFrames == 0)
        #expect(s.latePackets == 0 && o.played + s.driftDrops + s.bufferedPackets == s.packetsInserted)
        let delay = s.playoutDelayMilliseconds ?? -1  // nil would be a defect here: the stream is playing
        #expect(delay >= 0 && delay < s.targetDelayMilliseconds + 20)
    }

    @Test func aRestartedStreamStartsANewEstimate() {
        let jb = Self.buffer()
        let payload: [UInt8] = [1, 2, 3]
        func insert(sequence: Int, timestamp: Int, at arrival: UInt64) {
            _ = payload.withUnsafeBytes {
                jb.insert(
                    sequenceNumber: UInt16(truncatingIfNeeded: sequence), rtpTimestamp: UInt32(truncatingIfNeeded: timestamp),
                    payload: $0, arrivalNanoseconds: arrival)
            }
        }
        for i in 0..<100 {
            insert(sequence: 1000 + i, timestamp: 90_000 + i * 960, at: Self.t0 + UInt64(i) * Self.frameNs)
            _ = jb.pull(now: Self.t0 + UInt64(i) * Self.frameNs + 5_000_000)
        }
        // The sender restarts: sequence and timestamp jump (the buffer re-anchors on the new stream).
        for i in 100..<200 {
            insert(sequence: 30_000 + i, timestamp: 5_000_000 + i * 960, at: Self.t0 + UInt64(i) * Self.frameNs)
            _ = jb.pull(now: Self.t0 + UInt64(i) * Self.frameNs + 5_000_000)
        }
        #expect(jb.statistics.reanchors == 1)
        #expect(jb.statistics.targetDelayMilliseconds == 4)  // not the jump read as lateness
    }

    /// While the peer is silent (an outage) the playout point is held and `now` runs on: the
    /// delay figure keeps the last measured value for a moment, then has none (not a figure that
    /// climbs past what the buffer can hold); it is measured again once packets return.
    @Test func aSilentPeerLeavesNoDelayFigureUntilPacketsReturn() {
        let jb = Self.buffer()
        // 2 s of clean stream, then 3 s of nothing, then the stream resumes (sequence and time go on).
        let before = Self.stream(count: 100)
        _ = Self.run(jb, before, end: Self.t0 + 2_000_000_000)
        let playing = jb.statistics.playoutDelayMilliseconds
        #expect(playing != nil && playing! < 40)
        // Pulls go on with nothing arriving: briefly the last figure, then none.
        _ = Self.run(jb, [], firstPull: Self.t0 + 2_005_000_000, end: Self.t0 + 2_300_000_000)
        #expect(jb.statistics.playoutDelayMilliseconds == playing)
        _ = Self.run(jb, [], firstPull: Self.t0 + 2_305_000_000, end: Self.t0 + 5_000_000_000)
        #expect(jb.statistics.playoutDelayMilliseconds == nil)
        // The stream comes back 3 s later: a figure again, within what the buffer may hold.
        let after = (250..<350).map { Arrival(index: $0, at: Self.t0 + UInt64($0) * Self.frameNs) }
        _ = Self.run(jb, after, firstPull: Self.t0 + 5_005_000_000, end: Self.t0 + 7_000_000_000)
        let resumed = jb.statistics.playoutDelayMilliseconds
        #expect(resumed != nil && resumed! <= 200 + 20, "delay after the outage: \(String(describing: resumed)) ms")
    }

    @Test func theDelayIsBounded() {
        let jb = Self.buffer { $0.maximumDelayMilliseconds = 100 }
        let arrivals = Self.stream(count: 300) { $0 % 2 == 0 ? 0 : 400 }
        _ = Self.run(jb, arrivals, end: Self.t0 + 300 * Self.frameNs)
        #expect(jb.statistics.targetDelayMilliseconds == 100)
        #expect((jb.statistics.playoutDelayMilliseconds ?? 1000) < 100 + 20)
    }

    @Test func aFixedTargetIsUnchangedByArrivals() {
        let jb = JitterBuffer(configuration: .init(targetDelayMilliseconds: 40))
        let arrivals = Self.stream(count: 100) { UInt64(($0 * 37) % 61) }
        let o = Self.run(jb, arrivals, end: Self.t0 + 100 * Self.frameNs)
        #expect(jb.statistics.targetDelayMilliseconds == 40)
        #expect(o.inserted == 0)
    }
}
