import Glibc
import TetherAudio
import TetherRealtime

/// A fresh directory under /tmp for one test's files, removed with its contents by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/tether-audio-tests-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    func remove() {
        if let directory = opendir(path) {
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
                if name != "." && name != ".." { unlink(file(name)) }
            }
            closedir(directory)
        }
        rmdir(path)
    }
}

/// Deadline `seconds` from now, in monotonic nanoseconds.
func deadline(afterSeconds seconds: Double) -> UInt64 {
    MonotonicClock.nanoseconds() + UInt64(seconds * 1e9)
}

extension EventCount {
    /// Waits for the next signal (one sent after this call), or until the deadline.
    func waitForNextSignal(untilMonotonicNanoseconds deadline: UInt64) -> Bool {
        wait(prepareToWait(), untilMonotonicNanoseconds: deadline)
    }
}

/// Waits until the endpoint's wake-up has been signalled `count` times or `timeoutSeconds` pass.
/// - Returns: `true` when all signals arrived in time.
func waitForSignals(_ endpoint: AudioEndpoint, count: Int, timeoutSeconds: Double = 10) -> Bool {
    let limit = deadline(afterSeconds: timeoutSeconds)
    for _ in 0..<count where !endpoint.wakeup.waitForNextSignal(untilMonotonicNanoseconds: limit) {
        return false
    }
    return true
}

/// What a media-loop-like consumer took from a capture ring.
struct CapturedAudio {
    var samples: [Int16] = []
    var frames = 0
    var elapsedSeconds = 0.0
}

/// Consumes whole frames from a capture endpoint as the media loop would (waiting on the
/// wake-up, then draining the ring) until `frameLimit` frames arrived or `seconds` passed.
func captureFrames(from endpoint: AudioEndpoint, seconds: Double, frameLimit: Int = .max) -> CapturedAudio {
    var captured = CapturedAudio()
    var frame = [Int16](repeating: 0, count: endpoint.format.samplesPerFrame)
    let started = MonotonicClock.nanoseconds()
    let end = started + UInt64(seconds * 1e9)
    var ticket = endpoint.wakeup.prepareToWait()
    while captured.frames < frameLimit && MonotonicClock.nanoseconds() < end {
        endpoint.wakeup.wait(ticket, untilMonotonicNanoseconds: end)
        ticket = endpoint.wakeup.prepareToWait()
        while captured.frames < frameLimit,
            frame.withUnsafeMutableBufferPointer({ endpoint.ring.readAll(into: $0) })
        {
            captured.samples += frame
            captured.frames += 1
        }
    }
    captured.elapsedSeconds = Double(MonotonicClock.nanoseconds() - started) / 1e9
    return captured
}

/// Writes `samples` into the ring (all or nothing).
@discardableResult
func push(_ samples: [Int16], into ring: SPSCRing<Int16>) -> Bool {
    samples.withUnsafeBufferPointer { ring.writeAll($0) }
}

/// An ideal sine: `round(amplitude × sin(2π f n / rate))` for n in `range`.
func sine(frequencyHertz: Double, amplitude: Double, sampleRateHertz: Int, range: Range<Int>) -> [Int16] {
    range.map { n in
        Int16((amplitude * sin(2 * Double.pi * frequencyHertz * Double(n) / Double(sampleRateHertz))).rounded())
    }
}

/// Deterministic pseudo-random samples (a linear congruential generator), peak about `amplitude`.
func noise(count: Int, amplitude: Int16 = 8_000, seed: UInt64 = 0x2545F4914F6CDD1D) -> [Int16] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let unit = Double(Int64(bitPattern: state) >> 11) / Double(1 << 52)  // in [-1, 1)
        return Int16(unit * Double(amplitude))
    }
}

/// Builds a WAV file by hand (independently of `WAVFile`), for decoder tests.
enum WAVBuilder {
    enum Encoding {
        case pcm16([[Int16]])  // per sample frame, one value per channel
        case float32([[Float]])
        case custom(formatTag: UInt16, bitsPerSample: Int, channels: Int, payload: [UInt8])
    }

    static func build(
        _ encoding: Encoding, sampleRateHertz: Int = 48_000, extensible: Bool = false,
        extraChunksBeforeData: [(id: String, body: [UInt8])] = []
    ) -> [UInt8] {
        var tag: UInt16
        var bits: Int
        var channels: Int
        var payload: [UInt8] = []
        switch encoding {
        case let .pcm16(frames):
            (tag, bits, channels) = (1, 16, frames.first?.count ?? 1)
            for frame in frames { for value in frame { append16(&payload, UInt16(bitPattern: value)) } }
        case let .float32(frames):
            (tag, bits, channels) = (3, 32, frames.first?.count ?? 1)
            for frame in frames { for value in frame { append32(&payload, value.bitPattern) } }
        case let .custom(formatTag, bitsPerSample, channelCount, bytes):
            (tag, bits, channels, payload) = (formatTag, bitsPerSample, channelCount, bytes)
        }
        var fmt: [UInt8] = []
        append16(&fmt, extensible ? 0xFFFE : tag)
        append16(&fmt, UInt16(channels))
        append32(&fmt, UInt32(sampleRateHertz))
        append32(&fmt, UInt32(sampleRateHertz * channels * bits / 8))
        append16(&fmt, UInt16(channels * bits / 8))
        append16(&fmt, UInt16(bits))
        if extensible {
            append16(&fmt, 22)  // cbSize
            append16(&fmt, UInt16(bits))  // valid bits
            append32(&fmt, channels == 2 ? 0x3 : 0x4)  // channel mask
            append16(&fmt, tag)
            fmt += [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]
        }
        var body: [UInt8] = Array("WAVE".utf8)
        appendChunk(&body, "fmt ", fmt)
        for chunk in extraChunksBeforeData { appendChunk(&body, chunk.id, chunk.body) }
        appendChunk(&body, "data", payload)
        var file: [UInt8] = Array("RIFF".utf8)
        append32(&file, UInt32(body.count))
        return file + body
    }

    static func appendChunk(_ bytes: inout [UInt8], _ id: String, _ body: [UInt8]) {
        bytes += Array(id.utf8)
        append32(&bytes, UInt32(body.count))
        bytes += body
        if body.count % 2 == 1 { bytes.append(0) }
    }

    static func append16(_ bytes: inout [UInt8], _ value: UInt16) {
        bytes += [UInt8(value & 0xFF), UInt8(value >> 8)]
    }

    static func append32(_ bytes: inout [UInt8], _ value: UInt32) {
        bytes += [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF), UInt8(value >> 24)]
    }
}

/// Reads a whole file's bytes (test side, independent of the module's reader).
func fileBytes(_ path: String) -> [UInt8]? {
    guard let handle = fopen(path, "rb") else { return nil }
    defer { fclose(handle) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = fread(&chunk, 1, chunk.count, handle)
        if n == 0 { break }
        bytes += chunk[0..<n]
    }
    return bytes
}

/// Writes bytes to a file (test side).
func writeFile(_ path: String, _ bytes: [UInt8]) {
    let handle = fopen(path, "wb")!
    _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, handle) }
    fclose(handle)
}
