import CNice
import Glibc
import Dispatch
import Synchronization
import TetherRealtime

/// State the GLib-thread callbacks reach through a raw pointer, so the receive and send paths
/// touch no ARC-managed object.
struct ICEHotPathContext {
    var agent: OpaquePointer?
    /// The stream queued datagrams go out on through libnice: the one carrying media (the newest
    /// before any pair is selected). Written on the GLib thread, read there by the send watch.
    var streamID: guint
    var receiveRing: Unmanaged<PacketRing>
    var receiveWakeup: Unmanaged<EventCount>
    var sendRing: Unmanaged<PacketRing>
    var sendEventFD: Int32
    /// What became of the datagrams sent (see `ICESendCounters`).
    var sendCounters: UnsafeMutablePointer<ICESendCounters>
    /// Stamps received datagrams' arrival (`MonotonicClock.system` unless a test gives its own).
    var arrivalClock: MonotonicTimeSource
    /// The transport (unretained), for datagrams that are not media: DTLS records (first byte
    /// 20…63, RFC 7983) go to its event handler instead of the media ring. Set once after init.
    var owner: UnsafeMutableRawPointer?
}

/// Counts of what became of sent datagrams, kept where every thread that learns an outcome can
/// add to them: the GLib thread for datagrams libnice sent or refused, the media thread for its
/// direct sends; and the DTLS datagrams received and waiting for their handler. Relaxed: they
/// are counters and carry no data.
struct ICESendCounters: ~Copyable {
    /// Datagrams libnice refused (`nice_agent_send` < 0).
    let libniceFailures = Atomic<Int>(0)
    /// Direct sends the kernel refused (`sendto` < 0).
    let directFailures = Atomic<Int>(0)
    /// RTP packets, their payload bytes, and RTCP packets libnice accepted from the queue.
    let libniceRTPPackets = Atomic<Int>(0)
    let libniceRTPPayloadBytes = Atomic<Int>(0)
    let libniceRTCPPackets = Atomic<Int>(0)
    /// DTLS datagrams handed to the event handler and not yet acknowledged
    /// (`dtlsDatagramHandled()`), and those dropped because too many were (receive side).
    let dtlsPending = Atomic<Int>(0)
    let dtlsDropped = Atomic<Int>(0)
}

/// Where the media thread sends on its own: the selected pair's local UDP socket and the remote
/// address. Immutable once published; freed by the GLib thread once the media thread has moved
/// on to a newer route.
struct ICEDirectRoute {
    /// The remote address (first, so the struct's address is the `sockaddr`'s).
    var address: sockaddr_storage
    var addressLength: socklen_t
    /// A duplicate of the selected local socket's descriptor, owned by the route; −1: no direct
    /// route (no pair selected yet, a TURN relay, a stream being replaced).
    var fd: Int32
    /// Increases with every route published.
    var generation: Int
    /// A candidate pair is selected on the current stream (false once the route is withdrawn
    /// for a stream being replaced): without one there is nowhere to send.
    var pairSelected: Bool
}

/// What a datagram is, for counting what libnice sends on the media thread's behalf.
public enum ICEDatagramKind: Sendable, Equatable {
    /// An RTP packet carrying `payloadBytes` bytes of media payload.
    case rtp(payloadBytes: Int)
    /// An RTCP packet.
    case rtcp
    /// Anything else.
    case other

    /// The tag carried through the send queue (the ring's 64-bit per-packet field).
    var queueTag: UInt64 {
        switch self {
        case .rtp(let bytes): 1 << 32 | UInt64(UInt32(clamping: bytes))
        case .rtcp: 2 << 32
        case .other: 0
        }
    }
}

/// What `ICETransport.send` did with a datagram.
public enum ICESendResult: Sendable, Equatable {
    /// The kernel took it, on the selected pair's socket.
    case sent
    /// Queued for libnice (a TURN relay or TCP pair); `libniceSent` or `sendFailureCount`
    /// counts what libnice then did with it.
    case queued
    /// The queue to libnice was full: dropped (counted in `sendQueueDropCount`).
    case queueFull
    /// No candidate pair is selected (yet, or while the stream is replaced): nothing was sent and
    /// nothing is counted as a failure, since there was no path to fail on.
    case noPath
    /// The kernel refused it (counted in `sendFailureCount`).
    case failed

    /// The datagram left, or is on its way through libnice.
    public var isAccepted: Bool { self == .sent || self == .queued }
}

