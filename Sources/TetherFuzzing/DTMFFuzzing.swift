import TetherRTP

/// The DTMF receiver fed what a peer controls: telephone-event packets with any event, end bit,
/// duration and timestamp step, arrival gaps and time-outs, including long runs of one event's
/// segments (a seeded generator, so an input of a few bytes can carry an event over 100,000
/// segments — what overflowed its tick count).
///
/// The first byte chooses the event clock (8 or 48 kHz); the rest is a program of operations.
/// Invariants: at most two digits a packet, durations within the cap, no trap.
enum DTMFFuzzing {
    static func run(_ input: UnsafeRawBufferPointer) {
        var reader = ByteReader(input)
        let rate: UInt32 = reader.byte() & 1 == 0 ? 8000 : 48_000
        let segment = DTMFSender.maximumSegmentDuration * (48_000 / rate)
        var receiver = DTMFReceiver(eventClockRateHz: rate)
        var now: UInt64 = 1_000_000_000
        var timestamp = reader.uint32()
        var packets = 0
        var digits = 0

        func deliver(_ payload: TelephoneEventPayload) {
            receiver.receive(payload, timestamp: timestamp, now: now)
            packets += 1
            var taken = 0
            while let digit = receiver.takeReceived() {
                taken += 1
                check(digit)
            }
            digits += taken
            fuzzInvariant(taken <= 2, "\(taken) digits from one packet")
        }

        while !reader.isAtEnd {
            let tag = reader.byte()
            switch tag & 0x3 {
            case 0:
                // One packet: the timestamp stays, moves one segment on, or anywhere.
                switch tag >> 2 & 0x3 {
                case 0: break
                case 1: timestamp &+= segment
                case 2: timestamp &+= UInt32(reader.uint16())
                default: timestamp = reader.uint32()
                }
                now &+= UInt64(reader.byte()) * 1_000_000
                deliver(TelephoneEventPayload(event: reader.byte() & 0x1F, isEnd: tag & 0x10 != 0, duration: reader.uint16()))
            case 1:
                // A long event: `count` × 256 segments of one event, updates 1–4 ms apart.
                let event = reader.byte() & 0x0F
                let count = Int(reader.byte()) * 256 + 1
                let step = UInt64(tag >> 2 & 0x3) + 1
                for _ in 0..<count {
                    now &+= step * 1_000_000
                    deliver(TelephoneEventPayload(event: event, isEnd: false, duration: 0xFFFF))
                    timestamp &+= segment
                }
            case 2:
                now &+= UInt64(reader.uint16()) * 1_000_000
                receiver.expire(now: now)
                while let digit = receiver.takeReceived() {
                    digits += 1
                    check(digit)
                }
            default:
                if tag & 0x4 != 0 { receiver.reset() }
            }
        }
        fuzzInvariant(digits <= 2 * packets + 1, "\(digits) digits from \(packets) packets")
    }

    static func check(_ digit: DTMFReceived) {
        fuzzInvariant(
            digit.durationMilliseconds >= 0 && digit.durationMilliseconds <= DTMFReceiver.maximumEventMilliseconds,
            "a digit of \(digit.durationMilliseconds) ms")
        fuzzInvariant(!digit.lengthCapped || digit.durationMilliseconds == DTMFReceiver.maximumEventMilliseconds, "capped below the cap: \(digit)")
    }
}
