import Foundation
import TetherAudio

/// What a `CallSession` reports on its `events` stream, in order.
public enum CallEvent: Sendable {
    /// The call moved from one state to another, `secondsSinceStart` after the session was created.
    case stateChanged(from: CallState, to: CallState, secondsSinceStart: Double)
    /// A session description the embedder must deliver to the peer.
    case localDescription(SessionDescriptionMessage)
    /// Something went wrong. Non-terminal errors leave the call running.
    case error(TetherError)
    /// Periodic call statistics.
    case statistics(CallStatistics)
    /// The peer stopped (`true`) or resumed (`false`) receiving what we send, while our inbound
    /// media may be fine (one-way audio, seen in its RTCP reports).
    case outboundMediaChanged(disrupted: Bool)
    /// A capture or playback device failed, recovered or moved (a failed capture device leaves
    /// the call listen-only until it recovers; an `.error` event with code 2001/2002 comes too).
    case audioDevice(AudioDirection, AudioDeviceEvent)
    /// ICE selected a candidate pair (local and remote `address:port` and candidate types).
    case candidatePairSelected(local: String, remote: String, localType: String, remoteType: String)
    /// The peer sent a DTMF digit (RFC 4733), reported once when it ended: `0`–`9`, `*`, `#`,
    /// `A`–`D`, and how long its tone lasted. A tone longer than 30 s (a stuck key) is reported
    /// when it reaches 30 s, with a warning in the log, and the rest of it is ignored.
    case dtmf(digit: Character, durationMilliseconds: Int)
    /// Who holds the call changed (a hold or resume of either side was answered).
    case holdChanged(HoldState)
    /// Trickle ICE (`CallConfiguration.trickleICE`): a local candidate found after the
    /// description left, or (``ICECandidateMessage/isEndOfCandidates``) the end of them, to
    /// deliver to the peer after that description.
    case localCandidate(ICECandidateMessage)
}

/// One trickled ICE candidate (RFC 8838), in the shape of WebRTC's `RTCIceCandidateInit`, so it
/// goes to and from a browser as it is: `candidate` is the SDP attribute value
/// (`candidate:1 1 UDP 2015363327 192.0.2.1 49152 typ host`), or empty for the end of
/// candidates.
public struct ICECandidateMessage: Sendable, Equatable, Codable {
    /// `candidate:…`, or empty: end of candidates.
    public var candidate: String
    /// The media section's `a=mid` (`"0"` when the description has one, as a DTLS one does).
    public var sdpMid: String?
    /// The media section's index in the description (Tether's audio is the first).
    public var sdpMLineIndex: Int?
    /// The ICE username fragment of the description the candidate belongs to: a candidate of an
    /// earlier one (before an ICE restart) is ignored.
    public var usernameFragment: String?

    public init(candidate: String, sdpMid: String? = nil, sdpMLineIndex: Int? = 0, usernameFragment: String? = nil) {
        self.candidate = candidate
        self.sdpMid = sdpMid
        self.sdpMLineIndex = sdpMLineIndex
        self.usernameFragment = usernameFragment
    }

    /// Whether this says the sender has no more candidates (RFC 8840 `a=end-of-candidates`).
    public var isEndOfCandidates: Bool { candidate.trimmingCharacters(in: .whitespaces).isEmpty }
}

/// Who holds the call (RFC 3264 §8.4), as the last completed offer/answer says.
public struct HoldState: Sendable, Equatable, CustomStringConvertible {
    /// We hold the peer (`hold()` was answered): we send no RTP.
    public var local: Bool
    /// The peer holds us (its direction does not receive us: `sendonly` or `inactive`). It may
    /// still send (music on hold, RFC 3264 §8.4): that is played, but not expected, so the
    /// call's liveness is judged by RTCP.
    public var remote: Bool

    public init(local: Bool = false, remote: Bool = false) {
        self.local = local
        self.remote = remote
    }

    /// Either side holds the call.
    public var isOnHold: Bool { local || remote }

    public var description: String {
        switch (local, remote) {
        case (false, false): "not on hold"
        case (true, false): "on hold (local)"
        case (false, true): "on hold (remote)"
        case (true, true): "on hold (both)"
        }
    }
}

/// A session description to carry to the peer, with its role in offer/answer.
public struct SessionDescriptionMessage: Sendable, Equatable {
    /// Offer or answer.
    public enum Kind: String, Sendable, Equatable { case offer, answer }
    /// Offer or answer.
    public var kind: Kind
    /// The SDP text (CRLF line endings).
    public var sdp: String
    /// Whether this renegotiates a running call (an ICE restart offer or its answer, or a re-offer
    /// such as hold). The initial offer and answer are also returned by `makeOffer()` and
    /// `acceptOffer(_:)`; renegotiations only arrive here.
    public var isRestart: Bool

    public init(kind: Kind, sdp: String, isRestart: Bool = false) {
        self.kind = kind
        self.sdp = sdp
        self.isRestart = isRestart
    }
}

/// Capture or playback.
public enum AudioDirection: String, Sendable, Equatable {
    case capture, playback
}
