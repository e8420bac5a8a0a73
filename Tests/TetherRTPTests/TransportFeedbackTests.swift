import Testing

@testable import TetherRTP

/// Transport-wide congestion control: the sequence number extension, the feedback format both
/// ways, and the send history that turns feedback into per-packet results.
struct TransportFeedbackTests {
    /// A packet with the extension written after its fixed header reads back, among other
    /// one-byte elements and padding.
    @Test func theSequenceExtensionRoundTrips() throws {
        var packet = [UInt8](repeating: 0, count: 40)
        packet.withUnsafeMutableBytes { raw in
            _ = RTPHeader(payloadType: 111, sequenceNumber: 7, timestamp: 960, ssrc: 1).write(to: raw)
            TransportWideSequence.setExtensionBit(in: raw)
            TransportWideSequence.write(0xBEEF, id: 3, into: raw, at: 12)
        }
        let header = try packet.withUnsafeBytes { try RTPHeader.parse($0) }
        #expect(header.payloadOffset == 12 + TransportWideSequence.headerBytes)
        #expect(packet.withUnsafeBytes { TransportWideSequence.read(from: $0, header: header, id: 3) } == 0xBEEF)
        #expect(packet.withUnsafeBytes { TransportWideSequence.read(from: $0, header: header, id: 4) } == nil)
        // Chromium's layout: audio level (id 1, 1 byte), then transport-cc (id 3), padded.
        var chromium: [UInt8] = [0x90, 111, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xBE, 0xDE, 0, 2, 0x10, 0x55, 0x31, 0x12, 0x34, 0, 0, 0]
        chromium += [0xAA, 0xBB]
        let h2 = try chromium.withUnsafeBytes { try RTPHeader.parse($0) }
        #expect(chromium.withUnsafeBytes { TransportWideSequence.read(from: $0, header: h2, id: 3) } == 0x1234)
    }

    /// The receiver records arrivals (one lost, one reordered, gaps small and large); its feedback
    /// read by the sender's history gives each packet's arrival to 250 µs, the lost one as lost,
    /// in sequence order, each once.
    @Test func feedbackCarriesEachArrivalToTheSender() throws {
        let history = TransportSendHistory(firstSequence: 65_530)
        let recorder = TransportFeedbackRecorder()
        var sent: [(sequence: UInt16, at: UInt64)] = []
        for i in 0..<20 {
            let at = 5_000_000_000 + UInt64(i) * 20_000_000
            sent.append((history.stamp(bytes: 100 + i, sentNanoseconds: at), at))
        }
        // Arrivals: 30 ms path delay, packet 5 lost, 9 and 10 swapped, packet 15 delayed 90 ms.
        var arrivals: [(UInt16, UInt64)] = []
        for (i, p) in sent.enumerated() where i != 5 {
            arrivals.append((p.sequence, p.at + 30_000_000 + (i == 15 ? 90_000_000 : 0) + UInt64(i % 3) * 137_000))
        }
        arrivals.swapAt(8, 9)
        for (sequence, at) in arrivals { recorder.record(sequence: sequence, arrivalNanoseconds: at) }
        var buffer = [UInt8](repeating: 0, count: 1500)
        let length = try #require(buffer.withUnsafeMutableBytes { recorder.writeFeedback(into: $0, at: 0, senderSSRC: 9, mediaSSRC: 8) })
        #expect(length % 4 == 0 && buffer[0] == 0x8F && buffer[1] == 205)
        var results: [TransportSendHistory.Result] = []
        // The parser hands the body over without the 4-byte header.
        let ok = Array(buffer[4..<length]).withUnsafeBytes { body in history.readFeedback(body: body) { results.append($0) } }
        #expect(ok)
        #expect(results.map(\.sequence) == sent.map(\.sequence))
        #expect(results[5].arrivalMicroseconds == nil && history.reportedLost == 1)
        // Arrival differences, as the sender sees them, match the real ones to a tick.
        let truth = Dictionary(uniqueKeysWithValues: arrivals.map { ($0.0, Int64($0.1 / 1000)) })
        let base = try #require(results[0].arrivalMicroseconds)
        for r in results where r.arrivalMicroseconds != nil {
            let measured = r.arrivalMicroseconds! - base
            let real = truth[r.sequence]! - truth[results[0].sequence]!
            #expect(abs(measured - real) <= 250, "packet \(r.sequence): \(measured) µs, really \(real)")
        }
        #expect(results.map(\.bytes) == (0..<20).map { 100 + $0 })
        // Nothing new: no feedback; the same feedback again: no result twice.
        #expect(buffer.withUnsafeMutableBytes { recorder.writeFeedback(into: $0, at: 0, senderSSRC: 9, mediaSSRC: 8) } == nil)
        var again = 0
        _ = Array(buffer[4..<length]).withUnsafeBytes { body in history.readFeedback(body: body) { _ in again += 1 } }
        #expect(again == 0)
    }

