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
        acceptsRemoteMKI: Bool = false
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
    }
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
    /// The chosen SRTP crypto suite.
    public var cryptoSuite: SDPCryptoSuite
    /// The peer's crypto attribute: its key protects what we receive.
    public var remoteCrypto: CryptoAttribute
    /// The tag of the chosen crypto line.
    public var localCryptoTag: UInt32
    /// Our crypto attribute as put in the SDP: its key protects what we send.
    public var localCrypto: CryptoAttribute
    /// The peer's effective direction, from its point of view.
    public var remoteDirection: MediaDirection
    /// What we may do, from our point of view (e.g. `.sendonly` = we send,
    /// we do not receive).
    public var direction: MediaDirection
    /// The `a=mid` of the audio section, if any.
    public var mid: String?

    /// Creates a negotiation result.
    public init(
        opusPayloadType: UInt8, remoteOpusParameters: OpusParameters, remotePtimeMilliseconds: UInt32?,
        remoteMaxPtimeMilliseconds: UInt32?, remoteICEUfrag: String, remoteICEPwd: String, remoteICELite: Bool,
        remoteCandidates: [ICECandidate], remoteEndOfCandidates: Bool, cryptoSuite: SDPCryptoSuite,
        remoteCrypto: CryptoAttribute, localCryptoTag: UInt32, localCrypto: CryptoAttribute,
        remoteDirection: MediaDirection, direction: MediaDirection, mid: String?
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
        self.cryptoSuite = cryptoSuite
        self.remoteCrypto = remoteCrypto
        self.localCryptoTag = localCryptoTag
        self.localCrypto = localCrypto
        self.remoteDirection = remoteDirection
        self.direction = direction
        self.mid = mid
    }
}

/// RFC 3264 offer/answer for Tether's single audio stream: Opus over SDES-SRTP
/// (`RTP/SAVP`, also `RTP/SAVPF`), ICE, mandatory rtcp-mux. Pure functions,
/// no I/O.
public enum AudioOfferAnswer {
    /// Builds our offer: one `m=audio` section, `RTP/SAVP`, Opus only.
    public static func makeOffer(_ local: LocalAudioParameters) -> SessionDescription {
        let section = audioSection(
            local: local, profile: .rtpSAVP, payloadType: local.opusPayloadType,
            crypto: local.crypto, direction: local.direction, mid: local.mid)
        return session(local: local, section: section)
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
        guard remote.transportProtocol.isSDESSRTP else { throw .unsupportedProfile(remote.transportProtocol.name) }
        guard let payloadType = remote.opusPayloadType else { throw .noOpus }

        var chosen: (remote: CryptoAttribute, local: CryptoAttribute)?
        // A tag must name one line (RFC 4568 §9.1): a line whose tag repeats is ambiguous to the
        // offerer when the answer names it, so it is skipped.
        var tagUses: [UInt32: Int] = [:]
        for offered in remote.crypto { tagUses[offered.tag, default: 0] += 1 }
        for offered in remote.crypto where offered.suite.isKnown && offered.sessionParameters.isEmpty && tagUses[offered.tag] == 1 {
            if !local.acceptsRemoteMKI, offered.keyParameters.contains(where: { $0.mki != nil }) { continue }
            guard let ours = local.crypto.first(where: { $0.suite == offered.suite }) else { continue }
            chosen = (offered, try ours.withTag(offered.tag))
            break
        }
        guard let chosen else { throw .noSupportedCrypto(offered: remote.crypto.map(\.suite.name)) }

        guard remote.rtcpMux else { throw .rtcpMuxRequired }
        let (ufrag, pwd) = try credentials(of: remote, in: offer)

        let remoteDirection = remote.effectiveDirection(sessionDirection: offer.direction)
        let ourDirection = MediaDirection(
            sending: local.direction.isSending && remoteDirection.isReceiving,
            receiving: local.direction.isReceiving && remoteDirection.isSending)

        let section = audioSection(
            local: local, profile: remote.transportProtocol, payloadType: payloadType,
            crypto: [chosen.local], direction: ourDirection, mid: remote.mid)
        var answer = session(local: local, section: section)
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
            cryptoSuite: chosen.remote.suite, remoteCrypto: chosen.remote,
            localCryptoTag: chosen.local.tag, localCrypto: chosen.local,
            remoteDirection: remoteDirection, direction: ourDirection, mid: remote.mid)
        return (answer, negotiated)
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
        guard remote.transportProtocol.isSDESSRTP else { throw .unsupportedProfile(remote.transportProtocol.name) }
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

        // Crypto: exactly the tag/suite of one of our lines, with the peer's key.
        guard let remoteCrypto = remote.crypto.first else {
            throw .noSupportedCrypto(offered: [])
        }
        guard let localCrypto = ours.crypto.first(where: { $0.tag == remoteCrypto.tag }) else {
            throw .answerDoesNotMatchOffer(reason: "answer crypto tag \(remoteCrypto.tag) was never offered")
        }
        guard localCrypto.suite == remoteCrypto.suite else {
            throw .answerDoesNotMatchOffer(
                reason: "answer crypto tag \(remoteCrypto.tag) uses \(remoteCrypto.suite.name), we offered \(localCrypto.suite.name)")
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

        return NegotiatedAudio(
            opusPayloadType: payloadType,
            remoteOpusParameters: remote.opusParameters(forPayloadType: payloadType),
            remotePtimeMilliseconds: remote.ptimeMilliseconds,
            remoteMaxPtimeMilliseconds: remote.maxPtimeMilliseconds,
            remoteICEUfrag: ufrag, remoteICEPwd: pwd, remoteICELite: answer.iceLite,
            remoteCandidates: usableCandidates(remote.candidates),
            remoteEndOfCandidates: remote.endOfCandidates || answer.endOfCandidates,
            cryptoSuite: remoteCrypto.suite, remoteCrypto: remoteCrypto,
            localCryptoTag: localCrypto.tag, localCrypto: localCrypto,
            remoteDirection: remoteDirection, direction: negotiatedDirection, mid: remote.mid ?? ours.mid)
    }

    // MARK: Helpers

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
        local: LocalAudioParameters, profile: SDPMediaProtocol, payloadType: UInt8,
        crypto: [CryptoAttribute], direction: MediaDirection, mid: String?
    ) -> MediaDescription {
        let (connection, port) = defaultDestination(local)
        let fmtp = local.opusParameters.formatParameters
        return MediaDescription(
            media: "audio", port: port, transportProtocol: profile, formats: ["\(payloadType)"],
            connection: connection,
            rtpMaps: [RTPMapAttribute(payloadType: payloadType, encodingName: "opus", clockRateHz: 48_000, channelCount: 2)],
            formatParameters: fmtp.isEmpty ? [] : [FormatParametersAttribute(payloadType: payloadType, parameters: fmtp)],
            ptimeMilliseconds: local.ptimeMilliseconds, maxPtimeMilliseconds: local.maxPtimeMilliseconds,
            rtcpMux: true, iceUfrag: local.iceUfrag, icePwd: local.icePwd, iceOptions: local.iceOptions,
            candidates: local.candidates, endOfCandidates: local.endOfCandidates,
            crypto: crypto, direction: direction, mid: mid)
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
