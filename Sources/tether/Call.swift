import ArgumentParser
import Foundation
import Logging
import Tether

/// `tether call`: one side of a call as a process; signaling travels as JSON lines on stdin/stdout.
struct Call: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "One side of a call. Signaling and reports are JSON lines on stdout; commands and the peer's lines on stdin.",
        discussion: """
            Every line printed on stdout is one JSON object with a "type" field. Deliver every line verbatim to the peer's stdin (by any transport); each side ignores the types it does not use. Logs go to stderr (--log-level, --log-format text or json), each message with the call's call-id (--call-id, or a random UUID).

            Printed types: offer and answer (sdp, restart); candidate (with --trickle: candidate, sdpMid, sdpMLineIndex, usernameFragment, as WebRTC's RTCIceCandidateInit; an empty candidate ends them); state (state, seconds, and on ended: cause, causeCode, sipCode, errorCode); error (code, terminal, retryable, message); statistics (with direction, localHold, remoteHold and DTMF counts); pair (local, remote, localType, remoteType); outbound (disrupted); device (direction, event); hold-state (local, remote, direction) when who holds the call changes; dtmf-received (digit, durationMs) for each digit the peer sent; report (the call's report, CallReport's fields: set-up, duration, end, disruptions, paths, devices, quality) once, after the ended state line.

            Read on stdin: the peer's offer, answer and candidate lines (a null or empty candidate is its end of candidates); {"type":"hangup"} (optionally with sipCode and sipPhrase), {"type":"mute"}, {"type":"unmute"}, {"type":"renew"} (renew the media path on fresh candidates), {"type":"hold"}, {"type":"resume"} (RFC 3264 hold: a re-offer), {"type":"dtmf","digits":"123#"} (optionally toneMs, gapMs; RFC 4733 events), or the bare words hangup, mute, unmute, renew, hold, resume, and dtmf DIGITS. End of input hangs up.

            A first offer or answer that cannot be negotiated prints an error line with its code (3001 malformed, 3002 incompatible) and ends the call with cause "error" and that errorCode; a bad restart description prints a non-terminal error line and the call goes on.

            Exit codes: 0 the call ended by a hang-up (either side); 1 bad usage or configuration; 2 negotiation failed (a description was malformed or incompatible); 3 media timeout (gave up after the reconnection budget); 4 the call never connected (ICE failure or set-up timeout); 5 another terminal error.
            """)

    @Option(help: "offer (sends the first offer; ICE-controlling) or answer (waits for an offer on stdin).")
    var role: Role

    @Option(help: "Audio in: tone[:HERTZ[:DBFS]], wav:PATH, pulse[:SOURCE] (default source if no name), alsa[:PCM].")
    var input: String = "tone:440:-12"

    @Option(help: "Audio out: discard, wav:PATH, pulse[:SINK] (default sink if no name), alsa[:PCM].")
    var output: String = "discard"

    @Option(help: "Device period in milliseconds for pulse/alsa devices (10 or 20).")
    var period: Int = 20

    @Flag(help: "Fail instead of going listen-only when the capture device cannot be opened.")
    var requireCapture = false

    @Option(name: .customLong("local-address"), help: "Local IP address for host candidates (repeatable; default: every interface but loopback).")
    var localAddresses: [String] = []

    @Option(help: "STUN server as IP:PORT.")
    var stun: String?

    @Option(help: "TURN server as IP:PORT:USERNAME:PASSWORD.")
    var turn: String?

    @Option(help: "How the TURN server is reached: udp, tcp where UDP is blocked, or tls (turns:, usually port 443) where only HTTPS gets out.")
    var turnTransport: IceServer.Transport = .udp

    @Option(help: "With --turn-transport tls: the name the server's certificate must carry, also sent as SNI (default: its IP address must be in the certificate).")
    var turnServerName: String?

    @Option(help: "With --turn-transport tls: a PEM file of certificates to trust (default: the system's store).")
    var turnCa: String?

    @Flag(help: "ICE consent freshness (RFC 7675): stop sending on a pair whose peer stops answering consent checks, and renew the path (off by default: Debian 12's libnice gives up on consent after 10 s, not 30).")
    var consentFreshness = false

    @Flag(help: "Trickle ICE (RFC 8838): send the offer (or the answer to an offer that advertises trickle) at once with the host candidates, and the rest as candidate lines, then one with an empty candidate (the end). The peer's candidate lines are taken either way.")
    var trickle = false

    @Option(help: "Opus frame duration in milliseconds (10, 20, 40, 60).")
    var ptime: Int = 20

    @Option(help: "How an offer keys SRTP: sdes (a=crypto), dtls (DTLS-SRTP, what browsers need) or both. An answer follows the offer.")
    var keying: CallConfiguration.Keying = .sdes

    @Option(help: "When each packet also carries the frames before it (RFC 2198 RED, with a peer that negotiated it): off, heavy-loss (from the first packet until the first reports show the path is not lossy, then two frames back from a sustained 10 %, or 5 % in runs, and one frame back instead of FEC under lighter loss) or always.")
    var redundancy: CallConfiguration.Redundancy = .underHeavyLoss

    @Flag(
        inversion: .prefixedNo,
        help: "Follow the path's bandwidth: Opus bitrate, packet duration (20/40/60 ms), FEC and RED inside an estimate from transport-cc feedback or receiver reports.")
    var rateControl = true

    @Option(help: "Seconds without media before the call is reported disrupted.")
    var disruptionThreshold: Double = 1.0

    @Option(help: "Further seconds of disruption before an ICE restart.")
    var renewalDelay: Double = 0.25

    @Option(help: "Seconds of inbound silence before the path is probed with a connectivity check, and between probes (0: never).")
    var pathProbe: Double = 0.2

    @Option(help: "Seconds after media stopped before the call gives up.")
    var giveUp: Double = 50

    @Option(help: "Seconds between statistics lines (0: none).")
    var statisticsInterval: Double = 1

    @Option(help: "Hang up after this many seconds (default: run until hangup).")
    var duration: Double?

    @Option(help: "The call's identifier in every log message and the report (default: a random UUID).")
    var callId: String?

    @OptionGroup var voice: VoiceOptions
    @OptionGroup var logging: LoggingOptions

    enum Role: String, ExpressibleByArgument, Sendable { case offer, answer }

    func run() async throws {
        let output = JSONLineWriter()
        var log = logging.bootstrap()
        var configuration: CallConfiguration
        do {
            configuration = try makeConfiguration()
        } catch {
            log.error("\(error)")
            throw ExitCode(1)
        }
        configuration.logger = log
        let session: CallSession
        do {
            session = try CallSession(configuration: configuration)
        } catch {
            log.error("\(error.message)", metadata: ["error-code": "\(error.code.rawValue)"])
            output.write(["type": "error", "code": error.code.rawValue, "terminal": true, "retryable": error.canRetry, "message": error.message])
            throw ExitCode(1)
        }
        // The command's own messages carry the call id too.
        log[metadataKey: "call-id"] = "\(session.callId)"
        let exitCode = try await Self.hold(session, role: role, duration: duration, output: output, log: log)
        throw ExitCode(exitCode)
    }

    /// Runs the call until it ends and returns its exit code. Every task that holds the session
    /// has finished when this returns, so the session is freed before the process exits (an ASan
    /// build's leak check at exit then sees nothing of it).
    static func hold(_ session: CallSession, role: Role, duration: Double?, output: JSONLineWriter, log: Logger) async throws -> Int32 {
        let outcome = CallOutcome()
        let reporter = Task { await Self.report(session.events, of: session, to: output, outcome: outcome) }
        try await session.start()
        if role == .offer {
            do {
                _ = try await session.makeOffer()  // printed through the events stream
            } catch {
                // Printed as an error line, and the ended line carries its code.
                await session.end(dueTo: error)
            }
        }
        let input = Task { await Self.readCommands(into: session, outcome: outcome, output: output, log: log) }
        let timer = duration.map { duration in
            Task {
                try? await Task.sleep(for: .seconds(duration))
                if !Task.isCancelled { await session.hangUp() }
            }
        }
        await reporter.value
        input.cancel()
        timer?.cancel()
        await input.value
        await timer?.value
        return outcome.exitCode
    }

    func makeConfiguration() throws -> CallConfiguration {
        var c = CallConfiguration()
        c.audioSource = try AudioEndpointSpec.source(input, periodMilliseconds: period)
        c.audioSink = try AudioEndpointSpec.sink(output, periodMilliseconds: period)
        c.requiresCapture = requireCapture
        c.consentFreshness = consentFreshness
        c.trickleICE = trickle
        c.voiceProcessing = voice.settings(for: c.audioSource)
        c.opus = OpusSettings(frameDurationMilliseconds: ptime)
        c.keying = keying
        c.redundancy = redundancy
        c.rateControl = rateControl
        c.localAddresses = localAddresses
        c.statisticsIntervalSeconds = statisticsInterval
        if let stun { c.stunServer = try ServerSpec.parse(stun, credentials: false) }
        if let turn {
            c.turnServer = try ServerSpec.parse(turn, credentials: true)
            c.turnServer?.transport = turnTransport
            c.turnServer?.serverName = turnServerName
            c.turnServer?.trustedCertificatesPath = turnCa
        }
        if (turnServerName != nil || turnCa != nil) && (turn == nil || turnTransport != .tls) {
            throw ValidationError("--turn-server-name and --turn-ca are for --turn-transport tls")
        }
        c.reconnection.disruptionThresholdSeconds = disruptionThreshold
        c.reconnection.renewalDelaySeconds = renewalDelay
        c.reconnection.pathProbeSeconds = pathProbe
        c.reconnection.giveUpSeconds = giveUp
        c.callId = callId
        return c
    }

    /// Prints every event as a JSON line and records how the call ended.
    static func report(_ events: AsyncStream<CallEvent>, of session: CallSession, to output: JSONLineWriter, outcome: CallOutcome) async {
        for await event in events {
            switch event {
            case .localDescription(let d):
                output.write(["type": d.kind.rawValue, "sdp": d.sdp, "restart": d.isRestart])
            case .stateChanged(_, let to, let seconds):
                var line: [String: Any] = ["type": "state", "state": to.name, "seconds": (seconds * 1000).rounded() / 1000]
                if case .ended(let reason) = to {
                    line["cause"] = reason.cause.description
                    line["causeCode"] = reason.causeCode
                    if let sip = reason.sipCode { line["sipCode"] = sip }
                    if let e = reason.error { line["errorCode"] = e.code.rawValue }
                    outcome.record(reason)
                }
                output.write(line)
                if to.isEnded, let report = reportObject(session.report()) { output.write(report) }
            case .error(let e):
                output.write(["type": "error", "code": e.code.rawValue, "terminal": e.isTerminal, "retryable": e.canRetry, "message": e.message])
            case .statistics(let s):
                output.write(StatisticsJSON.object(s))
            case .audioDevice(let direction, let deviceEvent):
                let change = CallReport.DeviceChange(atSeconds: 0, direction: direction, event: deviceEvent)
                var line: [String: Any] = ["type": "device", "direction": change.direction, "event": change.event]
                if let device = change.device { line["device"] = device }
                if let message = change.message { line["message"] = message }
                output.write(line)
            case .outboundMediaChanged(let disrupted):
                output.write(["type": "outbound", "disrupted": disrupted])
            case .candidatePairSelected(let local, let remote, let lt, let rt):
                output.write(["type": "pair", "local": local, "remote": remote, "localType": lt, "remoteType": rt])
            case .dtmf(let digit, let milliseconds):
                output.write(["type": "dtmf-received", "digit": String(digit), "durationMs": milliseconds])
            case .holdChanged(let hold):
                let direction = session.statistics().direction
                output.write(["type": "hold-state", "local": hold.local, "remote": hold.remote, "direction": direction])
            case .localCandidate(let c):
                var line: [String: Any] = ["type": "candidate", "candidate": c.candidate, "sdpMLineIndex": c.sdpMLineIndex ?? 0]
                if let mid = c.sdpMid { line["sdpMid"] = mid }
                if let fragment = c.usernameFragment { line["usernameFragment"] = fragment }
                output.write(line)
            }
        }
    }

    /// The report as a JSON line's object (`type` "report"; dates in ISO 8601).
    static func reportObject(_ report: CallReport) -> [String: Any]? {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(report), var object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            return nil
        }
        object["type"] = "report"
        return object
    }

    /// Reads the peer's descriptions and the user's commands from stdin.
    static func readCommands(into session: CallSession, outcome: CallOutcome, output: JSONLineWriter, log: Logger) async {
        do {
            for try await line in StandardInputLines.stream() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty { continue }
                var type = trimmed
                var object: [String: Any] = [:]
                if trimmed.hasPrefix("dtmf ") {
                    type = "dtmf"
                    object["digits"] = String(trimmed.dropFirst(5)).trimmingCharacters(in: .whitespaces)
                }
                if trimmed.hasPrefix("{") {
                    guard let data = trimmed.data(using: .utf8),
                        let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let t = o["type"] as? String
                    else {
                        log.warning("ignored an input line that is not a JSON object with a type")
                        continue
                    }
                    object = o
                    type = t
                }
                switch type {
                case "offer":
                    guard let sdp = object["sdp"] as? String else { continue }
                    do { _ = try await session.acceptOffer(sdp) } catch {
                        await Self.negotiationFailed(error, session: session, outcome: outcome, output: output, log: log)
                    }
                case "answer":
                    guard let sdp = object["sdp"] as? String else { continue }
                    do { try await session.applyAnswer(sdp) } catch {
                        await Self.negotiationFailed(error, session: session, outcome: outcome, output: output, log: log)
                    }
                case "candidate":
                    // RTCIceCandidateInit's shape; a null or empty candidate ends them.
                    let message = ICECandidateMessage(
                        candidate: object["candidate"] as? String ?? "", sdpMid: object["sdpMid"] as? String,
                        sdpMLineIndex: object["sdpMLineIndex"] as? Int, usernameFragment: object["usernameFragment"] as? String)
                    do { try await session.addRemoteCandidate(message) } catch { refused(error, output: output, log: log) }
                case "hangup":
                    await session.hangUp(sipCode: object["sipCode"] as? Int, sipPhrase: object["sipPhrase"] as? String)
                case "mute":
                    await session.setMuted(true)
                case "unmute":
                    await session.setMuted(false)
                case "renew":
                    await session.renewMedia()
                case "hold", "resume":
                    do {
                        if type == "hold" { try await session.hold() } else { try await session.resume() }
                    } catch {
                        refused(error, output: output, log: log)
                    }
                case "dtmf":
                    guard let digits = object["digits"] as? String else { continue }
                    let toneMs = object["toneMs"] as? Int ?? 100
                    let gapMs = object["gapMs"] as? Int ?? 70
                    do {
                        try await session.sendDTMF(digits, toneDuration: .milliseconds(toneMs), gap: .milliseconds(gapMs))
                    } catch {
                        refused(error, output: output, log: log)
                    }
                default:
                    continue  // the peer's state, statistics, error and pair lines
                }
            }
        } catch {
            log.error("stdin: \(error)")
        }
        if !Task.isCancelled { await session.hangUp() }  // end of input
    }

    /// A description from the peer could not be used. The first offer or answer ends the call
    /// (an `error` line with the code, then `ended` with cause `error` and `errorCode`, exit 2);
    /// a later one (a restart) is reported as a non-terminal `error` line and the call goes on.
    static func negotiationFailed(_ error: TetherError, session: CallSession, outcome: CallOutcome, output: JSONLineWriter, log: Logger) async {
        if session.state == .new {
            outcome.recordNegotiationFailure()
            await session.end(dueTo: error)  // the events stream prints the error and the ended lines
        } else {
            refused(error, output: output, log: log)
        }
    }

    /// Something the call refused (a restart description, a command): a non-terminal `error`
    /// line, and the log; the call goes on.
    static func refused(_ error: TetherError, output: JSONLineWriter, log: Logger) {
        output.write(["type": "error", "code": error.code.rawValue, "terminal": false, "retryable": error.canRetry, "message": error.message])
        log.warning("refused: \(error.message)", metadata: ["error-code": "\(error.code.rawValue)"])
    }
}

