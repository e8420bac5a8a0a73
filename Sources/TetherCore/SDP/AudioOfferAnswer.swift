/// What we put into our side of the audio negotiation.
///
/// Key generation is the caller's job (use a CSPRNG); ``crypto`` lists the
/// `a=crypto` lines to offer in our preference order and is also the pool of
/// keys we answer with (one per suite we support).
public struct LocalAudioParameters: Sendable, Equatable {
    /// `o=` session ID; keep it for the whole call.
    public var sessionID: UInt64
    /// `o=` session version; increment it for every new offer/answer that
    /// changes the session.
    public var sessionVersion: UInt64
    /// `o=` address (IPv4/IPv6 literal or FQDN) of this host.
    public var originAddress: String
    /// `o=` user name.
    public var username: String
    /// `s=` session name.
    public var sessionName: String
    /// RTP payload type offered for Opus (dynamic range 96…127); answers
    /// always use the offerer's payload type instead.
    public var opusPayloadType: UInt8
    /// Opus fmtp parameters describing what we want to receive.
    public var opusParameters: OpusParameters
    /// `a=ptime` we want to receive, in milliseconds.
    public var ptimeMilliseconds: UInt32
    /// Optional `a=maxptime`, in milliseconds.
    public var maxPtimeMilliseconds: UInt32?
    /// Our ICE username fragment.
    public var iceUfrag: String
    /// Our ICE password.
    public var icePwd: String
    /// `a=ice-options` tokens, e.g. `["trickle"]`.
    public var iceOptions: [String]
    /// Whether we are an ICE-lite agent (Tether is full ICE: `false`).
    public var iceLite: Bool
    /// Our gathered candidates (component 1). The first UDP candidate with an
    /// IP literal provides the `c=`/`m=` default address and port;
    /// without one, `IN IP4 0.0.0.0` and port 9 are written (RFC 8840).
    public var candidates: [ICECandidate]
    /// Whether gathering finished (`a=end-of-candidates`).
    public var endOfCandidates: Bool
    /// `a=crypto` attributes to offer, in preference order, each with our own
    /// fresh key. Must contain `AES_CM_128_HMAC_SHA1_80`; normally
    /// `AEAD_AES_128_GCM` as well. Tags should be unique.
    public var crypto: [CryptoAttribute]
    /// The direction we want (from our point of view).
    public var direction: MediaDirection
    /// Optional `a=mid` for our offer (answers copy the offer's mid).
    public var mid: String?
    /// Whether we accept remote keys carrying an MKI. The SRTP layer must
    /// then handle MKI fields; off by default, so offered crypto lines with
    /// an MKI are skipped.
    public var acceptsRemoteMKI: Bool
    /// DTLS-SRTP keying (RFC 5763): our certificate's fingerprint and the association in force.
    /// nil: DTLS is neither offered nor accepted. An offer carries SDES when ``crypto`` is not
    /// empty and DTLS when this is set; with both, the profile is `RTP/SAVPF`, with DTLS alone
    /// `UDP/TLS/RTP/SAVPF`, with SDES alone `RTP/SAVP`.
    public var dtls: LocalDTLSParameters?
    /// The `telephone-event` formats (RFC 4733 DTMF) our offers carry, in preference order:
    /// by default at the Opus clock rate (48000) and at 8000 for peers that only take that.
    /// Answers take the offer's, preferring 48000; empty: DTMF is neither offered nor accepted.
    public var telephoneEvents: [TelephoneEventFormat]
    /// The payload type our offers carry RFC 2198 redundant audio on (`red/48000/2`, its blocks
    /// Opus); answers take the offer's when its blocks are our Opus. nil: RED is neither offered
    /// nor accepted.
    public var redundantAudioPayloadType: UInt8?
    /// Whether our offers list RED before Opus: the peer's preferred format to send with
    /// (Chromium sends RED only when it comes first). Answers keep the offer's order.
    public var prefersRedundantAudio: Bool = false
    /// Whether our descriptions ask the peer for RTCP XR Loss RLE blocks (`a=rtcp-xr:pkt-loss-rle`,
    /// RFC 3611 §5): which of our packets it lost, one by one, so that our sender sees bursts.
    public var requestsLossRunLengthReports: Bool = true
    /// The one-byte header extension ID our offers map the transport-wide sequence number to,
    /// with `a=rtcp-fb:<opus> transport-cc` (``TransportWideCongestionControl``); answers take the
    /// offer's. nil: transport-wide congestion control is neither offered nor accepted.
    public var transportWideCCExtensionID: UInt8? = TransportWideCongestionControl.defaultExtensionID
    /// Whether our descriptions take reduced-size RTCP (`a=rtcp-rsize`, RFC 5506): feedback may
    /// then travel alone, not in a compound with a report (a third of the bytes).
    public var reducedSizeRTCP: Bool = true

