import TetherCodec
import TetherRTP

/// A datagram after SRTP, as the media loop handles it: demultiplexed, then parsed as RTP (header,
/// payload, Opus TOC and LBRR flags) or as an RTCP compound (every packet and report block).
enum RTPFuzzing {
    static func run(_ packet: UnsafeRawBufferPointer) {
        let kind = RTPPacketClassifier.classify(packet)
        // Whatever the classifier says, both parsers must cope with the bytes.
        rtp(packet, classifiedAs: kind)
        rtcp(packet)
    }

    static func rtp(_ packet: UnsafeRawBufferPointer, classifiedAs kind: RTPPacketClassifier.Kind) {
        guard let header = try? RTPHeader.parse(packet) else { return }
        fuzzInvariant(packet.count >= RTPHeader.fixedHeaderLength, "an RTP header parsed from \(packet.count) bytes")
        fuzzInvariant(
            header.payloadOffset >= RTPHeader.fixedHeaderLength && header.payloadLength >= 0
                && header.payloadOffset + header.payloadLength + header.paddingLength == packet.count,
            "the header's layout does not add up to the packet: offset \(header.payloadOffset), payload \(header.payloadLength), padding \(header.paddingLength), packet \(packet.count)")
        if header.hasExtension {
            fuzzInvariant(
                header.extensionOffset >= RTPHeader.fixedHeaderLength && header.extensionOffset + header.extensionLength <= header.payloadOffset,
                "the header extension lies outside the header")
        }
        for index in 0..<Int(header.csrcCount) {
            fuzzInvariant(header.contributingSource(at: index, in: packet) != nil, "CSRC \(index) of \(header.csrcCount) missing")
        }
        fuzzInvariant(header.contributingSource(at: Int(header.csrcCount), in: packet) == nil, "a CSRC past the count")

        // Writing the fixed fields back and parsing them again gives the same fields.
        var written = [UInt8](repeating: 0, count: RTPHeader.fixedHeaderLength)
        let size = written.withUnsafeMutableBytes {
            RTPHeader(marker: header.marker, payloadType: header.payloadType, sequenceNumber: header.sequenceNumber, timestamp: header.timestamp, ssrc: header.ssrc)
                .write(to: $0)
        }
        fuzzInvariant(size == RTPHeader.fixedHeaderLength, "a header written in \(size) bytes")
        let again = written.withUnsafeBytes { try? RTPHeader.parse($0) }
        fuzzInvariant(
            again?.marker == header.marker && again?.payloadType == header.payloadType && again?.sequenceNumber == header.sequenceNumber
                && again?.timestamp == header.timestamp && again?.ssrc == header.ssrc,
            "a written header parses to other fields")

        // The payload as the receive path reads it: Opus TOC, first frame, LBRR.
        let payload = UnsafeRawBufferPointer(rebasing: packet[header.payloadOffset..<(header.payloadOffset + header.payloadLength)])
        _ = OpusPacket.mode(of: payload)
        if let frame = OpusPacket.firstFrame(of: payload) {
            fuzzInvariant(frame.lowerBound >= 0 && frame.upperBound <= payload.count, "the first Opus frame \(frame) lies outside \(payload.count) bytes")
        }
        _ = OpusPacket.hasLBRR(payload)
        telephoneEvent(payload, header: header)
        _ = kind
    }

    /// The payload as an RFC 4733 telephone-event, through both receivers' rates: the payload
    /// round-trips, and a receiver reports at most the one digit an event can complete here.
    static func telephoneEvent(_ payload: UnsafeRawBufferPointer, header: RTPHeader) {
        guard let event = TelephoneEventPayload(parsing: payload) else {
            fuzzInvariant(payload.count < TelephoneEventPayload.length, "a \(payload.count)-byte payload refused as an event")
            return
        }
        var bytes = [UInt8](repeating: 0, count: TelephoneEventPayload.length)
        bytes.withUnsafeMutableBytes { event.write(to: $0) }
        fuzzInvariant(bytes.withUnsafeBytes { TelephoneEventPayload(parsing: $0) } == event, "a telephone-event payload does not round-trip")
        for rate: UInt32 in [8000, 48_000] {
            var receiver = DTMFReceiver(eventClockRateHz: rate)
            receiver.receive(event, timestamp: header.timestamp, now: 1_000_000_000)
            receiver.receive(event, timestamp: header.timestamp &+ UInt32(event.duration), now: 1_020_000_000)
            receiver.expire(now: 10_000_000_000)
            var reported = 0
            while let digit = receiver.takeReceived() {
                reported += 1
                fuzzInvariant(digit.digit.event == event.event && digit.durationMilliseconds >= 0, "a digit \(digit) from event \(event.event)")
            }
            fuzzInvariant(reported <= 2 && (event.event <= 15 || reported == 0), "\(reported) digits from two packets of event \(event.event)")
        }
    }

    static func rtcp(_ packet: UnsafeRawBufferPointer) {
        for reducedSize in [false, true] {
            guard let compound = try? RTCPCompoundParser(packet, allowReducedSize: reducedSize) else { continue }
            var count = 0
            for item in compound {
                count += 1
                fuzzInvariant(count <= packet.count / 4, "more RTCP packets than 4-byte words")
                switch item {
                case .senderReport(_, _, let blocks), .receiverReport(_, let blocks):
                    var seen = 0
                    for block in blocks {
                        seen += 1
                        _ = block.cumulativeLost
                    }
                    fuzzInvariant(seen == blocks.count && seen * RTCPReportBlock.encodedLength <= packet.count, "report blocks beyond the packet")
                case .sourceDescription(_, _, let cname):
                    if let cname { fuzzInvariant(within(cname, packet), "a CNAME outside the packet") }
                case .bye(_, _, let reason):
                    if let reason { fuzzInvariant(within(reason, packet), "a BYE reason outside the packet") }
                case .other(let type, _, let body):
                    fuzzInvariant(within(body, packet), "a packet body outside the compound")
                    if type == RTCPExtendedReport.packetType {
                        // Loss RLE blocks about any source the body names (the first block's).
                        let source = body.count >= 12 ? UInt32(body[8]) << 24 | UInt32(body[9]) << 16 | UInt32(body[10]) << 8 | UInt32(body[11]) : 0
                        if let runs = RTCPExtendedReport.lossRuns(inBody: body, sourceSSRC: source) {
                            // At most `maximumLossRunLengthBlocksRead` blocks are read, each of at most 65,535 packets.
                            fuzzInvariant(
                                runs.lost <= runs.packets && runs.lossRuns <= runs.lost
                                    && runs.packets <= RTCPExtendedReport.maximumLossRunLengthBlocksRead * 65_535,
                                "loss runs beyond the blocks: \(runs)")
                            fuzzInvariant(runs.lostAfterThreeLosses <= runs.lostAfterALoss && runs.lostAfterALoss <= runs.lost, "run counts out of order: \(runs)")
                        }
                    }
                }
            }
        }
    }

    /// Whether `part` lies inside `whole`'s memory.
    static func within(_ part: UnsafeRawBufferPointer, _ whole: UnsafeRawBufferPointer) -> Bool {
        guard part.count > 0 else { return true }
        guard let p = part.baseAddress, let w = whole.baseAddress else { return false }
        return p >= w && p + part.count <= w + whole.count
    }
}