    /// The call moves to another device: its packets' transport-wide sequence starts anywhere.
    /// After `reset()` the recorder reports the new sender's packets alone, every one received.
    /// (Without it, a new sequence behind the old was ignored, and one far ahead reported the
    /// gap lost: the new sender read loss and a queue that were not there, and cut its rate.)
    @Test func aNewSendersSequenceStartsAfresh() throws {
        let recorder = TransportFeedbackRecorder()
        for i in 0..<50 { recorder.record(sequence: UInt16(30_000 + i), arrivalNanoseconds: 1_000_000_000 + UInt64(i) * 20_000_000) }
        var buffer = [UInt8](repeating: 0, count: 1500)
        _ = buffer.withUnsafeMutableBytes { recorder.writeFeedback(into: $0, at: 0, senderSSRC: 9, mediaSSRC: 8) }
        for behind in [false, true] {
            recorder.reset()
            let history = TransportSendHistory(firstSequence: behind ? 100 : 60_000)
            for i in 0..<20 {
                let at = 3_000_000_000 + UInt64(i) * 20_000_000
                recorder.record(sequence: history.stamp(bytes: 120, sentNanoseconds: at), arrivalNanoseconds: at + 10_000_000)
            }
            let length = try #require(buffer.withUnsafeMutableBytes { recorder.writeFeedback(into: $0, at: 0, senderSSRC: 9, mediaSSRC: 8) })
            var results: [TransportSendHistory.Result] = []
            _ = Array(buffer[4..<length]).withUnsafeBytes { body in history.readFeedback(body: body) { results.append($0) } }
            #expect(results.count == 20 && results.allSatisfy { $0.arrivalMicroseconds != nil }, "behind: \(behind)")
            #expect(history.reportedLost == 0)
        }
    }

    /// Long runs and a large gap: a run-length chunk, a two-bit vector for a large delta, and
    /// the reference time carried across two feedbacks (its 24 bits unwrapped by the history).
    @Test func runsLargeDeltasAndConsecutiveFeedbacks() throws {
        let history = TransportSendHistory()
        let recorder = TransportFeedbackRecorder()
        var clock: UInt64 = 1_000_000_000
        var expected: [UInt16: UInt64] = [:]
        for round in 0..<3 {
            for i in 0..<60 {
                let sequence = history.stamp(bytes: 80, sentNanoseconds: clock)
                // A run of 30 lost in the second round; one 2 s gap.
                if !(round == 1 && i >= 10 && i < 40) {
                    let arrival = clock + 20_000_000 + (i == 50 ? 2_000_000_000 : 0)
                    recorder.record(sequence: sequence, arrivalNanoseconds: arrival)
                    expected[sequence] = arrival
                }
                clock += 20_000_000
            }
            var buffer = [UInt8](repeating: 0, count: 1500)
            let length = try #require(buffer.withUnsafeMutableBytes { recorder.writeFeedback(into: $0, at: 0, senderSSRC: 1, mediaSSRC: 2) })
            var got = 0
            var lost = 0
            var first: (UInt16, Int64)?
            _ = Array(buffer[4..<length]).withUnsafeBytes { body in
                history.readFeedback(body: body) { r in
                    got += 1
                    guard let arrival = r.arrivalMicroseconds else { lost += 1; return }
                    if let (s0, a0) = first {
                        let real = Int64(expected[r.sequence]! / 1000) - Int64(expected[s0]! / 1000)
                        #expect(abs((arrival - a0) - real) <= 250)
                    } else {
                        first = (r.sequence, arrival)
                    }
                }
            }
            #expect(got == 60 && lost == (round == 1 ? 30 : 0))
        }
    }

