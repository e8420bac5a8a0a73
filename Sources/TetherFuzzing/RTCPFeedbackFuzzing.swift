import TetherCore
import TetherRTP

/// RTCP compounds as the media loop reads them after SRTCP (`PeerReports`), and what it does
/// with the reading (`LossAdaptation` takes the fraction lost and the loss runs), over a call:
/// each input is a sequence of compounds, and a seeded generator repeats a crafted XR report
/// (many Loss RLE blocks about us, long runs) thousands of times, so totals run far.
///
/// Transport-cc feedback in a compound goes through the send history (five packets are stamped
/// before each compound) into the rate control, as the media loop does.
///
/// Invariants: the reading stays inside what the bytes can say, the rate control's decisions
/// (bitrate, packet duration, RED, the estimate) stay inside their bounds, reported arrivals stay
/// within the history's bound, the call's totals never go backwards, no trap.
enum RTCPFeedbackFuzzing {
    static let localSSRC: UInt32 = 0x1234_5678

    static func run(_ input: UnsafeRawBufferPointer) {
        var reader = ByteReader(input)
        var reports = PeerReports(localSSRC: localSSRC)
        var controller = SendRateController(
            lossAdaptation: LossAdaptation(
                baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true, allowsRedundancy: true),
            usesTransportFeedback: true)
        let history = TransportSendHistory()
        var now: UInt64 = 1_000_000_000
        var compound = [UInt8](repeating: 0, count: 1500)
        var lastTotals = (reports: 0, lost: 0, runs: 0)

        func check(_ decision: SendRateController.Decision) {
            let settings = decision.settings
            fuzzInvariant(
                settings.bitrateBitsPerSecond >= 6_000 && settings.bitrateBitsPerSecond <= 510_000
                    && (0...100).contains(settings.expectedLossPercent)
                    && (0...LossAdaptation.maximumRedundantFrames).contains(settings.redundantFrames)
                    && [20, 40, 60, 120].contains(decision.frameMilliseconds) && decision.sendBitsPerSecond > 0,
                "a decision out of bounds: \(decision)")
        }

        func feed(_ bytes: UnsafeRawBufferPointer) {
            guard let parsed = try? RTCPCompoundParser(bytes, allowReducedSize: true) else { return }
            now &+= 20_000_000
            for k in 0..<5 { _ = history.stamp(bytes: 120, sentNanoseconds: now &+ UInt64(k) * 4_000_000) }
            let reading = reports.read(parsed, arrivalNanoseconds: now, arrivalNTPMiddle32: UInt32(truncatingIfNeeded: now >> 16))
            if let runs = reading.lossRuns {
                fuzzInvariant(runs.packets > 0 && runs.lost <= runs.packets && runs.lossRuns <= runs.lost, "a reading's runs: \(runs)")
                fuzzInvariant(
                    runs.packets <= RTCPExtendedReport.maximumLossRunLengthBlocksRead * 65_535 * (bytes.count / 24 + 1),
                    "\(runs.packets) packets from \(bytes.count) bytes")
            }
            if let rtt = reading.roundTripSeconds { fuzzInvariant(rtt >= 0 && rtt < 65_536, "a round trip of \(rtt) s") }
            if let body = reading.transportFeedback {
                history.readFeedback(body: body) { result in
                    if let arrival = result.arrivalMicroseconds {
                        fuzzInvariant(
                            abs(arrival) < (TransportSendHistory.maximumReferenceTicks + 1 << 24) * TransportFeedback.referenceTickMicroseconds
                                + 1 << 40,
                            "an arrival at \(arrival) µs")
                    }
                    controller.packetReported(sentNanoseconds: result.sentNanoseconds, bytes: result.bytes, arrivalMicroseconds: result.arrivalMicroseconds)
                }
                if let decision = controller.feedbackEnded(now: now) { check(decision) }
            }
            if let fraction = reading.fractionLost,
                let decision = controller.reportReceived(
                    fractionLost: fraction, lossRuns: reading.lossRuns.map { ($0.lost, $0.lossRuns) },
                    roundTripSeconds: reading.roundTripSeconds, now: now)
            {
                check(decision)
            }
            let estimate = controller.estimator.estimateBitsPerSecond
            fuzzInvariant(estimate.isFinite && estimate > 0 && estimate < 1e10, "an estimate of \(estimate) b/s")
            fuzzInvariant(
                reports.lossRunReports >= lastTotals.reports && reports.lostInRuns >= lastTotals.lost && reports.lossRuns >= lastTotals.runs,
                "the call's loss-run totals went backwards")
            lastTotals = (reports.lossRunReports, reports.lostInRuns, reports.lossRuns)
            if let mean = reports.meanLossRunPackets { fuzzInvariant(mean >= 1, "a mean loss run of \(mean)") }
        }

        while !reader.isAtEnd {
            let tag = reader.byte()
            if tag & 0x80 == 0 {
                // A compound of the next `length` bytes, as they are.
                let length = min(Int(reader.uint16()), compound.count)
                for i in 0..<length { compound[i] = reader.byte() }
                compound.withUnsafeBytes { feed(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
            } else {
                // A receiver report about us and a crafted XR report, repeated (tag & 0x7F) × 16
                // + 1 times: `blocks` Loss RLE blocks about us, each of `chunks` chunks of one kind.
                let repeats = Int(tag & 0x7F) * 16 + 1
                let blocks = Int(reader.byte() % 80) + 1
                let chunks = Int(reader.byte() % 8) + 1
                let chunk = reader.uint16()
                let fraction = reader.byte()
                let length = craft(into: &compound, blocks: blocks, chunks: chunks, chunk: chunk, fractionLost: fraction)
                for _ in 0..<repeats {
                    compound.withUnsafeBytes { feed(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
                }
            }
        }
    }

    /// RR (one block about us) + XR with `blocks` Loss RLE blocks about us, each claiming 65,535
    /// packets in `chunks` copies of `chunk`, cut to what fits 1,500 bytes. Returns the length.
    static func craft(into buffer: inout [UInt8], blocks: Int, chunks: Int, chunk: UInt16, fractionLost: UInt8) -> Int {
        var bytes: [UInt8] = [0x81, 201, 0, 7, 0x87, 0x65, 0x43, 0x21]
        bytes += [0x12, 0x34, 0x56, 0x78, fractionLost, 0, 0, 9, 0, 1, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0]
        let chunkWords = (chunks + 1) / 2
        let blockWords = 3 + chunkWords
        let fitting = min(blocks, (1500 - bytes.count - 8) / (blockWords * 4))
        let words = 1 + fitting * blockWords
        bytes += [0x80, RTCPExtendedReport.packetType, UInt8(words >> 8), UInt8(words & 0xFF), 0x87, 0x65, 0x43, 0x21]
        for _ in 0..<fitting {
            bytes += [RTCPExtendedReport.lossRunLengthBlockType, 0, UInt8((blockWords - 1) >> 8), UInt8((blockWords - 1) & 0xFF)]
            bytes += [0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0xFF, 0xFF]
            for _ in 0..<(chunkWords * 2) { bytes += [UInt8(chunk >> 8), UInt8(chunk & 0xFF)] }
        }
        for (i, b) in bytes.enumerated() { buffer[i] = b }
        return bytes.count
    }
}
