import Synchronization
import TetherCodec
import TetherCore
import TetherRTP
import TetherRealtime

// MARK: DTMF (RFC 4733): telephone events sent in place of audio, and digits received from the peer handed to the session
extension MediaLoop {
    /// A `telephone-event` format as one word: 1 << 24 | clock rate in kHz << 8 | payload type.
    static func packFormat(_ format: TelephoneEventFormat?) -> UInt32 {
        guard let format else { return 0 }
        return 1 << 24 | (format.clockRateHz / 1000) << 8 | UInt32(format.payloadType)
    }

    /// The formats as one word: the one we send with (low half), another the peer may send with
    /// (high half); 0 for none.
    static func packFormats(send: TelephoneEventFormat?, receivable: [TelephoneEventFormat]) -> UInt64 {
        guard let send else { return 0 }
        let other = receivable.first { $0.payloadType != send.payloadType }
        return UInt64(packFormat(send)) | UInt64(packFormat(other)) << 32
    }

    /// A tone for `dtmfToSend`: event | duration ms << 8 | gap ms << 24 (each duration ≤ 65535).
    static func packTone(_ tone: DTMFTone) -> UInt64 {
        UInt64(tone.digit.event) | UInt64(UInt16(clamping: tone.durationMilliseconds)) << 8
            | UInt64(UInt16(clamping: tone.gapMilliseconds)) << 24
    }

    /// A digit from `dtmfReceived`.
    static func unpackReceived(_ word: UInt64) -> DTMFReceived? {
        guard let digit = DTMFDigit(event: UInt8(truncatingIfNeeded: word)) else { return nil }
        return DTMFReceived(
            digit: digit, durationMilliseconds: Int(word >> 16 & 0xFFFF_FFFF), endSeen: word & 0x100 != 0, lengthCapped: word & 0x200 != 0)
    }

    /// Takes the telephone-event formats a negotiation or renegotiation set.
    /// Control thread.
    func setTelephoneEvents(send: TelephoneEventFormat?, receivable: [TelephoneEventFormat]) {
        telephoneEventSetting.store(Self.packFormats(send: send, receivable: receivable), ordering: .relaxed)
    }

    /// Rebuilds the DTMF sender and receiver when the format changed (a few words, no allocation).
    @inline(__always)
    func adoptTelephoneEvent() {
        let setting = telephoneEventSetting.load(ordering: .relaxed)
        guard setting != telephoneEventInUse else { return }
        telephoneEventInUse = setting
        dtmfSender = nil
        dtmfReceiver = nil
        alternateDTMFReceiver = nil
        guard setting != 0 else { return }
        let rate = UInt32(setting >> 8 & 0xFFFF) * 1000
        telephoneEventPayloadType = UInt8(truncatingIfNeeded: setting)
        dtmfSender = DTMFSender(eventClockRateHz: rate, frameMilliseconds: setup.encoder.configuration.frameDurationMilliseconds)
        dtmfReceiver = DTMFReceiver(eventClockRateHz: rate)
        let other = setting >> 32
        if other != 0 {
            alternateEventPayloadType = UInt8(truncatingIfNeeded: other)
            alternateDTMFReceiver = DTMFReceiver(eventClockRateHz: UInt32(other >> 8 & 0xFFFF) * 1000)
        }
    }

    /// Moves the digits the receiver completed into `dtmfReceived` (dropped if the session let
    /// 64 pile up).
    func forwardReceivedDigits() {
        while true {
            var digit = dtmfReceiver?.takeReceived()
            if digit == nil { digit = alternateDTMFReceiver?.takeReceived() }
            guard let digit else { return }
            stats.dtmfDigitsReceived += 1
            var word = UInt64(digit.digit.event) | (digit.endSeen ? 0x100 : 0) | (digit.lengthCapped ? 0x200 : 0)
                | UInt64(UInt32(clamping: digit.durationMilliseconds)) << 16
            _ = withUnsafePointer(to: &word) { dtmfReceived.write(UnsafeBufferPointer(start: $0, count: 1)) }
        }
    }

    /// The telephone-event packet to send instead of this frame's audio, starting the next
    /// queued tone when the sender is ready; nil to send audio.
    func nextTelephoneEvent() -> TelephoneEventPacket? {
        guard var sender = dtmfSender else { return nil }
        if sender.isReady(at: rtpTimestamp) && dtmfToSend.availableToRead > 0 {
            var word: UInt64 = 0
            let read = withUnsafeMutablePointer(to: &word) { dtmfToSend.read(into: UnsafeMutableBufferPointer(start: $0, count: 1)) }
            if read == 1, let digit = DTMFDigit(event: UInt8(truncatingIfNeeded: word)) {
                sender.start(
                    DTMFTone(digit: digit, durationMilliseconds: Int(word >> 8 & 0xFFFF), gapMilliseconds: Int(word >> 24 & 0xFFFF)))
                stats.dtmfDigitsSent += 1
            }
        }
        let packet = sender.nextFrame(streamTimestamp: rtpTimestamp)
        dtmfSender = sender
        return packet
    }

    /// The call stopped sending (hold, inactive): the tone in progress and the queued ones are
    /// dropped rather than sent when it resumes.
    func dropDTMF() {
        guard dtmfSender.map({ !$0.isIdle }) == true || dtmfToSend.availableToRead > 0 else { return }
        dtmfSender?.cancel()
        _ = dtmfToSend.discard(dtmfToSend.availableToRead)
    }

    /// Sends one telephone-event packet on the stream's SSRC and sequence numbers.
    func sendTelephoneEvent(_ event: TelephoneEventPacket, now: UInt64) {
        let header = RTPHeader(
            marker: event.marker, payloadType: telephoneEventPayloadType, sequenceNumber: sequenceNumber,
            timestamp: event.timestamp, ssrc: localSSRC)
        let headerBytes = writeHeader(header, payloadBytes: TelephoneEventPayload.length, now: now)
        event.payload.write(to: UnsafeMutableRawBufferPointer(rebasing: packet[headerBytes...]))
        var length = headerBytes + TelephoneEventPayload.length
        do throws(SRTPError) {
            length = try outbound.protectRTP(packet, length: length)
        } catch {
            localSendFailures += 1
            return
        }
        if transmit(length: length, payloadBytes: TelephoneEventPayload.length, timestamp: rtpTimestamp, now: now) { stats.dtmfPacketsSent += 1 }
    }
}