/// One ICE stream with one component (RTP and RTCP multiplexed) over libnice.
///
/// libnice runs on its own GLib main-context thread. Received datagrams are copied into
/// `receiveRing` on that thread, stamped with their monotonic arrival instant, and the media loop
/// is woken through `receiveWakeup`.
///
/// Outgoing datagrams go straight from the media thread to the kernel once a UDP pair is
/// selected: `send` calls `sendto` on (a duplicate of) the selected pair's local socket, which is
/// what `nice_agent_send` does for such a pair, without libnice's agent lock and without waking
/// the GLib thread for every packet. The route is republished on every new selected pair, and
/// withdrawn while a stream is replaced. Before a pair is selected, and through a TURN relay
/// (whose framing libnice adds), datagrams are queued into a ring that the GLib thread drains into
/// `nice_agent_send`. Either way the media loop never waits on libnice.
public final class ICETransport: @unchecked Sendable {
    /// The configuration in force.
    public let configuration: ICETransportConfiguration
    private let context: OpaquePointer  // GMainContext
    private let loop: OpaquePointer  // GMainLoop
    let agent: OpaquePointer
    /// The newest stream: the one descriptions speak for (its credentials and candidates, the
    /// peer's credentials and candidates applied to it). GLib thread only.
    private(set) var signalingStream: guint
    /// The stream whose selected pair carries media (0 before any pair). Differs from
    /// `signalingStream` after `regather()` until the new stream selects a pair: the old pair
    /// keeps carrying media meanwhile (make before break). GLib thread only.
    private var mediaStream: guint = 0
    private let thread = RealtimeThread(name: "tether-ice", realtimePriority: 0)
    private let hot: UnsafeMutablePointer<ICEHotPathContext>
    private let sendRing: PacketRing
    private let sendEventFD: Int32
    private var sendWatch: UnsafeMutablePointer<GSource>?
    private let eventHandler: @Sendable (ICETransportEvent) -> Void
    let closed = Atomic<Bool>(false)
    /// The route the media thread sends on (release/acquire: the route's fields and descriptor
    /// are published with the pointer).
    private let publishedRoute = Atomic<UnsafeMutablePointer<ICEDirectRoute>?>(nil)
    /// The generation of the route the media thread uses; older routes are no longer touched
    /// (release/acquire: the media thread's last use of an older route happens before).
    private let adoptedGeneration = Atomic<Int>(0)
    /// The media thread's current route (media thread only).
    private var mediaRoute: UnsafeMutablePointer<ICEDirectRoute>?
    /// Superseded routes the media thread may still be using (GLib thread, or `close` after it).
    private var retiredRoutes: [UnsafeMutablePointer<ICEDirectRoute>] = []
    private var routeGeneration = 0
    /// Datagrams sent directly (media thread writes, relaxed: a counter).
    private let directSends = Atomic<Int>(0)
    /// The peer's credentials per stream, for the checks `probePath()` sends. GLib thread only.
    var remoteCredentials: [guint: (ufrag: String, password: String)] = [:]
    /// Path probes sent so far; each one claims a higher priority than the last (GLib thread only).
    private var probesSent: UInt32 = 0
    /// ICE-CONTROLLING/CONTROLLED tie-breaker of the probes (a role conflict is never meant).
    private let probeTieBreaker = UInt64.random(in: .min ... .max)
    /// `regather()` calls so far (tokens).
    private let regathers = Atomic<Int>(0)
    /// The newest `regather()`'s token and stream. GLib thread only.
    private var lastRegather: (token: UInt64, stream: guint)?
    /// Path probes handed to libnice (a counter, relaxed).
    private let probesDelivered = Atomic<Int>(0)
    /// `.consentLost` was delivered for the media stream's selected pair. GLib thread only.
    private var consentLostReported = false
    /// Consent losses so far (a counter, relaxed).
    private let consentLosses = Atomic<Int>(0)
    /// The TURN server as libnice is given it: the server itself, or for TURN over TLS the
    /// loopback end of ``turnTLSTunnel``.
    private let relay: ICEServer?
    /// TURN over TLS: the tunnel libnice's TCP connections to the server go through (nil for
    /// TURN over UDP or TCP, and without TURN).
    public let turnTLSTunnel: TURNTLSTunnel?

