import Synchronization
import Tether
import TetherFaults
import TetherRealtime

/// Carries two in-process sessions' descriptions to each other, as an embedder's signaling
/// would: every `.localDescription` event of one side goes to the other (offers to
/// `acceptOffer`, answers to `applyAnswer`), and every trickled candidate (`.localCandidate`)
/// to `addRemoteCandidate`, optionally through a UDP impairment relay (the descriptions'
/// candidates are rewritten to the relay's ports and the relay is told the real addresses;
/// trickled candidates are not rewritten).
///
/// It consumes both sessions' `events` streams and hands every event to `observer`.
public final class InProcessSignaling: Sendable {
    /// Which side an event came from.
    public enum Side: String, Sendable { case a = "A", b = "B" }

    private let a: CallSession
    private let b: CallSession
    private let relay: UDPImpairmentRelay?
    private let observer: @Sendable (Side, CallEvent) -> Void
    private let signalingDelayMilliseconds: Double
    private let tasks = Mutex<[Task<Void, Never>]>([])
    private let problems = Mutex<[String]>([])

    /// - Parameters:
    ///   - relay: when given, media goes through it: A reaches B at `relay.portA`, B reaches A at `relay.portB`.
    ///   - signalingDelayMilliseconds: delay added to every description in transit.
    ///   - observer: called for every event of both sides, in each side's order.
    public init(
        a: CallSession, b: CallSession, relay: UDPImpairmentRelay? = nil, signalingDelayMilliseconds: Double = 0,
        observer: @escaping @Sendable (Side, CallEvent) -> Void = { _, _ in }
    ) {
        self.a = a
        self.b = b
        self.relay = relay
        self.signalingDelayMilliseconds = signalingDelayMilliseconds
        self.observer = observer
        let forwardA = Task { await self.pump(a.events, from: .a) }
        let forwardB = Task { await self.pump(b.events, from: .b) }
        tasks.withLock { $0 = [forwardA, forwardB] }
    }

    /// Starts the call: A offers; the rest follows through the events.
    public func connect() async throws {
        _ = try await a.makeOffer()
    }

    /// Signaling problems seen so far (a description the other side refused, for example).
    public var errors: [String] { problems.withLock { $0 } }

    /// Waits until both sides' event streams have finished (both calls ended).
    public func waitUntilFinished() async {
        for t in tasks.withLock({ $0 }) { await t.value }
    }

    private func pump(_ events: AsyncStream<CallEvent>, from side: Side) async {
        for await event in events {
            observer(side, event)
            if case .localDescription(let message) = event {
                await deliver(message, from: side)
            }
            if case .localCandidate(let message) = event {
                do {
                    try await (side == .a ? b : a).addRemoteCandidate(message)
                } catch {
                    problems.withLock { $0.append("\(side == .a ? "B" : "A") refused a trickled candidate: \(error)") }
                }
            }
        }
    }

    private func deliver(_ message: SessionDescriptionMessage, from side: Side) async {
        let target = side == .a ? b : a
        var sdp = message.sdp
        if let relay {
            do {
                // A's descriptions go to B, which must reach A through the relay's B-facing port.
                let port = side == .a ? relay.portB : relay.portA
                let rewritten = try RelayCandidateRewriter.rewrite(sdp, relayAddress: relay.bindAddress, relayPort: port)
                sdp = rewritten.sdp
                if let sender = rewritten.sender {
                    if side == .a { try relay.setPeerA(address: sender.address, port: sender.port) }
                    else { try relay.setPeerB(address: sender.address, port: sender.port) }
                }
            } catch {
                problems.withLock { $0.append("\(side.rawValue): cannot rewrite description: \(error)") }
                return
            }
        }
        if signalingDelayMilliseconds > 0 {
            try? await Task.sleep(for: .milliseconds(signalingDelayMilliseconds))
        }
        do {
            switch message.kind {
            case .offer: _ = try await target.acceptOffer(sdp)
            case .answer: try await target.applyAnswer(sdp)
            }
        } catch {
            problems.withLock { $0.append("\(side == .a ? "B" : "A") refused \(message.kind.rawValue): \(error)") }
        }
    }
}
