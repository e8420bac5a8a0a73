import Testing
import TetherAudio

@Suite("WAVFile")
struct WAVFileTests {
    @Test("16-bit mono samples round-trip through a file")
    func sixteenBitMonoRoundTrips() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let samples: [Int16] = [0, 1, -1, 32_767, -32_768, 1_234, -4_321] + noise(count: 1_000)
        let path = directory.file("mono.wav")
        try WAVFile.write(samples: samples, sampleRateHertz: 16_000, to: path)
        let file = try WAVFile.read(path: path)
        #expect(file.samples == samples)
        #expect(file.sampleRateHertz == 16_000)
        #expect(fileBytes(path)?.count == 44 + samples.count * 2)
    }

    @Test("the written header is canonical mono 16-bit PCM")
    func writtenHeaderIsCanonical() {
        let bytes = WAVFile.encode(samples: [1, 2, 3], sampleRateHertz: 8_000)
        #expect(bytes.count == 50)
        #expect(Array(bytes[0..<4]) == Array("RIFF".utf8))
        #expect(Array(bytes[4..<8]) == [42, 0, 0, 0])  // RIFF size = file size - 8
        #expect(Array(bytes[8..<16]) == Array("WAVEfmt ".utf8))
        #expect(Array(bytes[16..<24]) == [16, 0, 0, 0, 1, 0, 1, 0])  // fmt size, PCM, 1 channel
        #expect(Array(bytes[24..<28]) == [0x40, 0x1F, 0, 0])  // 8 000 Hz
        #expect(Array(bytes[28..<36]) == [0x80, 0x3E, 0, 0, 2, 0, 16, 0])  // 16 000 B/s, align 2, 16 bits
        #expect(Array(bytes[36..<44]) == Array("data".utf8) + [6, 0, 0, 0])
        #expect(Array(bytes[44...]) == [1, 0, 2, 0, 3, 0])
    }

    @Test("32-bit float stereo is downmixed to 16-bit mono")
    func floatStereoIsDownmixed() throws {
        let frames: [[Float]] = [[0.5, 0.25], [1_000 / 32_768, 1_000 / 32_768], [0.25, -0.25], [1, 1], [-1, -1], [0.75, 0.5]]
        let file = try WAVFile.decode(WAVBuilder.build(.float32(frames), sampleRateHertz: 44_100))
        #expect(file.samples == [12_288, 1_000, 0, 32_767, -32_768, 20_480])
        #expect(file.sampleRateHertz == 44_100)
    }

    @Test("16-bit stereo is averaged with rounding")
    func sixteenBitStereoIsAveraged() throws {
        let file = try WAVFile.decode(WAVBuilder.build(.pcm16([[100, 200], [-3, -4], [32_767, 32_767], [-32_768, 32_767]])))
        #expect(file.samples == [150, -4, 32_767, -1 /* -0.5 rounds away from zero */])
    }

    @Test("WAVE_FORMAT_EXTENSIBLE 16-bit and float files are accepted")
    func extensibleIsAccepted() throws {
        let pcm = try WAVFile.decode(WAVBuilder.build(.pcm16([[10, 20], [30, 40]]), extensible: true))
        #expect(pcm.samples == [15, 35])
        let float = try WAVFile.decode(WAVBuilder.build(.float32([[0.5], [-0.5]]), sampleRateHertz: 16_000, extensible: true))
        #expect(float.samples == [16_384, -16_384])
        #expect(float.sampleRateHertz == 16_000)
    }

    @Test("unknown chunks, odd-sized ones included, are skipped")
    func unknownChunksAreSkipped() throws {
        let bytes = WAVBuilder.build(
            .pcm16([[7], [8], [9]]),
            extraChunksBeforeData: [("LIST", Array("abc".utf8)), ("fact", [3, 0, 0, 0])])
        #expect(try WAVFile.decode(bytes).samples == [7, 8, 9])
    }

    @Test("truncated files throw invalidWAVFile", arguments: [20, 40, 60, 1_000])
    func truncatedFilesThrow(keptBytes: Int) {
        let whole = WAVFile.encode(samples: noise(count: 1_000), sampleRateHertz: 48_000)
        #expect {
            try WAVFile.decode(Array(whole.prefix(keptBytes)))
        } throws: { error in
            guard case .invalidWAVFile = error as? AudioDeviceError else { return false }
            return true
        }
    }

    @Test("garbage, empty and chunkless files throw invalidWAVFile")
    func garbageThrows() {
        let garbage = noise(count: 500).flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
        let noData = Array(WAVBuilder.build(.pcm16([[1]])).prefix(36))  // RIFF + WAVE + fmt, no data chunk
        for bytes in [garbage, [], Array("RIFF\u{0}\u{0}\u{0}\u{0}AVI ".utf8), noData] {
            #expect {
                try WAVFile.decode(bytes)
            } throws: { error in
                guard case .invalidWAVFile = error as? AudioDeviceError else { return false }
                return true
            }
        }
    }

    @Test("encodings other than 16-bit PCM and 32-bit float throw unsupportedWAVFormat")
    func unsupportedEncodingsThrow() {
        let files = [
            WAVBuilder.build(.custom(formatTag: 1, bitsPerSample: 8, channels: 1, payload: [128, 128])),
            WAVBuilder.build(.custom(formatTag: 1, bitsPerSample: 24, channels: 1, payload: [0, 0, 0])),
            WAVBuilder.build(.custom(formatTag: 3, bitsPerSample: 64, channels: 1, payload: Array(repeating: 0, count: 8))),
            WAVBuilder.build(.custom(formatTag: 6, bitsPerSample: 8, channels: 1, payload: [0xD5])),  // A-law
        ]
        for bytes in files {
            #expect {
                try WAVFile.decode(bytes)
            } throws: { error in
                guard case .unsupportedWAVFormat = error as? AudioDeviceError else { return false }
                return true
            }
        }
    }

    @Test("reading a missing file throws cannotOpenFile; decoding errors name the path")
    func readErrorsNameThePath() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let missing = directory.file("missing.wav")
        #expect {
            try WAVFile.read(path: missing)
        } throws: { error in
            guard case .cannotOpenFile(let path, _) = error as? AudioDeviceError else { return false }
            return path == missing
        }
        let garbage = directory.file("garbage.wav")
        writeFile(garbage, Array("this is not a wave file at all".utf8))
        #expect {
            try WAVFile.read(path: garbage)
        } throws: { error in
            guard case .invalidWAVFile(let reason) = error as? AudioDeviceError else { return false }
            return reason.contains(garbage)
        }
    }

    @Test("writing into a missing directory throws cannotOpenFile")
    func writeIntoMissingDirectoryThrows() {
        #expect(throws: AudioDeviceError.self) {
            try WAVFile.write(samples: [1], sampleRateHertz: 48_000, to: "/nonexistent-tether-directory/out.wav")
        }
    }
}
