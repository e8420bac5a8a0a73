import Logging
import Synchronization

/// Delivers every call event, in order, to each subscriber's stream.
///
/// `CallSession.events` is the first subscription (made at creation, so it misses nothing);
/// `CallSession.subscribeToEvents()` adds more (each sees the events from then on).
final class EventBroadcaster: Sendable {
    private struct State {
        var continuations: [AsyncStream<CallEvent>.Continuation] = []
        var finished = false
    }

    private let state = Mutex(State())
    /// Every event is also logged here (the call's logger), as it is delivered.
    let logger: Logger
    /// Sees every event first, as it is delivered (the session's report recorder).
    private let observer: @Sendable (CallEvent) -> Void

    init(logger: Logger, observer: @escaping @Sendable (CallEvent) -> Void = { _ in }) {
        self.logger = logger
        self.observer = observer
    }

    /// A new stream of the events from now on (finished at once if the call has ended).
    func subscribe() -> AsyncStream<CallEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: CallEvent.self, bufferingPolicy: .unbounded)
        let alreadyFinished = state.withLock { s in
            if !s.finished { s.continuations.append(continuation) }
            return s.finished
        }
        if alreadyFinished { continuation.finish() }
        return stream
    }

    func yield(_ event: CallEvent) {
        observer(event)
        Self.log(event, to: logger)
        let targets = state.withLock { $0.finished ? [] : $0.continuations }
        for c in targets { c.yield(event) }
    }

    func finish() {
        let targets = state.withLock { s in
            s.finished = true
            defer { s.continuations = [] }
            return s.continuations
        }
        for c in targets { c.finish() }
    }
}

extension EventBroadcaster {
    /// The log message of an event (statistics are not logged: they are the report's). A
    /// description is logged by kind and size, never its text: SDES descriptions carry keys.
    static func log(_ event: CallEvent, to logger: Logger) {
        switch event {
        case .stateChanged(let from, let to, let seconds):
            var metadata: Logger.Metadata = [
                "state": "\(to.name)", "from": "\(from.name)", "seconds": "\((seconds * 1000).rounded() / 1000)",
            ]
            var level = Logger.Level.info
            var message = "call \(to.name)"
            switch to {
            case .mediaDisrupted, .renewingMedia:
                level = .notice
            case .ended(let reason):
                metadata["cause"] = "\(reason.cause)"
                metadata["cause-code"] = "\(reason.causeCode)"
                if let sip = reason.sipCode { metadata["sip-code"] = "\(sip)" }
                if let phrase = reason.sipPhrase { metadata["sip-phrase"] = "\(phrase)" }
                if let error = reason.error { metadata["error-code"] = "\(error.code.rawValue)" }
                message = "call ended: \(reason)"
                switch reason.cause {
                case .localHangup, .remoteHangup: level = .notice
                case .connectionFailed, .connectionTimeout, .mediaTimeout, .error: level = .error
                }
            default:
                break
            }
            logger.log(level: level, "\(message)", metadata: metadata)
        case .localDescription(let d):
            logger.debug(
                "sent \(d.isRestart ? "restart " : "")\(d.kind.rawValue)",
                metadata: ["kind": "\(d.kind.rawValue)", "restart": "\(d.isRestart)", "bytes": "\(d.sdp.utf8.count)"])
        case .localCandidate(let c):
            logger.debug(c.isEndOfCandidates ? "sent end of candidates" : "sent a trickled candidate")
        case .error(let e):
            logger.log(
                level: e.isTerminal ? .error : .warning, "\(e.message)",
                metadata: ["error-code": "\(e.code.rawValue)", "terminal": "\(e.isTerminal)", "retryable": "\(e.canRetry)"])
        case .statistics:
            break
        case .outboundMediaChanged(let disrupted):
            if disrupted {
                logger.warning("the peer stopped receiving our media")
            } else {
                logger.notice("the peer receives our media again")
            }
        case .audioDevice(let direction, let deviceEvent):
            switch deviceEvent {
            case .failed(let error):
                logger.warning("\(direction.rawValue) device failed: \(error)", metadata: ["direction": "\(direction.rawValue)"])
            case .recovered(let name):
                logger.notice("\(direction.rawValue) device recovered", metadata: ["direction": "\(direction.rawValue)", "device": "\(name)"])
            case .moved(let name):
                logger.notice("\(direction.rawValue) moved to another device", metadata: ["direction": "\(direction.rawValue)", "device": "\(name)"])
            }
        case .candidatePairSelected(let local, let remote, let localType, let remoteType):
            logger.info(
                "selected pair \(localType) → \(remoteType)",
                metadata: ["local": "\(local)", "remote": "\(remote)", "local-type": "\(localType)", "remote-type": "\(remoteType)"])
        case .dtmf(let digit, let milliseconds):
            logger.debug("received DTMF", metadata: ["digit": "\(digit)", "duration-ms": "\(milliseconds)"])
        case .holdChanged(let hold):
            logger.info("\(hold)", metadata: ["local-hold": "\(hold.local)", "remote-hold": "\(hold.remote)"])
        }
    }
}
