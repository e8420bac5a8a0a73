import Testing
import TetherRTP

/// Runs a sender frame by frame from `timestamp` (20 ms frames at 48 kHz) and returns what each
/// frame carried (nil: the audio frame).
private func frames(_ sender: inout DTMFSender, from timestamp: UInt32, count: Int, step: UInt32 = 960) -> [TelephoneEventPacket?] {
    var ts = timestamp
    var out: [TelephoneEventPacket?] = []
    for _ in 0..<count {
        out.append(sender.nextFrame(streamTimestamp: ts))
        ts &+= step
    }
    return out
}

@Suite("DTMF (RFC 4733)")
struct DTMFTests {
    @Test func digitsMapToEventCodesAndBack() {
        let keys = Array("0123456789*#ABCD")
        for (code, key) in keys.enumerated() {
            #expect(DTMFDigit(key)?.event == UInt8(code))
            #expect(DTMFDigit(event: UInt8(code))?.character == key)
        }
        #expect(DTMFDigit("a")?.event == 12)
        #expect(DTMFDigit("E") == nil)
        #expect(DTMFDigit(",") == nil)
        #expect(DTMFDigit(event: 16) == nil)
    }

    @Test func payloadRoundTrips() {
        let p = TelephoneEventPayload(event: 11, isEnd: true, volume: 10, duration: 0xABCD)
        var bytes = [UInt8](repeating: 0, count: 4)
        bytes.withUnsafeMutableBytes { p.write(to: $0) }
        #expect(bytes == [11, 0x8A, 0xAB, 0xCD])
        #expect(bytes.withUnsafeBytes { TelephoneEventPayload(parsing: $0) } == p)
        #expect([UInt8](repeating: 0, count: 3).withUnsafeBytes { TelephoneEventPayload(parsing: $0) } == nil)
    }

