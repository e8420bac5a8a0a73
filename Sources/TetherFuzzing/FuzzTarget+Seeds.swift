import Foundation
import TetherCodec
import TetherCore
import TetherRTP

extension FuzzTarget {
    /// Seed inputs made with Tether's own writers: real RTP packets with real Opus payloads (FEC
    /// on and off, so some carry LBRR), RTCP compounds as the media loop writes them, and jitter
    /// buffer programs (a clean stream, loss, reordering, a restart). The SDP seeds are real
    /// descriptions from other stacks and Tether, kept as files in `Fuzz/corpus/sdp`.
    ///
    /// `fuzz-rtp --write-seeds DIR` writes them; the committed corpus was made that way.
    public func seeds() -> [(name: String, bytes: [UInt8])] {
        switch self {
        case .sdp:
            let offer = AudioOfferAnswer.makeOffer(SDPFuzzing.local)
            var seeds = [("tether-offer", Array(offer.serialized().utf8))]
            if let (answer, _) = try? AudioOfferAnswer.makeAnswer(to: offer, local: SDPFuzzing.local) {
                seeds.append(("tether-answer", Array(answer.serialized().utf8)))
            }
            return seeds
        case .rtp: return Self.rtpSeeds()
        case .jitterBuffer: return Self.jitterBufferSeeds()
        case .dtmf: return Self.dtmfSeeds()
        case .rtcpFeedback: return Self.rtcpFeedbackSeeds()
        }
    }

    private static func rtpSeeds() -> [(name: String, bytes: [UInt8])] {
        var seeds: [(String, [UInt8])] = []
        // Opus packets of a voiced signal (harmonics of a gliding pitch), FEC on and off.
        for fec in [false, true] {
            guard
                let encoder = try? OpusEncoder(
                    configuration: OpusConfiguration(inBandFEC: fec, expectedLossPercent: fec ? 20 : 0))
            else { continue }
            var pcm = [Int16](repeating: 0, count: 960)
            var phase = 0.0
            var packet = [UInt8](repeating: 0, count: 1500)
            for frame in 0..<6 {
                for i in pcm.indices {
                    phase += 2 * Double.pi * (130 + Double(frame) * 5) / 48_000
                    var v = 0.0
                    for h in 1...6 { v += sin(Double(h) * phase) / Double(h) }
                    pcm[i] = Int16(6000 * v)
                }
                let size = pcm.withUnsafeBufferPointer { samples in
                    packet.withUnsafeMutableBytes { (try? encoder.encode(samples.baseAddress!, into: $0)) ?? 0 }
                }
                guard size > 0, frame >= 3 else { continue }  // the first frames carry no LBRR yet
                var datagram = [UInt8](repeating: 0, count: RTPHeader.fixedHeaderLength)
                _ = datagram.withUnsafeMutableBytes {
                    RTPHeader(marker: frame == 3, payloadType: 111, sequenceNumber: 65_534 &+ UInt16(frame), timestamp: 4_294_000_000 &+ UInt32(frame * 960), ssrc: 0x1234_5678)
                        .write(to: $0)
                }
                datagram += packet[0..<size]
                seeds.append(("rtp-opus-\(fec ? "fec" : "nofec")-\(frame)", datagram))
            }
        }
        // An RTP packet with CSRCs, a one-byte header extension and padding.
        seeds.append(
            ("rtp-csrc-extension-padding",
             [0xB2, 0x6F, 0x00, 0x01, 0x00, 0x00, 0x03, 0xC0, 0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
              0xBE, 0xDE, 0x00, 0x01, 0x10, 0xAA, 0x00, 0x00, 0x78, 0x01, 0x02, 0x00, 0x00, 0x03]))
        // RTCP compounds as the media loop writes them: SR and RR with report blocks, and a BYE.
        let writer = RTCPCompoundWriter(cname: Array("tether@fuzz".utf8))!
        let block = RTCPReportBlock(
            ssrc: 0x1234_5678, fractionLost: 25, cumulativeLost: 17, extendedHighestSequence: 70_000, interarrivalJitter: 312,
            lastSenderReport: 0xABCD_0123, delaySinceLastSenderReport: 65_536)
        let info = RTCPSenderInfo(ntpTimestamp: 0xE8F0_0000_8000_0000, rtpTimestamp: 96_000, senderPacketCount: 500, senderOctetCount: 40_000)
        var buffer = [UInt8](repeating: 0, count: 1500)
        let reason = Array("hang-up".utf8)
        for (name, sender, blocks, bye) in [
            ("rtcp-sr", true, [block], false), ("rtcp-rr", false, [block, block], false), ("rtcp-sr-bye", true, [], true),
        ] {
            let size = buffer.withUnsafeMutableBytes { out in
                reason.withUnsafeBytes { r in
                    (try? writer.write(
                        into: out, ssrc: 0x8765_4321, senderInfo: sender ? info : nil, reportBlocks: blocks,
                        bye: bye ? .included(reason: r) : .omitted)) ?? 0
                }
            }
            seeds.append((name, Array(buffer[0..<size])))
        }
        // A receiver report followed by an XR Loss RLE block (bursts and single losses), as a
        // Tether asked for it sends.
        var received = ReceivedPackets(beginSequence: 65_500, count: 90)
        for i in 0..<90 where !(i % 17 == 3 || (40..<46).contains(i)) { received.markReceived(i) }
        let xrSize = buffer.withUnsafeMutableBytes { out -> Int in
            let report = (try? writer.write(into: out, ssrc: 0x8765_4321, senderInfo: nil, reportBlocks: [block], bye: .omitted)) ?? 0
            return report + (RTCPExtendedReport.writeLossRunLength(
                into: out, at: report, reporterSSRC: 0x8765_4321, sourceSSRC: 0x1234_5678, packets: received) ?? 0)
        }
        seeds.append(("rtcp-rr-xr-loss-rle", Array(buffer[0..<xrSize])))
        return seeds
    }

