import CNice
import Glibc
import Dispatch
import Synchronization
import TetherRealtime

// The C callbacks libnice and GLib call on the transport's GLib thread: received datagrams,
// the send queue the media loop fills (drained when its eventfd fires), and libnice's signals.

/// Receive callback: runs on the GLib thread. Copies the datagram into the ring and wakes the
/// media loop; no allocation, no lock, no ARC traffic.
func iceReceive(
    _ agent: OpaquePointer?, _ stream: guint, _ component: guint, _ length: guint,
    _ buffer: UnsafeMutablePointer<gchar>?, _ userData: gpointer?
) {
    guard let userData, let buffer else { return }
    let hot = userData.assumingMemoryBound(to: ICEHotPathContext.self)
    // RFC 7983: 20…63 is DTLS. Only during a handshake (and a close): the copy and the event are
    // off the media path, which never sees these bytes.
    if length > 0, UInt8(bitPattern: buffer[0]) >= 20, UInt8(bitPattern: buffer[0]) <= 63, let owner = hot.pointee.owner {
        // At most `maximumPendingDTLSDatagrams` wait for their handler: a peer flooding DTLS
        // bytes (a handshake is a few datagrams) is dropped here, not queued without bound.
        let counters = hot.pointee.sendCounters
        guard counters.pointee.dtlsPending.load(ordering: .relaxed) < ICETransport.maximumPendingDTLSDatagrams else {
            counters.pointee.dtlsDropped.add(1, ordering: .relaxed)
            return
        }
        counters.pointee.dtlsPending.add(1, ordering: .relaxed)
        let datagram = Array(UnsafeRawBufferPointer(start: buffer, count: Int(length)))
        Unmanaged<ICETransport>.fromOpaque(owner).takeUnretainedValue().deliver(.dtlsDatagram(datagram))
        return
    }
    let now = hot.pointee.arrivalClock()
    let pushed = hot.pointee.receiveRing._withUnsafeGuaranteedRef {
        $0.push(UnsafeRawBufferPointer(start: buffer, count: Int(length)), arrivalNanoseconds: now)
    }
    if pushed {
        _ = hot.pointee.receiveWakeup._withUnsafeGuaranteedRef { $0.signal() }
    }
}

/// Send-queue watch: runs on the GLib thread when the media loop queued datagrams.
func iceSendReady(_ fd: gint, _ condition: GIOCondition, _ userData: gpointer?) -> gboolean {
    guard let userData else { return 1 }
    let hot = userData.assumingMemoryBound(to: ICEHotPathContext.self)
    var value: eventfd_t = 0
    if fd >= 0 { _ = eventfd_read(fd, &value) }
    let agent = hot.pointee.agent
    let stream = hot.pointee.streamID
    let counters = hot.pointee.sendCounters
    hot.pointee.sendRing._withUnsafeGuaranteedRef { ring in
        while let (sent, tag) = ring.pop({ buffer, tag in
            (nice_agent_send(agent, stream, 1, guint(buffer.count), buffer.baseAddress?.assumingMemoryBound(to: gchar.self)), tag)
        }) {
            guard sent >= 0 else {
                counters.pointee.libniceFailures.add(1, ordering: .relaxed)
                continue
            }
            switch tag >> 32 {
            case 1:
                counters.pointee.libniceRTPPackets.add(1, ordering: .relaxed)
                counters.pointee.libniceRTPPayloadBytes.add(Int(tag & 0xFFFF_FFFF), ordering: .relaxed)
            case 2:
                counters.pointee.libniceRTCPPackets.add(1, ordering: .relaxed)
            default:
                break
            }
        }
    }
    return 1  // G_SOURCE_CONTINUE
}

func iceGatheringDone(_ agent: OpaquePointer?, _ stream: guint, _ userData: gpointer?) {
    let me = Unmanaged<ICETransport>.fromOpaque(userData!).takeUnretainedValue()
    guard me.isCurrent(stream: stream) else { return }
    me.deliver(.gatheringDone(candidates: me.gatheredCandidates()))
}

func iceNewCandidate(_ agent: OpaquePointer?, _ candidate: UnsafeMutablePointer<NiceCandidate>?, _ userData: gpointer?) {
    let me = Unmanaged<ICETransport>.fromOpaque(userData!).takeUnretainedValue()
    guard let candidate, me.isCurrent(stream: candidate.pointee.stream_id), let line = me.candidateLine(candidate) else { return }
    me.deliver(.candidateGathered(line, ufrag: me.credentialsOnLoop(stream: candidate.pointee.stream_id).ufrag))
}

func iceStateChanged(
    _ agent: OpaquePointer?, _ stream: guint, _ component: guint, _ state: guint, _ userData: gpointer?
) {
    let me = Unmanaged<ICETransport>.fromOpaque(userData!).takeUnretainedValue()
    if state == NICE_COMPONENT_STATE_FAILED.rawValue { me.componentFailed(stream: stream) }
    guard me.isCurrent(stream: stream) else { return }
    me.deliver(.componentStateChanged(ICEComponentState(rawValue: Int(state)) ?? .failed))
}

func iceSelectedPair(
    _ agent: OpaquePointer?, _ stream: guint, _ component: guint,
    _ local: UnsafeMutablePointer<NiceCandidate>?, _ remote: UnsafeMutablePointer<NiceCandidate>?, _ userData: gpointer?
) {
    let me = Unmanaged<ICETransport>.fromOpaque(userData!).takeUnretainedValue()
    guard let local, let remote, me.pairSelected(stream: stream, remote: remote) else { return }
    me.deliver(
        .selectedPairChanged(
            ICESelectedPair(
                local: describe(&local.pointee.addr), remote: describe(&remote.pointee.addr),
                localType: typeName(local.pointee.type), remoteType: typeName(remote.pointee.type),
                localBase: host(&local.pointee.base_addr))))
}

func host(_ address: UnsafeMutablePointer<NiceAddress>) -> String {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    nice_address_to_string(address, &buffer)
    // The text up to its terminating NUL (an address is ASCII).
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func describe(_ address: UnsafeMutablePointer<NiceAddress>) -> String {
    let host = host(address)
    let port = nice_address_get_port(address)
    return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
}

func typeName(_ type: NiceCandidateType) -> String {
    switch type {
    case NICE_CANDIDATE_TYPE_HOST: "host"
    case NICE_CANDIDATE_TYPE_SERVER_REFLEXIVE: "srflx"
    case NICE_CANDIDATE_TYPE_PEER_REFLEXIVE: "prflx"
    case NICE_CANDIDATE_TYPE_RELAYED: "relay"
    default: "unknown"
    }
}