    /// Creates local parameters with Tether's defaults: Opus on PT 111 with
    /// `minptime=10;useinbandfec=1`, 20 ms ptime, full ICE, sendrecv.
    public init(
        sessionID: UInt64, sessionVersion: UInt64 = 1, originAddress: String,
        username: String = "-", sessionName: String = "-",
        opusPayloadType: UInt8 = 111,
        opusParameters: OpusParameters = OpusParameters(minPtimeMilliseconds: 10, useInbandFEC: true),
        ptimeMilliseconds: UInt32 = 20, maxPtimeMilliseconds: UInt32? = nil,
        iceUfrag: String, icePwd: String, iceOptions: [String] = [], iceLite: Bool = false,
        candidates: [ICECandidate] = [], endOfCandidates: Bool = false,
        crypto: [CryptoAttribute], direction: MediaDirection = .sendrecv, mid: String? = nil,
        acceptsRemoteMKI: Bool = false, dtls: LocalDTLSParameters? = nil,
        telephoneEvents: [TelephoneEventFormat] = TelephoneEventFormat.defaultOffer,
        redundantAudioPayloadType: UInt8? = RedundantAudioFormat.defaultPayloadType, prefersRedundantAudio: Bool = false
    ) {
        self.sessionID = sessionID
        self.sessionVersion = sessionVersion
        self.originAddress = originAddress
        self.username = username
        self.sessionName = sessionName
        self.opusPayloadType = opusPayloadType
        self.opusParameters = opusParameters
        self.ptimeMilliseconds = ptimeMilliseconds
        self.maxPtimeMilliseconds = maxPtimeMilliseconds
        self.iceUfrag = iceUfrag
        self.icePwd = icePwd
        self.iceOptions = iceOptions
        self.iceLite = iceLite
        self.candidates = candidates
        self.endOfCandidates = endOfCandidates
        self.crypto = crypto
        self.direction = direction
        self.mid = mid
        self.acceptsRemoteMKI = acceptsRemoteMKI
        self.dtls = dtls
        self.telephoneEvents = telephoneEvents
        self.redundantAudioPayloadType = redundantAudioPayloadType
        self.prefersRedundantAudio = prefersRedundantAudio
    }

    /// The profile our offers use for the keying they carry.
    var offerProfile: SDPMediaProtocol {
        switch (crypto.isEmpty, dtls == nil) {
        case (false, false): .rtpSAVPF
        case (true, false): .udpTLSRTPSAVPF
        default: .rtpSAVP
        }
    }
}

/// Our side of DTLS-SRTP keying.
public struct LocalDTLSParameters: Sendable, Equatable {
    /// Our certificate's fingerprint (`a=fingerprint`).
    public var fingerprint: DTLSFingerprint
    /// The role we hold in the association in force, if there is one: answers keep it so an ICE
    /// restart keeps the association (RFC 8842 §5.2).
    public var currentRole: DTLSRole?

    public init(fingerprint: DTLSFingerprint, currentRole: DTLSRole? = nil) {
        self.fingerprint = fingerprint
        self.currentRole = currentRole
    }
}

/// How the negotiated SRTP is keyed.
public enum NegotiatedKeying: Sendable, Equatable {
    /// SDES (RFC 4568): both keys are in the descriptions. `local` protects what we send (our line
    /// with the chosen tag), `remote` what we receive.
    case sdes(suite: SDPCryptoSuite, local: CryptoAttribute, remote: CryptoAttribute)
    /// DTLS-SRTP (RFC 5763/5764): a handshake in `role` with a peer whose certificate has
    /// `remoteFingerprint` exports the keys.
    case dtls(role: DTLSRole, remoteFingerprint: DTLSFingerprint)
}

