import CAllocationCounter
import Foundation
import Synchronization
import Testing
import TetherCore
import TetherCodec
import TetherICE
import TetherRTP
import TetherRealtime
import TetherTestSupport

@testable import Tether

/// The clock these tests run the media loops on, advanced by hand (20 ms a period): the loops'
/// passes and the arrival stamps of their datagrams read it, so what the jitter buffer plays out
/// does not depend on how fast the machine runs the periods.
private let manualNanoseconds = Atomic<UInt64>(1_000_000_000)
private let manualClock: MonotonicTimeSource = { manualNanoseconds.load(ordering: .acquiring) }
/// Moves the manual clock on (release: a datagram stamped after this sees the new instant).
private func advanceManualClock(byNanoseconds step: UInt64) -> UInt64 {
    manualNanoseconds.add(step, ordering: .releasing).newValue
}

/// Two ICE transports connected on loopback, for driving media loops by hand.
private struct ConnectedTransports {
    let a: ICETransport
    let b: ICETransport
    let ringA = PacketRing(slotCount: 256)
    let ringB = PacketRing(slotCount: 256)
    let wakeA: EventCount
    let wakeB: EventCount
    /// The keys A and B send with.
    let keyA = SRTPKeyMaterial.generate(for: .aesCM128HMACSHA1_80)
    let keyB = SRTPKeyMaterial.generate(for: .aesCM128HMACSHA1_80)

    /// - Parameter wakeup: what both transports signal for a received datagram (a media worker's);
    ///   by default each has its own.
    init(wakeup: EventCount? = nil) throws {
        wakeA = wakeup ?? EventCount()
        wakeB = wakeup ?? EventCount()
        let gathered = Mutex<[Int: [String]]>([:])
        let ready = Mutex<Set<Int>>([])
        let signal = Wakeup()
        func handler(_ side: Int) -> @Sendable (ICETransportEvent) -> Void {
            { event in
                switch event {
                case .gatheringDone(let c): gathered.withLock { $0[side] = c }
                case .componentStateChanged(.ready): _ = ready.withLock { $0.insert(side) }
                default: break
                }
                signal.signal()
            }
        }
        a = try ICETransport(
            configuration: .init(controlling: true, localAddresses: ["127.0.0.1"]), receiveRing: ringA, receiveWakeup: wakeA,
            arrivalClock: manualClock, eventHandler: handler(0))
        b = try ICETransport(
            configuration: .init(controlling: false, localAddresses: ["127.0.0.1"]), receiveRing: ringB, receiveWakeup: wakeB,
            arrivalClock: manualClock, eventHandler: handler(1))
        a.gatherCandidates()
        b.gatherCandidates()
        let deadline = MonotonicClock.nanoseconds() + 5_000_000_000
        while gathered.withLock({ $0.count }) < 2, signal.wait(untilMonotonicNanoseconds: deadline) {}
        let c = gathered.withLock { $0 }
        let ca = a.localCredentials()
        let cb = b.localCredentials()
        try a.setRemote(ufrag: cb.ufrag, password: cb.password, candidates: c[1] ?? [])
        try b.setRemote(ufrag: ca.ufrag, password: ca.password, candidates: c[0] ?? [])
        while ready.withLock({ $0.count }) < 2, signal.wait(untilMonotonicNanoseconds: deadline) {}
    }

    func close() {
        a.close()
        b.close()
    }
}