    private static func jitterBufferSeeds() -> [(name: String, bytes: [UInt8])] {
        // Operations: [0x00, step, arrival ms, length] inserts the next packet; [0x02, ms] pulls;
        // [0x03] runs twenty pulls at the frame period; [0x04 | 0x01, seq16, ts32, ms, length]
        // inserts an arbitrary packet. See `JitterBufferFuzzing`.
        func program(_ setup: UInt8, _ body: [[UInt8]]) -> [UInt8] { [setup, 0xFF, 0xF0, 0xFF, 0xFF, 0x10, 0x00] + body.flatMap { $0 } }
        var clean: [[UInt8]] = []
        for _ in 0..<30 { clean += [[0x00, 1, 20, 60], [0x02, 0]] }
        var lossy: [[UInt8]] = []
        for i in 0..<30 { lossy += [[0x00, i % 5 == 0 ? 2 : 1, i % 7 == 0 ? 60 : 20, 60], [0x02, 0]] }
        var reordered: [[UInt8]] = []
        for i in 0..<15 { reordered += [[0x00, 2, 20, 60], [0x00, 0xFF, 1, 60], [0x00, 2, 19, 60], [0x02, i % 2 == 0 ? 20 : 25]] }
        let restart: [[UInt8]] = clean.prefix(20) + [[0x05, 0x12, 0x34, 0x00, 0x00, 0x10, 0x00, 20, 60]] + clean.prefix(20) + [[0x03]]
        // Long streams ([0x0B | loss << 4, count, ahead | pullEvery << 6, seed32]): 65,536
        // packets with 5 % loss from near the timestamp wrap, and a peer racing the playout point
        // 1.26 s a packet through two slots with a 10 s re-anchor threshold (past 9.2 × 10⁹
        // samples, where timestamp × 10⁹ no longer fits in 64 bits, at about 81,500 packets; it
        // sends 93,184).
        let continuous: [[UInt8]] = [[0x5B, 0x3F, 0x01, 0x12, 0x34, 0x56, 0x78], [0x03]]
        let racing: [[UInt8]] = [[0x02, 0], [0x0B, 0x5A, 0x3F, 0x0B, 0xAD, 0xF0, 0x0D]]
        return [
            ("jb-fixed-clean", program(0x02, clean)), ("jb-adaptive-clean", program(0x12, clean)),
            ("jb-adaptive-loss", program(0x12, lossy)), ("jb-adaptive-reorder", program(0x12, reordered)),
            ("jb-small-restart", program(0x0A, restart)), ("jb-adaptive-probation", program(0x32, lossy + [[0x07], [0x03]])),
            ("jb-long-continuous-lossy", program(0x12, clean.prefix(4) + continuous)),
            ("jb-long-racing", program(0xD2, clean.prefix(2) + racing)),
        ]
    }

