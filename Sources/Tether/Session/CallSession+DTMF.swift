import CoreMetrics
import Foundation
import Logging
import Synchronization
import TetherAudio
import TetherCodec
import TetherCore
import TetherDTLS
import TetherICE
import TetherNetworkMonitor
import TetherRTP
import TetherRealtime

/// DTMF (RFC 4733): digits queued for the media loop, and digits it received passed on as events.
extension CallSession {
    /// Sends DTMF digits as RFC 4733 telephone events: each digit's events replace the audio for
    /// `toneDuration`, then `gap` passes before the next (WebRTC's `insertDTMF` defaults). Digits
    /// are queued behind those not yet sent (up to 64).
    /// - Parameters:
    ///   - digits: `0`–`9`, `*`, `#`, `A`–`D` (lower case accepted).
    ///   - toneDuration: 40 ms … 6 s.
    ///   - gap: 30 ms … 6 s.
    /// - Throws: 5004 for a character that is not a DTMF key, durations out of range or a full
    ///   queue; 3004 when the peer did not accept `telephone-event`; 5002 when media does not
    ///   run, the call is on hold, or the direction does not let us send.
    public func sendDTMF(_ digits: String, toneDuration: Duration = .milliseconds(100), gap: Duration = .milliseconds(70)) throws(TetherError) {
        let toneMilliseconds = Self.milliseconds(toneDuration)
        let gapMilliseconds = Self.milliseconds(gap)
        guard (40...6000).contains(toneMilliseconds) else {
            throw TetherError(code: .invalidDTMF, isTerminal: false, canRetry: false,
                message: "tone duration \(toneMilliseconds) ms is outside 40…6000 ms")
        }
        guard (30...6000).contains(gapMilliseconds) else {
            throw TetherError(code: .invalidDTMF, isTerminal: false, canRetry: false, message: "gap \(gapMilliseconds) ms is outside 30…6000 ms")
        }
        var tones: [DTMFTone] = []
        for character in digits {
            guard let digit = DTMFDigit(character) else {
                throw TetherError(code: .invalidDTMF, isTerminal: false, canRetry: false,
                    message: "'\(character)' is not a DTMF key (0-9, *, #, A-D)")
            }
            tones.append(DTMFTone(digit: digit, durationMilliseconds: toneMilliseconds, gapMilliseconds: gapMilliseconds))
        }
        guard !tones.isEmpty else {
            throw TetherError(code: .invalidDTMF, isTerminal: false, canRetry: false, message: "no digits to send")
        }
        guard let negotiated, let media, mediaRunning, !state.isClosing else {
            throw .invalidState("sendDTMF(_:) needs a call whose media runs; the call is \(state.name)")
        }
        guard negotiated.telephoneEvent != nil else {
            throw TetherError(code: .dtmfNotNegotiated, isTerminal: false, canRetry: false,
                message: "the peer did not accept telephone-event (RFC 4733), so DTMF cannot be sent")
        }
        guard negotiated.direction.isSending, !negotiation.holdInForce, !negotiation.wantsHold else {
            throw .invalidState("DTMF cannot be sent while the call is on hold or the peer does not receive (\(negotiated.direction.rawValue))")
        }
        guard media.dtmfToSend.availableToWrite >= tones.count else {
            throw TetherError(code: .invalidDTMF, isTerminal: false, canRetry: true,
                message: "\(tones.count) digits do not fit in the queue (\(media.dtmfToSend.availableToWrite) of 64 free); send them as the queue drains")
        }
        for tone in tones {
            var word = MediaLoop.packTone(tone)
            _ = withUnsafePointer(to: &word) { media.dtmfToSend.write(UnsafeBufferPointer(start: $0, count: 1)) }
        }
    }

    static func milliseconds(_ d: Duration) -> Int {
        let (seconds, attoseconds) = d.components
        // Saturating: any duration outside the accepted range is refused by its caller, never a trap.
        let (whole, overflow) = Int(clamping: seconds).multipliedReportingOverflow(by: 1000)
        guard !overflow else { return seconds < 0 ? Int.min : Int.max }
        return whole.addingReportingOverflow(Int(attoseconds / 1_000_000_000_000_000)).partialValue
    }

    /// Reports the digits the media loop received.
    func forwardReceivedDTMF() {
        guard let media else { return }
        var word: UInt64 = 0
        while withUnsafeMutablePointer(to: &word, { media.dtmfReceived.read(into: UnsafeMutableBufferPointer(start: $0, count: 1)) }) == 1 {
            if let received = MediaLoop.unpackReceived(word) {
                if received.lengthCapped {
                    logger.warning(
                        "DTMF \(received.digit.character) from the peer went on past \(DTMFReceiver.maximumEventMilliseconds / 1000) s: reported at that length, the rest ignored")
                }
                eventSink.yield(.dtmf(digit: received.digit.character, durationMilliseconds: received.durationMilliseconds))
            }
        }
    }
}
