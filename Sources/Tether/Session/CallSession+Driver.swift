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

/// The driver: the session's timers (one task sleeps until the soonest deadline), the
/// reconnection core fed with what the media loop saw, ICE and media events, and the call's end.
extension CallSession {
    /// Arms `timer` `seconds` from now.
    func arm(_ timer: SessionTimer, afterSeconds seconds: Double) {
        arm(timer, at: instantNow().advanced(bySeconds: seconds))
    }

    func arm(_ timer: SessionTimer, at instant: MonotonicInstant) {
        guard !state.isEnded else { return }
        deadlines.arm(timer, at: instant)
        scheduleWake()
    }

    /// Keeps one task sleeping until the soonest deadline (a disarmed one may wake it early:
    /// nothing is due then, and it sleeps again).
    func scheduleWake() {
        guard let next = deadlines.next?.nanoseconds else { return }
        if let at = wakeAt, at <= next { return }
        wakeTask?.cancel()
        wakeAt = next
        wakeTask = Task { [weak self] in
            let now = MonotonicClock.nanoseconds()
            if next > now { guard (try? await Task.sleep(for: .nanoseconds(next - now))) != nil else { return } }
            await self?.wake(scheduledFor: next)
        }
    }

    /// Fires every due timer, soonest first, then sleeps until the next. A task replaced after
    /// its sleep ended (an earlier deadline was armed meanwhile) finds another wake scheduled and
    /// leaves it alone.
    func wake(scheduledFor scheduled: UInt64) {
        guard wakeAt == scheduled else { return }
        wakeTask = nil
        wakeAt = nil
        for timer in deadlines.takeDue(now: instantNow()) {
            guard !state.isEnded else { return }
            fire(timer)
        }
        scheduleWake()
    }