    private static func dtmfSeeds() -> [(name: String, bytes: [UInt8])] {
        // [rate, ts32] then operations: [0x00 | end << 4, ms, event, duration16] a packet at the
        // same timestamp; [0x04 …] one segment on; [0x08, step16, …] a step; [0x0C, ts32, …]
        // anywhere; [0x01 | step << 2, event, count] a long event of count × 256 + 1 segments;
        // [0x02, ms16] a time-out check; [0x07] a reset. See `DTMFFuzzing`.
        var digits: [UInt8] = [0x00, 0xFF, 0xFF, 0x00, 0x00]
        for event: UInt8 in [1, 2, 3, 11] {
            digits += [0x0C, 0, 0, 0x10 * event, 0, 20, event, 0x00, 0xA0]  // a new event
            digits += [0x00, 20, event, 0x01, 0x40, 0x10, 20, event, 0x01, 0xE0, 0x10, 20, event, 0x01, 0xE0]  // updates, end
        }
        digits += [0x02, 0x03, 0xE8]
        // One event of 2 × 65,281 + 1 segments at 8 kHz (its 65,536th segment trapped the old
        // receiver), then its end, then a digit.
        let endless: [UInt8] = [0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 20, 5, 0xFF, 0xFF, 0x01, 5, 0xFF, 0x01, 5, 0xFF,
                                0x14, 20, 5, 0x00, 0x10, 0x02, 0x07, 0xD0, 0x0C, 0x40, 0, 0, 0, 20, 9, 0x00, 0xA0]
        // The same digits at 48 kHz; a 3 s digit in segments (65,535 ticks apart at 48 kHz);
        // digits whose end packets were lost, each reported when the next began; a reset midway.
        let wide: [UInt8] = [0x01] + digits.dropFirst()
        var segmented: [UInt8] = [0x01, 0x7F, 0xFF, 0x80, 0x00, 0x00, 20, 0, 0x10, 0x00]
        for _ in 0..<2 { segmented += [0x00, 20, 0, 0xFF, 0xFF, 0x04, 20, 0, 0x03, 0x00] }
        segmented += [0x10, 20, 0, 0x32, 0x82, 0x10, 20, 0, 0x32, 0x82]
        var unended: [UInt8] = [0x00, 0x00, 0x00, 0x20, 0x00]
        for event: UInt8 in [4, 7, 4] { unended += [0x08, 0x06, 0x40, 20, event, 0x00, 0xA0, 0x00, 20, event, 0x01, 0x40] }
        unended += [0x02, 0x01, 0xF4, 0x02, 0x01, 0xF4]
        let reset: [UInt8] = [0x00, 0, 0, 0, 0, 0x00, 20, 8, 0x00, 0xA0, 0x07, 0x10, 20, 8, 0x01, 0x40, 0x02, 0x03, 0xE8]
        return [
            ("dtmf-digits", digits), ("dtmf-endless-event", endless), ("dtmf-digits-48k", wide), ("dtmf-segmented-digit", segmented),
            ("dtmf-lost-ends", unended), ("dtmf-reset-midway", reset),
        ]
    }