    /// Creates the agent and its stream, and starts the GLib thread. Gathering starts with `gatherCandidates()`.
    /// - Parameters:
    ///   - receiveRing: where received datagrams go (producer: the GLib thread).
    ///   - receiveWakeup: signalled after each received datagram.
    ///   - eventHandler: called on the GLib thread for every `ICETransportEvent`.
    ///   - arrivalClock: stamps each received datagram's arrival (called on the GLib thread); tests
    ///     that drive media loops on a clock of their own pass it here too.
    public init(
        configuration: ICETransportConfiguration, receiveRing: PacketRing, receiveWakeup: EventCount,
        arrivalClock: MonotonicTimeSource = MonotonicClock.system,
        eventHandler: @escaping @Sendable (ICETransportEvent) -> Void
    ) throws(ICETransportError) {
        self.configuration = configuration
        self.eventHandler = eventHandler
        if let turn = configuration.turnServer, turn.transport == .tls {
            let tunnel = try TURNTLSTunnel(server: turn)
            turnTLSTunnel = tunnel
            relay = ICEServer(
                address: tunnel.listenAddress, port: tunnel.listenPort, username: turn.username, password: turn.password, transport: .tcp)
        } else {
            turnTLSTunnel = nil
            relay = configuration.turnServer
        }
        context = g_main_context_new()
        loop = g_main_loop_new(context, 0)
        let options = configuration.consentFreshness ? NICE_AGENT_OPTION_CONSENT_FRESHNESS : NICE_AGENT_OPTION_NONE
        guard let a = nice_agent_new_full(context, NICE_COMPATIBILITY_RFC5245, options) else {
            g_main_loop_unref(loop)
            g_main_context_unref(context)
            throw .agentCreationFailed("nice_agent_new_full returned NULL")
        }
        agent = a
        // UPnP is on in Debian's build and multicasts SSDP; ICE-TCP is not used by Tether.
        CNice_set_bool(a, "upnp", 0)
        CNice_set_bool(a, "ice-tcp", 0)
        CNice_set_bool(a, "ice-udp", 1)
        CNice_set_bool(a, "controlling-mode", configuration.controlling ? 1 : 0)
        var failure: ICETransportError?
        for address in configuration.localAddresses {
            var addr = NiceAddress()
            nice_address_init(&addr)
            if nice_address_set_from_string(&addr, address) == 0 {
                failure = .invalidLocalAddress(address)
                break
            }
            nice_agent_add_local_address(a, &addr)
        }
        if failure == nil, let stun = configuration.stunServer {
            var probe = NiceAddress()
            if nice_address_set_from_string(&probe, stun.address) == 0 {
                failure = .invalidServer(stun.address)
            } else {
                CNice_set_string(a, "stun-server", stun.address)
                CNice_set_uint(a, "stun-server-port", guint(stun.port))
            }
        }
        let stream = failure == nil ? nice_agent_add_stream(a, 1) : 0
        if failure == nil && stream == 0 { failure = .agentCreationFailed("nice_agent_add_stream failed") }
        if failure == nil, let turn = relay, !Self.setRelay(turn, agent: a, stream: stream) {
            failure = .invalidServer(configuration.turnServer?.address ?? turn.address)
        }
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        if failure == nil && fd < 0 { failure = .agentCreationFailed("eventfd failed: errno \(errno)") }
        if let failure {
            if fd >= 0 { Glibc.close(fd) }
            g_object_unref(UnsafeMutableRawPointer(a))
            g_main_loop_unref(loop)
            g_main_context_unref(context)
            throw failure
        }
        sendEventFD = fd
        signalingStream = stream
        sendRing = PacketRing(slotCount: 128, maximumPacketBytes: 1500)
        let counters = UnsafeMutablePointer<ICESendCounters>.allocate(capacity: 1)
        counters.initialize(to: ICESendCounters())
        hot = .allocate(capacity: 1)
        hot.initialize(
            to: ICEHotPathContext(
                agent: a, streamID: stream, receiveRing: .passRetained(receiveRing), receiveWakeup: .passRetained(receiveWakeup),
                sendRing: .passRetained(sendRing), sendEventFD: fd, sendCounters: counters,
                arrivalClock: arrivalClock))

        let me = Unmanaged.passUnretained(self).toOpaque()
        hot.pointee.owner = me
        _ = CNice_connect_gathering_done(a, iceGatheringDone, me)
        _ = CNice_connect_new_candidate(a, iceNewCandidate, me)
        _ = CNice_connect_state_changed(a, iceStateChanged, me)
        _ = CNice_connect_selected_pair(a, iceSelectedPair, me)
        nice_agent_attach_recv(a, stream, 1, context, iceReceive, UnsafeMutableRawPointer(hot))
        sendWatch = CNice_add_fd_watch(context, fd, iceSendReady, UnsafeMutableRawPointer(hot))

        let handles = GLibLoopHandles(context: context, loop: loop)
        do {
            try thread.start { _ in
                g_main_context_push_thread_default(handles.context)
                g_main_loop_run(handles.loop)
                g_main_context_pop_thread_default(handles.context)
            }
        } catch {
            // deinit still runs after a throwing init: mark closed so it does not tear down twice.
            closed.store(true, ordering: .releasing)
            releaseAgentAndContext()
            throw .agentCreationFailed(error.description)
        }
    }

    deinit {
        close()
    }

    /// Datagrams that failed to go out so far: refused by the kernel (direct sends) or by libnice.
    /// Datagrams not sent for want of a selected pair are not failures (`ICESendResult.noPath`).
    public var sendFailureCount: Int {
        hot.pointee.sendCounters.pointee.libniceFailures.load(ordering: .relaxed)
            + hot.pointee.sendCounters.pointee.directFailures.load(ordering: .relaxed)
    }
    /// Datagrams dropped because the send queue was full.
    public var sendQueueDropCount: Int { sendRing.droppedBecauseFull + sendRing.droppedBecauseOversize }
    /// What libnice accepted from the send queue: RTP packets, their payload bytes, RTCP packets
    /// (direct sends are counted by their caller, which learns the outcome at once).
    public var libniceSent: (rtpPackets: Int, rtpPayloadBytes: Int, rtcpPackets: Int) {
        let c = hot.pointee.sendCounters
        return (
            c.pointee.libniceRTPPackets.load(ordering: .relaxed), c.pointee.libniceRTPPayloadBytes.load(ordering: .relaxed),
            c.pointee.libniceRTCPPackets.load(ordering: .relaxed)
        )
    }
    /// Most DTLS datagrams (`ICETransportEvent.dtlsDatagram`) handed to the event handler and
    /// not yet acknowledged with ``dtlsDatagramHandled()``; more are dropped (counted in
    /// ``dtlsDatagramsDropped``). A handshake flight is a few datagrams.
    public static let maximumPendingDTLSDatagrams = 32

