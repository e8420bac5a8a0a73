import CTetherNet
import Foundation
import Glibc
import Synchronization

/// A user-space UDP relay between two peers that can black-hole, drop (seeded, reproducible),
/// burst-drop, delay, reorder and duplicate datagrams, for fault tests.
///
/// The relay binds two UDP sockets on one IPv4 address: ``portA`` faces peer A and ``portB``
/// faces peer B. A datagram arriving on the A socket from address X makes X "peer A's address"
/// (the latest source wins, so a peer that changes address is followed) and is forwarded out of
/// the B socket to peer B's address, learned the same way from the B socket, and vice versa.
/// With nothing learned yet the datagram is dropped and counted
/// (``UDPRelayDirectionStatistics/droppedNoDestination``).
///
/// Use with ICE: give agent A the candidate `host <bind address> <portA>` as its remote
/// candidate and agent B `host <bind address> <portB>`. Each agent sees the relay as its peer,
/// and the relay's source ports appear as peer-reflexive candidates, as behind a NAT. The first
/// checks of A arrive before B has sent anything, so ICE tests should call
/// ``setPeerA(address:port:)`` and ``setPeerB(address:port:)`` with each agent's own local
/// host candidate before exchanging candidates; later traffic still updates them.
///
/// One dedicated thread runs `poll(2)` on both sockets and an eventfd, and times delayed
/// datagrams (queue ordered by release time). It only forwards what arrives, and the delay queue
/// is capped (``maximumQueuedPackets``), so memory and CPU are bounded. IPv4 only.
/// ``stop()`` (or deinit) ends the thread and closes the sockets; delayed datagrams are discarded.
///
/// Every method is thread-safe and may be called from any thread at any time.
public final class UDPImpairmentRelay: Sendable {
    /// The IPv4 address both sockets are bound to.
    public let bindAddress: String
    /// The UDP port facing peer A (give it to peer A as its remote candidate).
    public let portA: UInt16
    /// The UDP port facing peer B (give it to peer B as its remote candidate).
    public let portB: UInt16
    /// Datagrams the delay queue may hold (both directions); beyond this new delayed
    /// datagrams are dropped and counted as ``UDPRelayDirectionStatistics/droppedQueueFull``.
    public let maximumQueuedPackets: Int

    private let core: RelayCore

    /// Binds the two sockets and starts the relay thread.
    /// - Parameters:
    ///   - bindAddress: IPv4 address to bind both sockets to; only 127.0.0.0/8 or an address
    ///     inside a network namespace the test created itself should be used.
    ///   - portA: UDP port facing peer A, 0 for an ephemeral port.
    ///   - portB: UDP port facing peer B, 0 for an ephemeral port.
    ///   - seed: seed of every random decision (loss, burst loss, duplication, jitter).
    ///   - impairments: initial impairments (none by default).
    ///   - maximumQueuedPackets: cap of the delay queue, in datagrams.
    ///   - socketBufferBytes: SO_RCVBUF/SO_SNDBUF of each socket, in bytes (kernel-capped).
    /// - Throws: ``UDPRelayError`` when the address is invalid or a socket cannot be bound.
    public init(
        bindAddress: String = "127.0.0.1", portA: UInt16 = 0, portB: UInt16 = 0, seed: UInt64 = 1,
        impairments: UDPImpairments = UDPImpairments(), maximumQueuedPackets: Int = 4096,
        socketBufferBytes: Int = 1 << 20
    ) throws(UDPRelayError) {
        var address: UInt32 = 0
        guard CTetherNet_ipv4_parse(bindAddress, &address) == 0 else { throw .invalidAddress(bindAddress) }
        var boundA: UInt16 = 0
        var boundB: UInt16 = 0
        let socketA = CTetherNet_udp4_open(address, portA, Int32(clamping: socketBufferBytes), &boundA)
        guard socketA >= 0 else { throw .systemCall("bind(\(bindAddress):\(portA))", errno: errno) }
        let socketB = CTetherNet_udp4_open(address, portB, Int32(clamping: socketBufferBytes), &boundB)
        guard socketB >= 0 else {
            let saved = errno
            close(socketA)
            throw .systemCall("bind(\(bindAddress):\(portB))", errno: saved)
        }
        let wake = CTetherNet_eventfd_create()
        guard wake >= 0 else {
            let saved = errno
            close(socketA)
            close(socketB)
            throw .systemCall("eventfd", errno: saved)
        }
        self.bindAddress = bindAddress
        self.portA = boundA
        self.portB = boundB
        self.maximumQueuedPackets = max(0, maximumQueuedPackets)
        core = RelayCore(
            socketA: socketA, socketB: socketB, wake: wake, seed: seed, impairments: impairments,
            maximumQueuedPackets: max(0, maximumQueuedPackets))
        let core = self.core
        let thread = Thread { core.run() }
        thread.name = "tether-relay"
        thread.start()
    }