/// Lines of standard input, read on a thread of their own (blocking reads stay off the pool).
enum StandardInputLines {
    static func stream() -> AsyncThrowingStream<String, Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: String.self)
        let thread = Thread {
            while let line = readLine(strippingNewline: true) { continuation.yield(line) }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}

/// How the call ended, turned into the documented exit code.
final class CallOutcome: @unchecked Sendable {
    private let lock = NSLock()
    private var reason: CallTerminationReason?
    private var negotiationFailed = false

    func record(_ r: CallTerminationReason) { lock.withLock { reason = r } }
    func recordNegotiationFailure() { lock.withLock { negotiationFailed = true } }

    var exitCode: Int32 {
        lock.withLock {
            if negotiationFailed { return 2 }
            switch reason?.cause {
            case .localHangup, .remoteHangup, nil: return 0
            case .mediaTimeout: return 3
            case .connectionFailed, .connectionTimeout: return 4
            case .error: return 5
            }
        }
    }
}

/// Writes one JSON object per line on stdout, whole lines only.
final class JSONLineWriter: @unchecked Sendable {
    private let lock = NSLock()

    func write(_ object: [String: Any]) {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        lock.withLock {
            FileHandle.standardOutput.write(data + Data([0x0A]))
        }
    }
}

/// `tone[:HZ[:DBFS]]`, `wav:PATH`, `pulse[:NAME]`, `alsa[:PCM]`, `discard`.
enum AudioEndpointSpec {
    static func source(_ spec: String, periodMilliseconds: Int = 20) throws -> any AudioSource {
        let parts = spec.split(separator: ":", maxSplits: 2).map(String.init)
        switch parts.first {
        case "tone":
            let f = parts.count > 1 ? Double(parts[1]) : 440
            let l = parts.count > 2 ? Double(parts[2]) : -12
            guard let f, let l else { throw ValidationError("--input \(spec): expected tone[:HERTZ[:DBFS]]") }
            return TestSignalSource(frequencyHertz: f, levelDBFS: l)
        case "wav" where parts.count > 1:
            return WAVFileSource(path: String(spec.dropFirst(4)), loop: true)
        case "pulse":
            return PulseAudioCapture(deviceName: device(spec, prefix: "pulse"), periodMilliseconds: periodMilliseconds)
        case "alsa":
            return ALSACapture(pcmName: device(spec, prefix: "alsa") ?? "default", periodMilliseconds: periodMilliseconds)
        default:
            throw ValidationError("--input \(spec): expected tone[:HERTZ[:DBFS]], wav:PATH, pulse[:SOURCE] or alsa[:PCM]")
        }
    }