    /// The event handler's owner has dealt with one `.dtlsDatagram` event (or let it go): call
    /// once for each, from any thread.
    public func dtlsDatagramHandled() {
        guard !closed.load(ordering: .acquiring) else { return }
        hot.pointee.sendCounters.pointee.dtlsPending.subtract(1, ordering: .relaxed)
    }

    /// DTLS datagrams dropped because ``maximumPendingDTLSDatagrams`` were waiting.
    public var dtlsDatagramsDropped: Int {
        closed.load(ordering: .acquiring) ? 0 : hot.pointee.sendCounters.pointee.dtlsDropped.load(ordering: .relaxed)
    }

    /// Datagrams the media thread sent straight on the selected pair's socket.
    public var directSendCount: Int { directSends.load(ordering: .relaxed) }
    /// Path probes (`probePath()`) handed to libnice.
    public var pathProbeCount: Int { probesDelivered.load(ordering: .relaxed) }

    /// Starts gathering local candidates; `.gatheringDone` follows.
    public func gatherCandidates() {
        guard !closed.load(ordering: .acquiring) else { return }
        let me = UnsafeSendableTransport(self)
        onLoopThread {
            guard !me.transport.closed.load(ordering: .acquiring) else { return }
            me.transport.gather(stream: me.transport.signalingStream)
        }
    }

    /// Starts gathering on `stream`. libnice refuses at once, with no `candidate-gathering-done`,
    /// when no interface is up and running: that is reported as a gathering that found nothing,
    /// so nobody waits for a signal that never comes. GLib thread.
    private func gather(stream: guint) {
        if nice_agent_gather_candidates(agent, stream) == 0 && stream == signalingStream {
            deliver(.gatheringDone(candidates: []))
        }
    }

    /// Gives `stream` the TURN server (over UDP or TCP; TURN over TLS arrives here as TCP to the
    /// tunnel). Returns false when libnice refuses it.
    private static func setRelay(_ turn: ICEServer, agent: OpaquePointer, stream: guint) -> Bool {
        let type = turn.transport == .udp ? NICE_RELAY_TYPE_TURN_UDP : NICE_RELAY_TYPE_TURN_TCP
        return nice_agent_set_relay_info(agent, stream, 1, turn.address, guint(turn.port), turn.username, turn.password, type) != 0
    }

    /// Starts an ICE restart (RFC 8445 §9): new local credentials, checks start again once the
    /// peer's new credentials and candidates are set with `setRemote`. Media keeps flowing on the
    /// old pair meanwhile. The local candidates are kept (use `regather()` after an address change).
    /// - Returns: the new local credentials and the local candidates, or nil when closed.
    public func restart() -> (ufrag: String, password: String, candidates: [String])? {
        runOnLoopThreadAndWait { me in
            guard nice_agent_restart_stream(me.agent, me.signalingStream) != 0 else { return nil }
            let (u, p) = me.credentialsOnLoop()
            return (u, p, me.gatheredCandidates())
        } ?? nil
    }

    /// Gathers candidates again on a new stream (after a local address or link change libnice's
    /// restart would keep the old candidates). `.gatheringDone` follows; the new local
    /// credentials are read with `localCredentials()`, and `setRemote` then applies to the new
    /// stream.
    ///
    /// Make before break: the stream that carries media now keeps its selected pair, its sockets
    /// and the direct route until the new stream selects a pair, so media resumes on the old
    /// path by itself if that path comes back (a link that drops and returns) and nothing is
    /// lost while the new one is negotiated. The old stream (and its TURN allocation) is removed
    /// once the new one carries media. A regather while an earlier new stream has not selected a
    /// pair yet replaces that one.
    /// - Returns: a token for `abandonRegather(_:)`.
    @discardableResult
    public func regather() -> UInt64 {
        let token = UInt64(regathers.add(1, ordering: .relaxed).newValue)
        guard !closed.load(ordering: .acquiring) else { return token }
        let me = UnsafeSendableTransport(self)
        onLoopThread {
            let t = me.transport
            // A regather queued just before `close()` must not add an allocation nobody frees.
            guard !t.closed.load(ordering: .acquiring) else { return }
            let new = nice_agent_add_stream(t.agent, 1)
            guard new != 0 else { return }
            t.lastRegather = (token, new)
            if let turn = t.relay { _ = Self.setRelay(turn, agent: t.agent, stream: new) }
            nice_agent_attach_recv(t.agent, new, 1, t.context, iceReceive, UnsafeMutableRawPointer(t.hot))
            let previous = t.signalingStream
            t.signalingStream = new
            if previous != t.mediaStream { t.removeStream(previous) }  // never carried media: superseded
            if t.mediaStream == 0 { t.hot.pointee.streamID = new }
            t.gather(stream: new)
        }
        return token
    }