/// The outcome of a successful offer/answer: everything the media engine
/// needs to configure ICE, SRTP and the Opus codec.
///
/// Printing this value never shows keys (``CryptoAttribute`` redacts itself).
public struct NegotiatedAudio: Sendable, Equatable {
    /// Opus payload type to use in both directions (the offerer's).
    public var opusPayloadType: UInt8
    /// The peer's Opus fmtp parameters (what it wants to receive).
    public var remoteOpusParameters: OpusParameters
    /// The peer's `a=ptime`, in milliseconds, if given.
    public var remotePtimeMilliseconds: UInt32?
    /// The peer's `a=maxptime`, in milliseconds, if given.
    public var remoteMaxPtimeMilliseconds: UInt32?
    /// The peer's ICE username fragment (media level, else session level).
    public var remoteICEUfrag: String
    /// The peer's ICE password (media level, else session level).
    public var remoteICEPwd: String
    /// Whether the peer is an ICE-lite agent.
    public var remoteICELite: Bool
    /// The peer's UDP candidates for component 1 (RTP+RTCP, rtcp-mux). Non-UDP
    /// candidates and component-2 candidates are dropped.
    public var remoteCandidates: [ICECandidate]
    /// Whether the peer signalled `a=end-of-candidates` (media or session level).
    public var remoteEndOfCandidates: Bool
    /// How SRTP is keyed.
    public var keying: NegotiatedKeying
    /// With SDES: the chosen SRTP crypto suite.
    public var cryptoSuite: SDPCryptoSuite? { if case let .sdes(suite, _, _) = keying { suite } else { nil } }
    /// With SDES: the peer's crypto attribute (its key protects what we receive).
    public var remoteCrypto: CryptoAttribute? { if case let .sdes(_, _, remote) = keying { remote } else { nil } }
    /// With SDES: the tag of the chosen crypto line.
    public var localCryptoTag: UInt32? { localCrypto?.tag }
    /// With SDES: our crypto attribute as put in the SDP (its key protects what we send).
    public var localCrypto: CryptoAttribute? { if case let .sdes(_, local, _) = keying { local } else { nil } }
    /// The peer's effective direction, from its point of view.
    public var remoteDirection: MediaDirection
    /// What we may do, from our point of view (e.g. `.sendonly` = we send,
    /// we do not receive).
    public var direction: MediaDirection
    /// The `a=mid` of the audio section, if any.
    public var mid: String?
    /// The negotiated `telephone-event` format (RFC 4733 DTMF) we send with, if any: at 48000
    /// (the Opus clock) when both rates are negotiated.
    public var telephoneEvent: TelephoneEventFormat?
    /// Every `telephone-event` format the peer may send with: an answer may keep both our offered
    /// rates, and its side picks either (Chromium sends at 8000 when both are there).
    public var receivableTelephoneEvents: [TelephoneEventFormat]
    /// RFC 2198 redundant audio both sides take (the same payload type each way), if negotiated.
    public var redundantAudio: RedundantAudioFormat?
    /// The peer asked for RTCP XR Loss RLE blocks (`a=rtcp-xr` with `pkt-loss-rle`, at media or
    /// else session level): our reports carry one about its stream (RFC 3611 §5.2: the side
    /// whose description lists a block receives it).
    public var peerRequestsLossRunLengthReports = false
    /// The header extension ID of the transport-wide sequence number when transport-cc was
    /// negotiated (both sides stamp their packets and report the other's arrivals); nil when not.
    public var transportWideCCExtensionID: UInt8?
    /// The peer's cap on what it receives from us (`b=AS`/`b=TIAS`), bits per second with headers.
    public var remoteBandwidthLimitBitsPerSecond: Int?
    /// Both sides take reduced-size RTCP (`a=rtcp-rsize`).
    public var reducedSizeRTCP = false

    /// Creates a negotiation result.
    public init(
        opusPayloadType: UInt8, remoteOpusParameters: OpusParameters, remotePtimeMilliseconds: UInt32?,
        remoteMaxPtimeMilliseconds: UInt32?, remoteICEUfrag: String, remoteICEPwd: String, remoteICELite: Bool,
        remoteCandidates: [ICECandidate], remoteEndOfCandidates: Bool, keying: NegotiatedKeying,
        remoteDirection: MediaDirection, direction: MediaDirection, mid: String?,
        telephoneEvent: TelephoneEventFormat? = nil, receivableTelephoneEvents: [TelephoneEventFormat]? = nil,
        redundantAudio: RedundantAudioFormat? = nil
    ) {
        self.opusPayloadType = opusPayloadType
        self.remoteOpusParameters = remoteOpusParameters
        self.remotePtimeMilliseconds = remotePtimeMilliseconds
        self.remoteMaxPtimeMilliseconds = remoteMaxPtimeMilliseconds
        self.remoteICEUfrag = remoteICEUfrag
        self.remoteICEPwd = remoteICEPwd
        self.remoteICELite = remoteICELite
        self.remoteCandidates = remoteCandidates
        self.remoteEndOfCandidates = remoteEndOfCandidates
        self.keying = keying
        self.remoteDirection = remoteDirection
        self.direction = direction
        self.mid = mid
        self.telephoneEvent = telephoneEvent
        self.receivableTelephoneEvents = receivableTelephoneEvents ?? telephoneEvent.map { [$0] } ?? []
        self.redundantAudio = redundantAudio
    }
}

