extension ReconnectStateMachine {
    /// The media view of the call as this machine sees it. The driver maps it onto the public
    /// `CallState` (`idle` is `new`; the `ending` step of a hang-up belongs to the driver).
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Created; media not started yet.
        case idle
        /// Negotiation done and the media loop running; no media decoded yet.
        case connecting
        /// Media flowing: frames from the peer are being decoded (or, while the peer is on hold,
        /// its RTCP arrives).
        case established
        /// Nothing (RTP or RTCP) received for the disruption threshold, or the local network the
        /// media path uses went away: waiting for media to come back by itself before renewing,
        /// or for a usable network to renew on (renewal is suspended while there is none).
        case mediaDisrupted
        /// An ICE restart (or full re-gathering) is under way.
        case renewingMedia
        /// Terminal.
        case ended(EndReason)

        /// The state's name (`ended` without its reason).
        public var name: String {
            switch self {
            case .idle: "idle"
            case .connecting: "connecting"
            case .established: "established"
            case .mediaDisrupted: "mediaDisrupted"
            case .renewingMedia: "renewingMedia"
            case .ended: "ended"
            }
        }

        /// Whether the call is over.
        public var isEnded: Bool { if case .ended = self { true } else { false } }

        public var description: String {
            if case .ended(let reason) = self { return "ended(\(reason))" }
            return name
        }
    }

    /// Why the machine ended.
    public enum EndReason: Sendable, Equatable {
        /// ``Input/hangUp``.
        case localHangup
        /// The give-up budget ran out without media coming back (terminal, retryable).
        case mediaTimeout
    }

    /// Which side's ICE-restart offer survives when both sides offer at once (glare).
    ///
    /// The side that sent the call's initial offer uses ``keepsOwnOffer``; the side that answered
    /// it uses ``yieldsToPeer``. Only one side then ever keeps a colliding offer, so both
    /// converge on the same restart.
    public enum GlareRole: Sendable, Equatable {
        /// A peer offer that collides with our unanswered offer is declined; the peer answers ours.
        case keepsOwnOffer
        /// A peer offer that collides with our unanswered offer wins: our attempt is abandoned
        /// and the peer's offer is answered.
        case yieldsToPeer
    }

    /// Something that happened, reported by the driver with the instant it happened.
    public enum Input: Sendable, Equatable {
        /// Offer/answer is done and the media loop runs.
        case mediaStarted
        /// A valid (authenticated) RTP or RTCP packet from the peer arrived.
        case inboundPacket
        /// A frame from the peer was decoded (a real packet's frame, not concealment).
        case mediaDecoded
        /// The driver's timer fired (call at ``ReconnectStateMachine/nextDeadline()``).
        case tick
        /// libnice reported the component FAILED. Not final: libnice can report FAILED in the
        /// middle of a later restart.
        case iceFailed
        /// A candidate pair was selected / the component is READY: we have a path to send on.
        /// Never restores a call by itself (but a disruption of cause
        /// ``RecoveryTimeline/Cause/noSendPath`` waits for it). Media that establishes the call
        /// before it came starts ``ReconnectionPolicy/sendPathGraceSeconds``.
        case iceConnected
        /// The peer no longer consents to receive on the selected pair (RFC 7675: its consent
        /// checks went unanswered for 30 s, or it answered one with 403): nothing may be sent on
        /// that pair, so the call has no path to send on until a new pair is selected
        /// (``iceConnected``). Renewal starts at once; a disruption it starts (cause
        /// ``RecoveryTimeline/Cause/consentLost``), or one already under way, is restored only once
        /// a new pair is selected and media flows.
        case consentLost
        /// The local network changed in a way that concerns the media path (its address or link
        /// went away, or a usable network appeared while media is disrupted), and gathering can
        /// find candidates: renew on fresh candidates now.
        case localNetworkChanged
        /// The local address or link the media path uses went away and no usable network is left
        /// to gather on (a link down with nothing else up): media is disrupted, and renewal waits
        /// for a usable network (``localNetworkChanged``) instead of spending attempts; the old
        /// path may carry media again by itself if it comes back. The give-up still runs.
        case localNetworkLost
        /// Gathering for this attempt found no candidate (the network went away meanwhile): the
        /// attempt is not counted, and renewal waits for a usable network as after
        /// ``localNetworkLost``. A description without candidates is never sent.
        case gatheringFoundNothing(attempt: Int)
        /// The peer's answer to our restart offer for this attempt arrived. The machine says
        /// whether to apply it (``Action/applyRenewalAnswer(attempt:)``) or drop it
        /// (``Action/discardRenewalAnswer(attempt:)``).
        case renewalAnswered(attempt: Int)
        /// The peer sent an ICE-restart offer.
        case peerRenewalOffer
        /// The negotiated direction says whether the peer sends media (false: it is on hold).
        case peerSendsMedia(Bool)
        /// The negotiated direction says whether we send media (false: we are on hold/inactive).
        case weSendMedia(Bool)
        /// The peer's RTCP receiver report block about our stream (report its packet as
        /// ``inboundPacket`` too). `missesRecentPackets`: the driver found that the peer has not
        /// received any packet we sent more than a round trip (plus a margin) before the report
        /// arrived, which shows one-way audio from this one report.
        case peerReport(extendedHighestSequence: UInt32, missesRecentPackets: Bool = false)
        /// We hang up.
        case hangUp
    }

    /// Something the driver must do, in the order given.
    public enum Action: Sendable, Equatable {
        /// The state changed: emit the state-change event.
        case changeState(to: State)
        /// Restart ICE (new credentials) and send a new offer through signalling. With
        /// `regatherCandidates`, first gather new local candidates (a new stream or agent:
        /// libnice's restart keeps the old ones). Attempts are numbered from 1 in each disruption.
        case restartICE(attempt: Int, regatherCandidates: Bool)
        /// Stop waiting for this attempt (timed out, ICE failed, or superseded). Its ICE session
        /// may stay in place until the next restart; a later answer may still be applied.
        case abandonAttempt(attempt: Int)
        /// Apply the peer's answer for this attempt to the ICE agent.
        case applyRenewalAnswer(attempt: Int)
        /// Drop the peer's answer for this attempt: a newer attempt replaced it, or it came twice.
        case discardRenewalAnswer(attempt: Int)
        /// Answer the peer's ICE-restart offer (restart our side with new credentials, gathering
        /// new local candidates first when `regatherCandidates`).
        case answerRenewalOffer(regatherCandidates: Bool)
        /// Do not answer the peer's ICE-restart offer: it collided with ours and ours wins (the
        /// peer answers ours). See ``GlareRole``.
        case declineRenewalOffer
        /// One-way audio started (`true`) or ended (`false`): the peer does (not) receive our stream.
        case outboundDisruption(started: Bool)
        /// End the call with a terminal, retryable media-timeout error.
        case giveUp
    }
}