    /// Gives up the stream `regather()` (`token`) made when its candidates will not be offered
    /// or answered with (the renewal was overtaken or ended, or the gathering found nothing):
    /// the stream is removed (libnice releases its TURN allocation) and descriptions speak for
    /// the stream carrying media again. Nothing happens once that stream carries media, after a
    /// newer `regather()`, or before any pair carried media (there is nothing to go back to).
    public func abandonRegather(_ token: UInt64) {
        guard !closed.load(ordering: .acquiring) else { return }
        let me = UnsafeSendableTransport(self)
        onLoopThread {
            let t = me.transport
            guard let last = t.lastRegather, last.token == token, last.stream == t.signalingStream,
                last.stream != t.mediaStream, t.mediaStream != 0
            else { return }
            t.lastRegather = nil
            t.signalingStream = t.mediaStream
            t.removeStream(last.stream)
        }
    }

    /// Sends one ICE connectivity check to the peer on the pair that carries media, now (libnice
    /// itself checks a selected pair only every 25 s).
    ///
    /// For a path that went quiet: when a NAT in front of us rebound our mapping (its state was
    /// flushed, or expired), the peer drops our media, which now comes from an address it never
    /// checked, and its media goes to the old mapping. This check reaches it from the new
    /// mapping with valid credentials, so the peer learns the address as a peer-reflexive
    /// candidate, checks it back at once (a triggered check), and moves its selected pair onto
    /// it: within a round trip, with no restart and no signalling. The check claims a priority
    /// above every earlier one (host type preference, rising with each probe), so the newest
    /// mapping wins over the one it replaces; the controlling side nominates it (USE-CANDIDATE),
    /// the controlled side's is nominated by the peer's triggered check (libnice nominates
    /// aggressively). On a path that did not change the check finds a known candidate and
    /// changes nothing. The peer's answer comes back to libnice, which drops it as unmatched.
    /// No-op before a pair carries media or without the peer's credentials.
    public func probePath() {
        guard !closed.load(ordering: .acquiring) else { return }
        let me = UnsafeSendableTransport(self)
        onLoopThread { me.transport.sendProbe() }
    }

    /// `probePath()` on the GLib thread.
    private func sendProbe() {
        let stream = mediaStream
        guard stream != 0, !closed.load(ordering: .acquiring), let remote = remoteCredentials[stream] else { return }
        var ufrag: UnsafeMutablePointer<gchar>?
        var pwd: UnsafeMutablePointer<gchar>?
        guard nice_agent_get_local_credentials(agent, stream, &ufrag, &pwd) != 0, let ufrag else { return }
        let localUfrag = String(cString: ufrag)
        g_free(ufrag)
        g_free(pwd)
        probesSent &+= 1
        // RFC 8445 §5.1.2.1: type preference, local preference (rising), 256 − component 1.
        let priority = UInt32(126) << 24 | min(probesSent, 0xFFFF) << 8 | 255
        let controlling = CNice_get_bool(agent, "controlling-mode") != 0
        var buffer = [UInt8](repeating: 0, count: 548)
        let length = CNice_build_connectivity_check(
            &buffer, buffer.count, remote.ufrag + ":" + localUfrag, remote.password,
            controlling ? 1 : 0, controlling ? 1 : 0, priority, probeTieBreaker)
        guard length > 0 else { return }
        let sent = buffer.withUnsafeBufferPointer {
            $0.baseAddress!.withMemoryRebound(to: gchar.self, capacity: length) { nice_agent_send(agent, stream, 1, guint(length), $0) }
        }
        if sent >= 0 { probesDelivered.add(1, ordering: .relaxed) }
    }

    /// Stops receiving on `stream` and removes it (libnice frees its TURN allocation). GLib thread.
    func removeStream(_ stream: guint) {
        guard stream != 0 else { return }
        remoteCredentials[stream] = nil
        nice_agent_attach_recv(agent, stream, 1, context, nil, nil)
        nice_agent_remove_stream(agent, stream)
    }

    /// Consent losses so far (``ICETransportEvent/consentLost``).
    public var consentLossCount: Int { consentLosses.load(ordering: .relaxed) }

    /// libnice reported FAILED on `stream`. When that is the media stream and its selected pair
    /// lost the peer's consent (RFC 7675), media stops going out on it at once: the direct route
    /// (which bypasses libnice's own refusal) is withdrawn, and `.consentLost` is delivered.
    /// GLib thread.
    func componentFailed(stream: guint) {
        guard configuration.consentFreshness, stream == mediaStream, !consentLostReported, CNice_consent_revoked(agent, stream) != 0 else {
            return
        }
        consentLostReported = true
        consentLosses.add(1, ordering: .relaxed)
        publishRoute(stream: stream, to: nil)
        deliver(.consentLost)
    }

    /// Tests only: tells the peer we no longer consent to receive (libnice answers its consent
    /// checks with 403 from now on), as a peer that wants no more of our packets does.
    func revokeConsentForTesting() {
        let me = UnsafeSendableTransport(self)
        onLoopThread { nice_agent_consent_lost(me.transport.agent, me.transport.signalingStream, 1) }
    }