/// RFC 3264 offer/answer for Tether's single audio stream: Opus over SDES-SRTP
/// (`RTP/SAVP`, also `RTP/SAVPF`), ICE, mandatory rtcp-mux. Pure functions,
/// no I/O.
public enum AudioOfferAnswer {
    /// Builds our offer: one `m=audio` section, Opus only, keyed as ``LocalAudioParameters/dtls``
    /// and ``LocalAudioParameters/crypto`` say (DTLS offers say `a=setup:actpass`, and with a
    /// mid put the section in a BUNDLE group as WebRTC endpoints expect).
    public static func makeOffer(_ local: LocalAudioParameters) -> SessionDescription {
        let section = audioSection(
            local: local, profile: local.offerProfile, payloadType: local.opusPayloadType,
            telephoneEvents: local.telephoneEvents,
            redundantAudio: local.redundantAudioPayloadType.map { RedundantAudioFormat(payloadType: $0, blockPayloadType: local.opusPayloadType) },
            redundantAudioFirst: local.prefersRedundantAudio, crypto: local.crypto, fingerprints: local.dtls.map { [$0.fingerprint] } ?? [],
            setup: local.dtls == nil ? nil : .actpass, direction: local.direction, mid: local.mid,
            transportWideCCExtensionID: local.transportWideCCExtensionID, reducedSizeRTCP: local.reducedSizeRTCP)
        var offer = session(local: local, section: section)
        if local.dtls != nil, let mid = local.mid { offer.attributes.append(SDPAttribute(name: "group", value: "BUNDLE \(mid)")) }
        return offer
    }