    /// 100 ms at 48 kHz with 20 ms frames: five updates, the first with the marker, the fifth
    /// ending, then that end packet twice more; all on the first frame's timestamp; audio frames
    /// resume after the end packets, and the next digit waits for the gap.
    @Test func oneDigitIsUpdatesThenThreeEndPacketsOnOneTimestamp() throws {
        var sender = DTMFSender(eventClockRateHz: 48_000, frameMilliseconds: 20)
        let readyAtFirst = sender.isReady(at: 1000)
        #expect(readyAtFirst)
        sender.start(DTMFTone(digit: try #require(DTMFDigit("5")), durationMilliseconds: 100, gapMilliseconds: 70))
        let events = frames(&sender, from: 1000, count: 7).map { try! #require($0) }
        #expect(events.map(\.timestamp) == Array(repeating: 1000, count: 7))
        #expect(events.map(\.marker) == [true, false, false, false, false, false, false])
        #expect(events.map(\.payload.duration) == [960, 1920, 2880, 3840, 4800, 4800, 4800])
        #expect(events.map(\.payload.isEnd) == [false, false, false, false, true, true, true])
        #expect(events.allSatisfy { $0.payload.event == 5 && $0.payload.volume == 10 })
        // Tone 100 ms + gap 70 ms from 1000: the next digit may start at 1000 + 8160.
        let instants: [UInt32] = [7960, 9159, 9160]
        let readiness = instants.map { sender.isReady(at: $0) }
        #expect(readiness == [false, false, true])
        // Audio frames between digits.
        let afterwards = frames(&sender, from: 7960, count: 3)
        #expect(afterwards.allSatisfy { $0 == nil })
    }

    @Test func telephoneEventAt8000CountsDurationsInItsOwnTicks() throws {
        var sender = DTMFSender(eventClockRateHz: 8000, frameMilliseconds: 20)
        sender.start(DTMFTone(digit: try #require(DTMFDigit("#")), durationMilliseconds: 60, gapMilliseconds: 40))
        let events = frames(&sender, from: 5, count: 5).map { try! #require($0) }
        #expect(events.map(\.payload.duration) == [160, 320, 480, 480, 480])
        #expect(events.map(\.timestamp) == Array(repeating: 5, count: 5))
        #expect(events.map(\.payload.event) == Array(repeating: 11, count: 5))
    }

    /// The event's timestamp stays fixed across the 32-bit wrap of the audio timestamps, and the
    /// gap is measured across it too.
    @Test func timestampWrapKeepsTheEventTimestampAndTheGap() throws {
        var sender = DTMFSender(eventClockRateHz: 48_000, frameMilliseconds: 20)
        let start = UInt32.max - 1500
        sender.start(DTMFTone(digit: try #require(DTMFDigit("1")), durationMilliseconds: 60, gapMilliseconds: 50))
        let events = frames(&sender, from: start, count: 5).map { try! #require($0) }
        #expect(events.allSatisfy { $0.timestamp == start })
        #expect(events.map(\.payload.duration) == [960, 1920, 2880, 2880, 2880])
        let readiness = [start &+ 5 * 960, start &+ 2880 + 2400].map { sender.isReady(at: $0) }
        #expect(readiness == [false, true])
    }

    /// 3 s at 48 kHz is 144000 ticks: three segments (65535, 65535, 12930). Each segment's
    /// timestamp is the previous one plus 65535; only the first packet has the marker, only
    /// the last segment the end bit; no duration exceeds 0xFFFF.
    @Test func longDigitIsSplitIntoSegments() throws {
        var sender = DTMFSender(eventClockRateHz: 48_000, frameMilliseconds: 20)
        sender.start(DTMFTone(digit: try #require(DTMFDigit("0")), durationMilliseconds: 3000, gapMilliseconds: 50))
        let start: UInt32 = 0xFFFF_0000  // the segments cross the timestamp wrap too
        let sent = frames(&sender, from: start, count: 160)
        let events = sent.compactMap { $0 }
        #expect(events.count == 150 + 2)  // one packet per frame of tone (two of them close a segment), 2 end repeats
        #expect(events.filter(\.marker).count == 1 && events[0].marker)
        let timestamps = Array(Set(events.map(\.timestamp))).sorted { Int32(bitPattern: $0 &- $1) < 0 }
        #expect(timestamps == [start, start &+ 65535, start &+ 131_070])
        #expect(events.allSatisfy { $0.payload.duration <= 0xFFFF })
        let closes = events.filter { $0.payload.duration == 0xFFFF }
        #expect(closes.count == 2 && closes.allSatisfy { !$0.payload.isEnd })
        #expect(closes.map(\.timestamp) == [start, start &+ 65535])
        let ends = events.filter(\.payload.isEnd)
        #expect(ends.count == 3)
        #expect(ends.allSatisfy { $0.timestamp == start &+ 131_070 && $0.payload.duration == 12_930 })
        // Durations grow within each segment.
        for ts in timestamps {
            let d = events.filter { $0.timestamp == ts && !$0.payload.isEnd }.map(\.payload.duration)
            #expect(d == d.sorted())
        }
        // The receiver puts the segments back together into one 3 s digit.
        var receiver = DTMFReceiver(eventClockRateHz: 48_000)
        var got: [DTMFReceived] = []
        for (i, e) in events.enumerated() {
            receiver.receive(e.payload, timestamp: e.timestamp, now: UInt64(i) * 20_000_000)
            while let r = receiver.takeReceived() { got.append(r) }
        }
        #expect(got == [DTMFReceived(digit: try #require(DTMFDigit("0")), durationMilliseconds: 3000, endSeen: true)])
    }

    @Test func cancelStopsAToneAtOnce() throws {
        var sender = DTMFSender(eventClockRateHz: 48_000, frameMilliseconds: 20)
        sender.start(DTMFTone(digit: try #require(DTMFDigit("9")), durationMilliseconds: 200, gapMilliseconds: 50))
        let first = sender.nextFrame(streamTimestamp: 0)
        #expect(first != nil)
        sender.cancel()
        #expect(sender.isIdle)
        let after = sender.nextFrame(streamTimestamp: 960)
        #expect(after == nil)
    }

    // MARK: Receiver

    /// Sends digits through the sender and delivers every packet through `deliver`, which may
    /// drop, duplicate or reorder; returns the digits the receiver reported.
    private func roundTrip(
        _ digits: String, eventRate: UInt32 = 48_000, deliver: ([TelephoneEventPacket]) -> [TelephoneEventPacket]
    ) throws -> [DTMFReceived] {
        var sender = DTMFSender(eventClockRateHz: eventRate, frameMilliseconds: 20)
        var queue = Array(digits)
        var packets: [TelephoneEventPacket] = []
        var ts: UInt32 = 123_456
        for _ in 0..<400 {
            if sender.isReady(at: ts), !queue.isEmpty {
                sender.start(DTMFTone(digit: try #require(DTMFDigit(queue.removeFirst())), durationMilliseconds: 100, gapMilliseconds: 60))
            }
            if let p = sender.nextFrame(streamTimestamp: ts) { packets.append(p) }
            ts &+= 960
        }
        var receiver = DTMFReceiver(eventClockRateHz: eventRate)
        var got: [DTMFReceived] = []
        var now: UInt64 = 0
        for p in deliver(packets) {
            now += 20_000_000
            receiver.receive(p.payload, timestamp: p.timestamp, now: now)
            while let r = receiver.takeReceived() { got.append(r) }
        }
        receiver.expire(now: now + 1_000_000_000)
        while let r = receiver.takeReceived() { got.append(r) }
        return got
    }

    @Test func eachDigitIsReportedOnceWithItsDuration() throws {
        let got = try roundTrip("0123456789*#ABCD") { $0 }
        #expect(String(got.map(\.digit.character)) == "0123456789*#ABCD")
        #expect(got.allSatisfy { $0.durationMilliseconds == 100 && $0.endSeen })
    }

    @Test func duplicatedAndRepeatedEndPacketsCollapse() throws {
        let got = try roundTrip("12") { packets in packets.flatMap { [$0, $0] } }
        #expect(got.map(\.digit.character) == ["1", "2"])
    }

    @Test func aDigitWhoseEndPacketsAreAllLostIsReportedWhenTheNextBegins() throws {
        let got = try roundTrip("47") { packets in packets.filter { !($0.payload.event == 4 && $0.payload.isEnd) } }
        #expect(got.map(\.digit.character) == ["4", "7"])
        #expect(got[0].endSeen == false && got[0].durationMilliseconds == 80)
        #expect(got[1].endSeen)
    }

    @Test func theLastDigitWithoutEndIsReportedAfterTheTimeout() throws {
        var receiver = DTMFReceiver(eventClockRateHz: 8000, timeoutNanoseconds: 500_000_000)
        receiver.receive(TelephoneEventPayload(event: 3, isEnd: false, duration: 160), timestamp: 10, now: 1_000_000_000)
        receiver.receive(TelephoneEventPayload(event: 3, isEnd: false, duration: 320), timestamp: 10, now: 1_020_000_000)
        receiver.expire(now: 1_500_000_000)
        let early = receiver.takeReceived()
        #expect(early == nil)
        receiver.expire(now: 1_520_000_000)
        let expired = receiver.takeReceived()
        #expect(expired == DTMFReceived(digit: try #require(DTMFDigit("3")), durationMilliseconds: 40, endSeen: false))
        // A late update of the reported digit is dropped.
        receiver.receive(TelephoneEventPayload(event: 3, isEnd: true, duration: 480), timestamp: 10, now: 1_600_000_000)
        let late = receiver.takeReceived()
        #expect(late == nil)
    }

    /// 30 % loss, a fixed pattern: every digit still arrives once, in order.
    @Test func lossyPathStillDeliversEveryDigitOnce() throws {
        var rng = SeededGenerator(seed: 7)
        let got = try roundTrip("159#D0") { packets in
            packets.filter { _ in rng.next() % 10 >= 3 }
        }
        #expect(String(got.map(\.digit.character)) == "159#D0")
    }

    @Test func reorderedPacketsOfAReportedDigitAreDropped() throws {
        let got = try roundTrip("66") { packets in
            // The first digit's second update arrives after the second digit's first packet.
            var p = packets
            let late = p.remove(at: 1)
            let secondStart = p.firstIndex { $0.marker && $0.timestamp != packets[0].timestamp }!
            p.insert(late, at: secondStart + 1)
            return p
        }
        #expect(got.map(\.digit.character) == ["6", "6"])
    }

    @Test func nonDTMFEventsAreIgnored() {
        var receiver = DTMFReceiver(eventClockRateHz: 8000)
        receiver.receive(TelephoneEventPayload(event: 16, isEnd: true, duration: 800), timestamp: 1, now: 0)
        let got = receiver.takeReceived()
        #expect(got == nil)
    }

    // MARK: Length cap

    /// A peer that never ends one event: segment after segment (timestamp one maximum segment
    /// on each time, updates 1 ms apart, no end bit). 70,000 segments are past the 65,536 that
    /// overflowed a 32-bit tick count; the digit is reported once, at the cap, as capped, and
    /// the rest (its end packets too) is ignored; the next digit is reported as usual.
    @Test(arguments: [UInt32(8000), 48_000])
    func anEventThatNeverEndsIsReportedOnceAtTheCap(eventRate: UInt32) throws {
        var receiver = DTMFReceiver(eventClockRateHz: eventRate)
        let segmentTicks = DTMFSender.maximumSegmentDuration * (48_000 / eventRate)
        var timestamp: UInt32 = 0xFFF0_0000
        var now: UInt64 = 1_000_000_000
        var got: [DTMFReceived] = []
        for _ in 0..<70_000 {
            receiver.receive(TelephoneEventPayload(event: 5, isEnd: false, duration: 0xFFFF), timestamp: timestamp, now: now)
            while let r = receiver.takeReceived() { got.append(r) }
            timestamp &+= segmentTicks
            now += 1_000_000
        }
        receiver.receive(TelephoneEventPayload(event: 5, isEnd: true, duration: 100), timestamp: timestamp, now: now)
        receiver.expire(now: now + 1_000_000_000)
        while let r = receiver.takeReceived() { got.append(r) }
        let five = try #require(DTMFDigit("5"))
        #expect(got == [DTMFReceived(digit: five, durationMilliseconds: DTMFReceiver.maximumEventMilliseconds, endSeen: false, lengthCapped: true)])
        // The next digit, 200 ms after, is its own.
        timestamp &+= 9600
        receiver.receive(TelephoneEventPayload(event: 1, isEnd: true, duration: eventRate == 8000 ? 800 : 4800), timestamp: timestamp, now: now + 2_000_000_000)
        #expect(receiver.takeReceived() == DTMFReceived(digit: try #require(DTMFDigit("1")), durationMilliseconds: 100, endSeen: true))
    }

    /// A key held for 20 s, sent by our own sender: one digit of 20 s, not capped.
    @Test func aKeyHeldTwentySecondsIsOneDigitOfTwentySeconds() throws {
        var sender = DTMFSender(eventClockRateHz: 48_000, frameMilliseconds: 20)
        sender.start(DTMFTone(digit: try #require(DTMFDigit("#")), durationMilliseconds: 20_000, gapMilliseconds: 50))
        var receiver = DTMFReceiver(eventClockRateHz: 48_000)
        var got: [DTMFReceived] = []
        var ts: UInt32 = 0x7FFF_0000
        for frame in 0..<1_100 {
            if let p = sender.nextFrame(streamTimestamp: ts) {
                receiver.receive(p.payload, timestamp: p.timestamp, now: UInt64(frame) * 20_000_000)
                while let r = receiver.takeReceived() { got.append(r) }
            }
            ts &+= 960
        }
        #expect(got == [DTMFReceived(digit: try #require(DTMFDigit("#")), durationMilliseconds: 20_000, endSeen: true)])
    }

    /// The tone a peer's single packet claims can already pass the cap at a slow event clock
    /// (65,535 ticks at 1 kHz is 65 s): reported at once, capped.
    @Test func oneSegmentLongerThanTheCapIsCappedAtOnce() throws {
        var receiver = DTMFReceiver(eventClockRateHz: 1000)
        receiver.receive(TelephoneEventPayload(event: 0, isEnd: false, duration: 0xFFFF), timestamp: 77, now: 0)
        #expect(receiver.takeReceived()?.lengthCapped == true)
        receiver.receive(TelephoneEventPayload(event: 0, isEnd: true, duration: 0xFFFF), timestamp: 77, now: 1)
        #expect(receiver.takeReceived() == nil)
    }
}
