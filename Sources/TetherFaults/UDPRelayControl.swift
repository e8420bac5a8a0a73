import Foundation

/// One control command for a relay running as a process (`tether-relay`), carried as one JSON
/// object per line on its stdin, so a `tether call`-style harness can script faults.
///
/// Every field is optional; the ones present are applied in declaration order. Examples:
/// `{"peerA":"127.0.0.1:40000","peerB":"127.0.0.1:40002"}`, `{"blackHole":true}`,
/// `{"lossPercent":10}`, `{"delayMilliseconds":50,"jitterMilliseconds":20}`,
/// `{"burstLoss":{"goodToBadProbability":0.05,"badToGoodProbability":0.3,
/// "lossProbabilityInBadState":1,"lossProbabilityInGoodState":0}}`, `{"clearBurstLoss":true}`,
/// `{"outage":{"afterSeconds":1,"forSeconds":3}}`, `{"statistics":true}`, `{"stop":true}`.
public struct UDPRelayControlCommand: Sendable, Equatable, Codable {
    /// Peer A as `"a.b.c.d:port"`.
    public var peerA: String?
    /// Peer B as `"a.b.c.d:port"`.
    public var peerB: String?
    /// Both-way black hole on or off.
    public var blackHole: Bool?
    /// A→B black hole on or off.
    public var blackHoleAToB: Bool?
    /// B→A black hole on or off.
    public var blackHoleBToA: Bool?
    /// Uniform loss, percent of datagrams.
    public var lossPercent: Double?
    /// Gilbert–Elliott loss to use.
    public var burstLoss: BurstLoss?
    /// `true` removes the burst loss model.
    public var clearBurstLoss: Bool?
    /// Fixed delay, milliseconds.
    public var delayMilliseconds: Double?
    /// Jitter, ± milliseconds.
    public var jitterMilliseconds: Double?
    /// Duplication, percent of datagrams.
    public var duplicatePercent: Double?
    /// Restart the random streams from this seed.
    public var seed: UInt64?
    /// Black-hole both directions later, for a while.
    public var outage: Outage?
    /// `true` asks for a statistics reply.
    public var statistics: Bool?
    /// `true` stops the relay (the process then exits).
    public var stop: Bool?

    /// A scheduled both-way outage, in seconds from the command.
    public struct Outage: Sendable, Equatable, Codable {
        /// Seconds from now until the outage begins.
        public var afterSeconds: Double
        /// Seconds the outage lasts.
        public var forSeconds: Double

        /// Creates an outage schedule; both in seconds.
        public init(afterSeconds: Double, forSeconds: Double) {
            self.afterSeconds = afterSeconds
            self.forSeconds = forSeconds
        }
    }

    /// An empty command (does nothing).
    public init() {}

    /// Decodes one JSON line.
    /// - Throws: ``UDPRelayError/invalidCommand(_:)``.
    public init(jsonLine: String) throws(UDPRelayError) {
        do {
            self = try JSONDecoder().decode(Self.self, from: Data(jsonLine.utf8))
        } catch {
            throw .invalidCommand(jsonLine)
        }
    }

    /// Applies the command to `relay` and returns the reply to print.
    /// - Throws: ``UDPRelayError`` for a malformed peer address (nothing after it is applied).
    public func apply(to relay: UDPImpairmentRelay) throws(UDPRelayError) -> UDPRelayControlReply {
        if let peerA {
            let endpoint = try UDPRelayEndpoint(parsing: peerA)
            try relay.setPeerA(address: endpoint.addressText, port: endpoint.port)
        }
        if let peerB {
            let endpoint = try UDPRelayEndpoint(parsing: peerB)
            try relay.setPeerB(address: endpoint.addressText, port: endpoint.port)
        }
        relay.updateImpairments { impairments in
            if let blackHole { impairments.blackHole = blackHole }
            if let blackHoleAToB { impairments.blackHoleAToB = blackHoleAToB }
            if let blackHoleBToA { impairments.blackHoleBToA = blackHoleBToA }
            if let lossPercent { impairments.lossPercent = lossPercent }
            if let burstLoss { impairments.burstLoss = burstLoss }
            if clearBurstLoss == true { impairments.burstLoss = nil }
            if let delayMilliseconds { impairments.delayMilliseconds = delayMilliseconds }
            if let jitterMilliseconds { impairments.jitterMilliseconds = jitterMilliseconds }
            if let duplicatePercent { impairments.duplicatePercent = duplicatePercent }
        }
        if let seed { relay.reseed(seed) }
        if let outage { relay.scheduleOutage(afterSeconds: outage.afterSeconds, forSeconds: outage.forSeconds) }
        var reply = UDPRelayControlReply(ok: true)
        if statistics == true { reply.statistics = relay.statistics() }
        if stop == true {
            relay.stop()
            reply.stopped = true
        }
        return reply
    }
}

/// The relay process's answer to one ``UDPRelayControlCommand`` (one JSON line on stdout).
public struct UDPRelayControlReply: Sendable, Equatable, Codable {
    /// Whether the command was applied.
    public var ok: Bool
    /// Why not, when `ok` is false.
    public var error: String?
    /// The counters, when asked for.
    public var statistics: UDPRelayStatistics?
    /// `true` when the relay has stopped.
    public var stopped: Bool?

    /// Creates a reply.
    public init(ok: Bool, error: String? = nil, statistics: UDPRelayStatistics? = nil, stopped: Bool? = nil) {
        self.ok = ok
        self.error = error
        self.statistics = statistics
        self.stopped = stopped
    }

    /// The reply as one JSON line (no trailing newline), keys sorted.
    public var jsonLine: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(self) else { return #"{"ok":false}"# }
        return String(decoding: data, as: UTF8.self)
    }
}
