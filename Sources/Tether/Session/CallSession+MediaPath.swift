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

/// The media path: local descriptions' parameters, the ICE transport and its (re-)gathering,
/// and the media loop built once negotiation (and keying) completed.
extension CallSession {
    func localParameters(
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
            iceOptions: configuration.trickleICE ? ["trickle"] : [],
            candidates: parsed, endOfCandidates: true, crypto: crypto, dtls: dtls,
            telephoneEvents: configuration.dtmf ? TelephoneEventFormat.defaultOffer : [],
            redundantAudioPayloadType: configuration.redundantAudio ? RedundantAudioFormat.defaultPayloadType : nil,
            prefersRedundantAudio: configuration.redundancy == .always)
    }

    /// Creates the ICE transport and gathers local candidates: all of them, or with `trickle` the
    /// ones found at once (host candidates; the rest follow as `.candidateGathered` events).
    /// - Returns: the candidates, and whether they are all (gathering finished).
    func prepareTransport(controlling: Bool, trickle: Bool = false) async throws(TetherError) -> (candidates: [String], complete: Bool) {
        let sink = internalSink
        let t: ICETransport
        do throws(ICETransportError) {
            t = try ICETransport(
                configuration: ICETransportConfiguration(
                    controlling: controlling, localAddresses: configuration.localAddresses,
                    stunServer: configuration.stunServer, turnServer: configuration.turnServer,
                    consentFreshness: configuration.consentFreshness),
                receiveRing: receiveRing, receiveWakeup: wakeup, eventHandler: { sink.yield(.ice($0)) })
        } catch {
            throw TetherError(code: .iceTransportUnavailable, isTerminal: false, canRetry: false, message: "\(error)", cause: error)
        }
        transport = t
        t.gatherCandidates()
        if trickle {
            // Host candidates are there as soon as libnice has started gathering (the call runs
            // after it on the GLib thread). Without one, wait for what the servers give.
            let sofar = t.localCandidates()
            if !sofar.isEmpty { return (sofar, false) }
        }
        let candidates = await awaitGathering()
        guard !state.isEnded else { throw .invalidState("the call ended while ICE was gathering") }
        guard let candidates, !candidates.isEmpty else {
            throw TetherError(
                code: .iceGatheringFailed, isTerminal: false, canRetry: true,
                message: "ICE gathered no local candidate (local addresses: \(configuration.localAddresses))")
        }
        if let turn = configuration.turnServer, !candidates.contains(where: { (try? ICECandidate.parse($0))?.type == .relay }) {
            // Say why there is no relayed path now, not when a network that needs one fails.
            let why = t.turnTLSTunnel?.lastFailure ?? "no answer, or an answer refusing the allocation"
            logger.warning(
                "the TURN server gave no relayed candidate: the call has no path through it",
                metadata: ["turn-server": "\(turn.address):\(turn.port)", "transport": "\(turn.transport.rawValue)", "reason": "\(why)"])
        }
        return (candidates, true)
    }

    /// Waits for the current gathering to finish, at most 10 s (nil on time-out or hang-up).
    func awaitGathering() async -> [String]? {
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
    ///
    /// With `trickle` (when it starts the job) it returns at once with the new stream's host
    /// candidates, `complete` false: the rest follow as `.localCandidate` events once the
    /// description leaves (`startTrickling`).
    func regatherCandidates(trickle: Bool = false) async -> Regathered {
        let (job, start) = regathers.claim()
        if start { regatherTask = (job, Task { await self.gatherOnFreshStream(trickle: trickle) }) }
        // The ledger's running job is always the task's (both are set here, cleared on its end).
        guard let running = regatherTask, running.job == job else { return Regathered(candidates: nil, token: 0, complete: true) }
        var result = await running.task.value
        if !trickle && !result.complete {
            // The job trickles for another claimant; this one's description needs them all.
            let all = await awaitGathering()
            result = Regathered(candidates: all?.isEmpty == false ? all : result.candidates, token: result.token, complete: true)
        }
        if regatherTask?.job == job { regatherTask = nil }
        regathers.finished(job: job, token: result.token)
        return result
    }

    func gatherOnFreshStream(trickle: Bool) async -> Regathered {
        gathered = nil
        stopTrickling()  // the earlier generation's candidates are not announced any more
        let token = transport?.regather() ?? 0
        if trickle, let sofar = transport?.localCandidates(), !sofar.isEmpty {
            return Regathered(candidates: sofar, token: token, complete: false)
        }
        let fresh = await awaitGathering()
        return Regathered(candidates: fresh?.isEmpty == false ? fresh : nil, token: token, complete: true)
    }

    /// A re-gathered stream whose candidates go nowhere (see `ICETransport.abandonRegather`):
    /// dropped, with its TURN allocation, once no other caller holds it; the media stream's
    /// candidates are ours again.
    func abandonRegather(_ token: UInt64) {
        guard regathers.abandon(token), let transport else { return }
        transport.abandonRegather(token)
        gathered = transport.localCandidates()
    }

    /// Waits for the current gathering to finish (candidates), or nil on time-out or hang-up.
    func waitForGathering() async -> [String]? {
        await withCheckedContinuation { (c: CheckedContinuation<[String]?, Never>) in
            if let gathered { c.resume(returning: gathered) } else { gatherWaiters.append(c) }
        }
    }

    /// Gathering ran 10 s without finishing (a STUN or TURN server out of reach): go on with
    /// what was found so far (the host candidates), or nil when the call ended or nothing was.
    func gatheringTimedOut() {
        let waiters = gatherWaiters
        gatherWaiters = []
        let sofar = state.isEnded ? [] : (transport?.localCandidates() ?? [])
        for w in waiters { w.resume(returning: sofar.isEmpty ? nil : sofar) }
    }

    /// Negotiation finished: set up the ICE remote side, then SRTP, Opus and the media loop: at
    /// once with SDES keys, after the handshake with DTLS-SRTP (the call is `connecting` meanwhile).
    func activate(_ result: NegotiatedAudio) throws(TetherError) {
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
        case let .dtls(role, remoteFingerprint):
            try startDTLS(role: role, remoteFingerprint: remoteFingerprint)
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
        recovery = RecoveryDriver(machine: m, pathProbeSeconds: configuration.reconnection.pathProbeSeconds)
        publishHold()
        transition(to: .connecting)
        if configuration.statisticsIntervalSeconds > 0 { arm(.statistics, afterSeconds: configuration.statisticsIntervalSeconds) }
        if startRequested && media != nil { try startMedia() }
    }

    /// Builds the media loop (SRTP both ways, Opus, jitter buffer) for `result` with these keys.
    func installMedia(_ result: NegotiatedAudio, keys: SRTPContextPair) throws(TetherError) {
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
                receiveRing: receiveRing, captureRing: devices.capture.ring, playbackRing: devices.playback.ring,
                playbackDemand: devices.playback.demand,
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
        mediaSummary = MediaSummary(
            bitrate: setup.encoder.configuration.bitrateBitsPerSecond, voiceProcessing: voice?.settings.summary ?? "off",
            encoderLookaheadMilliseconds: Double(setup.encoder.lookaheadSamples) * 1000 / Double(OpusConfiguration.sampleRateHertz),
            encoderMaximumBandwidth: setup.encoder.configuration.maximumBandwidth.rawValue)
        srtpSuiteInUse = keys.outbound.suite.rawValue
        publishTelemetry()
    }

    func startMedia() throws(TetherError) {
        guard let media, !mediaRunning else { return }
        startSink()
        if negotiation.capturesNow(muted: isMuted) && !startSource() && configuration.requiresCapture {
            throw TetherError(
                code: .captureDeviceFailed, isTerminal: false, canRetry: true,
                message: "capture '\(devices.source.name)' cannot be opened and the configuration requires capture")
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
}

/// What the media loop was built with, for statistics.
struct MediaSummary {
    var bitrate: Int
    var voiceProcessing: String
    var encoderLookaheadMilliseconds: Double
    var encoderMaximumBandwidth: String
}

/// What a re-gathering found: its candidates (nil: none), the stream's token, and whether they
/// are all of them (false: trickle ICE, the host candidates of a gathering still running).
struct Regathered: Sendable {
    var candidates: [String]?
    var token: UInt64
    var complete: Bool
}