    /// Answers a remote offer.
    ///
    /// Uses the first `m=audio` section with a non-zero port; every other
    /// section is answered with port 0. Requires `RTP/SAVP`/`RTP/SAVPF`,
    /// `opus/48000/2` (its payload type is reused), a crypto suite we hold a
    /// key for (the offer's first such line wins; lines with session
    /// parameters, with a tag another line also uses, or with an MKI unless
    /// ``LocalAudioParameters/acceptsRemoteMKI``, are skipped), `a=rtcp-mux` and ICE credentials at media or session level.
    public static func makeAnswer(
        to offer: SessionDescription, local: LocalAudioParameters
    ) throws(SDPError) -> (answer: SessionDescription, negotiated: NegotiatedAudio) {
        guard offer.media.contains(where: { $0.media == "audio" }) else { throw .noAudioMedia }
        guard let index = offer.media.firstIndex(where: { $0.media == "audio" && $0.port != 0 }) else {
            throw .audioRejected
        }
        let remote = offer.media[index]
        guard remote.transportProtocol.isSRTP else { throw .unsupportedProfile(remote.transportProtocol.name) }
        guard let payloadType = remote.opusPayloadType else { throw .noOpus }

        // Keying: DTLS when the offer carries a fingerprint we can check and we take DTLS (WebRTC
        // endpoints key RTP/SAVPF with DTLS too, and ignore a=crypto beside a fingerprint); SDES
        // otherwise, on the SDES profiles only.
        let fingerprints = remote.effectiveFingerprints(in: offer)
        let keying: NegotiatedKeying
        let answerCrypto: [CryptoAttribute]
        if let dtls = local.dtls, let fingerprint = fingerprints.first {
            let role = try DTLSNegotiation.answererRole(
                offered: remote.effectiveSetup(in: offer) ?? .active, current: dtls.currentRole)
            keying = .dtls(role: role, remoteFingerprint: fingerprint)
            answerCrypto = []
        } else if remote.transportProtocol.isDTLSSRTP {
            if local.dtls == nil { throw .noSupportedKeying(offered: "DTLS-SRTP (a=fingerprint), which this call does not accept") }
            throw .missingFingerprint
        } else {
            if local.crypto.isEmpty {
                throw .noSupportedKeying(offered: remote.crypto.isEmpty ? "no a=crypto and no a=fingerprint" : "SDES (a=crypto) only, and this call takes DTLS-SRTP")
            }
            let chosen = try chooseCrypto(from: remote, local: local)
            keying = .sdes(suite: chosen.remote.suite, local: chosen.local, remote: chosen.remote)
            answerCrypto = [chosen.local]
        }

        guard remote.rtcpMux else { throw .rtcpMuxRequired }
        let (ufrag, pwd) = try credentials(of: remote, in: offer)

        let remoteDirection = remote.effectiveDirection(sessionDirection: offer.direction)
        let ourDirection = MediaDirection(
            sending: local.direction.isSending && remoteDirection.isReceiving,
            receiving: local.direction.isReceiving && remoteDirection.isSending)

        var localSetup: DTLSSetup?
        if case let .dtls(role, _) = keying { localSetup = role.setup }
        let telephoneEvent = local.telephoneEvents.isEmpty ? nil : TelephoneEventFormat.preferred(in: remote)
        // RED on the offer's payload type, in the offer's place before or after Opus.
        let redundantAudio = local.redundantAudioPayloadType == nil ? nil : RedundantAudioFormat.find(in: remote, opusPayloadType: payloadType)
        // Transport-wide congestion control on the offer's extension ID.
        let transportWideCC = local.transportWideCCExtensionID == nil
            ? nil : TransportWideCongestionControl.extensionID(in: remote, payloadType: payloadType)
        let section = audioSection(
            local: local, profile: remote.transportProtocol, payloadType: payloadType,
            telephoneEvents: telephoneEvent.map { [$0] } ?? [], redundantAudio: redundantAudio,
            redundantAudioFirst: redundantAudio.map { RedundantAudioFormat.isPreferred(in: remote, format: $0) } ?? false, crypto: answerCrypto, fingerprints: localSetup == nil ? [] : local.dtls.map { [$0.fingerprint] } ?? [],
            setup: localSetup, direction: ourDirection, mid: remote.mid, transportWideCCExtensionID: transportWideCC,
            reducedSizeRTCP: local.reducedSizeRTCP && remote.hasAttribute("rtcp-rsize"))
        var answer = session(local: local, section: section)
        // A BUNDLE group holding the audio section is answered with that section alone (the
        // others are rejected below).
        if let mid = remote.mid,
            offer.attributeValues(named: "group").contains(where: { ($0 ?? "").sdpTokens.first == "BUNDLE" && ($0 ?? "").sdpTokens.dropFirst().contains(Substring(mid)) })
        {
            answer.attributes.append(SDPAttribute(name: "group", value: "BUNDLE \(mid)"))
        }
        // RFC 3264 §6: one answer m= line per offered m= line, others rejected.
        answer.media = offer.media.enumerated().map { position, offered in
            if position == index { return section }
            return MediaDescription(
                media: offered.media, port: 0, transportProtocol: offered.transportProtocol,
                formats: Array(offered.formats.prefix(1)), mid: offered.mid)
        }

        let negotiated = NegotiatedAudio(
            opusPayloadType: payloadType,
            remoteOpusParameters: remote.opusParameters(forPayloadType: payloadType),
            remotePtimeMilliseconds: remote.ptimeMilliseconds,
            remoteMaxPtimeMilliseconds: remote.maxPtimeMilliseconds,
            remoteICEUfrag: ufrag, remoteICEPwd: pwd, remoteICELite: offer.iceLite,
            remoteCandidates: usableCandidates(remote.candidates),
            remoteEndOfCandidates: remote.endOfCandidates || offer.endOfCandidates,
            keying: keying, remoteDirection: remoteDirection, direction: ourDirection, mid: remote.mid,
            telephoneEvent: telephoneEvent, redundantAudio: redundantAudio)
        var result = negotiated
        result.peerRequestsLossRunLengthReports = requestsLossRunLength(remote, in: offer)
        result.transportWideCCExtensionID = transportWideCC
        result.reducedSizeRTCP = local.reducedSizeRTCP && remote.hasAttribute("rtcp-rsize")
        result.remoteBandwidthLimitBitsPerSecond = remote.receiveBandwidthLimitBitsPerSecond ?? offer.receiveBandwidthLimitBitsPerSecond
        return (answer, result)
    }

