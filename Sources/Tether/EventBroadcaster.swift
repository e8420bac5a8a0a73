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