@Suite("Media hot path allocations", .keepsLogPerTest, .serialized)
struct MediaLoopAllocationTests {
    private func loop(
        transport: ICETransport, ring: PacketRing, worker: MediaWorker = MediaWorker(driven: true, clock: manualClock),
        send: SRTPKeyMaterial,
        receive: SRTPKeyMaterial, capture: SPSCRing<Int16>, playback: SPSCRing<Int16>, telephoneEvent: TelephoneEventFormat? = nil,
        voice: Bool = false, red: Bool = false, frameMilliseconds: Int = 20, peerCap: Int? = nil
    ) throws -> MediaLoop {
        var opus = OpusConfiguration()
        opus.frameDurationMilliseconds = frameMilliseconds
        var setup = MediaLoop.Setup(
                encoder: try OpusEncoder(configuration: opus), decoder: try OpusDecoder(),
                outbound: try SRTPContext(direction: .outbound, key: send), inbound: try SRTPContext(direction: .inbound, key: receive),
                transport: transport, receiveRing: ring, captureRing: capture, playbackRing: playback, worker: worker,
                payloadType: 111, cname: "alloc-test", jitterBufferTargetMilliseconds: 40, rtcpIntervalSeconds: 0.5,
                lossAdaptation: {
                    // RED at its deepest (four frames back, as on long loss runs).
                    var adaptation = LossAdaptation(
                        baseBitrateBitsPerSecond: 32_000, maximumBitrateBitsPerSecond: 64_000, peerAcceptsFEC: true,
                        initialExpectedLossPercent: 10, allowsRedundancy: red, alwaysRedundant: red)
                    adaptation.redundantFrameCount = LossAdaptation.maximumRedundantFrames
                    return adaptation
                }(),
                telephoneEvent: telephoneEvent, receivableTelephoneEvents: telephoneEvent.map { [$0] } ?? [],
                redundantAudio: red ? RedundantAudioFormat(payloadType: 63, blockPayloadType: 111) : nil,
                sendsLossRunLength: true, voiceProcessor: voice ? VoiceProcessor(settings: VoiceProcessingSettings()) : nil,
                notify: { _ in })
        // The rate control runs (its decisions change as reports and feedback come in): on
        // transport-cc feedback, as with Chromium or another Tether, except in the DTMF case, which
        // runs on receiver reports alone (baresip). The RED case holds the deepest RED at 20 ms
        // whatever the path, so it runs without (its allocation and its frames are what it counts).
        setup.rateControl = !red
        setup.transportWideSequenceID = telephoneEvent == nil ? 3 : nil
        setup.reducedSizeRTCP = telephoneEvent == nil
        if let cap = peerCap {
            // A peer that takes 120 ms packets and caps what we send: the longest packets.
            setup.maximumPacketMilliseconds = 120
            setup.peerBandwidthLimitBitsPerSecond = cap
        }
        return MediaLoop(setup)
    }

    /// Packets of 120 ms (a peer capping us at 20 kb/s, with `maxptime:120`) gathered from
    /// frames of 10 and 20 ms: twelve or six frames a packet fit the gathering buffer (it held
    /// three, and ten-millisecond frames in 40 or 60 ms packets wrote past its end — the address
    /// sanitizer's run of this test shows it), and the receiver decodes each packet into its
    /// frames: the tone comes through whole.
    @Test(arguments: [10, 20])
    func longPacketsOfShortFramesFitTheirBuffers(frameMilliseconds: Int) throws {
        let net = try ConnectedTransports()
        defer { net.close() }
        let (keyA, keyB) = (net.keyA, net.keyB)
        let captureA = SPSCRing<Int16>(capacity: 16384)
        let playbackB = SPSCRing<Int16>(capacity: 16384)
        let loopA = try loop(
            transport: net.a, ring: net.ringA, send: keyA, receive: keyB, capture: captureA, playback: SPSCRing<Int16>(capacity: 4096),
            frameMilliseconds: frameMilliseconds, peerCap: 20_000)
        let loopB = try loop(
            transport: net.b, ring: net.ringB, send: keyB, receive: keyA, capture: SPSCRing<Int16>(capacity: 16384), playback: playbackB,
            frameMilliseconds: frameMilliseconds, peerCap: 20_000)
        let samples = 48 * frameMilliseconds
        let frame = UnsafeMutableBufferPointer<Int16>.allocate(capacity: samples)
        defer { frame.deallocate() }
        let sink = UnsafeMutableBufferPointer<Int16>.allocate(capacity: samples)
        defer { sink.deallocate() }
        var phase = 0.0
        var played: [Double] = []
        let framesPerPacket = 120 / frameMilliseconds
        // Six seconds of a 440 Hz tone, one frame a period on the manual clock.
        for i in 0..<(6000 / frameMilliseconds) {
            for s in 0..<samples {
                frame[s] = Int16(8000 * sin(phase))
                phase += 2 * Double.pi * 440 / 48_000
            }
            _ = captureA.writeAll(UnsafeBufferPointer(frame))
            let now = advanceManualClock(byNanoseconds: UInt64(frameMilliseconds) * 1_000_000 - 1_000_000)
            loopA.processOnce(now: now)
            if i % framesPerPacket == framesPerPacket - 1 {
                // A packet left: wait for everything A has sent to come round through libnice (its
                // RTCP too: waiting for any one datagram let an early report stand for the media
                // packet still on its way, and B concealed a packet's worth of tone).
                let sent = net.a.directSendCount
                let deadline = MonotonicClock.nanoseconds() + 2_000_000_000
                while net.ringB.pushedCount < sent {
                    let ticket = net.wakeB.prepareToWait()
                    if net.ringB.pushedCount >= sent || !net.wakeB.wait(ticket, untilMonotonicNanoseconds: deadline) { break }
                }
            }
            loopB.processOnce(now: advanceManualClock(byNanoseconds: 1_000_000))
            // The device takes a frame a period.
            if playbackB.availableToRead >= samples {
                _ = playbackB.read(into: sink)
                played.append(sqrt(sink.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(samples)))
            }
        }
        loopA.publish()
        loopB.publish()
        let a = loopA.counters.read()
        let b = loopB.counters.read()
        // One packet per 120 ms, every one received and decoded into its frames.
        #expect(a.packetsSent >= 6000 / 120 - 2 && a.packetsSent <= 6000 / 120)
        #expect(b.packetsReceived == a.packetsSent && b.malformedPackets == 0)
        #expect(b.framesDecoded >= (a.packetsSent - 2) * framesPerPacket, "\(b.framesDecoded) frames from \(a.packetsSent) packets")
        // The last two seconds played are the tone throughout (RMS of a 8000-peak sine: 5657;
        // a frame of concealment or silence falls far under).
        let last = played.suffix(2000 / frameMilliseconds)
        #expect(last.count == 2000 / frameMilliseconds && last.allSatisfy { $0 > 3000 }, "\(last.map { Int($0) })")
    }