    /// Validates the peer's answer against the offer we sent and extracts the
    /// negotiated parameters.
    ///
    /// The answer's audio section is the one at the position of our offer's
    /// first active audio section. Checks: not rejected (port 0 →
    /// ``SDPError/audioRejected``), same SDES profile, an Opus payload type we
    /// offered, a crypto tag we offered with the matching suite, rtcp-mux,
    /// ICE credentials and a direction compatible with ours.
    public static func processAnswer(
        _ answer: SessionDescription, to offer: SessionDescription
    ) throws(SDPError) -> NegotiatedAudio {
        guard let index = offer.media.firstIndex(where: { $0.media == "audio" && $0.port != 0 }) else {
            throw .noAudioMedia
        }
        let ours = offer.media[index]
        guard index < answer.media.count else {
            throw .answerDoesNotMatchOffer(reason: "answer has \(answer.media.count) media sections, offer has \(offer.media.count)")
        }
        let remote = answer.media[index]
        guard remote.media == "audio" else {
            throw .answerDoesNotMatchOffer(reason: "answer section \(index + 1) is \(remote.media), not audio")
        }
        guard remote.port != 0 else { throw .audioRejected }
        guard remote.transportProtocol.isSRTP else { throw .unsupportedProfile(remote.transportProtocol.name) }
        guard remote.transportProtocol == ours.transportProtocol else {
            throw .answerDoesNotMatchOffer(
                reason: "answer profile \(remote.transportProtocol.name) differs from offered \(ours.transportProtocol.name)")
        }

        // Opus: the answer must use a payload type we offered as Opus.
        let offeredOpus = Set(ours.payloadTypes.filter { ours.rtpMap(forPayloadType: $0)?.isOpus == true })
        var payloadType: UInt8?
        for candidate in remote.payloadTypes {
            if let map = remote.rtpMap(forPayloadType: candidate) {
                guard map.isOpus else { continue }
                guard offeredOpus.contains(candidate) else {
                    throw .answerDoesNotMatchOffer(reason: "answer maps opus to payload type \(candidate), which we did not offer")
                }
                payloadType = candidate
                break
            } else if offeredOpus.contains(candidate) {
                payloadType = candidate  // rtpmap omitted: the offer's mapping applies
                break
            }
        }
        guard let payloadType else { throw .noOpus }

        // Keying: DTLS when we offered it and the answer carries a fingerprint; else SDES: exactly
        // the tag/suite of one of our lines, with the peer's key.
        let keying: NegotiatedKeying
        let answerFingerprints = remote.effectiveFingerprints(in: answer)
        if !ours.fingerprints.isEmpty, let fingerprint = answerFingerprints.first {
            // RFC 4145: an answer without a=setup is active.
            let role = try DTLSNegotiation.offererRole(answered: remote.effectiveSetup(in: answer) ?? .active)
            keying = .dtls(role: role, remoteFingerprint: fingerprint)
        } else {
            guard let remoteCrypto = remote.crypto.first else {
                if !ours.fingerprints.isEmpty && ours.crypto.isEmpty { throw .missingFingerprint }
                throw .noSupportedCrypto(offered: [])
            }
            guard let localCrypto = ours.crypto.first(where: { $0.tag == remoteCrypto.tag }) else {
                throw .answerDoesNotMatchOffer(reason: "answer crypto tag \(remoteCrypto.tag) was never offered")
            }
            guard localCrypto.suite == remoteCrypto.suite else {
                throw .answerDoesNotMatchOffer(
                    reason: "answer crypto tag \(remoteCrypto.tag) uses \(remoteCrypto.suite.name), we offered \(localCrypto.suite.name)")
            }
            keying = .sdes(suite: remoteCrypto.suite, local: localCrypto, remote: remoteCrypto)
        }

        guard remote.rtcpMux else { throw .rtcpMuxRequired }
        let (ufrag, pwd) = try credentials(of: remote, in: answer)

        let ourDirection = ours.effectiveDirection(sessionDirection: offer.direction)
        let remoteDirection = remote.effectiveDirection(sessionDirection: answer.direction)
        if remoteDirection.isSending && !ourDirection.isReceiving {
            throw .answerDoesNotMatchOffer(reason: "answer is \(remoteDirection.rawValue) but we offered \(ourDirection.rawValue)")
        }
        if remoteDirection.isReceiving && !ourDirection.isSending {
            throw .answerDoesNotMatchOffer(reason: "answer is \(remoteDirection.rawValue) but we offered \(ourDirection.rawValue)")
        }
        let negotiatedDirection = MediaDirection(
            sending: ourDirection.isSending && remoteDirection.isReceiving,
            receiving: ourDirection.isReceiving && remoteDirection.isSending)

        var negotiated = NegotiatedAudio(
            opusPayloadType: payloadType,
            remoteOpusParameters: remote.opusParameters(forPayloadType: payloadType),
            remotePtimeMilliseconds: remote.ptimeMilliseconds,
            remoteMaxPtimeMilliseconds: remote.maxPtimeMilliseconds,
            remoteICEUfrag: ufrag, remoteICEPwd: pwd, remoteICELite: answer.iceLite,
            remoteCandidates: usableCandidates(remote.candidates),
            remoteEndOfCandidates: remote.endOfCandidates || answer.endOfCandidates,
            keying: keying, remoteDirection: remoteDirection, direction: negotiatedDirection, mid: remote.mid ?? ours.mid,
            telephoneEvent: TelephoneEventFormat.answered(in: remote, offered: ours).first,
            receivableTelephoneEvents: TelephoneEventFormat.answered(in: remote, offered: ours),
            redundantAudio: answeredRedundantAudio(in: remote, offered: ours, opusPayloadType: payloadType))
        negotiated.peerRequestsLossRunLengthReports = requestsLossRunLength(remote, in: answer)
        // Transport-wide congestion control when we offered it and the answer took it (on the
        // answer's ID, which is ours for an answerer that follows RFC 8285).
        if TransportWideCongestionControl.extensionID(in: ours, payloadType: payloadType) != nil {
            negotiated.transportWideCCExtensionID = TransportWideCongestionControl.extensionID(in: remote, payloadType: payloadType)
        }
        negotiated.remoteBandwidthLimitBitsPerSecond = remote.receiveBandwidthLimitBitsPerSecond ?? answer.receiveBandwidthLimitBitsPerSecond
        negotiated.reducedSizeRTCP = ours.hasAttribute("rtcp-rsize") && remote.hasAttribute("rtcp-rsize")
        return negotiated
    }