    /// A stream selected a candidate pair. GLib thread.
    /// - Returns: whether the pair carries media now (events about other streams are dropped).
    func pairSelected(stream: guint, remote: UnsafeMutablePointer<NiceCandidate>) -> Bool {
        // A new selection comes with the peer's consent (its check just succeeded).
        if stream == signalingStream || stream == mediaStream { consentLostReported = false }
        if stream == signalingStream && stream != mediaStream {
            // The new stream works: media moves to it; the old one goes (after this signal).
            let old = mediaStream
            mediaStream = stream
            hot.pointee.streamID = stream
            publishRoute(stream: stream, to: remote)
            if old != 0 {
                let me = UnsafeSendableTransport(self)
                let box = Unmanaged.passRetained(LoopClosure { me.transport.removeStream(old) }).toOpaque()
                CNice_defer(context, iceRunClosure, box)
            }
            return true
        }
        guard stream == mediaStream else { return false }
        publishRoute(stream: stream, to: remote)
        return true
    }

    /// Whether a libnice gathering or state signal for `stream` concerns the stream descriptions
    /// speak for (an old stream's are ignored: its pair keeps carrying media until the new one
    /// works, and its failure is not the call's).
    func isCurrent(stream: guint) -> Bool { stream == signalingStream }

    /// The local ICE username fragment and password.
    public func localCredentials() -> (ufrag: String, password: String) {
        runOnLoopThreadAndWait { $0.credentialsOnLoop() } ?? ("", "")
    }

    /// The local credentials of `stream` (the current one by default). GLib thread.
    func credentialsOnLoop(stream: guint? = nil) -> (ufrag: String, password: String) {
        var ufrag: UnsafeMutablePointer<gchar>?
        var pwd: UnsafeMutablePointer<gchar>?
        guard nice_agent_get_local_credentials(agent, stream ?? signalingStream, &ufrag, &pwd) != 0, let ufrag, let pwd else {
            return ("", "")
        }
        defer {
            g_free(ufrag)
            g_free(pwd)
        }
        return (String(cString: ufrag), String(cString: pwd))
    }

    /// Sets the peer's credentials and candidates (SDP attribute values, with or without the
    /// `a=` and `candidate:` prefixes), which starts connectivity checks. Runs on the GLib thread;
    /// returns once applied.
    /// - Returns: how many candidates libnice could not use (skipped: mDNS `.local` names, for example).
    /// - Throws: when libnice refuses the credentials, or none of several candidates is usable.
    @discardableResult
    public func setRemote(ufrag: String, password: String, candidates: [String]) throws(ICETransportError) -> Int {
        guard !closed.load(ordering: .acquiring) else { throw .closed }
        let outcome = runOnLoopThreadAndWait { me -> (error: ICETransportError?, skipped: [String]) in
            let s = me.signalingStream
            guard nice_agent_set_remote_credentials(me.agent, s, ufrag, password) != 0 else { return (.remoteRejected("credentials"), []) }
            me.remoteCredentials[s] = (ufrag, password)
            let (skipped, refused) = me.addRemoteOnLoop(candidates, stream: s)
            return (refused ? .remoteRejected("candidates") : nil, skipped)
        }
        guard let outcome else { throw .remoteRejected("the ICE thread did not answer within 5 s") }
        if let error = outcome.error { throw error }
        return try Self.usableCount(of: candidates, skipped: outcome.skipped)
    }

    /// Whether a candidate pair is selected on the current stream, so `send` has somewhere to
    /// send. The media loop checks it before encoding and protecting a packet it could not send.
    /// - Note: Media loop only. Never allocates or locks.
    @inline(__always)
    public var hasPath: Bool {
        adoptRoute()?.pointee.pairSelected ?? false
    }

    /// Sends one datagram: straight on the selected pair's socket when there is a direct route;
    /// through libnice (queued, copied, for the GLib thread) for a relayed or TCP pair; not at all
    /// before a pair is selected (`.noPath`: libnice would refuse it, and that is no failure).
    /// - Parameter kind: what the datagram is, so what libnice sends for us is counted as such.
    /// - Note: Media loop only. Never allocates or locks: an atomic load and a `sendto`, or a ring
    ///   push and an eventfd write.
    @inline(__always)
    @discardableResult
    public func send(_ datagram: UnsafeRawBufferPointer, kind: ICEDatagramKind = .other) -> ICESendResult {
        guard let route = adoptRoute(), route.pointee.pairSelected else { return .noPath }
        if route.pointee.fd >= 0 {
            // `address` is the struct's first field: the route's address is the sockaddr's.
            let sent = sendto(
                route.pointee.fd, datagram.baseAddress, datagram.count, Int32(MSG_DONTWAIT),
                UnsafeRawPointer(route).assumingMemoryBound(to: sockaddr.self), route.pointee.addressLength)
            guard sent >= 0 else {
                hot.pointee.sendCounters.pointee.directFailures.add(1, ordering: .relaxed)
                return .failed
            }
            directSends.add(1, ordering: .relaxed)
            return .sent
        }
        guard sendRing.push(datagram, arrivalNanoseconds: kind.queueTag) else { return .queueFull }
        _ = eventfd_write(sendEventFD, 1)
        return .queued
    }