    static func sink(_ spec: String, periodMilliseconds: Int = 20) throws -> any AudioSink {
        if spec == "discard" { return DiscardSink() }
        if spec.hasPrefix("wav:") { return WAVFileSink(path: String(spec.dropFirst(4))) }
        if spec == "pulse" || spec.hasPrefix("pulse:") {
            return PulseAudioPlayback(deviceName: device(spec, prefix: "pulse"), periodMilliseconds: periodMilliseconds)
        }
        if spec == "alsa" || spec.hasPrefix("alsa:") {
            return ALSAPlayback(pcmName: device(spec, prefix: "alsa") ?? "default", periodMilliseconds: periodMilliseconds)
        }
        throw ValidationError("--output \(spec): expected discard, wav:PATH, pulse[:SINK] or alsa[:PCM]")
    }

    /// The device name after `prefix:`, or nil for the bare prefix (the system default).
    private static func device(_ spec: String, prefix: String) -> String? {
        spec.count > prefix.count + 1 ? String(spec.dropFirst(prefix.count + 1)) : nil
    }
}

/// `IP:PORT` or `IP:PORT:USER:PASS` (IPv6 in brackets).
enum ServerSpec {
    static func parse(_ spec: String, credentials: Bool) throws -> IceServer {
        var rest = Substring(spec)
        var host: String
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw ValidationError("bad server '\(spec)'") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            rest = rest[rest.index(after: close)...].drop { $0 == ":" }
        } else {
            let parts = rest.split(separator: ":", maxSplits: 1)
            host = String(parts.first ?? "")
            rest = parts.count > 1 ? parts[1] : ""
        }
        let fields = rest.split(separator: ":", maxSplits: 2).map(String.init)
        guard let portText = fields.first, let port = UInt16(portText) else { throw ValidationError("bad server port in '\(spec)'") }
        if credentials {
            guard fields.count == 3 else { throw ValidationError("TURN server needs IP:PORT:USERNAME:PASSWORD") }
            return IceServer(address: host, port: port, username: fields[1], password: fields[2])
        }
        return IceServer(address: host, port: port)
    }
}

extension IceServer.Transport: ExpressibleByArgument {}
extension CallConfiguration.Keying: ExpressibleByArgument {}
extension CallConfiguration.Redundancy: ExpressibleByArgument {}