    /// Whether a description asks to receive XR Loss RLE blocks: an `a=rtcp-xr` listing
    /// `pkt-loss-rle` (with or without a size, `pkt-loss-rle=N`), the media section's
    /// attribute replacing the session's (RFC 3611 §5.1).
    static func requestsLossRunLength(_ section: MediaDescription, in description: SessionDescription) -> Bool {
        var values = section.attributeValues(named: "rtcp-xr")
        if values.isEmpty { values = description.attributeValues(named: "rtcp-xr") }
        return values.contains { value in
            (value ?? "").sdpTokens.contains { $0 == "pkt-loss-rle" || $0.hasPrefix("pkt-loss-rle=") }
        }
    }

    // MARK: Helpers

    /// The answer's RED, when it is on a payload type we offered RED on (anything else: no RED).
    private static func answeredRedundantAudio(
        in answer: MediaDescription, offered: MediaDescription, opusPayloadType: UInt8
    ) -> RedundantAudioFormat? {
        guard let theirs = RedundantAudioFormat.find(in: answer, opusPayloadType: opusPayloadType),
            let ours = RedundantAudioFormat.find(in: offered, opusPayloadType: opusPayloadType), ours.payloadType == theirs.payloadType
        else { return nil }
        return theirs
    }

    /// The offer's first crypto line we hold a key for (lines with session parameters, with a tag
    /// another line also uses, or with an MKI unless accepted, are skipped), and our line for it.
    private static func chooseCrypto(
        from remote: MediaDescription, local: LocalAudioParameters
    ) throws(SDPError) -> (remote: CryptoAttribute, local: CryptoAttribute) {
        // A tag must name one line (RFC 4568 §9.1): a line whose tag repeats is ambiguous to the
        // offerer when the answer names it, so it is skipped.
        var tagUses: [UInt32: Int] = [:]
        for offered in remote.crypto { tagUses[offered.tag, default: 0] += 1 }
        for offered in remote.crypto where offered.suite.isKnown && offered.sessionParameters.isEmpty && tagUses[offered.tag] == 1 {
            if !local.acceptsRemoteMKI, offered.keyParameters.contains(where: { $0.mki != nil }) { continue }
            guard let ours = local.crypto.first(where: { $0.suite == offered.suite }) else { continue }
            return (offered, try ours.withTag(offered.tag))
        }
        throw .noSupportedCrypto(offered: remote.crypto.map(\.suite.name))
    }

    private static func credentials(
        of section: MediaDescription, in description: SessionDescription
    ) throws(SDPError) -> (ufrag: String, pwd: String) {
        guard let ufrag = section.iceUfrag ?? description.iceUfrag,
              let pwd = section.icePwd ?? description.icePwd else { throw .missingICECredentials }
        return (ufrag, pwd)
    }

    private static func usableCandidates(_ candidates: [ICECandidate]) -> [ICECandidate] {
        candidates.filter { $0.transport.isUDP && $0.componentID == 1 }
    }

    /// The default destination (RFC 8839 §4.2.1.4 / RFC 8840 §4.1.1).
    private static func defaultDestination(_ local: LocalAudioParameters) -> (SDPConnectionData, UInt16) {
        let usable = local.candidates.first {
            $0.transport.isUDP && $0.componentID == 1 && $0.addressKind != .hostname
        }
        guard let usable else { return (SDPConnectionData(address: "0.0.0.0"), 9) }
        return (SDPConnectionData(address: usable.address), usable.port)
    }