    /// Sends a datagram that is not media (a DTLS flight) through libnice on the stream media
    /// goes on, from the GLib thread. Best effort: DTLS sends its flights again when they are lost.
    /// - Note: Any thread; allocates (a closure for the GLib thread). Never on the media path.
    public func sendControl(_ datagram: [UInt8]) {
        guard !closed.load(ordering: .acquiring), !datagram.isEmpty else { return }
        let me = UnsafeSendableTransport(self)
        onLoopThread {
            let t = me.transport
            _ = datagram.withUnsafeBytes { raw in
                nice_agent_send(
                    t.agent, t.hot.pointee.streamID, 1, guint(raw.count), raw.baseAddress?.assumingMemoryBound(to: gchar.self))
            }
        }
    }

    /// The newest published route, adopted by the media thread (older ones may then be freed).
    /// - Note: Media loop only.
    @inline(__always)
    private func adoptRoute() -> UnsafeMutablePointer<ICEDirectRoute>? {
        let current = publishedRoute.load(ordering: .acquiring)
        if current != mediaRoute {
            mediaRoute = current
            if let current { adoptedGeneration.store(current.pointee.generation, ordering: .releasing) }
        }
        return mediaRoute
    }

    /// Publishes the route to `remote`, the remote candidate of `stream`'s selected pair (nil:
    /// withdraws the direct route). GLib thread.
    func publishRoute(stream: guint, to remote: UnsafeMutablePointer<NiceCandidate>?) {
        var route = ICEDirectRoute(address: sockaddr_storage(), addressLength: 0, fd: -1, generation: 0, pairSelected: remote != nil)
        if let remote, let socket = nice_agent_get_selected_socket(agent, stream, 1) {
            // NULL for a relayed or TCP local candidate: those keep going through libnice.
            let fd = g_socket_get_fd(socket)
            let duplicate = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1
            g_object_unref(UnsafeMutableRawPointer(socket))
            if duplicate >= 0 {
                withUnsafeMutablePointer(to: &route.address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { nice_address_copy_to_sockaddr(&remote.pointee.addr, $0) }
                }
                let family = Int32(route.address.ss_family)
                if family == AF_INET || family == AF_INET6 {
                    route.addressLength = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
                    route.fd = duplicate
                } else {
                    Glibc.close(duplicate)
                }
            }
        }
        routeGeneration += 1
        route.generation = routeGeneration
        let published = UnsafeMutablePointer<ICEDirectRoute>.allocate(capacity: 1)
        published.initialize(to: route)
        if let old = publishedRoute.exchange(published, ordering: .acquiringAndReleasing) { retiredRoutes.append(old) }
        reclaimRoutes(all: false)
    }

    /// Frees the retired routes the media thread has moved past (all of them once it stopped).
    private func reclaimRoutes(all: Bool) {
        let adopted = adoptedGeneration.load(ordering: .acquiring)
        retiredRoutes.removeAll { route in
            guard all || route.pointee.generation < adopted else { return false }
            if route.pointee.fd >= 0 { Glibc.close(route.pointee.fd) }
            route.deallocate()
            return true
        }
    }