    /// Allocations libsrtp makes per protect and per unprotect (Debian's NSS build allocates).
    private func srtpAllocationsPerPacket(_ suite: SRTPCryptoSuite) throws -> (protect: Int, unprotect: Int) {
        let key = SRTPKeyMaterial.generate(for: suite)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1600, alignment: 16)
        defer { buffer.deallocate() }
        var protectCount = 0
        var unprotectCount = 0
        for seq in 0..<200 {
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            buffer[0] = 0x80
            buffer[1] = 111
            buffer[2] = UInt8(seq >> 8)
            buffer[3] = UInt8(seq & 0xff)
            CAllocationCounter_begin()
            let n = try tx.protectRTP(buffer, length: 12 + 100)
            let p = CAllocationCounter_end()
            CAllocationCounter_begin()
            _ = try rx.unprotectRTP(buffer, length: n)
            let u = CAllocationCounter_end()
            if seq >= 100 {
                protectCount += p
                unprotectCount += u
            }
        }
        return (protectCount / 100, unprotectCount / 100)
    }

    /// The same for one RTCP receiver report (28 bytes).
    private func srtcpAllocationsPerPacket(_ suite: SRTPCryptoSuite) throws -> (protect: Int, unprotect: Int) {
        let key = SRTPKeyMaterial.generate(for: suite)
        let tx = try SRTPContext(direction: .outbound, key: key)
        let rx = try SRTPContext(direction: .inbound, key: key)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1600, alignment: 16)
        defer { buffer.deallocate() }
        var protectCount = 0
        var unprotectCount = 0
        for round in 0..<40 {
            buffer.initializeMemory(as: UInt8.self, repeating: 0)
            buffer[0] = 0x81  // RR with one report block
            buffer[1] = 201
            buffer[3] = 7
            buffer[7] = 1
            CAllocationCounter_begin()
            let n = try tx.protectRTCP(buffer, length: 32)
            let p = CAllocationCounter_end()
            CAllocationCounter_begin()
            _ = try rx.unprotectRTCP(buffer, length: n)
            let u = CAllocationCounter_end()
            if round >= 20 {
                protectCount += p
                unprotectCount += u
            }
        }
        return (protectCount / 20, unprotectCount / 20)
    }

    /// With `voice`, both loops run voice processing (WebRTC's: echo cancellation against their
    /// playout, noise suppression, gain control, high-pass filter) on every frame.
    /// With `dtmf`, ten digits are sent during the counted periods: RFC 4733 events replace the
    /// audio frames (the sender, the queue hand-off), and B's receivers report the digits.
    /// With `red`, every packet is RFC 2198 RED carrying the two frames before it, and every tenth
    /// datagram is dropped before B reads it: B fills those frames from the next packet's copy.
    /// With `forged`, every period also carries a packet of A's key from a new SSRC (a peer
    /// inventing sources): B drops each one unread, before SRTP, which would keep a stream for it.
    @Test(
        .enabled(if: CAllocationCounter_isAvailable() == 1, "the sanitizers own malloc; counting runs in the plain build"),
        arguments: [(false, false, false, false), (true, false, false, false), (false, true, false, false), (false, false, true, false),
                    (false, false, false, true)])
    func sendAndReceivePathsAllocateNothingOfTheirOwn(dtmf: Bool, voice: Bool, red: Bool, forged: Bool) throws {
        let net = try ConnectedTransports()
        defer { net.close() }
        let (keyA, keyB) = (net.keyA, net.keyB)
        let captureA = SPSCRing<Int16>(capacity: 8192)
        let playbackA = SPSCRing<Int16>(capacity: 4096)
        let captureB = SPSCRing<Int16>(capacity: 8192)
        let playbackB = SPSCRing<Int16>(capacity: 4096)
        let events = dtmf ? TelephoneEventFormat(payloadType: 101, clockRateHz: 48_000) : nil
        let loopA = try loop(
            transport: net.a, ring: net.ringA, send: keyA, receive: keyB, capture: captureA, playback: playbackA, telephoneEvent: events,
            voice: voice, red: red)
        let loopB = try loop(
            transport: net.b, ring: net.ringB, send: keyB, receive: keyA, capture: captureB, playback: playbackB, telephoneEvent: events,
            voice: voice, red: red)
        var dropped = 0
        /// Five junk datagrams in the counted periods (100..<400), the last 1.4 s before their end.
        func injectsJunk(_ i: Int) -> Bool { i >= 100 && i < 340 && i % 50 == 27 }
        let junkDatagram: [UInt8] = [0x80, 0x6F, 0x00, 0x01, 0x00]
        // The forged packets, protected beforehand (the counted periods only send them).
        let forger = try SRTPContext(direction: .outbound, key: keyA)
        let forgedDatagrams: [[UInt8]] = forged ? try (0..<400).map { i in
            var packet = [UInt8](repeating: 0, count: 12 + 40 + SRTPContext.maximumRTPTrailerBytes)
            let header = RTPHeader(payloadType: 111, sequenceNumber: UInt16(i), timestamp: UInt32(i) * 960, ssrc: 0x5000_0000 + UInt32(i))
            let length = try packet.withUnsafeMutableBytes { raw in
                _ = header.write(to: raw)
                return try forger.protectRTP(raw, length: 52)
            }
            return Array(packet[0..<length])
        } : []
        let frame = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 960)
        defer { frame.deallocate() }
        let sink = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 960)
        defer { sink.deallocate() }
        var phase = 0.0

        /// One 20 ms period: A captures and sends a frame, B receives it, plays out a frame.
        /// Both loops, and the datagrams' arrival stamps, run on the manual clock, which advances
        /// 20 ms a period however fast the machine runs them: RTCP reports (every 0.25–0.75 s) are
        /// written and read during the counted periods, and B plays out one frame a period.
        func period(_ i: Int) {
            for s in 0..<960 {
                frame[s] = Int16(8000 * sin(phase))
                phase += 2 * Double.pi * 440 / 48_000
            }
            _ = captureA.writeAll(UnsafeBufferPointer(frame))
            // Now and then a datagram too short for RTP goes first (B drops and counts it, and
            // its loop posts a log record about it, at most one a second).
            let junk = injectsJunk(i)
            if junk { _ = junkDatagram.withUnsafeBytes { net.a.send($0) } }
            let forges = forged && i >= 100
            if forges { _ = forgedDatagrams[i].withUnsafeBytes { net.a.send($0) } }
            let now = advanceManualClock(byNanoseconds: 19_000_000)
            loopA.processOnce(now: now)
            // Wait (without allocating) for the datagram to come round through libnice; its
            // arrival is stamped `now`. The deadline is the real clock's: a generous bound.
            let deadline = MonotonicClock.nanoseconds() + 2_000_000_000
            let expected = 1 + (junk ? 1 : 0) + (forges ? 1 : 0)
            while net.ringB.count < expected {
                let ticket = net.wakeB.prepareToWait()
                if net.ringB.count >= expected || !net.wakeB.wait(ticket, untilMonotonicNanoseconds: deadline) { break }
            }
            if red && i % 10 == 5, net.ringB.pop({ _, _ in }) != nil { dropped += 1 }  // lost on the way
            loopB.processOnce(now: advanceManualClock(byNanoseconds: 1_000_000))
            _ = playbackB.read(into: sink)
        }

        func queue(_ keys: String) {
            for key in keys {
                var word = MediaLoop.packTone(DTMFTone(digit: DTMFDigit(key)!, durationMilliseconds: 100, gapMilliseconds: 70))
                _ = withUnsafePointer(to: &word) { loopA.dtmfToSend.write(UnsafeBufferPointer(start: $0, count: 1)) }
            }
        }
        // Warm-up: first-use allocations (type metadata of the DTMF path too), jitter buffer start.
        if dtmf { queue("#") }
        for i in 0..<100 { period(i) }
        if dtmf {
            #expect(loopB.dtmfReceived.availableToRead == 1)
            _ = loopB.dtmfReceived.discard(1)
        }
        loopA.publish()
        loopB.publish()
        let before = loopB.counters.read()
        loopB.log.drain { _ in }  // the warm-up's records (the first packet, the encoder's settings)
        let droppedBefore = dropped
        let sentBefore = loopA.counters.read().packetsSent
        let rtcpBefore = (a: loopA.counters.read(), b: loopB.counters.read())
        if dtmf { queue("0123456789") }
        CAllocationCounter_begin()
        for i in 100..<400 { period(i) }
        let total = CAllocationCounter_end()
        loopA.publish()
        loopB.publish()
        let after = loopB.counters.read()
        let sent = loopA.counters.read().packetsSent - sentBefore
        let received = after.packetsReceived - before.packetsReceived
        let decoded = after.framesDecoded - before.framesDecoded
        #expect(sent == 300)
        // The junk was dropped, counted, and reported in B's log records (posted in the counted
        // periods: no allocation of their own).
        #expect(after.malformedPackets - before.malformedPackets == 5 + (forged ? 300 : 0))
        var junkLogged = 0
        let recordsLost = loopB.log.drain { r in
            if r.event == MediaLogEvent.packetsDropped.rawValue && r.a == MediaLogEvent.DropKind.malformed.rawValue { junkLogged += Int(r.b) }
        }
        if forged {
            #expect(junkLogged > 5 && recordsLost == 0)  // one record a second, each with the count since the last
        } else {
            #expect(junkLogged == 5 && recordsLost == 0)
        }
        let lost = dropped - droppedBefore
        #expect(received >= 299 - lost)
        if red {
            // Each datagram dropped (30) lost a frame that the next packets carried again: each
            // packet carries the four frames before it.
            #expect(lost == 30)
            #expect(loopA.counters.read().redundantFramesSent - rtcpBefore.a.redundantFramesSent >= LossAdaptation.maximumRedundantFrames * 300 - 20)
            #expect(after.redundantAudioPacketsReceived - before.redundantAudioPacketsReceived == received)
            #expect(after.framesRecoveredByRedundancy - before.framesRecoveredByRedundancy >= lost - 1)
            #expect(decoded >= 295)
        } else if dtmf {
            // Ten digits of 7 packets each (4 updates, the end three times) took 70 audio frames'
            // places; B played concealment and FEC for them (the loss paths of playout).
            #expect(loopA.counters.read().dtmfPacketsSent == 77 && after.dtmfPacketsReceived == 77)
            #expect(after.dtmfDigitsReceived == 11 && loopB.dtmfReceived.availableToRead == 10)
            #expect(decoded >= 225)
        } else {
            #expect(decoded >= 295)
        }

        let perPacket = try srtpAllocationsPerPacket(.aesCM128HMACSHA1_80)
        let perReport = try srtcpAllocationsPerPacket(.aesCM128HMACSHA1_80)
        // RTCP reports in the window (the first goes out 0.25–0.75 s into each loop's clock).
        let rtcpSent = after.rtcpPacketsSent - rtcpBefore.b.rtcpPacketsSent + loopA.counters.read().rtcpPacketsSent - rtcpBefore.a.rtcpPacketsSent
        let rtcpReceived = after.rtcpPacketsReceived - rtcpBefore.b.rtcpPacketsReceived
            + loopA.counters.read().rtcpPacketsReceived - rtcpBefore.a.rtcpPacketsReceived
        let libsrtp = sent * perPacket.protect + received * perPacket.unprotect
            + rtcpSent * perReport.protect + rtcpReceived * perReport.unprotect
        // Every allocation in 300 send + 300 receive + 300 playout periods, and in the RTCP
        // reports written and read meanwhile, is libsrtp's own.
        #expect(rtcpSent >= 8 && rtcpReceived >= 8)
        // Each of B's reports carried an XR Loss RLE block about A's packets (A asks for it),
        // written by B and read by A here.
        let lossRunReports = loopA.counters.read().lossRunReportsReceived - rtcpBefore.a.lossRunReportsReceived
        let feedbackToA = loopA.counters.read().transportFeedbackReceived - rtcpBefore.a.transportFeedbackReceived
        let reportsToA = loopA.counters.read().rtcpPacketsReceived - rtcpBefore.a.rtcpPacketsReceived - feedbackToA
        #expect(reportsToA >= 4 && lossRunReports >= reportsToA - 1, "\(lossRunReports) Loss RLE blocks in \(reportsToA) reports")
        // With transport-cc, B's feedback (reduced-size, alone) reached A, read into the rate
        // control, every 100–500 ms: over these six seconds at most 61 (one B sent just before
        // them may arrive within them).
        if !dtmf {
            let feedbackFromB = after.transportFeedbackSent - rtcpBefore.b.transportFeedbackSent
            #expect(feedbackToA >= 10 && feedbackToA <= 61 && feedbackFromB + 1 >= feedbackToA, "\(feedbackFromB) sent, \(feedbackToA) received")
        }
        #expect(total == libsrtp, "total \(total), libsrtp \(libsrtp) (\(perPacket.protect)+\(perPacket.unprotect) per packet, \(perReport.protect)+\(perReport.unprotect) per report; \(rtcpSent) reports sent, \(rtcpReceived) received)")

        // A stops sending (hold, a dead path): B, with nothing left to report, never asks its
        // worker to run at an instant already past. (A feedback deadline left behind once made
        // the realtime thread spin for the whole pause, and the kernel's RT throttling then
        // stalled the other threads for up to a second.)
        var pastDeadlines = 0
        for _ in 0..<100 {
            let now = advanceManualClock(byNanoseconds: 20_000_000)
            loopB.processOnce(now: now)
            if loopB.nextDeadline(now: now) <= now { pastDeadlines += 1 }
        }
        #expect(pastDeadlines == 0)
    }

    /// The same through a media worker's passes, as the worker thread runs them: the wake-up
    /// wait and its next ticket, the slot table, playout for every loop then the encodes, both directions
    /// at once, and the sends straight on the selected pair's socket. (A driven worker: the test
    /// thread runs the passes, so it can count them.)
    @Test(.enabled(if: CAllocationCounter_isAvailable() == 1, "the sanitizers own malloc; counting runs in the plain build"))
    func workerPassesAllocateNothingOfTheirOwn() throws {
        let worker = MediaWorker(driven: true, clock: manualClock)
        let net = try ConnectedTransports(wakeup: worker.wakeup)
        defer { net.close() }
        let (keyA, keyB) = (net.keyA, net.keyB)
        let capture = (a: SPSCRing<Int16>(capacity: 8192), b: SPSCRing<Int16>(capacity: 8192))
        let playback = (a: SPSCRing<Int16>(capacity: 4096), b: SPSCRing<Int16>(capacity: 4096))
        let loopA = try loop(
            transport: net.a, ring: net.ringA, worker: worker, send: keyA, receive: keyB, capture: capture.a, playback: playback.a)
        let loopB = try loop(
            transport: net.b, ring: net.ringB, worker: worker, send: keyB, receive: keyA, capture: capture.b, playback: playback.b)
        try loopA.start()
        try loopB.start()
        #expect(loopA.scheduling == .notStarted)  // no worker thread: this one runs the passes
        let frame = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 960)
        defer { frame.deallocate() }
        let sink = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 960)
        defer { sink.deallocate() }
        var phase = 0.0

        /// One period: both sides capture a frame; a pass encodes and sends both; once both
        /// datagrams are back through libnice, a pass receives and plays them out. The passes and
        /// the arrival stamps read the manual clock, 20 ms on per period, so each side plays out
        /// one frame a period however fast or slow the machine runs them.
        func period() {
            for s in 0..<960 {
                frame[s] = Int16(8000 * sin(phase))
                phase += 2 * Double.pi * 440 / 48_000
            }
            _ = capture.a.writeAll(UnsafeBufferPointer(frame))
            _ = capture.b.writeAll(UnsafeBufferPointer(frame))
            _ = advanceManualClock(byNanoseconds: 20_000_000)
            worker.serviceOnce(waitingUntil: 0)
            // Wait (without allocating, and without a pass, which would read them) for every
            // datagram each side sent (a report among them must not stand for the media packet).
            // The deadline is the real clock's: a generous bound.
            let deadline = MonotonicClock.nanoseconds() + 2_000_000_000
            func arrived() -> Bool { net.ringA.pushedCount >= net.b.directSendCount && net.ringB.pushedCount >= net.a.directSendCount }
            while !arrived(), MonotonicClock.nanoseconds() < deadline {
                let ticket = net.wakeA.prepareToWait()
                if arrived() { break }
                _ = net.wakeA.wait(ticket, untilMonotonicNanoseconds: min(deadline, MonotonicClock.nanoseconds() + 1_000_000))
            }
            worker.serviceOnce(waitingUntil: 0)
            _ = playback.a.read(into: sink)
            _ = playback.b.read(into: sink)
        }

        for _ in 0..<100 { period() }  // warm-up
        func snapshot() -> (sent: Int, received: Int, rtcpSent: Int, rtcpReceived: Int, decoded: Int) {
            loopA.publish()
            loopB.publish()
            let a = loopA.counters.read()
            let b = loopB.counters.read()
            return (
                a.packetsSent + b.packetsSent, a.packetsReceived + b.packetsReceived, a.rtcpPacketsSent + b.rtcpPacketsSent,
                a.rtcpPacketsReceived + b.rtcpPacketsReceived, a.framesDecoded + b.framesDecoded
            )
        }
        let before = snapshot()
        let directBefore = net.a.directSendCount + net.b.directSendCount
        CAllocationCounter_begin()
        for _ in 0..<300 { period() }
        let total = CAllocationCounter_end()
        let after = snapshot()
        let sent = after.sent - before.sent
        let received = after.received - before.received
        #expect(sent == 600)
        #expect(received >= 598)
        // One frame a period on each side, decoded (not concealed): the playout is paced by the
        // manual clock, not by how fast this machine runs the periods.
        #expect(after.decoded - before.decoded >= 590)
        // Every packet went straight to the kernel from this (the worker's) thread.
        #expect(net.a.directSendCount + net.b.directSendCount - directBefore >= sent)

        let perPacket = try srtpAllocationsPerPacket(.aesCM128HMACSHA1_80)
        let perReport = try srtcpAllocationsPerPacket(.aesCM128HMACSHA1_80)
        let libsrtp = sent * perPacket.protect + received * perPacket.unprotect
            + (after.rtcpSent - before.rtcpSent) * perReport.protect + (after.rtcpReceived - before.rtcpReceived) * perReport.unprotect
        // With two loops interleaved in one pass, NSS's pools serve a few of libsrtp's requests
        // without malloc (20 fewer than the estimate here, never more). The bound is one
        // packet's worth: one allocation of Tether's own per period would add 300.
        #expect(
            abs(total - libsrtp) <= perPacket.protect + perPacket.unprotect,
            "total \(total), libsrtp \(libsrtp) (\(perPacket.protect)+\(perPacket.unprotect) per packet, \(perReport.protect)+\(perReport.unprotect) per report; \(sent) sent, \(received) received, \(after.rtcpSent - before.rtcpSent) reports sent, \(after.rtcpReceived - before.rtcpReceived) received)")

        // Removing a loop gives it a last pass (its BYE, and no ordinary pass) and lets go of it.
        let reportsBeforeStop = loopA.counters.read().rtcpPacketsSent  // published by `snapshot()`
        loopA.stop(sendBye: true)
        loopB.stop(sendBye: false)
        #expect(loopA.counters.read().rtcpPacketsSent == reportsBeforeStop + 1)
    }
}
