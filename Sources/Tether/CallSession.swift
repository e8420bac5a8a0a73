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

/// One call's media: from the microphone to the far speaker and back.
///
/// The embedder owns signaling. Offerer: `makeOffer()`, deliver the SDP, then `applyAnswer(_:)`.
/// Answerer: `acceptOffer(_:)` returns the answer to deliver. Call `start()` to let media flow as
/// soon as negotiation completes, and `hangUp()` to end. Follow `events` for state changes,
/// descriptions, errors and statistics; read `state` and `statistics()` at any time.
///
/// The offerer is ICE-controlling (RFC 8445 §6.1.1).
public actor CallSession {
    /// Every event of the call, in order, from its creation. Finishes after the `ended` state
    /// change. One consumer; more can follow the call with `subscribeToEvents()`.
    public nonisolated let events: AsyncStream<CallEvent>
    private nonisolated let eventSink: EventBroadcaster
    /// The call's identifier (`CallConfiguration.callId`, or a random UUID): in every log
    /// message as `call-id`, and in the report.
    public nonisolated let callId: String
    /// The call's logger: the configuration's, with `call-id`.
    private nonisolated let logger: Logger
    /// What the call report needs, gathered as the call goes.
    private nonisolated let reportRecorder: ReportRecorderBox
    /// The call's last log messages, for the report.
    private nonisolated let recentLog: RecentLog
    /// The call's counters and gauges (swift-metrics).
    private nonisolated let metrics: CallMetrics
    /// When the driver last gave the report a statistics sample (monotonic ns).
    private var lastReportSample: UInt64 = 0
    private nonisolated let internalSink: AsyncStream<InternalEvent>.Continuation
    private nonisolated let stateBox = Mutex<CallState>(.new)
    private nonisolated let statisticsContext: Mutex<StatisticsContext>

    private let configuration: CallConfiguration
    private let createdAtNanoseconds: UInt64
    private let receiveRing = PacketRing(slotCount: 256, maximumPacketBytes: 1500)
    private let captureRing: SPSCRing<Int16>
    private let playbackRing: SPSCRing<Int16>
    /// How much the playback device wants queued in `playbackRing` (shared with the media loop).
    private let playbackDemand = PlaybackDemand()
    /// The media worker thread this call's loop runs on (assigned at creation, least loaded).
    private let lease = MediaWorker.lease()
    /// What the devices and the transport signal: the worker's wake-up.
    private var wakeup: EventCount { lease.worker.wakeup }
    private let cname: String

    private var transport: ICETransport?
    private var media: MediaLoop?
    private var localKeys: [UInt32: SRTPKeyMaterial] = [:]
    /// Offer/answer, renegotiation and hold (sans-IO): the description in force and ours outstanding.
    private var negotiation: Negotiator
    /// The session in force, once the first offer/answer completed.
    private var negotiated: NegotiatedAudio? { negotiation.negotiated }
    private var startRequested = false
    private var isMuted = false
    private var mediaRunning = false
    private var sourceRunning = false
    private var sinkRunning = false
    /// The capture and playback devices in use (changed by `setAudioSource`/`setAudioSink`).
    private var currentSource: any AudioSource
    private var currentSink: any AudioSink
    private var gathered: [String]?
    private var gatherWaiters: [CheckedContinuation<[String]?, Never>] = []
    /// Every timer of the call, as deadlines; `wakeTask` sleeps until the soonest (`scheduleWake`).
    private var deadlines = DeadlineSet<SessionTimer>()
    private var wakeTask: Task<Void, Never>?
    /// When `wakeTask` wakes (monotonic ns).
    private var wakeAt: UInt64?
    /// The reconnection core (sans-IO); this actor drives it with real instants.
    private var machine: ReconnectStateMachine?
    /// Instants already reported to the machine (monotonic nanoseconds).
    private var fedArrival: UInt64 = 0
    private var fedDecoded: UInt64 = 0
    private var fedReport: UInt64 = 0
    /// A `renewMedia()` of an established call is gathering or offering.
    private var manualRenewalRunning = false
    /// When to probe a quiet path with a connectivity check of our own (a rebound NAT mapping).
    private var pathProbes = PathProbeSchedule(silenceSeconds: 0)
    private var lastFedNow: UInt64 = 0
    /// The machine's attempt number our outstanding restart offer belongs to.
    private var offeredAttempt: Int?
    /// Our subscription to the process's network-change monitor.
    private var networkSubscription: UInt64?
    /// The candidate pair carrying media now.
    private var selectedPair: ICESelectedPair?
    /// What network changes mean for the path.
    private var networkJudge: NetworkPathJudge { NetworkPathJudge(pinnedAddresses: configuration.localAddresses) }
    private nonisolated let holdBox = Mutex(HoldState())
    /// Restart offers made (ours) and answered (theirs), for statistics.
    private var restartsOffered = 0
    private var restartsAnswered = 0
    /// DTLS-SRTP keying: the association (one per call; ICE restarts keep it; its timers are
    /// `.dtlsRetransmission` and `.dtlsHandshake`).
    private var dtls: DTLSKeying?
    private var dtlsHandshakes = 0
    /// The re-gathering under way, shared by every caller that needs fresh candidates meanwhile.
    private var regatherInFlight: RegatherJob?
    private var regatherSerial = 0
    /// Callers waiting on a job (by job id), then holding its stream (by regather token).
    private var pendingRegatherClaims: [Int: Int] = [:]
    private var regatherClaims: [UInt64: Int] = [:]

    /// A further stream of the call's events, from now on (for a second observer such as a UI
    /// next to the signaling bridge). Finishes after the `ended` state change.
    public nonisolated func subscribeToEvents() -> AsyncStream<CallEvent> {
        eventSink.subscribe()
    }

    /// The current state (readable from any thread).
    public nonisolated var state: CallState { stateBox.withLock { $0 } }

    /// Who holds the call, as the last completed offer/answer says (readable from any thread);
    /// `.holdChanged` events report every change.
    public nonisolated var holdState: HoldState { holdBox.withLock { $0 } }

    /// Creates a session.
    /// - Throws: `TetherError` with code 5001 when the configuration is invalid.
    public init(configuration: CallConfiguration) throws(TetherError) {
        try configuration.validate()
        self.configuration = configuration
        negotiation = Negotiator(
            sessionID: UInt64.random(in: 1...(UInt64(1) << 62)), unansweredOfferSeconds: configuration.connectTimeoutSeconds)
        currentSource = configuration.audioSource
        currentSink = configuration.audioSink
        createdAtNanoseconds = MonotonicClock.nanoseconds()
        callId = configuration.callId ?? UUID().uuidString.lowercased()
        // The embedder's handler (at its level) and the report's recent log (at info).
        let recent = RecentLog(createdAtNanoseconds: createdAtNanoseconds)
        recentLog = recent
        let embedders = configuration.logger.handler
        var logger = Logger(label: configuration.logger.label) { _ in
            MultiplexLogHandler([embedders, RecentLogHandler(log: recent)])
        }
        logger[metadataKey: "call-id"] = "\(callId)"
        self.logger = logger
        let recorder = ReportRecorderBox(CallReportRecorder(callId: callId, startedAt: Date()))
        reportRecorder = recorder
        let created = createdAtNanoseconds
        let callMetrics = CallMetrics(factory: configuration.metricsFactory ?? MetricsSystem.factory, dimensions: configuration.metricsDimensions)
        metrics = callMetrics
        eventSink = EventBroadcaster(logger: logger) { event in
            let seconds = Double(MonotonicClock.nanoseconds() - created) / 1e9
            recorder.state.withLock { $0.record(event, atSeconds: seconds, wallClock: Date()) }
            callMetrics.observe(event)
        }
        let frameSamples = configuration.opus.samplesPerFrame
        captureRing = SPSCRing(capacity: Self.powerOfTwo(atLeast: frameSamples * 8))
        playbackRing = SPSCRing(capacity: Self.powerOfTwo(atLeast: frameSamples * 4))
        cname = configuration.cname ?? "tether-\(UInt64.random(in: 0...UInt64.max))"
        events = eventSink.subscribe()
        let (internalEvents, internalSink) = AsyncStream.makeStream(of: InternalEvent.self, bufferingPolicy: .unbounded)
        self.internalSink = internalSink
        statisticsContext = Mutex(
            StatisticsContext(
                codec: "opus/48000/2", payloadType: 111, packetTimeMilliseconds: configuration.opus.frameDurationMilliseconds,
                bitrate: configuration.opus.bitrateBitsPerSecond, suite: "", source: configuration.audioSource,
                sink: configuration.audioSink))
        Task { [weak self] in
            for await event in internalEvents {
                guard let self else { return }
                await self.handle(event)
            }
        }
    }

    /// A session dropped without `hangUp()` still releases its threads, devices and sockets
    /// (without sending BYE).
    deinit {
        if let id = networkSubscription { NetworkChangeHub.shared.unsubscribe(id) }
        wakeTask?.cancel()
        if sourceRunning { currentSource.stop() }
        if mediaRunning { media?.stop(sendBye: false) }
        if sinkRunning { currentSink.stop() }
        transport?.close()
        internalSink.finish()
        eventSink.finish()
        metrics.sessionReleased()
    }

    private static func powerOfTwo(atLeast n: Int) -> Int {
        var c = 1
        while c < n { c <<= 1 }
        return c
    }

    // MARK: Offer / answer

    /// Gathers candidates and returns the SDP offer (also emitted as a `.localDescription` event).
    public func makeOffer() async throws(TetherError) -> String {
        guard state == .new, negotiation.localOffer == nil, transport == nil else {
            throw .invalidState("makeOffer() needs a new session; the call is \(state.name)")
        }
        let candidates = try await prepareTransport(controlling: true)
        let offersSDES = configuration.keying != .dtls
        var params = try localParameters(
            candidates: candidates, crypto: offersSDES ? makeLocalCrypto(suites: configuration.srtpSuites) : [],
            dtls: configuration.keying == .sdes ? nil : try localDTLS())
        if params.dtls != nil { params.mid = "0" }
        let offer = AudioOfferAnswer.makeOffer(params)
        negotiation.offered(offer)
        let text = offer.serialized()
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .offer, sdp: text)))
        return text
    }

    /// Applies the peer's answer to our offer; ICE checks start and the call goes to `connecting`.
    /// - Throws: 3001 for malformed SDP, 3002 for an answer that does not fit the offer, 5002 without an offer.
    public func applyAnswer(_ sdp: String) async throws(TetherError) {
        if negotiated != nil { return try applyRenegotiationAnswer(sdp) }
        guard negotiation.localOffer != nil, state == .new else {
            throw .invalidState("applyAnswer(_:) needs an outstanding offer; the call is \(state.name)")
        }
        let answer = try Self.parse(sdp)
        let processed: NegotiatedAudio?
        do throws(SDPError) {
            processed = try negotiation.processFirstAnswer(answer)
        } catch {
            throw Self.negotiationError(error)
        }
        guard let result = processed else { throw .invalidState("applyAnswer(_:) needs an outstanding offer") }
        try activate(result)
    }

    /// Accepts the peer's offer and returns our answer (also emitted as a `.localDescription` event);
    /// ICE checks start and the call goes to `connecting`.
    /// - Throws: 3001 for malformed SDP, 3002 for an offer Tether cannot use, 5002 when not new.
    public func acceptOffer(_ sdp: String) async throws(TetherError) -> String {
        if negotiated != nil { return try await acceptRenegotiationOffer(sdp) }
        guard state == .new, negotiation.localOffer == nil, transport == nil else {
            throw .invalidState("acceptOffer(_:) needs a new session; the call is \(state.name)")
        }
        let offer = try Self.parse(sdp)
        // Check the offer before gathering, so a bad offer costs nothing.
        let probeKeys = try makeLocalCrypto(suites: configuration.srtpSuites)
        let ourDTLS = try localDTLS()
        do throws(SDPError) {
            _ = try AudioOfferAnswer.makeAnswer(
                to: offer, local: localParameters(candidates: [], crypto: probeKeys, dtls: ourDTLS, checkOnly: true))
        } catch {
            throw Self.negotiationError(error)
        }
        let candidates = try await prepareTransport(controlling: false)
        let (answer, result): (SessionDescription, NegotiatedAudio)
        do throws(SDPError) {
            (answer, result) = try AudioOfferAnswer.makeAnswer(
                to: offer, local: localParameters(candidates: candidates, crypto: probeKeys, dtls: ourDTLS))
        } catch {
            throw Self.negotiationError(error)
        }
        try activate(result)
        let text = answer.serialized()
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .answer, sdp: text)))
        return text
    }

    // MARK: Renegotiation (ICE restarts, hold)

    /// Starts an ICE restart by offer. Glare rule: the ICE-controlling side (the original
    /// offerer) offers restarts; the controlled side offers only after its own network changed
    /// (it needs to send new candidates), and when both offers cross, the controlling side's wins:
    /// the controlled side drops its own and answers, the controlling side refuses the other with
    /// error 5003. Media keeps flowing on the old pair meanwhile, and SRTP keys and counters are
    /// kept (the same a=crypto line is offered again).
    /// A description is never sent without candidates: when gathering finds none (the network
    /// went away), nothing is offered and the reconnection core waits for a usable network.
    /// - Returns: what became of the attempt.
    /// - Parameter attempt: the reconnection core's attempt this offer is for; when the core moved
    ///   on while candidates were gathered (the peer's offer was answered instead, the network
    ///   went away), nothing is sent.
    @discardableResult
    func startICERestart(attempt: Int? = nil, regather: Bool) async -> RestartOutcome {
        guard let negotiated, let transport, !state.isEnded, state != .ending else { return .notSent }
        let controlling = transport.configuration.controlling
        if !controlling && !regather { return .notSent }  // wait for the controlling side's offer
        func superseded() -> Bool { state.isEnded || (attempt != nil && machine?.attemptInFlight != attempt) }
        let candidates: [String]
        if regather {
            let (fresh, token) = await regatherCandidates()
            if superseded() {
                abandonRegather(token)
                return .notSent
            }
            guard let fresh else {
                abandonRegather(token)
                logger.notice("ICE restart: gathering found no candidate (no usable network)")
                return .foundNothing
            }
            candidates = fresh
        } else {
            // A gathering of ours may still be running (a re-gather): its candidates, not a part.
            if gathered == nil { _ = await awaitGathering() }
            if superseded() { return .notSent }
            guard let r = transport.restart() else { return .notSent }
            candidates = r.candidates
        }
        guard !candidates.isEmpty else { return .foundNothing }
        let offer = negotiation.makeReoffer(.restart, base: reofferBase(candidates: candidates, negotiated: negotiated), now: instantNow())
        restartsOffered += 1
        metrics.restartOffered()
        logger.notice(
            "ICE restart offered",
            metadata: [
                "attempt": "\(attempt.map(String.init) ?? "manual")", "regather": "\(regather)", "candidates": "\(candidates.count)",
            ])
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .offer, sdp: offer.serialized(), isRestart: true)))
        return .sent
    }

    /// What `startICERestart` did.
    enum RestartOutcome: Equatable {
        /// The restart offer went out.
        case sent
        /// Nothing to do (the call ended, or the other side offers restarts).
        case notSent
        /// Gathering found no candidate: no offer (the network is gone).
        case foundNothing
    }

    /// The peer's answer to our re-offer (an ICE restart, or hold/resume).
    private func applyRenegotiationAnswer(_ sdp: String) throws(TetherError) {
        let notOutstanding = TetherError.invalidState("applyAnswer(_:) without an outstanding re-offer; the call is \(state.name)")
        guard negotiation.pending != nil, let current = negotiated, let transport, !state.isEnded else { throw notOutstanding }
        let parsed = try Self.parse(sdp)
        let processed: Negotiator.ReofferAnswer?
        do throws(SDPError) {
            processed = try negotiation.processReofferAnswer(parsed)
        } catch {
            throw Self.negotiationError(error)
        }
        guard let answer = processed else { throw notOutstanding }
        let result = answer.result
        if answer.purpose == .direction {
            // Hold or resume: the same ICE session (a peer that restarted ICE anyway is followed).
            try rekeyIfNeeded(current: current, new: result)
            if answer.restartsICE { try Self.applyRemoteICE(result, to: transport, describing: "answer") }
            negotiation.takeAnswer(answer)
            adopted()
            return
        }
        if let attempt = offeredAttempt, var m = machine {
            let actions = m.handle(.renewalAnswered(attempt: attempt), now: instantNow())
            machine = m
            perform(actions)
            if actions.contains(.discardRenewalAnswer(attempt: attempt)) { return }
        }
        // Only an answer that is taken up re-keys (a discarded one changes nothing).
        try rekeyIfNeeded(current: current, new: result)
        try Self.applyRemoteICE(result, to: transport, describing: "restart answer")
        negotiation.takeAnswer(answer)
        adopted()
    }

    /// A re-offer from the peer: an ICE restart (new ICE credentials) and/or a direction change.
    private func acceptRenegotiationOffer(_ sdp: String) async throws(TetherError) -> String {
        guard let current = negotiated, let transport, !state.isEnded, state != .ending else {
            throw .invalidState("acceptOffer(_:) on a call that is \(state.name)")
        }
        let offer = try Self.parse(sdp)
        let isICERestart = negotiation.restartsICE(offer)
        // Glare: the losing side drops its offer and answers; the winner refuses with 5003.
        switch negotiation.glare(peerRestartsICE: isICERestart, controlling: transport.configuration.controlling) {
        case .none:
            break
        case .oursWins(let pending):
            throw TetherError(
                code: .renegotiationConflict, isTerminal: false, canRetry: true,
                message: "both sides offered at once; this side's \(pending == .restart ? "restart" : "re-")offer wins, answer it instead")
        case .theirsWins:
            negotiation.yieldToPeerOffer()
        }
        var candidates: [String] = gathered ?? []
        if isICERestart {
            var regather = false
            if var m = machine {
                let actions = m.handle(.peerRenewalOffer, now: instantNow())
                machine = m
                perform(actions)
                if actions.contains(.declineRenewalOffer) {
                    throw TetherError(
                        code: .renegotiationConflict, isTerminal: false, canRetry: true,
                        message: "both sides offered at once; this side's restart offer wins, answer it instead")
                }
                regather = actions.contains(.answerRenewalOffer(regatherCandidates: true))
            }
            let answering = machine?.attemptInFlight
            var regathered: UInt64?
            if regather {
                let (fresh, token) = await regatherCandidates()
                guard !state.isEnded else { throw .invalidState("the call ended while ICE was gathering") }
                candidates = fresh ?? []
                regathered = token
            } else {
                if gathered == nil { _ = await awaitGathering() }  // our own re-gather may be running
                guard !state.isEnded else { throw .invalidState("the call ended while ICE was gathering") }
                candidates = transport.restart()?.candidates ?? []
            }
            // Another offer from the peer was taken up while we gathered: this one is stale.
            guard machine?.attemptInFlight == answering else {
                if let regathered { abandonRegather(regathered) }
                throw .invalidState("a newer restart offer from the peer was answered while this one waited for candidates")
            }
            // Never answer without candidates: the network is gone; wait for it.
            guard !candidates.isEmpty else {
                if let regathered { abandonRegather(regathered) }
                if let attempt = machine?.attemptInFlight { feed(.gatheringFoundNothing(attempt: attempt)) }
                throw TetherError(
                    code: .iceGatheringFailed, isTerminal: false, canRetry: true,
                    message: "no local candidate to answer the peer's restart offer with (no usable network); the call waits for one")
            }
        }
        if candidates.isEmpty { candidates = transport.localCandidates() }  // a re-gather still running
        let (answer, result): (SessionDescription, NegotiatedAudio)
        do throws(SDPError) {
            let base = localParameters(candidates: candidates, crypto: current.localCrypto.map { [$0] } ?? [], dtls: dtls?.localParameters)
            (answer, result) = try negotiation.makeAnswer(to: offer, base: base)
        } catch {
            throw Self.negotiationError(error)
        }
        try rekeyIfNeeded(current: current, new: result)
        if isICERestart {
            try Self.applyRemoteICE(result, to: transport, describing: "restart offer")
            restartsAnswered += 1
            metrics.restartAnswered()
            logger.notice("ICE restart: answering the peer's restart offer")
        }
        negotiation.answered(result)
        adopted()
        let text = answer.serialized()
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .answer, sdp: text, isRestart: true)))
        return text
    }

    /// Gives ICE the peer's credentials and UDP candidates from a negotiated description.
    private static func applyRemoteICE(
        _ result: NegotiatedAudio, to transport: ICETransport, describing what: String
    ) throws(TetherError) {
        do throws(ICETransportError) {
            try transport.setRemote(
                ufrag: result.remoteICEUfrag, password: result.remoteICEPwd,
                candidates: Self.reachableCandidates(result.remoteCandidates))
        } catch {
            throw TetherError(
                code: .incompatibleSessionDescription, isTerminal: false, canRetry: false,
                message: "ICE refused the peer's \(what): \(error)", cause: error)
        }
    }

    /// The peer's candidates ICE can use: UDP with an IP address. A browser hides its addresses
    /// behind mDNS names (`….local`, RFC 8828 mode 3) that nothing here resolves: they are left
    /// out, and the peer's checks, which arrive from its real address, make peer-reflexive
    /// candidates that carry the call instead (RFC 8445 §7.3.1.3).
    static func reachableCandidates(_ candidates: [ICECandidate]) -> [String] {
        candidates.filter { $0.transport.isUDP && $0.addressKind != .hostname }.map { $0.serialized() }
    }

    /// A renegotiation keeps SRTP as it is when the SDES keys, or the DTLS association (roles and
    /// the peer's certificate: an ICE restart), are unchanged. Otherwise the call is re-keyed
    /// (RFC 8842 §5.2: a new fingerprint means a new association, as when a call is handed to
    /// another device): new SDES keys take effect at once; a new DTLS handshake runs while media
    /// keeps the old keys, and its keys replace them when it finishes.
    private func rekeyIfNeeded(current: NegotiatedAudio, new: NegotiatedAudio) throws(TetherError) {
        switch (current.keying, new.keying) {
        case let (.dtls(role, fingerprint), .dtls(newRole, newFingerprint))
        where DTLSNegotiation.keepsAssociation(
            currentRole: role, currentFingerprint: fingerprint, role: newRole, remoteFingerprints: [newFingerprint]):
            return
        case let (.sdes(suite, local, remote), .sdes(newSuite, newLocal, newRemote))
        where suite == newSuite && local.keyAndSalt == newLocal.keyAndSalt && remote.keyAndSalt == newRemote.keyAndSalt:
            return
        case let (_, .sdes(newSuite, newLocal, newRemote)):
            guard let suite = SRTPSuite(rawValue: newSuite.name) else {
                throw TetherError(
                    code: .incompatibleSessionDescription, isTerminal: false, canRetry: false,
                    message: "renegotiated SRTP suite \(newSuite.name) has no local key")
            }
            media?.replaceKeys(try SRTPContextPair.sdes(suite: suite, local: newLocal.keyAndSalt, remote: newRemote.keyAndSalt))
            disarmDTLSTimers()
            dtls = nil
            statisticsContext.withLock {
                $0.keying = "SDES"
                $0.suite = suite.rawValue
                $0.dtls = nil
            }
        case let (_, .dtls(newRole, newFingerprint)):
            disarmDTLSTimers()
            try startDTLS(role: newRole, remoteFingerprint: newFingerprint)
            startDTLSIfClient()
        }
    }

    /// A new DTLS association in `role` with the peer whose certificate has `remoteFingerprint`,
    /// bounded by the set-up time; its keys start the media loop, or replace the running one's.
    private func startDTLS(role: DTLSRole, remoteFingerprint: DTLSFingerprint) throws(TetherError) {
        let keying: DTLSKeying
        do throws(DTLSError) {
            keying = try DTLSKeying(
                role: role, remoteFingerprint: remoteFingerprint, certificate: dtlsCertificate())
        } catch {
            throw .srtpSetupFailed(error)
        }
        dtls = keying
        statisticsContext.withLock {
            $0.keying = "DTLS-SRTP"
            $0.dtls = keying.connection
        }
        // The deadline belongs to this association: a new one re-arms it, its keys disarm it.
        arm(.dtlsHandshake, afterSeconds: configuration.connectTimeoutSeconds)
    }

    /// A renegotiation completed (the negotiator took its description and hold): the media loop
    /// takes its DTMF format and direction. Then offers the hold the embedder asked for
    /// meanwhile, if it differs.
    private func adopted() {
        guard let result = negotiated else { return }
        media?.setTelephoneEvents(send: result.telephoneEvent, receivable: result.receivableTelephoneEvents)
        applyDirection()
        offerHoldChangeIfNeeded()
    }

    /// Media, capture and liveness for the direction and hold in force. On hold (either side)
    /// no RTP is sent (RTCP goes on), the microphone is released as mute does, and liveness is
    /// judged by RTCP: the side that does not receive media does not expect any.
    private func applyDirection() {
        guard let result = negotiated else { return }
        let sending = negotiation.weSend
        media?.sendsMedia.store(sending, ordering: .relaxed)
        feed(.peerSendsMedia(negotiation.peerSends))
        feed(.weSendMedia(sending))
        updateMicrophone()
        let direction = result.direction.rawValue
        statisticsContext.withLock { $0.direction = direction }
        publishHold()
    }

    /// Publishes the hold in force (`holdState`, statistics) and reports a change.
    private func publishHold() {
        let hold = HoldState(local: negotiation.holdInForce, remote: negotiation.remoteHold)
        let changed = holdBox.withLock { current in
            defer { current = hold }
            return current != hold
        }
        if changed { eventSink.yield(.holdChanged(hold)) }
    }

    /// The microphone follows mute and hold: the media loop sends silence while either is on,
    /// and the capture device runs only while media runs, we are neither muted nor holding, and
    /// the direction lets us send.
    private func updateMicrophone() {
        media?.muted.store(isMuted || negotiation.wantsHold, ordering: .relaxed)
        guard mediaRunning else { return }
        if negotiation.capturesNow(muted: isMuted) { startSource() } else { stopSource() }
    }

    /// What a re-offer (restart, hold, resume) is built on: this call's candidates, credentials
    /// and the keys in force (the negotiator adds the session's payload types, mid and direction).
    private func reofferBase(candidates: [String], negotiated: NegotiatedAudio) -> LocalAudioParameters {
        localParameters(candidates: candidates, crypto: negotiated.localCrypto.map { [$0] } ?? [], dtls: dtls?.localParameters)
    }

    // MARK: Hold

    /// Puts the call on hold (RFC 3264 §8.4): a re-offer with `a=sendonly` (`inactive` when the
    /// peer holds us already) goes out as a `.localDescription` event, like a restart offer, to
    /// be answered through `applyAnswer(_:)`. The microphone is released at once (silence is sent
    /// until the answer); once answered no RTP is sent, RTCP keeps the call alive both ways, and
    /// neither side reports `mediaDisrupted` while it flows; a peer that vanishes meanwhile is
    /// still given up on after the give-up time. `.holdChanged` reports when the hold is in
    /// force. While an offer of either side is outstanding or a renewal runs, the hold rides on
    /// the next offer or answer instead. Idempotent.
    /// - Throws: 5002 before negotiation or once the call ends.
    public func hold() throws(TetherError) {
        try setHold(true)
    }

    /// Takes the call off hold: a re-offer with `a=sendrecv` (the peer answers `sendonly` if it
    /// holds us). The microphone reopens (unless muted) and RTP flows once the answer is applied.
    /// Idempotent.
    /// - Throws: 5002 before negotiation or once the call ends.
    public func resume() throws(TetherError) {
        try setHold(false)
    }

    private func setHold(_ hold: Bool) throws(TetherError) {
        guard negotiated != nil, !state.isEnded, state != .ending else {
            throw .invalidState("\(hold ? "hold()" : "resume()") needs a negotiated call; the call is \(state.name)")
        }
        guard negotiation.setWantsHold(hold) else { return }
        updateMicrophone()
        offerHoldChangeIfNeeded()
    }

    /// Sends a direction-only re-offer when the hold asked for differs from the one in force,
    /// no offer is outstanding, and no renewal is gathering or offering (its offer or answer
    /// will carry the hold).
    private func offerHoldChangeIfNeeded() {
        // While media is disrupted the restart that renews it carries the hold (checked again on
        // every driver pass, so a hold asked for meanwhile goes out once the call is back).
        guard negotiation.holdChangeDue, regatherInFlight == nil, !manualRenewalRunning,
            machine?.attemptInFlight == nil, state == .established || state == .connecting,
            let negotiated, let transport
        else { return }
        // An offer nobody answers (lost by the signaling, refused without word) would block every
        // later one: the negotiator withdraws it after the set-up time (the driver's pass).
        let base = reofferBase(candidates: gathered ?? transport.localCandidates(), negotiated: negotiated)
        let offer = negotiation.makeReoffer(.direction, base: base, now: instantNow())
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .offer, sdp: offer.serialized(), isRestart: true)))
    }

    /// Withdraws a hold or resume offer left unanswered past its deadline, and says so.
    private func expireUnansweredOffer(now: MonotonicInstant) {
        guard let carriedHold = negotiation.expireOffer(now: now) else { return }
        updateMicrophone()
        let seconds = negotiation.unansweredOfferSeconds
        eventSink.yield(
            .error(
                TetherError(
                    code: .renegotiationUnanswered, isTerminal: false, canRetry: true,
                    message: "the peer did not answer the \(carriedHold ? "hold" : "resume") re-offer within \(seconds) s; the call stays as it was")))
    }

    /// The peer refused our outstanding re-offer (SIP 488 or 491, a browser whose
    /// `setRemoteDescription` failed, a Tether that threw 3002 or 5003): call this when the
    /// signaling says so. The offer is dropped; a hold or resume it carried did not happen (call
    /// `hold()`/`resume()` again to retry, after a 491 for instance); a restart offer's attempt
    /// is retried by the reconnection core. Nothing happens without an outstanding re-offer.
    public func offerRejected() {
        guard negotiation.pending != nil, !state.isEnded else { return }
        // A direction change it carried is given up: the microphone follows the hold in force.
        if negotiation.withdrawOffer() { updateMicrophone() }
    }

    // MARK: DTMF

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
        guard let negotiated, let media, mediaRunning, !state.isEnded, state != .ending else {
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

    private static func milliseconds(_ d: Duration) -> Int {
        let (seconds, attoseconds) = d.components
        // Saturating: any duration outside the accepted range is refused by its caller, never a trap.
        let (whole, overflow) = Int(clamping: seconds).multipliedReportingOverflow(by: 1000)
        guard !overflow else { return seconds < 0 ? Int.min : Int.max }
        return whole.addingReportingOverflow(Int(attoseconds / 1_000_000_000_000_000)).partialValue
    }

    /// Reports the digits the media loop received.
    private func forwardReceivedDTMF() {
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

    /// Mutes or unmutes the microphone. Muting closes the capture stream (the microphone is
    /// really released); packets keep flowing (silence is encoded on the media loop's own clock),
    /// so neither side's media-loss detector fires. Unmuting reopens it.
    public func setMuted(_ muted: Bool) {
        guard muted != isMuted else { return }
        isMuted = muted
        // Muting releases the microphone; the media loop sends silence meanwhile.
        updateMicrophone()
    }

    /// Lets media flow: opens the audio source and sink and starts the media loop as soon as
    /// negotiation has completed (at once if it has).
    public func start() throws(TetherError) {
        guard !state.isEnded, state != .ending else { throw .invalidState("start() on a call that is \(state.name)") }
        startRequested = true
        if negotiated != nil && !mediaRunning { try startMedia() }
    }

    /// Renews the media path now, on freshly gathered candidates (an ICE restart on a new stream,
    /// new TURN allocations), as the session does by itself when a local address or link
    /// changes: for a change Tether cannot see (a VPN coming up, a captive portal passed, a user
    /// asking to reconnect), like libwebrtc's `restartIce()`. Media keeps flowing on the current
    /// pair until the new one works, and the old stream's TURN allocation is then released.
    /// While established the call stays established (media flows all along: nothing to show);
    /// while media is disrupted it is what a local network change does (a re-gathering attempt
    /// now). Does nothing before media runs, once the call ends, or while our own restart offer
    /// is unanswered.
    public func renewMedia() {
        guard mediaRunning, machine != nil else { return }
        switch state {
        case .established:
            // Media flows: the call stays established (the reconnection core would take the
            // first decoded frame for a restored path and drop the renewal half-way); a restart
            // offer on fresh candidates, answered as any restart is.
            guard negotiation.pending == nil, !manualRenewalRunning else { return }
            manualRenewalRunning = true
            Task { [weak self] in await self?.renewEstablishedMedia() }
        case .mediaDisrupted, .renewingMedia:
            feed(.localNetworkChanged)
        default:
            return
        }
    }

    private func renewEstablishedMedia() async {
        offeredAttempt = nil
        _ = await startICERestart(attempt: nil, regather: true)
        manualRenewalRunning = false
        offerHoldChangeIfNeeded()
    }

    /// Ends the call: sends RTCP BYE, releases devices and the network. Idempotent.
    /// - Parameters: sipCode, sipPhrase: what the embedder's signaling said, kept in the reason.
    public func hangUp(sipCode: Int? = nil, sipPhrase: String? = nil) {
        guard !state.isEnded, state != .ending else { return }
        transition(to: .ending)
        finish(CallTerminationReason(cause: .localHangup, sipCode: sipCode, sipPhrase: sipPhrase), sendBye: true)
    }

    /// Ends the call because of an error the embedder treats as final, for example a first offer or
    /// answer that could not be negotiated (3001, 3002: `acceptOffer` and `applyAnswer` throw them
    /// without touching the call, so the embedder may still try another description).
    ///
    /// Emits `.error` with the error marked terminal, then ends as `hangUp` does (RTCP BYE if media
    /// ran) with cause `.error` carrying it, so observers learn the code from the events alone.
    /// Idempotent; does nothing on a call already ending.
    public func end(dueTo error: TetherError, sipCode: Int? = nil, sipPhrase: String? = nil) {
        guard !state.isEnded, state != .ending else { return }
        let terminal = TetherError(
            code: error.code, isTerminal: true, canRetry: error.canRetry, message: error.message, cause: error.cause)
        eventSink.yield(.error(terminal))
        transition(to: .ending)
        finish(CallTerminationReason(cause: .error, sipCode: sipCode, sipPhrase: sipPhrase, error: terminal), sendBye: true)
    }

    /// Records that the peer hung up (the embedder learned it through signaling) and ends the call.
    public func remoteHungUp(sipCode: Int? = nil, sipPhrase: String? = nil) {
        guard !state.isEnded else { return }
        finish(CallTerminationReason(cause: .remoteHangup, sipCode: sipCode, sipPhrase: sipPhrase), sendBye: false)
    }

    // MARK: Statistics

    /// The call's report (callable from any thread, during the call or after it): how it went,
    /// from set-up to end, with every disruption, path and device change, and a quality summary.
    /// `tether call` prints it as a `{"type":"report"}` line when the call ends.
    ///
    /// - Parameter logRecords: how many of the call's last log messages to attach (info and
    ///   above, whatever the logger's level; at most 200 are kept; 0: none, `log` is nil). No
    ///   message carries key material (descriptions are never logged).
    public nonisolated func report(logRecords: Int = 0) -> CallReport {
        let s = statistics()
        let current = state
        let log = logRecords > 0 ? recentLog.last(logRecords) : nil
        return reportRecorder.state.withLock { $0.report(s, state: current, log: log) }
    }

    /// Stores the user's verdict on the call beside the report's own findings, so the embedder
    /// uploads one document (`report()`). Usually after the call ends; any time is accepted,
    /// and a later call replaces the earlier feedback.
    /// - Parameters:
    ///   - rating: 1 (bad) … 5 (excellent).
    ///   - issues: the problems the user chose (empty: no issue).
    ///   - comment: the user's words (at most 2000 characters).
    /// - Throws: 5005 (`invalidFeedback`) for a rating outside 1…5 or a longer comment.
    public nonisolated func submitFeedback(rating: Int, issues: Set<CallIssue> = [], comment: String? = nil) throws(TetherError) {
        guard (1...5).contains(rating) else {
            throw TetherError(code: .invalidFeedback, isTerminal: false, canRetry: false, message: "rating \(rating) is not in 1…5")
        }
        if let comment, comment.count > 2000 {
            throw TetherError(
                code: .invalidFeedback, isTerminal: false, canRetry: false, message: "comment of \(comment.count) characters (at most 2000)")
        }
        let feedback = CallReport.Feedback(
            rating: rating, issues: CallIssue.allCases.filter(issues.contains), comment: comment, submittedAt: Date())
        reportRecorder.state.withLock { $0.recordFeedback(feedback) }
        logger.info("user feedback", metadata: ["rating": "\(rating)", "issues": "\(feedback.issues.map(\.rawValue))"])
    }

    /// A snapshot of the call's statistics (callable from any thread).
    public nonisolated func statistics() -> CallStatistics {
        let context = statisticsContext.withLock { $0 }
        let c = context.media?.counters.read() ?? MediaCounters()
        let source = context.source?.statistics ?? AudioDeviceStatistics()
        let sink = context.sink?.statistics ?? AudioDeviceStatistics()
        var statistics = CallStatistics(
            codec: context.codec, payloadType: context.payloadType, packetTimeMilliseconds: context.packetTimeMilliseconds,
            targetBitrateBitsPerSecond: context.media == nil ? context.bitrate : c.encoderBitrateBitsPerSecond,
            srtpSuite: context.suite,
            packetsSent: c.packetsSent, bytesSent: c.bytesSent, rtcpPacketsSent: c.rtcpPacketsSent, sendFailures: c.sendFailures,
            packetsReceived: c.packetsReceived, bytesReceived: c.bytesReceived, packetsLost: c.packetsLost,
            fractionLost: c.fractionLost, jitterMilliseconds: c.jitterMilliseconds, rtcpPacketsReceived: c.rtcpPacketsReceived,
            duplicatePackets: c.duplicatePackets, remotePacketsLost: c.remotePacketsLost,
            remoteFractionLost: c.remoteFractionLost, remoteJitterMilliseconds: c.remoteJitterMilliseconds,
            roundTripTimeMilliseconds: c.roundTripTimeMilliseconds >= 0 ? c.roundTripTimeMilliseconds : nil,
            srtpAuthenticationFailures: c.srtpAuthenticationFailures, srtpReplayFailures: c.srtpReplayFailures,
            malformedPackets: c.malformedPackets, receiveQueueDrops: c.receiveQueueDrops,
            jitterBufferDelayMilliseconds: c.jitterBufferDelayMilliseconds,
            jitterBufferTargetMilliseconds: context.media == nil
                ? Double(configuration.jitterBufferTargetMilliseconds) : c.jitterBufferTargetMilliseconds,
            framesInsertedForDelay: c.framesInsertedForDelay, framesDroppedForDelay: c.framesDroppedForDelay,
            framesDecoded: c.framesDecoded, framesConcealed: c.framesConcealed, framesRecoveredByFEC: c.framesRecoveredByFEC,
            framesRecoveredByRedundancy: c.framesRecoveredByRedundancy, redundantAudioPacketsReceived: c.redundantAudioPacketsReceived,
            latePackets: c.latePackets, captureOverruns: source.overruns, playbackUnderruns: sink.underruns,
            encoderExpectedLossPercent: c.encoderExpectedLossPercent, encoderInBandFEC: c.encoderInBandFEC,
            encoderAdaptations: c.encoderAdaptations,
            redundantFramesSent: c.redundantFramesSent, redundantFramesPerPacket: c.encoderRedundantFrames,
            sendBitrateBitsPerSecond: c.sendBitrateBitsPerSecond, receiveBitrateBitsPerSecond: c.receiveBitrateBitsPerSecond,
            mediaThreadScheduling: context.media?.scheduling.rawValue ?? ThreadScheduling.notStarted.rawValue,
            captureDevice: context.source?.name ?? "", captureThreadScheduling: source.scheduling.rawValue,
            playbackDevice: context.sink?.name ?? "", playbackThreadScheduling: sink.scheduling.rawValue,
            localAddress: context.localAddress, remoteAddress: context.remoteAddress,
            durationSeconds: Double(MonotonicClock.nanoseconds() - createdAtNanoseconds) / 1e9, recovery: context.recovery)
        statistics.encoderLookaheadMilliseconds = context.encoderLookaheadMilliseconds
        statistics.redundantCopiesTooLate = c.redundantCopiesTooLate
        statistics.framesInSilenceGaps = c.silenceGapFrames
        statistics.remoteMeanLossRunPackets = c.remoteMeanLossRunPackets >= 0 ? c.remoteMeanLossRunPackets : nil
        statistics.encoderMaximumBandwidth = context.encoderMaximumBandwidth
        statistics.playbackQueueMilliseconds = c.playbackQueueMilliseconds
        statistics.captureDeviceLatencyMilliseconds = source.latencyMilliseconds
        statistics.playbackDeviceLatencyMilliseconds = sink.latencyMilliseconds
        statistics.srtpKeying = context.keying
        statistics.direction = context.direction
        statistics.voiceProcessing = context.voiceProcessing
        statistics.voiceProcessingFigures = c.voice
        let hold = holdState
        statistics.localHold = hold.local
        statistics.remoteHold = hold.remote
        statistics.dtmfDigitsSent = c.dtmfDigitsSent
        statistics.dtmfDigitsReceived = c.dtmfDigitsReceived
        statistics.dtmfPacketsSent = c.dtmfPacketsSent
        statistics.dtmfPacketsReceived = c.dtmfPacketsReceived
        statistics.paddingPacketsReceived = c.paddingPacketsReceived
        statistics.dtlsHandshakeDatagramsAfterSetUp = context.dtls?.handshakeDatagramsAfterConnected ?? 0
        if context.media != nil {
            statistics.estimatedBandwidthBitsPerSecond = c.estimatedBandwidthBitsPerSecond > 0 ? c.estimatedBandwidthBitsPerSecond : nil
            statistics.sentPacketMilliseconds = c.packetMilliseconds
            statistics.pathUse = c.pathUse
            statistics.queueingDelayMilliseconds = c.estimatedBandwidthBitsPerSecond > 0 ? c.queueDelayMilliseconds : nil
            statistics.lossIsCongestion = c.congestionLoss
            statistics.transportFeedbackReceived = c.transportFeedbackReceived
            statistics.transportFeedbackSent = c.transportFeedbackSent
        }
        return statistics
    }

    // MARK: Internals

    private static func parse(_ sdp: String) throws(TetherError) -> SessionDescription {
        do throws(SDPError) {
            return try SessionDescription.parse(sdp)
        } catch {
            throw TetherError(
                code: .malformedSessionDescription, isTerminal: false, canRetry: false,
                message: "malformed session description: \(error)", cause: error)
        }
    }

    private static func negotiationError(_ error: SDPError) -> TetherError {
        switch error {
        case .malformedLine, .missingRequiredLine, .unsupportedVersion, .invalidCandidate, .invalidCrypto:
            TetherError(
                code: .malformedSessionDescription, isTerminal: false, canRetry: false,
                message: "malformed session description: \(error)", cause: error)
        default:
            TetherError(
                code: .incompatibleSessionDescription, isTerminal: false, canRetry: false,
                message: "incompatible session description: \(error)", cause: error)
        }
    }

    private func makeLocalCrypto(suites: [SRTPSuite]) throws(TetherError) -> [CryptoAttribute] {
        var out: [CryptoAttribute] = []
        for (i, suite) in suites.enumerated() {
            let tag = UInt32(i + 1)
            let key = localKeys[tag] ?? SRTPKeyMaterial.generate(for: suite)
            localKeys[tag] = key
            // Straight into wiped storage: no plain array of the key is left behind.
            let bytes = key.withUnsafeBytes { SecretBytes($0) }
            do throws(SDPError) {
                out.append(try CryptoAttribute(tag: tag, suite: SDPCryptoSuite(name: suite.rawValue), keyAndSalt: bytes))
            } catch {
                throw .srtpSetupFailed(error)
            }
        }
        return out
    }

    /// The configured DTLS certificate, else the process's.
    private func dtlsCertificate() throws(DTLSError) -> DTLSCertificate {
        if let certificate = configuration.dtlsCertificate { return certificate }
        return try DTLSCertificate.shared()
    }

    /// Our DTLS side for a first negotiation: our certificate's fingerprint.
    private func localDTLS() throws(TetherError) -> LocalDTLSParameters {
        do throws(DTLSError) {
            return LocalDTLSParameters(fingerprint: try dtlsCertificate().fingerprint)
        } catch {
            throw .srtpSetupFailed(error)
        }
    }

    private func localParameters(
        candidates: [String], crypto: [CryptoAttribute], dtls: LocalDTLSParameters? = nil, checkOnly: Bool = false
    ) -> LocalAudioParameters {
        var parsed: [ICECandidate] = []
        for line in candidates {
            do throws(SDPError) {
                parsed.append(try ICECandidate.parse(line))
            } catch {
                continue  // libnice wrote something our parser does not take: leave it out
            }
        }
        let (ufrag, pwd) = checkOnly ? ("tether", "tethertethertethertether") : transport?.localCredentials() ?? ("", "")
        let opus = configuration.opus
        return LocalAudioParameters(
            sessionID: negotiation.sessionID, sessionVersion: negotiation.sessionVersion, originAddress: configuration.localAddresses.first ?? parsed.first?.address ?? "0.0.0.0",
            opusParameters: OpusParameters(
                // What we send is coded no wider than this (RFC 7587's hint to the receiver).
                spropMaxCaptureRateHz: UInt32(opus.maximumBandwidth.sampleRateHertz),
                // Room for the sender's loss adaptation to add bitrate for FEC (LossAdaptation
                // raises it up to twice the base).
                maxAverageBitrateBitsPerSecond: UInt32(min(510_000, opus.bitrateBitsPerSecond * 2)), minPtimeMilliseconds: 10,
                useInbandFEC: opus.inBandFEC, useDTX: opus.discontinuousTransmission),
            // We take packets up to 120 ms (the jitter buffer plays packets of up to six frames).
            ptimeMilliseconds: UInt32(opus.frameDurationMilliseconds), maxPtimeMilliseconds: 120, iceUfrag: ufrag, icePwd: pwd,
            candidates: parsed, endOfCandidates: true, crypto: crypto, dtls: dtls,
            telephoneEvents: configuration.dtmf ? TelephoneEventFormat.defaultOffer : [],
            redundantAudioPayloadType: configuration.redundantAudio ? RedundantAudioFormat.defaultPayloadType : nil,
            prefersRedundantAudio: configuration.redundancy == .always)
    }

    /// Creates the ICE transport and gathers local candidates.
    private func prepareTransport(controlling: Bool) async throws(TetherError) -> [String] {
        let sink = internalSink
        let t: ICETransport
        do throws(ICETransportError) {
            t = try ICETransport(
                configuration: ICETransportConfiguration(
                    controlling: controlling, localAddresses: configuration.localAddresses,
                    stunServer: configuration.stunServer, turnServer: configuration.turnServer),
                receiveRing: receiveRing, receiveWakeup: wakeup, eventHandler: { sink.yield(.ice($0)) })
        } catch {
            throw TetherError(code: .iceTransportUnavailable, isTerminal: false, canRetry: false, message: "\(error)", cause: error)
        }
        transport = t
        t.gatherCandidates()
        let candidates = await awaitGathering()
        guard !state.isEnded else { throw .invalidState("the call ended while ICE was gathering") }
        guard let candidates, !candidates.isEmpty else {
            throw TetherError(
                code: .iceGatheringFailed, isTerminal: false, canRetry: true,
                message: "ICE gathered no local candidate (local addresses: \(configuration.localAddresses))")
        }
        return candidates
    }

    /// Waits for the current gathering to finish, at most 10 s (nil on time-out or hang-up).
    private func awaitGathering() async -> [String]? {
        // One time-out for every waiter: it resumes them all.
        if gathered == nil && !deadlines.isArmed(.gathering) { arm(.gathering, afterSeconds: 10) }
        let candidates = await waitForGathering()
        if gatherWaiters.isEmpty { deadlines.disarm(.gathering) }
        return candidates
    }

    /// Gathers candidates again on a fresh ICE stream (after a local network change); the old
    /// pair keeps carrying media until the new stream works. Nil when nothing was found.
    ///
    /// One re-gathering at a time: a caller that comes while one runs (the peer's restart offer
    /// arriving while our own attempt gathers, as when both sides' networks change at once)
    /// shares it. Two would race: the first stream's candidates could reach the second caller
    /// after the second stream had replaced (and removed) the first, and a description would
    /// name a port nobody listens on. Each caller holds a claim on the result; the stream is
    /// given up only when every claimant has abandoned it.
    private func regatherCandidates() async -> (candidates: [String]?, token: UInt64) {
        let job: RegatherJob
        if let running = regatherInFlight {
            job = running
        } else {
            regatherSerial += 1
            let id = regatherSerial
            job = RegatherJob(id: id, task: Task { await self.gatherOnFreshStream() })
            regatherInFlight = job
        }
        pendingRegatherClaims[job.id, default: 0] += 1
        let result = await job.task.value
        if regatherInFlight?.id == job.id { regatherInFlight = nil }
        // The first caller to resume moves every claim on this job onto its stream's token.
        if let claims = pendingRegatherClaims.removeValue(forKey: job.id) { regatherClaims[result.token, default: 0] += claims }
        return result
    }

    private func gatherOnFreshStream() async -> (candidates: [String]?, token: UInt64) {
        gathered = nil
        let token = transport?.regather() ?? 0
        let fresh = await awaitGathering()
        return (fresh?.isEmpty == false ? fresh : nil, token)
    }

    /// A re-gathered stream whose candidates go nowhere (see `ICETransport.abandonRegather`):
    /// dropped, with its TURN allocation, once no other caller holds it; the media stream's
    /// candidates are ours again.
    private func abandonRegather(_ token: UInt64) {
        let claims = regatherClaims[token] ?? 1
        guard claims <= 1 else {
            regatherClaims[token] = claims - 1
            return
        }
        regatherClaims[token] = nil
        guard let transport else { return }
        transport.abandonRegather(token)
        gathered = transport.localCandidates()
    }

    /// Waits for the current gathering to finish (candidates), or nil on time-out or hang-up.
    private func waitForGathering() async -> [String]? {
        await withCheckedContinuation { (c: CheckedContinuation<[String]?, Never>) in
            if let gathered { c.resume(returning: gathered) } else { gatherWaiters.append(c) }
        }
    }

    /// Gathering ran 10 s without finishing (a STUN or TURN server out of reach): go on with
    /// what was found so far (the host candidates), or nil when the call ended or nothing was.
    private func gatheringTimedOut() {
        let waiters = gatherWaiters
        gatherWaiters = []
        let sofar = state.isEnded ? [] : (transport?.localCandidates() ?? [])
        for w in waiters { w.resume(returning: sofar.isEmpty ? nil : sofar) }
    }

    /// Negotiation finished: set up the ICE remote side, then SRTP, Opus and the media loop: at
    /// once with SDES keys, after the handshake with DTLS-SRTP (the call is `connecting` meanwhile).
    private func activate(_ result: NegotiatedAudio) throws(TetherError) {
        guard let transport else { throw .invalidState("no ICE transport") }
        try Self.applyRemoteICE(result, to: transport, describing: "description")
        switch result.keying {
        case let .sdes(negotiatedSuite, localCrypto, remoteCrypto):
            guard let suite = SRTPSuite(rawValue: negotiatedSuite.name) else {
                throw TetherError(
                    code: .incompatibleSessionDescription, isTerminal: false, canRetry: false,
                    message: "negotiated SRTP suite \(negotiatedSuite.name) has no local key")
            }
            // Our key is the one our description carried for the chosen line (the offer's tag on the answerer).
            try installMedia(result, keys: try SRTPContextPair.sdes(suite: suite, local: localCrypto.keyAndSalt, remote: remoteCrypto.keyAndSalt))
            statisticsContext.withLock { $0.keying = "SDES" }
        case let .dtls(role, remoteFingerprint):
            try startDTLS(role: role, remoteFingerprint: remoteFingerprint)
            statisticsContext.withLock { $0.payloadType = Int(result.opusPayloadType) }
        }
        negotiation.established(result)
        var m = ReconnectStateMachine(
            policy: configuration.reconnection, glareRole: transport.configuration.controlling ? .keepsOwnOffer : .yieldsToPeer)
        let now = instantNow()
        // A peer whose first description does not receive holds the call from the start.
        _ = m.handle(.peerSendsMedia(negotiation.peerSends), now: now)
        _ = m.handle(.weSendMedia(negotiation.weSend), now: now)
        // ICE may have selected a pair before the negotiation finished (the answerer's checks
        // start with the offer): the machine must know we can send (its send-path grace).
        if selectedPair != nil { _ = m.handle(.iceConnected, now: now) }
        publishHold()
        statisticsContext.withLock { $0.direction = result.direction.rawValue }
        machine = m
        pathProbes = PathProbeSchedule(silenceSeconds: configuration.reconnection.pathProbeSeconds)
        transition(to: .connecting)
        if configuration.statisticsIntervalSeconds > 0 { arm(.statistics, afterSeconds: configuration.statisticsIntervalSeconds) }
        if startRequested && media != nil { try startMedia() }
    }

    /// Builds the media loop (SRTP both ways, Opus, jitter buffer) for `result` with these keys.
    private func installMedia(_ result: NegotiatedAudio, keys: SRTPContextPair) throws(TetherError) {
        guard let transport else { throw .invalidState("no ICE transport") }
        var setup: MediaLoop.Setup
        // Voice processing as configured (allocated here, used on the media thread only).
        let voice = VoiceProcessor(settings: configuration.effectiveVoiceProcessing)
        do throws(OpusCodecError) {
            var opus = configuration.opus
            if let cap = result.remoteOpusParameters.maxAverageBitrateBitsPerSecond, cap >= 6000 {
                opus.bitrateBitsPerSecond = min(opus.bitrateBitsPerSecond, Int(cap))
            }
            // A peer that renders at most `maxplaybackrate` gets nothing wider (RFC 7587 §6.1).
            if let rate = result.remoteOpusParameters.maxPlaybackRateHz {
                opus.maximumBandwidth = min(opus.maximumBandwidth, OpusConfiguration.Bandwidth(sampleRateHertz: Int(rate)))
            }
            let adaptation = LossAdaptation(
                baseBitrateBitsPerSecond: opus.bitrateBitsPerSecond,
                maximumBitrateBitsPerSecond: result.remoteOpusParameters.maxAverageBitrateBitsPerSecond.map { Int($0) }
                    ?? 510_000,
                peerAcceptsFEC: opus.inBandFEC && result.remoteOpusParameters.useInbandFEC != false,
                initialExpectedLossPercent: opus.inBandFEC ? opus.expectedLossPercent : 0,
                allowsRedundancy: configuration.redundancy != .off && result.redundantAudio != nil,
                alwaysRedundant: configuration.redundancy == .always)
            opus.inBandFEC = adaptation.settings.inBandFEC
            opus.expectedLossPercent = adaptation.settings.expectedLossPercent
            let encoder = try OpusEncoder(configuration: opus)
            let decoder = try OpusDecoder()
            let sink = internalSink
            setup = MediaLoop.Setup(
                encoder: encoder, decoder: decoder, outbound: keys.outbound, inbound: keys.inbound, transport: transport,
                receiveRing: receiveRing, captureRing: captureRing, playbackRing: playbackRing, playbackDemand: playbackDemand,
                worker: lease.worker,
                payloadType: result.opusPayloadType, cname: cname,
                jitterBufferTargetMilliseconds: configuration.jitterBufferTargetMilliseconds,
                adaptiveJitterBuffer: configuration.adaptiveJitterBuffer,
                jitterBufferMaximumMilliseconds: configuration.jitterBufferMaximumMilliseconds,
                usesFEC: configuration.opus.inBandFEC, concealsLoss: configuration.concealsLoss,
                rtcpIntervalSeconds: configuration.rtcpIntervalSeconds, sendsMedia: negotiation.sends(under: result),
                lossAdaptation: adaptation, telephoneEvent: result.telephoneEvent,
                receivableTelephoneEvents: result.receivableTelephoneEvents, redundantAudio: result.redundantAudio,
                sendsLossRunLength: result.peerRequestsLossRunLengthReports, voiceProcessor: voice,
                notify: { sink.yield(.media($0)) })
            setup.rateControl = configuration.rateControl
            // Packets up to the peer's maxptime (60 ms when it says nothing; 120 only with a peer
            // that says it takes them, for links too narrow for 60: a lost packet costs 120 ms).
            setup.maximumPacketMilliseconds = min(120, max(20, result.remoteMaxPtimeMilliseconds.map { Int($0) } ?? 60))
            setup.peerBandwidthLimitBitsPerSecond = result.remoteBandwidthLimitBitsPerSecond
            setup.transportWideSequenceID = result.transportWideCCExtensionID
            setup.reducedSizeRTCP = result.reducedSizeRTCP
        } catch {
            throw TetherError(code: .codecFailed, isTerminal: false, canRetry: false, message: "\(error)", cause: error)
        }
        let loop = MediaLoop(setup)
        media = loop
        logger.info(
            "media negotiated",
            metadata: [
                "payload-type": "\(result.opusPayloadType)", "ptime-ms": "\(setup.encoder.configuration.frameDurationMilliseconds)",
                "bitrate": "\(setup.encoder.configuration.bitrateBitsPerSecond)", "srtp-suite": "\(keys.outbound.suite.rawValue)",
                "red": "\(result.redundantAudio != nil)", "fec": "\(setup.encoder.configuration.inBandFEC)",
                "direction": "\(result.direction)", "voice-processing": "\(voice?.settings.summary ?? "off")",
            ])
        updateMicrophone()  // muted from the first frame when muted or holding
        let voiceSummary = voice?.settings.summary ?? "off"
        statisticsContext.withLock {
            $0.media = loop
            $0.voiceProcessing = voiceSummary
            $0.payloadType = Int(result.opusPayloadType)
            $0.suite = keys.outbound.suite.rawValue
            $0.bitrate = setup.encoder.configuration.bitrateBitsPerSecond
            $0.encoderLookaheadMilliseconds = Double(setup.encoder.lookaheadSamples) * 1000 / Double(OpusConfiguration.sampleRateHertz)
            $0.encoderMaximumBandwidth = setup.encoder.configuration.maximumBandwidth.rawValue
        }
    }

    // MARK: DTLS-SRTP

    /// Sends what a DTLS step produced, takes its keys, ends the call on a failure, and sets the
    /// retransmission timer.
    private func handleDTLS(_ output: DTLSConnection.Output) {
        guard let dtls, let transport else { return }
        for datagram in output.datagrams { transport.sendControl(datagram) }
        if let keys = output.keys { dtlsKeysReady(keys) }
        if case let .failed(error) = dtls.connection.state {
            deadlines.disarm(.dtlsRetransmission)
            guard dtls.keys == nil || error != .closedByPeer else {
                // The peer closed the association (a browser's pc.close()): a hang-up.
                if !state.isEnded && state != .ending { remoteHangUpByDTLS() }
                return
            }
            guard dtls.keys == nil else { return }  // after the handshake: liveness judges the path
            let code: TetherError.Code = error == .fingerprintMismatch ? .dtlsFingerprintMismatch : .dtlsHandshakeFailed
            end(dueTo: TetherError(
                code: code, isTerminal: true, canRetry: code == .dtlsHandshakeFailed, message: "\(error)", cause: error))
            return
        }
        if let delay = dtls.connection.retransmitDelaySeconds {
            arm(.dtlsRetransmission, afterSeconds: delay + 0.001)
        } else {
            deadlines.disarm(.dtlsRetransmission)
        }
    }

    /// DTLS handshakes this call completed: one per association (ICE restarts add none; a peer
    /// whose certificate changed, as when the call moves to another device, adds one).
    public var dtlsHandshakesCompleted: Int { dtlsHandshakes }

    /// Whether the current DTLS association's handshake deadline is still armed (tests: a
    /// finished handshake disarms it, so no stale timer outlives its association).
    var dtlsHandshakeDeadlineArmed: Bool { deadlines.isArmed(.dtlsHandshake) }

    /// The association is replaced or the call ends: its timers go with it.
    private func disarmDTLSTimers() {
        deadlines.disarm(.dtlsRetransmission)
        deadlines.disarm(.dtlsHandshake)
    }

    /// The client opens the handshake once ICE has a pair to send it on.
    private func startDTLSIfClient() {
        guard let dtls, !dtls.started, dtls.role == .client, !state.isEnded else { return }
        dtls.started = true
        handleDTLS(dtls.connection.start())
    }

    private func dtlsKeysReady(_ keys: DTLSSRTPKeys) {
        guard let dtls, dtls.keys == nil, let negotiated, !state.isEnded else { return }
        dtls.keys = keys
        deadlines.disarm(.dtlsHandshake)
        dtlsHandshakes += 1
        if let media {
            // A new association of a running call (the peer's certificate changed): its keys
            // replace the old ones from the media thread's next pass.
            do throws(TetherError) {
                media.replaceKeys(try SRTPContextPair(local: keys.local, remote: keys.remote, isTerminal: true))
                statisticsContext.withLock { $0.suite = keys.suite.rawValue }
            } catch {
                end(dueTo: error)
            }
            return
        }
        do throws(TetherError) {
            try installMedia(negotiated, keys: try SRTPContextPair(local: keys.local, remote: keys.remote))
            if startRequested { try startMedia() }
        } catch {
            end(dueTo: error)
        }
    }

    private func remoteHangUpByDTLS() {
        transition(to: .ending)
        finish(CallTerminationReason(cause: .remoteHangup), sendBye: false)
    }

    private func dtlsHandshakeTimedOut(after seconds: Double) {
        guard let dtls, dtls.keys == nil, !state.isEnded, state != .ending else { return }
        let error = DTLSError.handshakeTimedOut(seconds: seconds)
        end(dueTo: TetherError(code: .dtlsHandshakeFailed, isTerminal: true, canRetry: true, message: "\(error)", cause: error))
    }

    private func startMedia() throws(TetherError) {
        guard let media, !mediaRunning else { return }
        startSink()
        if negotiation.capturesNow(muted: isMuted) && !startSource() && configuration.requiresCapture {
            throw TetherError(
                code: .captureDeviceFailed, isTerminal: false, canRetry: true,
                message: "capture '\(currentSource.name)' cannot be opened and the configuration requires capture")
        }
        do throws(MediaWorker.StartError) {
            try media.start()
        } catch {
            throw TetherError(code: .systemResourceFailed, isTerminal: false, canRetry: true, message: "\(error)", cause: error)
        }
        mediaRunning = true
        // The set-up clock runs from when media may flow (an answerer may accept an offer and
        // start only when the user picks up).
        arm(.connect, afterSeconds: configuration.connectTimeoutSeconds)
        feed(.mediaStarted)
        if configuration.followsNetworkChanges {
            networkSubscription = NetworkChangeHub.shared.subscribe { [weak self] change in
                Task { await self?.networkChanged(change) }
            }
        }
        arm(.driverPass, at: instantNow())
    }

    // MARK: Audio devices

    private var audioFormat: AudioFormat { AudioFormat(frameDurationMilliseconds: configuration.opus.frameDurationMilliseconds) }

    /// Opens the capture device; on failure the call goes on listen-only (silence is sent).
    /// - Returns: whether capture runs.
    @discardableResult
    private func startSource() -> Bool {
        guard !sourceRunning else { return true }
        if let reporting = currentSource as? any AudioDeviceEventReporting {
            reporting.setEventHandler { [weak self] event in Task { await self?.deviceEvent(event, capture: true) } }
        }
        do throws(AudioDeviceError) {
            try currentSource.start(AudioEndpoint(format: audioFormat, ring: captureRing, wakeup: wakeup))
            sourceRunning = true
            media?.captureActive.store(true, ordering: .releasing)
            return true
        } catch {
            media?.captureActive.store(false, ordering: .releasing)
            eventSink.yield(
                .error(
                    TetherError(
                        code: .captureDeviceFailed, isTerminal: false, canRetry: true,
                        message: "capture '\(currentSource.name)' failed: \(error); the call goes on listen-only", cause: error)))
            return false
        }
    }

    private func stopSource() {
        media?.captureActive.store(false, ordering: .releasing)
        if sourceRunning { currentSource.stop() }
        sourceRunning = false
    }

    private func startSink() {
        guard !sinkRunning else { return }
        if let reporting = currentSink as? any AudioDeviceEventReporting {
            reporting.setEventHandler { [weak self] event in Task { await self?.deviceEvent(event, capture: false) } }
        }
        do throws(AudioDeviceError) {
            try currentSink.start(AudioEndpoint(format: audioFormat, ring: playbackRing, wakeup: wakeup, demand: playbackDemand))
            sinkRunning = true
        } catch {
            eventSink.yield(
                .error(
                    TetherError(
                        code: .playbackDeviceFailed, isTerminal: false, canRetry: true,
                        message: "playback '\(currentSink.name)' failed: \(error)", cause: error)))
        }
    }

    /// Switches the capture device mid-call (the microphone stays released while muted).
    public func setAudioSource(_ source: any AudioSource) {
        let wasRunning = sourceRunning
        stopSource()
        currentSource = source
        statisticsContext.withLock { $0.source = source }
        if (wasRunning || mediaRunning) && negotiation.capturesNow(muted: isMuted) { startSource() }
    }

    /// Switches the playback device mid-call.
    public func setAudioSink(_ sink: any AudioSink) {
        let wasRunning = sinkRunning
        if sinkRunning { currentSink.stop() }
        sinkRunning = false
        currentSink = sink
        statisticsContext.withLock { $0.sink = sink }
        if wasRunning || mediaRunning { startSink() }
    }

    /// A device reported a failure or a recovery.
    private func deviceEvent(_ event: AudioDeviceEvent, capture: Bool) {
        guard !state.isEnded else { return }
        eventSink.yield(.audioDevice(capture ? .capture : .playback, event))
        switch event {
        case .failed(let error):
            if capture { media?.captureActive.store(false, ordering: .releasing) }
            eventSink.yield(
                .error(
                    TetherError(
                        code: capture ? .captureDeviceFailed : .playbackDeviceFailed, isTerminal: false, canRetry: true,
                        message: capture
                            ? "capture '\(currentSource.name)' failed: \(error); the call goes on listen-only"
                            : "playback '\(currentSink.name)' failed: \(error)",
                        cause: error)))
        case .recovered, .moved:
            if capture && sourceRunning && !isMuted { media?.captureActive.store(true, ordering: .releasing) }
        }
    }

    // MARK: Timers

    /// Arms `timer` `seconds` from now.
    private func arm(_ timer: SessionTimer, afterSeconds seconds: Double) {
        arm(timer, at: instantNow().advanced(bySeconds: seconds))
    }

    private func arm(_ timer: SessionTimer, at instant: MonotonicInstant) {
        guard !state.isEnded else { return }
        deadlines.arm(timer, at: instant)
        scheduleWake()
    }

    /// Keeps one task sleeping until the soonest deadline (a disarmed one may wake it early:
    /// nothing is due then, and it sleeps again).
    private func scheduleWake() {
        guard let next = deadlines.next?.nanoseconds else { return }
        if let at = wakeAt, at <= next { return }
        wakeTask?.cancel()
        wakeAt = next
        wakeTask = Task { [weak self] in
            let now = MonotonicClock.nanoseconds()
            if next > now { guard (try? await Task.sleep(for: .nanoseconds(next - now))) != nil else { return } }
            await self?.wake()
        }
    }

    /// Fires every due timer, soonest first, then sleeps until the next.
    private func wake() {
        wakeTask = nil
        wakeAt = nil
        for timer in deadlines.takeDue(now: instantNow()) {
            guard !state.isEnded else { return }
            fire(timer)
        }
        scheduleWake()
    }

    private func fire(_ timer: SessionTimer) {
        switch timer {
        case .driverPass:
            if let delay = drive() { arm(.driverPass, at: instantNow().advanced(byNanoseconds: delay)) }
        case .connect:
            connectTimedOut()
        case .statistics:
            emitStatistics()
            arm(.statistics, afterSeconds: configuration.statisticsIntervalSeconds)
        case .dtlsRetransmission:
            if let dtls { handleDTLS(dtls.connection.handleTimer()) }
        case .dtlsHandshake:
            dtlsHandshakeTimedOut(after: configuration.connectTimeoutSeconds)
        case .gathering:
            gatheringTimedOut()
        }
    }

    // MARK: Reconnection driver

    private func instantNow() -> MonotonicInstant {
        // Never report an instant earlier than one already reported (arrivals are published late).
        lastFedNow = max(lastFedNow, MonotonicClock.nanoseconds())
        return MonotonicInstant(nanoseconds: lastFedNow)
    }

    private func instant(_ nanoseconds: UInt64) -> MonotonicInstant {
        lastFedNow = max(lastFedNow, nanoseconds)
        return MonotonicInstant(nanoseconds: lastFedNow)
    }

    /// Feeds one input to the machine and carries out its actions.
    private func feed(_ input: ReconnectStateMachine.Input, at when: MonotonicInstant? = nil) {
        guard var m = machine else { return }
        let actions = m.handle(input, now: when ?? instantNow())
        machine = m
        perform(actions)
    }

    /// One pass of the driver: report what the media loop saw since the last pass, fire due
    /// deadlines. Returns how long to sleep (nanoseconds), or nil to stop.
    private func drive() -> UInt64? {
        guard machine != nil, let media, !state.isEnded else { return nil }
        drainMediaLog()
        let sampledAt = MonotonicClock.nanoseconds()
        if state == .established, sampledAt &- lastReportSample >= 1_000_000_000 {
            lastReportSample = sampledAt
            let s = statistics()
            reportRecorder.state.withLock { $0.sample(s) }
            metrics.update(s)
        }
        let c = media.counters.read()
        if c.lastMediaArrivalNanoseconds > fedArrival {
            fedArrival = c.lastMediaArrivalNanoseconds
            feed(.inboundPacket, at: instant(fedArrival))
            pathProbes.packetArrived(at: instant(fedArrival))
        }
        if c.peerReportArrivalNanoseconds > fedReport {
            fedReport = c.peerReportArrivalNanoseconds
            feed(
                .peerReport(extendedHighestSequence: c.peerReportedHighestSequence, missesRecentPackets: c.peerReportMissesRecentPackets),
                at: instant(fedReport))
        }
        if c.lastDecodedNanoseconds > fedDecoded {
            fedDecoded = c.lastDecodedNanoseconds
            feed(.mediaDecoded, at: instant(fedDecoded))
        }
        feed(.tick)
        forwardReceivedDTMF()
        expireUnansweredOffer(now: instantNow())
        offerHoldChangeIfNeeded()
        publishRecovery()
        guard let m = machine, !state.isEnded else { return nil }
        if state != .ending, pathProbes.probeIfDue(now: instantNow(), peerSendsMedia: m.liveness.peerSendsMedia) {
            transport?.probePath()
        }
        // Wake at the machine's deadline, and at least every 20 ms to read the media counters.
        let now = MonotonicClock.nanoseconds()
        var delay: UInt64 = 20_000_000
        for deadline in [m.nextDeadline(), negotiation.nextDeadline] {
            if let d = deadline { delay = min(delay, d.nanoseconds > now ? d.nanoseconds - now : 0) }
        }
        return max(delay, 1_000_000)
    }

    private func perform(_ actions: [ReconnectStateMachine.Action]) {
        for action in actions {
            switch action {
            case .changeState(let to):
                switch to {
                case .established, .mediaDisrupted, .renewingMedia:
                    let before = state
                    if let s = Self.callState(to), state != s, !state.isEnded, state != .ending { transition(to: s) }
                    // Our reception stopped or came back: tell the peer now (an RTCP report), so it
                    // sees one-way audio, or its end, within a round trip, not a report interval.
                    if to == .mediaDisrupted || (to == .established && (before == .mediaDisrupted || before == .renewingMedia)) {
                        media?.reportSoon.store(true, ordering: .relaxed)
                    }
                case .idle, .connecting, .ended:
                    break  // set-up and endings are the session's own transitions
                }
            case .restartICE(let attempt, let regather):
                Task { [weak self] in await self?.beginRenewal(attempt: attempt, regather: regather) }
            case .abandonAttempt:
                break  // a late answer to it may still be applied (the machine decides)
            case .outboundDisruption(let started):
                statisticsContext.withLock {
                    $0.recovery.outboundDisrupted = started
                    if started { $0.recovery.outboundDisruptions += 1 }
                }
                eventSink.yield(.outboundMediaChanged(disrupted: started))
            case .giveUp:
                let seconds = configuration.reconnection.giveUpSeconds
                let error = TetherError(
                    code: .mediaTimeout, isTerminal: true, canRetry: true,
                    message: "no media for \(seconds) s despite reconnection attempts; the call was given up")
                eventSink.yield(.error(error))
                finish(CallTerminationReason(cause: .mediaTimeout, error: error), sendBye: false)
            case .applyRenewalAnswer, .discardRenewalAnswer, .answerRenewalOffer, .declineRenewalOffer:
                break  // handled where the description is processed
            }
        }
    }

    private static func callState(_ s: ReconnectStateMachine.State) -> CallState? {
        switch s {
        case .established: .established
        case .mediaDisrupted: .mediaDisrupted
        case .renewingMedia: .renewingMedia
        default: nil
        }
    }

    private func beginRenewal(attempt: Int, regather: Bool) async {
        guard !state.isEnded else { return }
        switch await startICERestart(attempt: attempt, regather: regather) {
        case .sent:
            offeredAttempt = attempt
        case .foundNothing:
            feed(.gatheringFoundNothing(attempt: attempt))
            offerHoldChangeIfNeeded()
        case .notSent:
            offerHoldChangeIfNeeded()
        }
    }

    /// Copies the machine's recovery timeline into the statistics (seconds since creation).
    private func publishRecovery() {
        guard let m = machine else { return }
        let origin = createdAtNanoseconds
        func seconds(_ i: MonotonicInstant) -> Double { (Double(i.nanoseconds) - Double(origin)) / 1e9 }
        let disruptions = m.timeline.records.map { r in
            CallRecovery.Disruption(
                startSeconds: seconds(r.start), endSeconds: r.end.map(seconds), cause: Self.describe(r.cause),
                attempts: r.attempts, outcome: r.outcome.map(Self.describe))
        }
        let total = m.timeline.totalDisruptedSeconds(now: MonotonicInstant(nanoseconds: MonotonicClock.nanoseconds()))
        let offered = restartsOffered
        let answered = restartsAnswered
        statisticsContext.withLock {
            $0.recovery.disruptions = disruptions
            $0.recovery.totalDisruptedSeconds = total
            $0.recovery.restartsOffered = offered
            $0.recovery.restartsAnswered = answered
        }
    }

    private static func describe(_ c: RecoveryTimeline.Cause) -> String {
        switch c {
        case .inboundSilence: "media silence"
        case .localNetworkChange: "local network change"
        case .outboundStall: "peer stopped receiving"
        case .noSendPath: "no path to send on"
        }
    }

    private static func describe(_ o: RecoveryTimeline.Outcome) -> String {
        switch o {
        case .mediaResumedWithoutRenewal: "media resumed"
        case .renewed(let n): "renewed after \(n) attempt\(n == 1 ? "" : "s")"
        case .gaveUp: "gave up"
        case .hungUpDuring: "hung up"
        }
    }

    /// A debounced change of local addresses or links (see `NetworkPathJudge`): the path's
    /// local side gone (renew on what is left, or wait for a network when nothing is), or a
    /// network back while media is disrupted (renew on it).
    private func networkChanged(_ change: NetworkChange) {
        guard !state.isEnded, state != .ending, let usable = NetworkChangeHub.shared.usableAddresses() else { return }
        let ours = Set((gathered ?? []).compactMap { try? ICECandidate.parse($0) }.filter { $0.type != .relay }.map(\.address))
        let disrupted = state == .mediaDisrupted || state == .renewingMedia
        switch networkJudge.verdict(change: change, usable: usable, pair: selectedPair, gatheredAddresses: ours, disrupted: disrupted) {
        case .ignore:
            logger.debug("local network changed; the call's path is not affected", metadata: ["usable-addresses": "\(usable.count)"])
        case .renew:
            logger.notice("local network changed under the call's path: renewing it", metadata: ["usable-addresses": "\(usable.count)"])
            feed(.localNetworkChanged)
        case .lost:
            logger.notice("no usable local address left: waiting for a network")
            feed(.localNetworkLost)
        }
    }

    /// Turns what the media loop posted since the last call into log messages (the driver's
    /// pass, every 20 ms at most, and the call's end).
    private func drainMediaLog() {
        guard let media else { return }
        let lost = media.log.drain { MediaLogEvent.emit($0, to: logger) }
        if lost > 0 { logger.warning("media: \(lost) log record\(lost == 1 ? "" : "s") lost on a full ring") }
    }

    private func emitStatistics() {
        guard !state.isEnded else { return }
        eventSink.yield(.statistics(statistics()))
    }

    private func connectTimedOut() {
        guard state == .connecting else { return }
        let error = TetherError(
            code: .connectionTimeout, isTerminal: true, canRetry: true,
            message: "no media from the peer \(configuration.connectTimeoutSeconds) s after media started")
        eventSink.yield(.error(error))
        finish(CallTerminationReason(cause: .connectionTimeout, error: error), sendBye: true)
    }

    private func handle(_ event: InternalEvent) {
        switch event {
        case .ice(.gatheringDone(let candidates)):
            logger.debug("candidates gathered", metadata: ["candidates": "\(candidates.count)"])
            gathered = candidates
            let waiters = gatherWaiters
            gatherWaiters = []
            for w in waiters { w.resume(returning: candidates) }
        case .ice(.componentStateChanged(let s)):
            logger.debug("ICE component \(s)")
            // A side that receives nothing by negotiation (the peer is recvonly or inactive) has
            // no first decoded frame to wait for: a working ICE path is as far as it can see.
            if s == .failed && (state == .established || state == .mediaDisrupted || state == .renewingMedia) { feed(.iceFailed) }
            if s == .failed && state == .connecting {
                let error = TetherError(
                    code: .iceConnectionFailed, isTerminal: true, canRetry: true,
                    message: "ICE connectivity checks failed: no candidate pair works")
                eventSink.yield(.error(error))
                finish(CallTerminationReason(cause: .connectionFailed, error: error), sendBye: false)
            }
        case .ice(.dtlsDatagram(let datagram)):
            transport?.dtlsDatagramHandled()
            guard let dtls, !state.isEnded else { return }
            handleDTLS(dtls.connection.receive(datagram))
        case .ice(.selectedPairChanged(let pair)):
            selectedPair = pair
            // A pair to send on (libnice selects it just before the component turns READY): the
            // machine's one ICE-connected input.
            feed(.iceConnected)
            startDTLSIfClient()
            statisticsContext.withLock {
                $0.localAddress = pair.local
                $0.remoteAddress = pair.remote
            }
            eventSink.yield(
                .candidatePairSelected(local: pair.local, remote: pair.remote, localType: pair.localType, remoteType: pair.remoteType))
        case .media(.firstMediaDecoded):
            feed(.mediaDecoded)
        case .media(.byeReceived):
            if !state.isEnded && state != .ending {
                finish(CallTerminationReason(cause: .remoteHangup), sendBye: false)
            }
        }
    }

    private func transition(to new: CallState) {
        let old = stateBox.withLock { s in
            let o = s
            s = new
            return o
        }
        guard old != new else { return }
        let seconds = Double(MonotonicClock.nanoseconds() - createdAtNanoseconds) / 1e9
        eventSink.yield(.stateChanged(from: old, to: new, secondsSinceStart: seconds))
    }

    /// Releases everything and moves to `ended(reason)`.
    private func finish(_ reason: CallTerminationReason, sendBye: Bool) {
        guard !state.isEnded else { return }
        if reason.cause != .mediaTimeout { feed(.hangUp) }
        publishRecovery()
        deadlines.removeAll()
        wakeTask?.cancel()
        wakeTask = nil
        wakeAt = nil
        if let id = networkSubscription { NetworkChangeHub.shared.unsubscribe(id) }
        networkSubscription = nil
        if sourceRunning { currentSource.stop() }
        sourceRunning = false
        media?.stop(sendBye: sendBye && mediaRunning)
        mediaRunning = false
        drainMediaLog()  // the loop's last records: the worker no longer runs it
        if sinkRunning { currentSink.stop() }
        sinkRunning = false
        if let dtls {
            // close_notify, as browsers send on pc.close(): queued on the GLib thread before the close.
            if sendBye { for datagram in dtls.connection.close().datagrams { transport?.sendControl(datagram) } }
        }
        transport?.close()
        gatheringTimedOut()
        // Keep the final counters readable after the call ended.
        metrics.update(statistics())
        transition(to: .ended(reason))
        metrics.recordEnd(report())
        eventSink.finish()
        internalSink.finish()
    }
}

/// The call's timers (`CallSession.deadlines`).
enum SessionTimer: Hashable, Sendable {
    /// The reconnection driver's next pass (media counters, the machine's deadlines).
    case driverPass
    /// No media `connectTimeoutSeconds` after media started: the call fails.
    case connect
    /// The next `.statistics` event.
    case statistics
    /// A DTLS flight is due again.
    case dtlsRetransmission
    /// The current DTLS association's handshake must have finished.
    case dtlsHandshake
    /// Gathering is given up on (its waiters go on with what was found).
    case gathering
}

/// The report recorder, shared by the session and its event broadcaster.
final class ReportRecorderBox: Sendable {
    let state: Mutex<CallReportRecorder>
    init(_ recorder: CallReportRecorder) { state = Mutex(recorder) }
}

/// Events from the GLib and media threads, serialised onto the session.
/// One re-gathering on a fresh ICE stream, awaited by every caller that needs it.
struct RegatherJob {
    let id: Int
    let task: Task<(candidates: [String]?, token: UInt64), Never>
}

enum InternalEvent: Sendable {
    case ice(ICETransportEvent)
    case media(MediaNotification)
}

/// What `statistics()` needs besides the media counters.
struct StatisticsContext {
    var codec: String
    var payloadType: Int
    var packetTimeMilliseconds: Int
    var bitrate: Int
    var suite: String
    var keying = ""
    var dtls: DTLSConnection?
    var media: MediaLoop?
    var localAddress = ""
    var remoteAddress = ""
    var recovery = CallRecovery()
    var direction = "sendrecv"
    var voiceProcessing = "off"
    var encoderLookaheadMilliseconds = 0.0
    var encoderMaximumBandwidth = ""
    var source: (any AudioSource)?
    var sink: (any AudioSink)?
}