    /// Stops the GLib thread and frees the agent. Idempotent.
    /// - Note: Must not be called on the GLib thread (it joins it).
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let closedRemotely = Wakeup()
        var pendingRemoteClose = false
        if configuration.turnServer != nil {
            // Free the allocations and permissions held on the TURN server while the loop still
            // runs (libnice's asynchronous close sends the deallocations and waits for them);
            // left to expire, they would stay on the server for up to ten minutes. First what the
            // media loop queued last (an RTCP BYE goes through the relay), and short STUN
            // retransmissions, so a server that is out of reach costs about 1.4 s, not 39.
            pendingRemoteClose = true
            let box = UnsafeSendableRaw(Unmanaged.passRetained(closedRemotely).toOpaque())  // released by the callback
            let a = agent
            let hot = UnsafeSendableRaw(UnsafeMutableRawPointer(hot))
            onLoopThread {
                _ = iceSendReady(-1, G_IO_IN, hot.pointer)
                CNice_set_uint(a, "stun-max-retransmissions", 2)
                CNice_set_uint(a, "stun-initial-timeout", 200)
                CNice_close_async(a, iceClosed, box.pointer)
            }
            if closedRemotely.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 2_000_000_000) { pendingRemoteClose = false }
        }
        g_main_loop_quit(loop)
        thread.join()
        // No thread runs the context now: take it, and finish on this thread.
        _ = g_main_context_acquire(context)
        if pendingRemoteClose {
            // The deallocations are still out: keep their timers running (bounded) until libnice
            // calls back, or the agent (which the pending close holds) would never be freed.
            let deadline = MonotonicClock.nanoseconds() + 2_000_000_000
            while !closedRemotely.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds()), MonotonicClock.nanoseconds() < deadline {
                if g_main_context_iteration(context, 0) == 0 { usleep(5_000) }
            }
        }
        // Flush what the media loop queued last (an RTCP BYE) before going quiet.
        _ = iceSendReady(-1, G_IO_IN, UnsafeMutableRawPointer(hot))
        for stream in Set([signalingStream, mediaStream]) where stream != 0 {
            nice_agent_attach_recv(agent, stream, 1, context, nil, nil)
        }
        CNice_disconnect_all(agent, Unmanaged.passUnretained(self).toOpaque())
        // Run (and free) closures still queued for the loop while the agent is alive.
        drainContext()
        g_main_context_release(context)
        // The media loop has stopped sending (sessions stop it first): every route can go.
        if let last = publishedRoute.exchange(nil, ordering: .acquiringAndReleasing) { retiredRoutes.append(last) }
        reclaimRoutes(all: true)
        releaseAgentAndContext()
    }

    /// Dispatches what is ready on the (acquired) context without blocking, a bounded number of
    /// times: a source that stays ready (a peer still sending to our sockets) must not keep a
    /// closing transport spinning forever, as an unbounded `while iteration {}` once did.
    private func drainContext() {
        var rounds = 0
        while rounds < 256, g_main_context_iteration(context, 0) != 0 { rounds += 1 }
    }

    private func releaseAgentAndContext() {
        if let w = sendWatch {
            g_source_destroy(w)
            g_source_unref(w)
            sendWatch = nil
        }
        g_object_unref(UnsafeMutableRawPointer(agent))
        // Drain whatever the agent's finalisation left on the context.
        _ = g_main_context_acquire(context)
        drainContext()
        g_main_context_release(context)
        g_main_loop_unref(loop)
        g_main_context_unref(context)
        Glibc.close(sendEventFD)
        hot.pointee.receiveRing.release()
        hot.pointee.receiveWakeup.release()
        hot.pointee.sendRing.release()
        hot.pointee.sendCounters.deinitialize(count: 1)
        hot.pointee.sendCounters.deallocate()
        hot.deinitialize(count: 1)
        hot.deallocate()
    }

    /// Runs `body` on the GLib thread and waits (up to 5 s) for its result; nil when closed or timed out.
    func runOnLoopThreadAndWait<T: Sendable>(_ body: @escaping @Sendable (ICETransport) -> T) -> T? {
        guard !closed.load(ordering: .acquiring) else { return nil }
        let result = Mutex<T?>(nil)
        let done = Wakeup()
        let me = UnsafeSendableTransport(self)
        onLoopThread {
            let value = body(me.transport)
            result.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(untilMonotonicNanoseconds: MonotonicClock.nanoseconds() + 5_000_000_000) else { return nil }
        return result.withLock { $0 }
    }

    /// Runs `body` on the GLib thread (libnice emits signals on the calling thread).
    private func onLoopThread(_ body: @escaping () -> Void) {
        let box = Unmanaged.passRetained(LoopClosure(body)).toOpaque()
        CNice_invoke(context, iceRunClosure, box)
    }

    /// Tests only: runs `body` on the GLib thread as the transport's own closures run (holding
    /// the transport until it has run).
    func onLoopThreadForTesting(_ body: @escaping @Sendable () -> Void) {
        let me = UnsafeSendableTransport(self)
        onLoopThread {
            body()
            _ = me
        }
    }

    func deliver(_ event: ICETransportEvent) {
        eventHandler(event)
    }
}

/// The GLib context and loop the GLib thread runs; owned by `ICETransport`, which joins the
/// thread before freeing them.
private struct GLibLoopHandles: @unchecked Sendable {
    let context: OpaquePointer
    let loop: OpaquePointer
}

/// A retained object's address handed to the GLib thread.
private struct UnsafeSendableRaw: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    init(_ pointer: UnsafeMutableRawPointer) { self.pointer = pointer }
}

/// `nice_agent_close_async` finished: wakes `close()`. GLib thread (or `close` draining the context).
private func iceClosed(_ source: UnsafeMutablePointer<GObject>?, _ result: OpaquePointer?, _ data: gpointer?) {
    guard let data else { return }
    Unmanaged<Wakeup>.fromOpaque(data).takeRetainedValue().signal()
}

/// The transport, handed to closures that run on the GLib thread while it is open.
private struct UnsafeSendableTransport: @unchecked Sendable {
    let transport: ICETransport
    init(_ transport: ICETransport) { self.transport = transport }
}

/// A closure handed to the GLib thread through `g_main_context_invoke`.
private final class LoopClosure {
    let body: () -> Void
    /// GLib's own queue orders the hand-off, but GLib is not built with the thread sanitizer; this
    /// release/acquire pair states the hand-off where the sanitizer (and a reader) can see it.
    private let published = Atomic<Bool>(false)

    init(_ body: @escaping () -> Void) {
        self.body = body
        published.store(true, ordering: .releasing)
    }

    func run() {
        _ = published.load(ordering: .acquiring)
        body()
    }
}

private func iceRunClosure(_ data: gpointer?) -> gboolean {
    let box = Unmanaged<LoopClosure>.fromOpaque(data!)
    box.takeUnretainedValue().run()
    // A closure holds its transport: if the user dropped theirs meanwhile, releasing the closure
    // here would run the transport's deinit, and so `close()`, on the GLib thread, which would
    // join itself and free the loop it runs. The release happens on another thread.
    let release = UnsafeSendableRaw(box.toOpaque())
    DispatchQueue.global(qos: .utility).async { Unmanaged<LoopClosure>.fromOpaque(release.pointer).release() }
    return 0  // G_SOURCE_REMOVE
}