    /// A peer whose feedback's reference time leaps by the most it can (2^23 − 1 ticks of 64 ms)
    /// every time: 40,000 feedbacks would take the unwrapped arrivals past 2^54 µs (and 2^24 of
    /// them past Int64, a trap); they stay within ±2^36 ticks, so arrivals stay exact as Doubles
    /// and differences of them cannot overflow.
    @Test func aReferenceTimeThatKeepsLeapingStaysBounded() {
        let history = TransportSendHistory()
        // One packet, received, with reference time `reference` (24 bits).
        var body: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x20, 0x01, 4, 0]
        var reference: UInt32 = 0
        var largest: Int64 = 0
        var reports = 0
        for _ in 0..<40_000 {
            let sequence = history.stamp(bytes: 100, sentNanoseconds: 1)
            body[8] = UInt8(sequence >> 8)
            body[9] = UInt8(sequence & 0xFF)
            body[12] = UInt8((reference >> 16) & 0xFF)
            body[13] = UInt8((reference >> 8) & 0xFF)
            body[14] = UInt8(reference & 0xFF)
            _ = body.withUnsafeBytes { history.readFeedback(body: $0) { r in
                reports += 1
                if let a = r.arrivalMicroseconds { largest = max(largest, abs(a)) }
            } }
            reference = (reference + (1 << 23) - 1) & 0xFF_FFFF
        }
        #expect(reports == 40_000)
        #expect(largest < 1 << 53 && largest > 1 << 50, "largest arrival \(largest) µs")
    }

    /// A peer's 36-byte feedback claiming 65,535 lost packets (nine run-length chunks): read
    /// with a window, only the lost packets inside it are visited — across the 16-bit wrap, and
    /// for a window the run only partly covers — so the work is bounded by what the sender
    /// remembers (tether-bench hotpath: 49 µs a feedback before, about 1 µs after).
    @Test func aLongLostRunIsVisitedOnlyInsideTheWindow() {
        var body: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 2, 0xFF, 0x00, 0xFF, 0xFF, 0, 0, 1, 0]
        for _ in 0..<9 { body += [0x1F, 0xFF] }
        body += [0, 0]
        func visits(window: (first: UInt16, count: Int)?) -> [UInt16] {
            var seen: [UInt16] = []
            let header = body.withUnsafeBytes { TransportFeedback.read(body: $0, window: window) { s, a in
                #expect(a == nil)
                seen.append(s)
            } }
            #expect(header?.statusCount == Int(body[10]) << 8 | Int(body[11]))
            return seen
        }
        #expect(visits(window: nil).count == 65_535)
        // The run starts at 0xFF00; a window across the wrap, wholly inside the run.
        #expect(visits(window: (first: 0xFFF0, count: 1_024)) == (0..<1_024).map { 0xFFF0 &+ UInt16($0) })
        // A window the run ends inside: the run covers 0xFF00 … 0xFEFE (65,535 of 65,536), so
        // of a window 0xFEF0 … 0x02EF all but 0xFEFF are lost packets it reports.
        let partial = visits(window: (first: 0xFEF0, count: 1_024))
        #expect(partial.count == 1_024 - 1 && !partial.contains(0xFEFF))
        // A window the run misses: nothing.
        body[10] = 0
        body[11] = 100  // 100 statuses: 0xFF00 … 0xFF63
        #expect(visits(window: (first: 0x1000, count: 1_024)).isEmpty)
    }

    /// Malformed bodies visit nothing: a status count beyond the chunks, deltas missing, a
    /// reserved status, a body cut at every length.
    @Test func malformedFeedbackIsRefusedWhole() {
        var visited = 0
        // count 5, one run chunk of 5 "small delta" (0x2005), but no deltas.
        let noDeltas: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 0, 0x20, 0x05]
        #expect(noDeltas.withUnsafeBytes { TransportFeedback.read(body: $0) { _, _ in visited += 1 } } == nil)
        let reserved: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x01, 0, 0]
        #expect(reserved.withUnsafeBytes { TransportFeedback.read(body: $0) { _, _ in visited += 1 } } == nil)
        let good: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0x20, 0x02, 4, 8]
        #expect(good.withUnsafeBytes { TransportFeedback.read(body: $0) { _, _ in } } != nil)
        for cut in 0..<good.count {
            #expect(Array(good[0..<cut]).withUnsafeBytes { TransportFeedback.read(body: $0) { _, _ in visited += 1 } } == nil)
        }
        #expect(visited == 0)
    }
}