    deinit {
        core.stop()
    }

    // MARK: Impairments

    /// The impairments applied to the next datagrams; settable from any thread.
    public var impairments: UDPImpairments {
        get { core.state.withLock { $0.impairments } }
        set { core.state.withLock { $0.impairments = newValue } }
    }

    /// Changes some impairments atomically (no other change can interleave).
    public func updateImpairments(_ body: (inout UDPImpairments) -> Void) {
        core.state.withLock { body(&$0.impairments) }
    }

    /// Drops everything in both directions (`true`) or stops doing so (`false`). One-way black
    /// holes set with ``blackHole(_:_:)`` are kept.
    public func blackHole(_ enabled: Bool) {
        updateImpairments { $0.blackHole = enabled }
    }

    /// Drops everything travelling in `direction` (a one-way outage) or stops doing so.
    public func blackHole(_ direction: RelayDirection, _ enabled: Bool) {
        updateImpairments {
            if direction == .aToB { $0.blackHoleAToB = enabled } else { $0.blackHoleBToA = enabled }
        }
    }

    /// Black-holes both directions from `afterSeconds` from now for `forSeconds`, then restores
    /// them, without any further call. Replaces a previously scheduled outage. Seconds ≥ 0.
    public func scheduleOutage(afterSeconds: Double, forSeconds: Double) {
        let now = CTetherNet_monotonic_nanoseconds()
        let start = now &+ UInt64(max(0, afterSeconds) * 1e9)
        let end = start &+ UInt64(max(0, forSeconds) * 1e9)
        core.state.withLock { $0.outage = (start, end) }
    }

    /// Cancels a scheduled outage (whether or not it has begun).
    public func cancelScheduledOutage() {
        core.state.withLock { $0.outage = nil }
    }

    /// Restarts every random stream from `seed` (and resets burst-loss states to good), so the
    /// following datagrams see the same decisions as a relay freshly created with that seed.
    public func reseed(_ seed: UInt64) {
        core.state.withLock { $0.model = ImpairmentModel(seed: seed) }
    }

    // MARK: Peers

    /// Sets peer A's address (where datagrams from B are sent) before A has sent anything.
    /// Later datagrams arriving from A still replace it (latest source wins).
    /// - Throws: ``UDPRelayError/invalidAddress(_:)``.
    public func setPeerA(address: String, port: UInt16) throws(UDPRelayError) {
        let endpoint = try UDPRelayEndpoint(address: address, port: port)
        core.state.withLock { $0.peers[0] = endpoint }
    }

    /// Sets peer B's address (where datagrams from A are sent) before B has sent anything.
    /// Later datagrams arriving from B still replace it (latest source wins).
    /// - Throws: ``UDPRelayError/invalidAddress(_:)``.
    public func setPeerB(address: String, port: UInt16) throws(UDPRelayError) {
        let endpoint = try UDPRelayEndpoint(address: address, port: port)
        core.state.withLock { $0.peers[1] = endpoint }
    }

    /// Peer A's address as last configured or learned, if any.
    public var peerA: UDPRelayEndpoint? { core.state.withLock { $0.peers[0] } }
    /// Peer B's address as last configured or learned, if any.
    public var peerB: UDPRelayEndpoint? { core.state.withLock { $0.peers[1] } }

    // MARK: Statistics and lifetime

    /// A snapshot of the counters.
    public func statistics() -> UDPRelayStatistics {
        core.state.withLock { $0.statistics }
    }

    /// Sets every counter to zero (the queued-datagram gauge is kept).
    public func resetStatistics() {
        core.state.withLock {
            let queued = $0.statistics.queuedPackets
            $0.statistics = UDPRelayStatistics()
            $0.statistics.queuedPackets = queued
        }
    }

    /// Stops the relay thread, discards delayed datagrams and closes both sockets. Blocks until
    /// the thread has ended (at most one poll wake-up). Idempotent.
    public func stop() {
        core.stop()
    }
}

