@testable import TetherRTP

/// Deterministic pseudo-random generator (SplitMix64) so failures are reproducible.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Parses `bytes` as an RTP header, capturing the typed error.
func parseRTP(_ bytes: [UInt8]) -> Result<RTPHeader, RTPParseError> {
    bytes.withUnsafeBytes { raw in
        Result { () throws(RTPParseError) -> RTPHeader in try RTPHeader.parse(raw) }
    }
}

/// An owning copy of `RTCPPacket`, so tests can compare packets after the buffer is gone.
enum OwnedRTCPPacket: Equatable {
    case senderReport(ssrc: UInt32, info: RTCPSenderInfo, blocks: [RTCPReportBlock])
    case receiverReport(ssrc: UInt32, blocks: [RTCPReportBlock])
    case sourceDescription(sourceCount: Int, firstSSRC: UInt32?, firstCNAME: [UInt8]?)
    case bye(sourceCount: Int, firstSSRC: UInt32?, reason: [UInt8]?)
    case other(packetType: UInt8, count: UInt8, body: [UInt8])

    init(_ packet: RTCPPacket) {
        switch packet {
        case .senderReport(let ssrc, let info, let blocks):
            self = .senderReport(ssrc: ssrc, info: info, blocks: Array(blocks))
        case .receiverReport(let ssrc, let blocks):
            self = .receiverReport(ssrc: ssrc, blocks: Array(blocks))
        case .sourceDescription(let sourceCount, let firstSSRC, let firstCNAME):
            self = .sourceDescription(sourceCount: sourceCount, firstSSRC: firstSSRC, firstCNAME: firstCNAME.map { Array($0) })
        case .bye(let sourceCount, let firstSSRC, let reason):
            self = .bye(sourceCount: sourceCount, firstSSRC: firstSSRC, reason: reason.map { Array($0) })
        case .other(let packetType, let count, let body):
            self = .other(packetType: packetType, count: count, body: Array(body))
        }
    }
}

/// Validates and fully visits an RTCP compound, copying every packet.
func parseRTCP(_ bytes: [UInt8], allowReducedSize: Bool = false) -> Result<[OwnedRTCPPacket], RTPParseError> {
    bytes.withUnsafeBytes { raw in
        Result { () throws(RTPParseError) -> [OwnedRTCPPacket] in
            let parser = try RTCPCompoundParser(raw, allowReducedSize: allowReducedSize)
            let packets = parser.map(OwnedRTCPPacket.init)
            precondition(packets.count == parser.packetCount)
            return packets
        }
    }
}

/// The error of a failed result, or nil on success.
func failure<T>(_ result: Result<T, RTPParseError>) -> RTPParseError? {
    if case .failure(let error) = result { return error }
    return nil
}

/// Writes a compound with `writer` into a fresh array sized exactly.
/// `byeReason`: nil = no BYE, .some(nil) = BYE without reason, .some(bytes) = with reason.
func writeCompound(
    _ writer: RTCPCompoundWriter,
    ssrc: UInt32,
    senderInfo: RTCPSenderInfo?,
    blocks: [RTCPReportBlock],
    byeReason: [UInt8]?? = nil
) throws(RTCPWriteError) -> [UInt8] {
    var output = [UInt8](repeating: 0xEE, count: 4096)
    let reason = byeReason.flatMap { $0 } ?? []
    let result = output.withUnsafeMutableBytes { raw in
        reason.withUnsafeBytes { reasonBytes in
            Result { () throws(RTCPWriteError) -> Int in
                let bye: RTCPCompoundWriter.Bye
                switch byeReason {
                case .none: bye = .omitted
                case .some(.none): bye = .included(reason: nil)
                case .some(.some): bye = .included(reason: reasonBytes)
                }
                return try writer.write(into: raw, ssrc: ssrc, senderInfo: senderInfo, reportBlocks: blocks, bye: bye)
            }
        }
    }
    let length = try result.get()
    return Array(output[0..<length])
}

/// Big-endian bytes of a 32-bit value.
func bytes32(_ value: UInt32) -> [UInt8] {
    [UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
}

/// A sample report block with distinctive field values.
func sampleBlock(_ index: UInt32) -> RTCPReportBlock {
    RTCPReportBlock(
        ssrc: 0x1000_0000 + index,
        fractionLost: UInt8(truncatingIfNeeded: index * 7),
        cumulativeLost: Int32(index) * 1000 - 3,
        extendedHighestSequence: 0x0001_0000 + index,
        interarrivalJitter: 40 + index,
        lastSenderReport: 0xB705_2000 &+ index,
        delaySinceLastSenderReport: 0x0005_4000 + index
    )
}