    private static func rtcpFeedbackSeeds() -> [(name: String, bytes: [UInt8])] {
        // [0x00, length16, bytes…] one compound; [0x80 | repeats/64, blocks, chunks, chunk16,
        // fraction] a crafted RR + XR repeated. See `RTCPFeedbackFuzzing`.
        var report = [UInt8](repeating: 0, count: 1500)
        let length = RTCPFeedbackFuzzing.craft(into: &report, blocks: 1, chunks: 2, chunk: 0xB6DB, fractionLost: 30)
        let single: [UInt8] = [0x00, UInt8(length >> 8), UInt8(length & 0xFF)] + report[0..<length]
        // 2,033 reports, each of 70 blocks of four 16,383-packet runs (4.6 million packets a
        // report, read one by one before issue 33), then 241 with bit vectors.
        let flood: [UInt8] = [0xFF, 70, 4, 0x3F, 0xFF, 60, 0x8F, 70, 8, 0xD5, 0x55, 200]
        // As a peer writes them: a sender report whose block about us gives a round trip, a
        // receiver report about another source with a BYE, and XR bit vectors about us.
        func compound(_ sender: Bool, about: UInt32, bye: Bool, runs: String?) -> [UInt8] {
            guard let writer = RTCPCompoundWriter(cname: Array("peer@fuzz".utf8)) else { return [] }
            let block = RTCPReportBlock(
                ssrc: about, fractionLost: 40, cumulativeLost: 12, extendedHighestSequence: 70_000, interarrivalJitter: 480,
                lastSenderReport: 0x0001_8000, delaySinceLastSenderReport: 0x4000)
            let info = RTCPSenderInfo(ntpTimestamp: 0x0000_0002_0000_0000, rtpTimestamp: 96_000, senderPacketCount: 500, senderOctetCount: 40_000)
            var buffer = [UInt8](repeating: 0, count: 1500)
            let size = buffer.withUnsafeMutableBytes { out -> Int in
                var n = (try? writer.write(
                    into: out, ssrc: 0x8765_4321, senderInfo: sender ? info : nil, reportBlocks: [block],
                    bye: bye ? .included(reason: nil) : .omitted)) ?? 0
                if let runs {
                    var packets = ReceivedPackets(beginSequence: 65_500, count: runs.count)
                    for (i, c) in runs.enumerated() where c == "1" { packets.markReceived(i) }
                    n += RTCPExtendedReport.writeLossRunLength(
                        into: out, at: n, reporterSSRC: 0x8765_4321, sourceSSRC: about, packets: packets) ?? 0
                }
                return n
            }
            return [0x00, UInt8(size >> 8), UInt8(size & 0xFF)] + buffer[0..<size]
        }
        let us = RTCPFeedbackFuzzing.localSSRC
        let pattern = String(repeating: "1101110111110", count: 9)
        // Transport-cc feedback as a receiver writes it (reduced-size, alone): each compound
        // reports the five packets stamped before it, one lost, arrivals 20 ms apart and
        // growing later (a queue); then one whose reference time leaps by 2^23 − 1 ticks each
        // time, 300 times.
        func feedback(_ round: Int, leap: Bool) -> [UInt8] {
            let recorder = TransportFeedbackRecorder()
            for k in 0..<5 where k != 2 {
                let base: UInt64 = leap ? UInt64(round) * ((1 << 23) - 1) * 64_000_000 : 1_000_000_000 + UInt64(round) * 20_000_000
                recorder.record(sequence: UInt16(truncatingIfNeeded: round * 5 + k), arrivalNanoseconds: base + UInt64(k * (4 + round)) * 1_000_000)
            }
            var buffer = [UInt8](repeating: 0, count: 1500)
            let size = buffer.withUnsafeMutableBytes { recorder.writeFeedback(into: $0, at: 0, senderSSRC: 0x8765_4321, mediaSSRC: us) } ?? 0
            return [0x00, UInt8(size >> 8), UInt8(size & 0xFF)] + buffer[0..<size]
        }
        return [
            ("rtcp-transport-cc", (0..<40).flatMap { feedback($0, leap: false) }),
            ("rtcp-transport-cc-leaps", (0..<300).flatMap { feedback($0, leap: true) }),
            ("rtcp-rr-xr", single), ("rtcp-xr-flood", flood), ("rtcp-sr-round-trip", compound(true, about: us, bye: false, runs: nil)),
            ("rtcp-rr-other-source-bye", compound(false, about: 0x0BAD_0BAD, bye: true, runs: pattern)),
            ("rtcp-rr-xr-bit-vectors", compound(false, about: us, bye: false, runs: pattern) + compound(true, about: us, bye: false, runs: "0011")),
        ]
    }

    /// The command-line entry of the fuzz executables in an ordinary build: replays files and
    /// folders of inputs (`fuzz-sdp Fuzz/corpus/sdp`), or writes the seeds (`--write-seeds DIR`).
    /// Exits 0 when every input ran (a violated invariant traps instead).
    public func replayMain(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) -> Never {
        if arguments.first == "--write-seeds", arguments.count == 2 {
            let folder = URL(fileURLWithPath: arguments[1])
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for seed in seeds() {
                let path = folder.appendingPathComponent(seed.name).path
                guard FileManager.default.createFile(atPath: path, contents: Data(seed.bytes)) else {
                    print("cannot write \(path)")
                    exit(1)
                }
            }
            print("wrote \(seeds().count) seeds for \(rawValue) to \(folder.path)")
            exit(0)
        }
        guard !arguments.isEmpty, !arguments.contains(where: { $0.hasPrefix("-") }) else {
            print(
                """
                usage: fuzz-\(rawValue) FILE|FOLDER…      replay inputs through the \(rawValue) target
                       fuzz-\(rawValue) --write-seeds FOLDER
                Built with scripts/fuzz.sh (-sanitize=fuzzer,address), this executable is a libFuzzer target instead.
                """)
            exit(arguments.isEmpty ? 1 : 0)
        }
        var count = 0
        for path in arguments {
            for file in Self.files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    print("cannot read \(file)")
                    exit(1)
                }
                run([UInt8](data))
                count += 1
            }
        }
        print("\(rawValue): \(count) inputs replayed, no invariant violated")
        exit(0)
    }

    /// The files at `path`: the file itself, or a folder's regular files (not hidden), sorted.
    public static func files(at path: String) -> [String] {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return [] }
        guard isFolder.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
    }
}