/// State shared between the relay thread and callers, guarded by one mutex. Each datagram takes
/// the lock once or twice for a few hundred nanoseconds, so contention is negligible.
struct RelayState: ~Copyable {
    var impairments: UDPImpairments
    var model: ImpairmentModel
    /// [peer A, peer B].
    var peers: [UDPRelayEndpoint?] = [nil, nil]
    var statistics = UDPRelayStatistics()
    /// Scheduled outage (start, end) in CLOCK_MONOTONIC nanoseconds.
    var outage: (UInt64, UInt64)? = nil
}

/// Owns the sockets and runs the relay thread. Separate from ``UDPImpairmentRelay`` so the
/// thread does not keep the public object alive (its deinit stops the thread).
final class RelayCore: Sendable {
    let socketA: Int32
    let socketB: Int32
    let wake: Int32
    let maximumQueuedPackets: Int
    let state: LockedValue<RelayState>
    /// Set once by `stop()`; read by the relay thread after each wake-up. Releasing/acquiring
    /// so the thread sees everything `stop()` did before it.
    let stopRequested = Atomic<Bool>(false)
    let stopped = LockedValue<Bool>(false)
    let finished = DispatchSemaphore(value: 0)

    init(socketA: Int32, socketB: Int32, wake: Int32, seed: UInt64, impairments: UDPImpairments, maximumQueuedPackets: Int) {
        self.socketA = socketA
        self.socketB = socketB
        self.wake = wake
        self.maximumQueuedPackets = maximumQueuedPackets
        state = LockedValue(RelayState(impairments: impairments, model: ImpairmentModel(seed: seed)))
    }

