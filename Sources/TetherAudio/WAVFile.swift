/// Reading and writing RIFF WAVE files.
///
/// The reader accepts 16-bit integer PCM and 32-bit IEEE float, plain or WAVE_FORMAT_EXTENSIBLE,
/// with any number of channels, and returns mono 16-bit samples (channels are averaged). The
/// writer produces mono 16-bit PCM with the canonical 44-byte header.
///
/// These run on control paths (they allocate); the device threads only write raw frames.
public enum WAVFile {
    /// Size of the canonical header the writer produces, in bytes ("RIFF", "fmt " and "data" headers).
    public static let canonicalHeaderByteCount = 44

    private static let formatTagPCM: UInt16 = 0x0001
    private static let formatTagIEEEFloat: UInt16 = 0x0003
    private static let formatTagExtensible: UInt16 = 0xFFFE
    /// Bytes 2..<16 of the KSDATAFORMAT_SUBTYPE_* GUIDs; bytes 0..<2 carry the format tag.
    private static let extensibleSubformatGUIDTail: [UInt8] = [
        0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
    ]

    // MARK: Reading

    /// Reads the WAV file at `path` and converts it to mono 16-bit samples.
    /// - Returns: the samples and the file's sample rate in hertz.
    /// - Throws: `.cannotOpenFile` when the file cannot be read, `.invalidWAVFile` when it is not
    ///   a complete WAV file, `.unsupportedWAVFormat` for other encodings (the reasons name `path`).
    public static func read(path: String) throws(AudioDeviceError) -> (samples: [Int16], sampleRateHertz: Int) {
        let bytes = try POSIXFile.readAll(path: path)
        do {
            return try decode(bytes)
        } catch {
            switch error {
            case let .invalidWAVFile(reason): throw .invalidWAVFile(reason: "\(path): \(reason)")
            case let .unsupportedWAVFormat(reason): throw .unsupportedWAVFormat(reason: "\(path): \(reason)")
            default: throw error
            }
        }
    }

