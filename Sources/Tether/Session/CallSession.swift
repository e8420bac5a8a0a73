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
///
/// Inside, one actor owns the call's parts, each in its own file, and is the only code that
/// awaits. The decisions are sans-IO values in TetherCore, fed with explicit instants:
/// offer/answer and hold (`Negotiator`), reconnection (`RecoveryDriver`: the
/// `ReconnectStateMachine` and what it has been fed), re-keying (`NegotiatedKeying.change(to:)`),
/// the call's timers (`DeadlineSet`), shared re-gatherings (`RegatherLedger`). The devices are an
/// `AudioDevices` value; what other threads read (statistics, report, metrics, hold) is
/// `CallTelemetry`, published whole by `publishTelemetry()`. The parts carry out what they decide:
/// - `CallSession.swift`: state, creation, the first offer/answer, call control (start, mute, end).
/// - `+Renegotiation`: ICE restarts and hold re-offers and answers, glare, direction.
/// - `+Keying`: SDES and DTLS-SRTP, re-keying.
/// - `+MediaPath`: ICE transport and gathering, the media loop's set-up.
/// - `+AudioDevices`, `+DTMF`, `+Statistics` (statistics and the report).
/// - `+Driver`: the one timer task, the reconnection core's feed, ICE and media events, the end.
public actor CallSession {
    /// Every event of the call, in order, from its creation. Finishes after the `ended` state
    /// change. One consumer; more can follow the call with `subscribeToEvents()`.
    public nonisolated let events: AsyncStream<CallEvent>
    nonisolated let eventSink: EventBroadcaster
    /// The call's identifier (`CallConfiguration.callId`, or a random UUID): in every log
    /// message as `call-id`, and in the report.
    public nonisolated let callId: String
    /// The call's logger, report recorder, metrics and published statistics snapshot.
    nonisolated let telemetry: CallTelemetry
    /// The call's logger: the configuration's, with `call-id`.
    nonisolated var logger: Logger { telemetry.logger }
    nonisolated let internalSink: AsyncStream<InternalEvent>.Continuation
    nonisolated let stateBox = Mutex<CallState>(.new)

    let configuration: CallConfiguration
    let createdAtNanoseconds: UInt64
    let receiveRing = PacketRing(slotCount: 256, maximumPacketBytes: 1500)
    /// The media worker thread this call's loop runs on (assigned at creation, least loaded).
    let lease = MediaWorker.lease()
    /// What the devices and the transport signal: the worker's wake-up.
    var wakeup: EventCount { lease.worker.wakeup }
    let cname: String

    var transport: ICETransport?
    var media: MediaLoop?
    var localKeys: [UInt32: SRTPKeyMaterial] = [:]
    /// Offer/answer, renegotiation and hold (sans-IO): the description in force and ours outstanding.
    var negotiation: Negotiator
    /// The session in force, once the first offer/answer completed.
    var negotiated: NegotiatedAudio? { negotiation.negotiated }
    var startRequested = false
    var isMuted = false
    var mediaRunning = false
    /// The capture and playback devices in use (changed by `setAudioSource`/`setAudioSink`),
    /// whether each runs, and their rings.
    var devices: AudioDevices
    var gathered: [String]?
    var gatherWaiters: [CheckedContinuation<[String]?, Never>] = []
    /// Trickle ICE: what has been announced, and what the peer may still send.
    var trickle = TrickleState()
    /// Every timer of the call, as deadlines; `wakeTask` sleeps until the soonest (`scheduleWake`).
    var deadlines = DeadlineSet<SessionTimer>()
    var wakeTask: Task<Void, Never>?
    /// When `wakeTask` wakes (monotonic ns).
    var wakeAt: UInt64?
    /// The reconnection core and what it has been fed (sans-IO); this actor drives it with real
    /// instants. Nil until the first offer/answer completed.
    var recovery: RecoveryDriver?
    /// The reconnection core's state machine.
    var machine: ReconnectStateMachine? { recovery?.machine }
    /// A `renewMedia()` of an established call is gathering or offering.
    var manualRenewalRunning = false
    /// The machine's attempt number our outstanding restart offer belongs to.
    var offeredAttempt: Int?
    /// Our subscription to the process's network-change monitor.
    var networkSubscription: UInt64?
    /// The candidate pair carrying media now.
    var selectedPair: ICESelectedPair?
    /// What network changes mean for the path.
    var networkJudge: NetworkPathJudge { NetworkPathJudge(pinnedAddresses: configuration.localAddresses) }
    /// The hold last reported with `.holdChanged`.
    var reportedHold = HoldState()
    /// Restart offers made (ours) and answered (theirs), for statistics.
    var restartsOffered = 0
    var restartsAnswered = 0
    /// Whether the peer does not receive what we send now, and how often that began.
    var outboundDisrupted = false
    var outboundDisruptions = 0
    /// What the media loop was built with, for statistics (nil until it is).
    var mediaSummary: MediaSummary?
    /// The SRTP suite the media loop's keys use ("" until keys are in force).
    var srtpSuiteInUse = ""
    /// DTLS-SRTP keying: the association (one per call; ICE restarts keep it; its timers are
    /// `.dtlsRetransmission` and `.dtlsHandshake`).
    var dtls: DTLSKeying?
    var dtlsHandshakes = 0
    /// Who shares the re-gathering under way and who holds the streams re-gatherings made.
    var regathers = RegatherLedger()
    /// The re-gathering under way (`regathers.running`), awaited by every caller that claimed it.
    var regatherTask: (job: Int, task: Task<Regathered, Never>)?

    /// A further stream of the call's events, from now on (for a second observer such as a UI
    /// next to the signaling bridge). Finishes after the `ended` state change.
    public nonisolated func subscribeToEvents() -> AsyncStream<CallEvent> {
        eventSink.subscribe()
    }

    /// The current state (readable from any thread).
    public nonisolated var state: CallState { stateBox.withLock { $0 } }

    /// Who holds the call, as the last completed offer/answer says (readable from any thread);
    /// `.holdChanged` events report every change.
    public nonisolated var holdState: HoldState { telemetry.hold }

    /// Creates a session.
    /// - Throws: `TetherError` with code 5001 when the configuration is invalid.
    public init(configuration: CallConfiguration) throws(TetherError) {
        try configuration.validate()
        self.configuration = configuration
        negotiation = Negotiator(
            sessionID: UInt64.random(in: 1...(UInt64(1) << 62)), unansweredOfferSeconds: configuration.connectTimeoutSeconds)
        devices = AudioDevices(
            source: configuration.audioSource, sink: configuration.audioSink,
            format: AudioFormat(frameDurationMilliseconds: configuration.opus.frameDurationMilliseconds), wakeup: lease.worker.wakeup)
        createdAtNanoseconds = MonotonicClock.nanoseconds()
        callId = configuration.callId ?? UUID().uuidString.lowercased()
        let telemetry = CallTelemetry(
            configuration: configuration, callId: callId, createdAtNanoseconds: createdAtNanoseconds,
            initial: CallTelemetry.Snapshot(
                payloadType: 111, packetTimeMilliseconds: configuration.opus.frameDurationMilliseconds,
                bitrate: configuration.opus.bitrateBitsPerSecond,
                configuredJitterBufferTargetMilliseconds: Double(configuration.jitterBufferTargetMilliseconds),
                source: configuration.audioSource, sink: configuration.audioSink))
        self.telemetry = telemetry
        eventSink = EventBroadcaster(logger: telemetry.logger) { telemetry.observe($0) }
        cname = configuration.cname ?? "tether-\(UInt64.random(in: 0...UInt64.max))"
        events = eventSink.subscribe()
        let (internalEvents, internalSink) = AsyncStream.makeStream(of: InternalEvent.self, bufferingPolicy: .unbounded)
        self.internalSink = internalSink
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
        devices.stopSource()
        if mediaRunning { media?.stop(sendBye: false) }
        devices.stopSink()
        transport?.close()
        internalSink.finish()
        eventSink.finish()
        telemetry.metrics.sessionReleased()
    }

    // MARK: The first offer/answer

    /// Gathers candidates and returns the SDP offer (also emitted as a `.localDescription` event).
    public func makeOffer() async throws(TetherError) -> String {
        guard state == .new, negotiation.localOffer == nil, transport == nil else {
            throw .invalidState("makeOffer() needs a new session; the call is \(state.name)")
        }
        let (candidates, complete) = try await prepareTransport(controlling: true, trickle: configuration.trickleICE)
        let offersSDES = configuration.keying != .dtls
        var params = try localParameters(
            candidates: candidates, crypto: offersSDES ? makeLocalCrypto(suites: configuration.srtpSuites) : [],
            dtls: configuration.keying == .sdes ? nil : try localDTLS())
        if params.dtls != nil { params.mid = "0" }
        params.endOfCandidates = complete
        let offer = AudioOfferAnswer.makeOffer(params)
        negotiation.offered(offer)
        if !complete { startTrickling(generation: params.iceUfrag, mid: params.mid, announced: candidates) }
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
        peerDescriptionApplied(answer, endOfCandidates: result.remoteEndOfCandidates)
        if !trickle.described.isEmpty && !Self.advertisesTrickle(answer) {
            trickle.peerNeedsCompleteOffer = true
            offerCompleteCandidatesIfNeeded()
        }
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
        // Trickle only to a peer that said it takes trickled candidates.
        let (candidates, complete) = try await prepareTransport(
            controlling: false, trickle: configuration.trickleICE && Self.advertisesTrickle(offer))
        let (answer, result): (SessionDescription, NegotiatedAudio)
        var local = localParameters(candidates: candidates, crypto: probeKeys, dtls: ourDTLS)
        local.endOfCandidates = complete
        do throws(SDPError) {
            (answer, result) = try AudioOfferAnswer.makeAnswer(to: offer, local: local)
        } catch {
            throw Self.negotiationError(error)
        }
        try activate(result)
        peerDescriptionApplied(offer, endOfCandidates: result.remoteEndOfCandidates)
        if !complete, let index = answer.media.firstIndex(where: { $0.port != 0 }) {
            startTrickling(generation: local.iceUfrag, mid: answer.media[index].mid, mLineIndex: index, announced: candidates)
        }
        let text = answer.serialized()
        eventSink.yield(.localDescription(SessionDescriptionMessage(kind: .answer, sdp: text)))
        return text
    }

    // MARK: Call control

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
        guard !state.isClosing else { throw .invalidState("start() on a call that is \(state.name)") }
        startRequested = true
        if negotiated != nil && !mediaRunning { try startMedia() }
    }

    /// Ends the call: sends RTCP BYE, releases devices and the network. Idempotent.
    /// - Parameters: sipCode, sipPhrase: what the embedder's signaling said, kept in the reason.
    public func hangUp(sipCode: Int? = nil, sipPhrase: String? = nil) {
        guard !state.isClosing else { return }
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
        guard !state.isClosing else { return }
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

    static func parse(_ sdp: String) throws(TetherError) -> SessionDescription {
        do throws(SDPError) {
            return try SessionDescription.parse(sdp)
        } catch {
            throw TetherError(
                code: .malformedSessionDescription, isTerminal: false, canRetry: false,
                message: "malformed session description: \(error)", cause: error)
        }
    }

    static func negotiationError(_ error: SDPError) -> TetherError {
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

}

extension CallState {
    /// Ending or ended: the call takes on no new work (no offers, restarts, timers or devices).
    var isClosing: Bool { isEnded || self == .ending }
}