    func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        stopRequested.store(true, ordering: .releasing)
        _ = CTetherNet_eventfd_signal(wake)
        finished.wait()
        close(socketA)
        close(socketB)
        close(wake)
    }

    /// The relay thread's loop.
    func run() {
        let capacity = 65_536
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        defer {
            buffer.deallocate()
            finished.signal()
        }
        var queue = DelayQueue()
        var fds = [
            pollfd(fd: socketA, events: Int16(POLLIN), revents: 0),
            pollfd(fd: socketB, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while !stopRequested.load(ordering: .acquiring) {
            releaseDue(&queue)
            var timeoutMilliseconds: Int32 = -1
            if let next = queue.earliestReleaseNanoseconds {
                let now = CTetherNet_monotonic_nanoseconds()
                let remaining = next > now ? next - now : 0
                // Round up so a datagram is never released early.
                timeoutMilliseconds = Int32(min((remaining + 999_999) / 1_000_000, 60_000))
            }
            for index in fds.indices { fds[index].revents = 0 }
            let ready = poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            if fds[2].revents != 0 { CTetherNet_eventfd_drain(wake) }
            for (side, direction) in [(0, RelayDirection.aToB), (1, RelayDirection.bToA)]
            where fds[side].revents & Int16(POLLIN | POLLERR) != 0 {
                receiveBatch(from: fds[side].fd, direction: direction, buffer: buffer, capacity: capacity, queue: &queue)
            }
        }
        queue.removeAll()
        state.withLock { $0.statistics.queuedPackets = 0 }
    }

    private func egressSocket(_ direction: RelayDirection) -> Int32 {
        direction == .aToB ? socketB : socketA
    }

    /// Reads up to 256 datagrams from one socket (then lets the other socket have a turn).
    private func receiveBatch(
        from fd: Int32, direction: RelayDirection, buffer: UnsafeMutableRawPointer, capacity: Int,
        queue: inout DelayQueue
    ) {
        for _ in 0..<256 {
            var sourceAddress: UInt32 = 0
            var sourcePort: UInt16 = 0
            var truncated: Int32 = 0
            let length = CTetherNet_udp4_receive(fd, buffer, capacity, &sourceAddress, &sourcePort, &truncated)
            if length < 0 { return }  // EAGAIN: drained (other errors: poll reports them again)
            handle(
                direction: direction, source: UDPRelayEndpoint(address: sourceAddress, port: sourcePort),
                bytes: UnsafeRawBufferPointer(start: buffer, count: length), truncated: truncated != 0,
                queue: &queue)
        }
    }

    /// RTP by RFC 5761's demultiplexing rule (SRTP leaves the header in the clear): version 2 and
    /// a second byte outside RTCP's 192…223.
    static func isRTP(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 12 && bytes[0] & 0xC0 == 0x80 && !(192...223).contains(bytes[1])
    }

    private func handle(
        direction: RelayDirection, source: UDPRelayEndpoint, bytes: UnsafeRawBufferPointer, truncated: Bool,
        queue: inout DelayQueue
    ) {
        let now = CTetherNet_monotonic_nanoseconds()
        let ingress = direction.rawValue
        let maximumQueued = maximumQueuedPackets
        let plan: (UDPRelayEndpoint, UInt64, UInt64?)? = state.withLock { state in
            state.statistics[direction].packetsReceived += 1
            state.statistics[direction].bytesReceived += UInt64(bytes.count)
            if state.peers[ingress] != source {
                if state.peers[ingress] != nil { state.statistics[direction].peerAddressChanges += 1 }
                state.peers[ingress] = source
            }
            if truncated {
                state.statistics[direction].droppedTruncated += 1
                return nil
            }
            var impairments = state.impairments
            if let (start, end) = state.outage {
                if now >= end {
                    state.outage = nil
                } else if now >= start {
                    impairments.blackHole = true
                }
            }
            if impairments.isBlackHoled(direction) {
                state.statistics[direction].droppedByBlackHole += 1
                return nil
            }
            if impairments.dropsAsBindingResponse(bytes, travelling: direction) {
                state.statistics[direction].droppedBindingResponses += 1
                return nil
            }
            guard let destination = state.peers[1 - ingress] else {
                state.statistics[direction].droppedNoDestination += 1
                return nil
            }
            switch state.model.decide(direction, impairments: impairments) {
            case .dropByBlackHole:
                state.statistics[direction].droppedByBlackHole += 1
                return nil
            case .dropByLoss:
                state.statistics[direction].droppedByLoss += 1
                if Self.isRTP(bytes) { state.statistics[direction].rtpDroppedByLoss += 1 }
                return nil
            case .forward(let delay, var duplicateDelay):
                var delay: UInt64? = delay
                if duplicateDelay != nil { state.statistics[direction].duplicated += 1 }
                for copy in [0, 1] {
                    guard let value = copy == 0 ? delay : duplicateDelay, value > 0 else { continue }
                    if state.statistics.queuedPackets >= maximumQueued {
                        state.statistics[direction].droppedQueueFull += 1
                        if copy == 0 { delay = nil } else { duplicateDelay = nil }
                    } else {
                        state.statistics.queuedPackets += 1
                        state.statistics[direction].delayed += 1
                    }
                }
                guard let delay else {
                    // The original did not fit; a duplicate that fit still goes.
                    return duplicateDelay.map { (destination, $0, nil) }
                }
                return (destination, delay, duplicateDelay)
            }
        }
        guard let (destination, delay, duplicateDelay) = plan else { return }
        for copyDelay in [delay, duplicateDelay].compactMap({ $0 }) {
            if copyDelay == 0 {
                send(direction: direction, destination: destination, bytes: bytes)
            } else {
                queue.insert(
                    releaseNanoseconds: now &+ copyDelay, direction: direction, destination: destination,
                    bytes: Array(bytes))
            }
        }
    }

    private func releaseDue(_ queue: inout DelayQueue) {
        let now = CTetherNet_monotonic_nanoseconds()
        var released = 0
        while let item = queue.popDue(nowNanoseconds: now) {
            released += 1
            item.bytes.withUnsafeBytes { send(direction: item.direction, destination: item.destination, bytes: $0) }
        }
        if released > 0 {
            state.withLock { $0.statistics.queuedPackets -= released }
        }
    }

    private func send(direction: RelayDirection, destination: UDPRelayEndpoint, bytes: UnsafeRawBufferPointer) {
        // Stamped before the send: a receiver on the other core may read and stamp the datagram
        // before `sendto` returns here, and "forwarded" must never come after "arrived".
        let sentAt = CTetherNet_monotonic_nanoseconds()
        let sent = CTetherNet_udp4_send(
            egressSocket(direction), bytes.baseAddress, bytes.count, destination.address, destination.port)
        state.withLock { state in
            if sent < 0 {
                state.statistics[direction].sendErrors += 1
            } else {
                state.statistics[direction].packetsForwarded += 1
                state.statistics[direction].bytesForwarded += UInt64(bytes.count)
                state.statistics[direction].lastForwardedNanoseconds = sentAt
            }
        }
    }
}