    /// Decodes a whole WAV file held in memory and converts it to mono 16-bit samples.
    ///
    /// Chunks other than "fmt " and "data" are skipped (odd-sized chunks are padded, as RIFF
    /// requires). Integer samples of several channels are averaged with rounding; float samples
    /// are averaged, scaled by 32 768, rounded and clamped to the Int16 range. A trailing partial
    /// sample frame is ignored.
    /// - Returns: the samples and the file's sample rate in hertz.
    public static func decode(_ bytes: [UInt8]) throws(AudioDeviceError) -> (samples: [Int16], sampleRateHertz: Int) {
        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WAVE".utf8)
        else { throw .invalidWAVFile(reason: "not a RIFF WAVE file") }

        var format: FormatChunk?
        var dataRange: Range<Int>?
        var offset = 12
        while offset + 8 <= bytes.count {
            let chunkID = bytes[offset..<offset + 4]
            let chunkSize = Int(loadUInt32(bytes, offset + 4))
            let bodyStart = offset + 8
            guard chunkSize <= bytes.count - bodyStart else {
                throw .invalidWAVFile(
                    reason: "truncated: chunk \"\(String(decoding: chunkID, as: UTF8.self))\" declares \(chunkSize) bytes, "
                        + "\(bytes.count - bodyStart) remain")
            }
            if chunkID.elementsEqual("fmt ".utf8) {
                format = try parseFormat(bytes, bodyStart, chunkSize)
            } else if chunkID.elementsEqual("data".utf8) {
                dataRange = bodyStart..<bodyStart + chunkSize
                if format != nil { break }
            }
            offset = bodyStart + chunkSize + (chunkSize & 1)
        }
        guard let format else { throw .invalidWAVFile(reason: "no \"fmt \" chunk") }
        guard let dataRange else { throw .invalidWAVFile(reason: "no \"data\" chunk") }

        let frameCount = dataRange.count / format.blockAlignBytes
        let channels = format.channelCount
        var samples = [Int16](repeating: 0, count: frameCount)
        bytes.withUnsafeBytes { raw in
            samples.withUnsafeMutableBufferPointer { out in
                var position = dataRange.lowerBound
                switch format.encoding {
                case .pcm16:
                    for frame in 0..<frameCount {
                        var sum = 0
                        for channel in 0..<channels {
                            sum += Int(Int16(bitPattern: UInt16(littleEndian: raw.loadUnaligned(
                                fromByteOffset: position + 2 * channel, as: UInt16.self))))
                        }
                        out[frame] = channels == 1 ? Int16(sum) : Int16(roundedQuotient(sum, channels))
                        position += format.blockAlignBytes
                    }
                case .float32:
                    for frame in 0..<frameCount {
                        var sum = 0.0
                        for channel in 0..<channels {
                            sum += Double(Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(
                                fromByteOffset: position + 4 * channel, as: UInt32.self))))
                        }
                        out[frame] = int16(fromUnit: sum / Double(channels))
                        position += format.blockAlignBytes
                    }
                }
            }
        }
        return (samples, format.sampleRateHertz)
    }

    // MARK: Writing

    /// Writes `samples` as a mono 16-bit PCM WAV file at `path` (created or truncated, mode 0644).
    public static func write(samples: [Int16], sampleRateHertz: Int, to path: String) throws(AudioDeviceError) {
        try POSIXFile.writeAll(encode(samples: samples, sampleRateHertz: sampleRateHertz), path: path)
    }

    /// Encodes `samples` as a complete mono 16-bit PCM WAV file.
    public static func encode(samples: [Int16], sampleRateHertz: Int) -> [UInt8] {
        var bytes = header(dataByteCount: samples.count * 2, sampleRateHertz: sampleRateHertz)
        bytes.reserveCapacity(bytes.count + samples.count * 2)
        for sample in samples {
            let bits = UInt16(bitPattern: sample)
            bytes.append(UInt8(truncatingIfNeeded: bits))
            bytes.append(UInt8(truncatingIfNeeded: bits >> 8))
        }
        return bytes
    }

    /// The canonical 44-byte header of a mono 16-bit PCM file whose data chunk holds
    /// `dataByteCount` bytes (sizes beyond the 32-bit fields are clamped).
    static func header(dataByteCount: Int, sampleRateHertz: Int) -> [UInt8] {
        let dataSize = UInt32(clamping: dataByteCount)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(canonicalHeaderByteCount)
        func append32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        func append16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
        bytes.append(contentsOf: "RIFF".utf8)
        append32(dataSize > UInt32.max - 36 ? UInt32.max : dataSize + 36)
        bytes.append(contentsOf: "WAVE".utf8)
        bytes.append(contentsOf: "fmt ".utf8)
        append32(16)
        append16(formatTagPCM)
        append16(1)  // channels
        append32(UInt32(clamping: sampleRateHertz))
        append32(UInt32(clamping: sampleRateHertz * 2))  // byte rate
        append16(2)  // block align, bytes
        append16(16)  // bits per sample
        bytes.append(contentsOf: "data".utf8)
        append32(dataSize)
        return bytes
    }

    /// Byte offsets, in the canonical header, of the RIFF chunk size and of the data chunk size.
    static let riffSizeOffset = 4
    static let dataSizeOffset = 40

    // MARK: Internals

    private enum SampleEncoding { case pcm16, float32 }

    private struct FormatChunk {
        var encoding: SampleEncoding
        var channelCount: Int
        var sampleRateHertz: Int
        var blockAlignBytes: Int
    }

    private static func parseFormat(_ bytes: [UInt8], _ start: Int, _ size: Int) throws(AudioDeviceError) -> FormatChunk {
        guard size >= 16 else { throw .invalidWAVFile(reason: "\"fmt \" chunk of \(size) bytes is too short") }
        var tag = loadUInt16(bytes, start)
        let channels = Int(loadUInt16(bytes, start + 2))
        let rate = Int(loadUInt32(bytes, start + 4))
        let blockAlign = Int(loadUInt16(bytes, start + 12))
        let bits = Int(loadUInt16(bytes, start + 14))
        if tag == formatTagExtensible {
            // cbSize(2) validBits(2) channelMask(4) subformat GUID(16) follow the 16 basic bytes.
            guard size >= 40 else {
                throw .invalidWAVFile(reason: "WAVE_FORMAT_EXTENSIBLE \"fmt \" chunk of \(size) bytes is too short")
            }
            let guid = bytes[start + 24..<start + 40]
            guard guid.dropFirst(2).elementsEqual(extensibleSubformatGUIDTail) else {
                throw .unsupportedWAVFormat(reason: "unknown WAVE_FORMAT_EXTENSIBLE subformat")
            }
            tag = loadUInt16(bytes, start + 24)
        }
        guard channels >= 1 else { throw .invalidWAVFile(reason: "zero channels") }
        guard rate >= 1 else { throw .invalidWAVFile(reason: "zero sample rate") }
        let encoding: SampleEncoding
        switch (tag, bits) {
        case (formatTagPCM, 16): encoding = .pcm16
        case (formatTagIEEEFloat, 32): encoding = .float32
        case (formatTagPCM, _):
            throw .unsupportedWAVFormat(reason: "\(bits)-bit integer PCM (only 16-bit PCM and 32-bit float are read)")
        case (formatTagIEEEFloat, _):
            throw .unsupportedWAVFormat(reason: "\(bits)-bit float (only 16-bit PCM and 32-bit float are read)")
        default:
            throw .unsupportedWAVFormat(
                reason: "format tag 0x\(String(tag, radix: 16)) (only 16-bit PCM and 32-bit float are read)")
        }
        guard blockAlign == channels * bits / 8 else {
            throw .invalidWAVFile(reason: "block align of \(blockAlign) bytes for \(channels) channels of \(bits) bits")
        }
        return FormatChunk(encoding: encoding, channelCount: channels, sampleRateHertz: rate, blockAlignBytes: blockAlign)
    }

    private static func loadUInt16(_ bytes: [UInt8], _ offset: Int) -> UInt16 {
        UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    private static func loadUInt32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
            | UInt32(bytes[offset + 3]) << 24
    }

    /// `numerator / denominator` rounded half away from zero.
    private static func roundedQuotient(_ numerator: Int, _ denominator: Int) -> Int {
        numerator >= 0
            ? (numerator + denominator / 2) / denominator
            : -((-numerator + denominator / 2) / denominator)
    }

    /// A sample in [-1, 1) of full scale to Int16 (× 32 768, rounded, clamped; NaN becomes 0).
    static func int16(fromUnit value: Double) -> Int16 {
        guard !value.isNaN else { return 0 }
        let scaled = (value * 32_768).rounded()
        return Int16(max(-32_768, min(32_767, scaled)))
    }
}
