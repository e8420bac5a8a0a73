/// A DTMF key, RFC 4733 §3.2: events 0–15 are `0`–`9`, `*`, `#` and `A`–`D`.
public struct DTMFDigit: Sendable, Hashable, CustomStringConvertible {
    /// The RFC 4733 event code, 0…15.
    public let event: UInt8

    /// The digit for an event code, or nil outside 0…15 (flash, modem tones …).
    public init?(event: UInt8) {
        guard event <= 15 else { return nil }
        self.event = event
    }

    /// The digit for a key: `0`–`9`, `*`, `#`, `A`–`D` (lower case accepted), or nil.
    public init?(_ character: Character) {
        switch character {
        case "0"..."9": event = UInt8(character.asciiValue! - 48)
        case "*": event = 10
        case "#": event = 11
        case "A"..."D": event = UInt8(character.asciiValue! - 65 + 12)
        case "a"..."d": event = UInt8(character.asciiValue! - 97 + 12)
        default: return nil
        }
    }

    /// The key as a character: `0`–`9`, `*`, `#`, `A`–`D`.
    public var character: Character {
        switch event {
        case 0...9: Character(Unicode.Scalar(48 + event))
        case 10: "*"
        case 11: "#"
        default: Character(Unicode.Scalar(65 + event - 12))
        }
    }

    public var description: String { String(character) }
}

/// The four-byte payload of an RFC 4733 telephone-event packet (§2.3).
///
/// ```
///  0                   1                   2                   3
///  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
/// |     event     |E|R| volume    |          duration             |
/// ```
public struct TelephoneEventPayload: Sendable, Equatable {
    /// The payload's length in bytes.
    public static let length = 4

    /// Event code (0–15 for DTMF).
    public var event: UInt8
    /// The end bit: the event has ended; `duration` is final.
    public var isEnd: Bool
    /// Power level in −dBm0, 0…63 (RFC 4733 §2.3.4; 10 is customary for DTMF).
    public var volume: UInt8
    /// Duration so far, in units of the telephone-event clock, from the packet's RTP timestamp.
    public var duration: UInt16

    public init(event: UInt8, isEnd: Bool, volume: UInt8 = 10, duration: UInt16) {
        self.event = event
        self.isEnd = isEnd
        self.volume = volume & 0x3F
        self.duration = duration
    }

    /// Parses the first four bytes of an RTP payload (extra bytes, such as further events of a
    /// redundant block, are ignored); nil when shorter.
    public init?(parsing payload: UnsafeRawBufferPointer) {
        guard payload.count >= Self.length else { return nil }
        event = payload[0]
        isEnd = payload[1] & 0x80 != 0
        volume = payload[1] & 0x3F
        duration = UInt16(payload[2]) << 8 | UInt16(payload[3])
    }

    /// Writes the payload's four bytes at the start of `buffer` (at least four bytes long).
    public func write(to buffer: UnsafeMutableRawBufferPointer) {
        precondition(buffer.count >= Self.length)
        buffer[0] = event
        buffer[1] = (isEnd ? 0x80 : 0) | (volume & 0x3F)
        buffer[2] = UInt8(truncatingIfNeeded: duration >> 8)
        buffer[3] = UInt8(truncatingIfNeeded: duration)
    }
}