    private static func audioSection(
        local: LocalAudioParameters, profile: SDPMediaProtocol, payloadType: UInt8, telephoneEvents: [TelephoneEventFormat],
        redundantAudio: RedundantAudioFormat?, redundantAudioFirst: Bool, crypto: [CryptoAttribute], fingerprints: [DTLSFingerprint], setup: DTLSSetup?, direction: MediaDirection, mid: String?,
        transportWideCCExtensionID: UInt8?, reducedSizeRTCP: Bool
    ) -> MediaDescription {
        let (connection, port) = defaultDestination(local)
        let fmtp = local.opusParameters.formatParameters
        var formatParameters = fmtp.isEmpty ? [] : [FormatParametersAttribute(payloadType: payloadType, parameters: fmtp)]
        formatParameters += (redundantAudio.map { [$0.formatParameters] } ?? []) + telephoneEvents.map(\.formatParameters)
        let opusMap = RTPMapAttribute(payloadType: payloadType, encodingName: "opus", clockRateHz: 48_000, channelCount: 2)
        let audioMaps = redundantAudio.map { redundantAudioFirst ? [$0.rtpMap, opusMap] : [opusMap, $0.rtpMap] } ?? [opusMap]
        return MediaDescription(
            media: "audio", port: port, transportProtocol: profile,
            formats: audioMaps.map { "\($0.payloadType)" } + telephoneEvents.map { "\($0.payloadType)" },
            connection: connection,
            rtpMaps: audioMaps + telephoneEvents.map(\.rtpMap),
            formatParameters: formatParameters,
            ptimeMilliseconds: local.ptimeMilliseconds, maxPtimeMilliseconds: local.maxPtimeMilliseconds,
            rtcpMux: true, iceUfrag: local.iceUfrag, icePwd: local.icePwd, iceOptions: local.iceOptions,
            candidates: local.candidates, endOfCandidates: local.endOfCandidates,
            crypto: crypto, direction: direction, mid: mid, fingerprints: fingerprints, setup: setup,
            attributes: (local.requestsLossRunLengthReports ? [SDPAttribute(name: "rtcp-xr", value: "pkt-loss-rle")] : [])
                + (transportWideCCExtensionID.map { TransportWideCongestionControl.attributes(id: $0, payloadType: payloadType) } ?? [])
                + (reducedSizeRTCP ? [SDPAttribute(name: "rtcp-rsize", value: nil)] : []))
    }

    private static func session(local: LocalAudioParameters, section: MediaDescription) -> SessionDescription {
        SessionDescription(
            origin: SDPOrigin(
                username: local.username, sessionID: local.sessionID, sessionVersion: local.sessionVersion,
                address: local.originAddress),
            sessionName: local.sessionName, iceLite: local.iceLite,
            media: [section])
    }
}

extension NegotiatedKeying {
    /// What a renegotiation does to SRTP, from the keying in force to `new`.
    public enum Change: Sendable, Equatable {
        /// Keep SRTP as it is: the same SDES keys, or the same DTLS association (role and the
        /// peer's certificate: an ICE restart).
        case keep
        /// New SDES keys, in force at once (from DTLS too: its association is dropped).
        case sdes(suite: SDPCryptoSuite, local: CryptoAttribute, remote: CryptoAttribute)
        /// A new DTLS association (RFC 8842 §5.2: a new fingerprint or role, as when a call is
        /// handed to another device); media keeps the old keys until its handshake finishes.
        case newDTLSAssociation(role: DTLSRole, remoteFingerprint: DTLSFingerprint)
    }

    /// What changing from this keying to `new` takes.
    public func change(to new: NegotiatedKeying) -> Change {
        switch (self, new) {
        case let (.dtls(role, fingerprint), .dtls(newRole, newFingerprint))
        where DTLSNegotiation.keepsAssociation(
            currentRole: role, currentFingerprint: fingerprint, role: newRole, remoteFingerprints: [newFingerprint]):
            return .keep
        case let (.sdes(suite, local, remote), .sdes(newSuite, newLocal, newRemote))
        where suite == newSuite && local.keyAndSalt == newLocal.keyAndSalt && remote.keyAndSalt == newRemote.keyAndSalt:
            return .keep
        case let (_, .sdes(suite, local, remote)):
            return .sdes(suite: suite, local: local, remote: remote)
        case let (_, .dtls(role, fingerprint)):
            return .newDTLSAssociation(role: role, remoteFingerprint: fingerprint)
        }
    }
}