    func fire(_ timer: SessionTimer) {
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
        case .unansweredOffer:
            expireUnansweredOffer(now: instantNow())
        case .trickledChecks:
            trickledChecksEnded()
        }
    }

    func instantNow() -> MonotonicInstant {
        // The clock is monotonic; the reconnection core's inputs are kept in order by its driver.
        MonotonicInstant(nanoseconds: MonotonicClock.nanoseconds())
    }

    /// Feeds one input to the machine and carries out its actions.
    func feed(_ input: ReconnectStateMachine.Input, at when: MonotonicInstant? = nil) {
        guard var r = recovery else { return }
        let actions = r.handle(input, at: when ?? instantNow())
        recovery = r
        perform(actions)
    }

    /// One pass of the driver: report what the media loop saw since the last pass, fire due
    /// deadlines. Returns how long to sleep (nanoseconds), or nil to stop.
    func drive() -> UInt64? {
        guard machine != nil, let media, !state.isEnded else { return nil }
        drainMediaLog()
        let c = media.counters.read()
        let seen = RecoveryDriver.Observation(
            lastMediaArrivalNanoseconds: c.lastMediaArrivalNanoseconds, peerReportArrivalNanoseconds: c.peerReportArrivalNanoseconds,
            peerReportedHighestSequence: c.peerReportedHighestSequence, peerReportMissesRecentPackets: c.peerReportMissesRecentPackets,
            lastDecodedNanoseconds: c.lastDecodedNanoseconds)
        if var r = recovery {
            let actions = r.observe(seen, now: instantNow())
            recovery = r
            perform(actions)
        }
        forwardReceivedDTMF()
        // A hold or resume that waited for an outstanding offer or a renewal goes out here, and
        // the complete candidates a peer that takes no trickled ones still lacks.
        offerHoldChangeIfNeeded()
        offerCompleteCandidatesIfNeeded()
        publishTelemetry()
        if state == .established { telemetry.sampleIfDue(now: MonotonicClock.nanoseconds()) }
        guard var r = recovery, !state.isEnded else { return nil }
        if state != .ending, r.probeIfDue(now: instantNow()) { transport?.probePath() }
        recovery = r
        // Wake at the machine's deadline, and at least every 20 ms to read the media counters.
        let now = MonotonicClock.nanoseconds()
        var delay: UInt64 = 20_000_000
        if let d = r.nextDeadline { delay = min(delay, d.nanoseconds > now ? d.nanoseconds - now : 0) }
        return max(delay, 1_000_000)
    }

    func perform(_ actions: [ReconnectStateMachine.Action]) {
        for action in actions {
            switch action {
            case .changeState(let to):
                switch to {
                case .established, .mediaDisrupted, .renewingMedia:
                    let before = state
                    if let s = Self.callState(to), state != s, !state.isClosing { transition(to: s) }
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
                outboundDisrupted = started
                if started { outboundDisruptions += 1 }
                publishTelemetry()
                eventSink.yield(.outboundMediaChanged(disrupted: started))
            case .giveUp:
                let seconds = configuration.reconnection.giveUpSeconds
                let error = TetherError(
                    code: .mediaTimeout, isTerminal: true, canRetry: true,
                    message: "no media for \(seconds) s despite reconnection attempts; the call was given up")
                eventSink.yield(.error(error))
                finish(CallTerminationReason(cause: .mediaTimeout, error: error), sendBye: false)
            case .applyRenewalAnswer, .discardRenewalAnswer, .answerRenewalOffer, .declineRenewalOffer:
                break  // verdicts: RecoveryDriver.renewalAnswered / peerRenewalOffer return them apart
            }
        }
    }

    static func callState(_ s: ReconnectStateMachine.State) -> CallState? {
        switch s {
        case .established: .established
        case .mediaDisrupted: .mediaDisrupted
        case .renewingMedia: .renewingMedia
        default: nil
        }
    }

    func beginRenewal(attempt: Int, regather: Bool) async {
        guard !state.isEnded else { return }
        switch await startICERestart(attempt: attempt, regather: regather) {
        case .sent:
            offeredAttempt = attempt
        case .foundNothing:
            feed(.gatheringFoundNothing(attempt: attempt))
        case .notSent:
            break
        }
    }

    /// A debounced change of local addresses or links (see `NetworkPathJudge`): the path's
    /// local side gone (renew on what is left, or wait for a network when nothing is), or a
    /// network back while media is disrupted (renew on it).
    func networkChanged(_ change: NetworkChange) {
        guard !state.isClosing, let usable = NetworkChangeHub.shared.usableAddresses() else { return }
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

    func connectTimedOut() {
        guard state == .connecting else { return }
        let error = TetherError(
            code: .connectionTimeout, isTerminal: true, canRetry: true,
            message: "no media from the peer \(configuration.connectTimeoutSeconds) s after media started")
        eventSink.yield(.error(error))
        finish(CallTerminationReason(cause: .connectionTimeout, error: error), sendBye: true)
    }

    /// No candidate pair works and none may come: the call never connected.
    func connectivityFailed() {
        let error = TetherError(
            code: .iceConnectionFailed, isTerminal: true, canRetry: true,
            message: "ICE connectivity checks failed: no candidate pair works")
        eventSink.yield(.error(error))
        finish(CallTerminationReason(cause: .connectionFailed, error: error), sendBye: false)
    }

    func handle(_ event: InternalEvent) {
        switch event {
        case .ice(.gatheringDone(let candidates)):
            logger.debug("candidates gathered", metadata: ["candidates": "\(candidates.count)"])
            gathered = candidates
            let waiters = gatherWaiters
            gatherWaiters = []
            for w in waiters { w.resume(returning: candidates) }
            localGatheringFinished(candidates)
        case .ice(.candidateGathered(let line, let ufrag)):
            guard ufrag == trickle.localGeneration else { return }  // an earlier stream's, still queued
            localCandidateGathered(line)
        case .ice(.componentStateChanged(let s)):
            logger.debug("ICE component \(s)")
            // A side that receives nothing by negotiation (the peer is recvonly or inactive) has
            // no first decoded frame to wait for: a working ICE path is as far as it can see.
            if s == .failed && (state == .established || state == .mediaDisrupted || state == .renewingMedia) { feed(.iceFailed) }
            if s == .failed && state == .connecting && !holdsFailureForTrickle() { connectivityFailed() }
            if s != .failed && trickle.failureHeld {
                // A trickled candidate's pair is being checked or works: the failure is over.
                trickle.failureHeld = false
                deadlines.disarm(.trickledChecks)
            }
        case .ice(.consentLost):
            // RFC 7675: the peer stopped answering consent checks on our pair (30 s) or refused
            // one; the transport has stopped sending on it. A cause of disruption of its own.
            logger.warning(
                "the peer no longer consents to receive on the selected pair: media to it stopped, renewing the path",
                metadata: ["pair": "\(selectedPair.map { "\($0.local) ⇄ \($0.remote)" } ?? "none")"])
            feed(.consentLost)
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
            publishTelemetry()
            eventSink.yield(
                .candidatePairSelected(local: pair.local, remote: pair.remote, localType: pair.localType, remoteType: pair.remoteType))
        case .media(.firstMediaDecoded):
            // At once, not at the counters' next publication (which then feeds it no more).
            if var r = recovery {
                let actions = r.firstFrameDecoded(now: instantNow())
                recovery = r
                perform(actions)
            }
        case .media(.byeReceived):
            if !state.isClosing {
                finish(CallTerminationReason(cause: .remoteHangup), sendBye: false)
            }
        }
    }

    func transition(to new: CallState) {
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
    func finish(_ reason: CallTerminationReason, sendBye: Bool) {
        guard !state.isEnded else { return }
        if reason.cause != .mediaTimeout { feed(.hangUp) }
        publishTelemetry()
        deadlines.removeAll()
        wakeTask?.cancel()
        wakeTask = nil
        wakeAt = nil
        if let id = networkSubscription { NetworkChangeHub.shared.unsubscribe(id) }
        networkSubscription = nil
        devices.stopSource()
        media?.stop(sendBye: sendBye && mediaRunning)
        mediaRunning = false
        drainMediaLog()  // the loop's last records: the worker no longer runs it
        devices.stopSink()
        if let dtls {
            // close_notify, as browsers send on pc.close(): queued on the GLib thread before the close.
            if sendBye { for datagram in dtls.connection.close().datagrams { transport?.sendControl(datagram) } }
        }
        transport?.close()
        gatheringTimedOut()
        // Keep the final counters readable after the call ended.
        telemetry.metrics.update(statistics())
        transition(to: .ended(reason))
        telemetry.recordEnd(state: state)
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
    /// A hold or resume offer is withdrawn if still unanswered (`Negotiator.nextDeadline`).
    case unansweredOffer
    /// The checks of the peer's last trickled candidates have had their time (a connectivity
    /// failure held for them stands if it still holds).
    case trickledChecks
}

/// Events from the GLib and media threads, serialised onto the session.
enum InternalEvent: Sendable {
    case ice(ICETransportEvent)
    case media(MediaNotification)
}
