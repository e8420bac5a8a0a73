import Testing
import TetherRTP

@Suite("RFC 2198 redundant audio")
struct RedundantAudioTests {
    /// Writes a payload with the given redundant blocks (payload type 111, offsets given) and primary.
    func written(primary: [UInt8], redundant: [(offset: UInt32, bytes: [UInt8])], capacity: Int = 1500) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: capacity)
        // Keep every block's bytes alive for the call.
        let storage = redundant.map(\.bytes)
        return storage.withUnsafeBufferPointers { pointers in
            let sources = zip(redundant, pointers).map {
                RedundantAudioPayload.Source(payloadType: 111, timestampOffset: $0.offset, bytes: UnsafeRawBufferPointer($1))
            }
            let n = sources.withUnsafeBufferPointer { s in
                primary.withUnsafeBytes { p in
                    out.withUnsafeMutableBytes { RedundantAudioPayload.write(primaryPayloadType: 111, primary: p, redundant: s, into: $0) }
                }
            }
            return n.map { Array(out[0..<$0]) }
        }
    }

    func parsed(_ bytes: [UInt8]) throws(RedundantAudioPayload.ParseError) -> RedundantAudioPayload {
        var result: Result<RedundantAudioPayload, RedundantAudioPayload.ParseError>!
        bytes.withUnsafeBytes { raw in
            do throws(RedundantAudioPayload.ParseError) {
                result = .success(try RedundantAudioPayload(parsing: raw))
            } catch {
                result = .failure(error)
            }
        }
        return try result.get()
    }

    @Test func aPayloadWithTwoEarlierFramesRoundTrips() throws {
        let older: [UInt8] = Array(repeating: 0xA1, count: 61)
        let previous: [UInt8] = Array(repeating: 0xB2, count: 70)
        let primary: [UInt8] = Array(repeating: 0xC3, count: 83)
        let blocks: [(offset: UInt32, bytes: [UInt8])] = [(1920, older), (960, previous)]
        let bytes = try #require(written(primary: primary, redundant: blocks))
        #expect(bytes.count == 2 * 4 + 1 + 61 + 70 + 83)
        // Header of the first redundant block: F=1, PT 111, offset 1920, length 61.
        #expect(Array(bytes[0..<4]) == [0x80 | 111, UInt8(1920 >> 6), UInt8((1920 & 0x3F) << 2), 61])
        #expect(bytes[8] == 111)  // the primary's header: F=0
        let red = try parsed(bytes)
        #expect(red.redundantCount == 2)
        #expect(red.redundant(0) == .init(payloadType: 111, timestampOffset: 1920, range: 9..<70))
        #expect(red.redundant(1) == .init(payloadType: 111, timestampOffset: 960, range: 70..<140))
        #expect(red.primary == .init(payloadType: 111, timestampOffset: 0, range: 140..<223))
        #expect(Array(bytes[red.redundant(1).range]) == previous)
        #expect(Array(bytes[red.primary.range]) == primary)
    }

    /// What Chromium sends for Opus 111 inside RED 63 (one redundant block, then the primary).
    @Test func chromiumsLayoutIsRead() throws {
        // F=1 PT=111, offset 960 (0x3C0), length 3; F=0 PT=111; 3 redundant bytes; 2 primary bytes.
        let bytes: [UInt8] = [0xEF, 0x0F, 0x00, 0x03, 0x6F, 1, 2, 3, 9, 8]
        let red = try parsed(bytes)
        #expect(red.redundantCount == 1)
        #expect(red.redundant(0).timestampOffset == 960)
        #expect(Array(bytes[red.redundant(0).range]) == [1, 2, 3])
        #expect(red.primary.payloadType == 111)
        #expect(Array(bytes[red.primary.range]) == [9, 8])
    }

    @Test func aPrimaryAloneIsOneHeaderByte() throws {
        let bytes = try #require(written(primary: [7, 7, 7], redundant: []))
        #expect(bytes == [111, 7, 7, 7])
        let red = try parsed(bytes)
        #expect(red.redundantCount == 0)
        #expect(red.primary.range == 1..<4)
    }

    @Test func malformedPayloadsAreRefusedWhole() {
        #expect(throws: RedundantAudioPayload.ParseError.truncated) { try parsed([]) }
        #expect(throws: RedundantAudioPayload.ParseError.truncated) { try parsed([0xEF, 0x0F, 0x00]) }  // header cut short
        #expect(throws: RedundantAudioPayload.ParseError.truncated) { try parsed([0xEF, 0x0F, 0x00, 0x03]) }  // no primary header
        #expect(throws: RedundantAudioPayload.ParseError.truncated) { try parsed([0xEF, 0x0F, 0x00, 0x09, 0x6F, 1, 2]) }  // block past the end
        let tooMany: [UInt8] = (0..<9).flatMap { _ -> [UInt8] in [0xEF, 0x0F, 0x00, 0x00] } + [0x6F]
        #expect(throws: RedundantAudioPayload.ParseError.tooManyBlocks) { try parsed(tooMany) }
    }

    @Test func blocksAHeaderCannotDescribeAreNotWritten() {
        #expect(written(primary: [1], redundant: [(0x4000, [2])]) == nil)  // offset over 14 bits
        let long: [(offset: UInt32, bytes: [UInt8])] = [(960, [UInt8](repeating: 0, count: 1024))]
        #expect(written(primary: [1], redundant: long) == nil)  // length over 10 bits
        #expect(written(primary: [1, 2, 3], redundant: [(960, [4, 5])], capacity: 8) == nil)  // 4 + 1 + 5 = 10 > 8
    }
}

extension Array where Element == [UInt8] {
    /// Calls `body` with stable pointers to every inner array's bytes.
    func withUnsafeBufferPointers<R>(_ body: ([UnsafeBufferPointer<UInt8>]) -> R) -> R {
        func nest(_ index: Int, _ acc: [UnsafeBufferPointer<UInt8>]) -> R {
            if index == count { return body(acc) }
            return self[index].withUnsafeBufferPointer { nest(index + 1, acc + [$0]) }
        }
        return nest(0, [])
    }
}
