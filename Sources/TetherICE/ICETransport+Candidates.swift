import CNice
import Synchronization

/// Candidates in and out: the local ones as they are offered, the peer's as libnice is given
/// them (from a description through `setRemote`, or trickled through `addRemoteCandidates`).
extension ICETransport {
    /// The local candidates gathered so far on the current stream (SDP attribute values), for a
    /// gathering that is taking long (a STUN or TURN server out of reach): the host candidates
    /// are there long before it gives up.
    public func localCandidates() -> [String] {
        runOnLoopThreadAndWait { $0.gatheredCandidates() } ?? []
    }

    /// The peer's candidates libnice holds for the current stream (from descriptions, trickled,
    /// and peer-reflexive ones learnt from checks), as SDP attribute values: for diagnostics.
    public func remoteCandidates() -> [String] {
        runOnLoopThreadAndWait { me in
            me.lines(of: nice_agent_get_remote_candidates(me.agent, me.signalingStream, 1)) { me.sdpValue($0) }
        } ?? []
    }

    /// Adds candidates the peer trickled (RFC 8838; SDP attribute values, with or without the
    /// `a=` and `candidate:` prefixes) to the current stream, after its credentials were set
    /// with `setRemote`: checks start on the new pairs. Runs on the GLib thread; returns once
    /// applied.
    /// - Returns: how many candidates were skipped (mDNS names, IPv6 link-local, unparsable).
    /// - Throws: when libnice refuses them, or none of several candidates is usable.
    @discardableResult
    public func addRemoteCandidates(_ candidates: [String]) throws(ICETransportError) -> Int {
        guard !closed.load(ordering: .acquiring) else { throw .closed }
        let outcome = runOnLoopThreadAndWait { me in me.addRemoteOnLoop(candidates, stream: me.signalingStream) }
        guard let (skipped, refused) = outcome else { throw .remoteRejected("the ICE thread did not answer within 5 s") }
        if refused { throw .remoteRejected("candidates") }
        return try Self.usableCount(of: candidates, skipped: skipped)
    }

    /// How many of `candidates` were skipped; throws when several were given and none was usable.
    static func usableCount(of candidates: [String], skipped: [String]) throws(ICETransportError) -> Int {
        if !candidates.isEmpty && skipped.count == candidates.count, let first = skipped.first {
            throw .invalidRemoteCandidate(first)
        }
        return skipped.count
    }

    /// Parses `candidates` and gives the usable ones to libnice for `stream`. GLib thread.
    /// - Returns: the lines skipped (unparsable, or IPv6 link-local: see `candidateLine`), and
    ///   whether libnice refused the rest.
    func addRemoteOnLoop(_ candidates: [String], stream: guint) -> (skipped: [String], refused: Bool) {
        var skipped: [String] = []
        var list: UnsafeMutablePointer<GSList>?
        for line in candidates {
            var value = line.hasPrefix("a=") ? String(line.dropFirst(2)) : line
            if !value.hasPrefix("candidate:") { value = "candidate:" + value }
            guard let c = nice_agent_parse_remote_candidate_sdp(agent, stream, "a=" + value) else {
                skipped.append(line)
                continue
            }
            guard CNice_address_is_ipv6_linklocal(&c.pointee.addr) == 0 else {
                nice_candidate_free(c)
                skipped.append(line)
                continue
            }
            list = g_slist_append(list, c)
        }
        guard list != nil else { return (skipped, false) }
        let n = nice_agent_set_remote_candidates(agent, stream, 1, list)
        CNice_free_candidate_list(list)
        return (skipped, n < 0)
    }

    /// The current stream's local candidates as they are offered (see `candidateLine`). GLib thread.
    func gatheredCandidates() -> [String] {
        lines(of: nice_agent_get_local_candidates(agent, signalingStream, 1)) { candidateLine($0) }
    }

    /// A local candidate as an SDP attribute value (`candidate:…`), or nil for one that is not
    /// offered: IPv6 link-local candidates (as libwebrtc and Firefox do not offer them), which a
    /// peer can use only on the same link and only knowing which interface (the scope id, which
    /// a candidate cannot carry), and most of which spell the hardware address out (EUI-64); and
    /// peer-reflexive ones, which checks taught libnice (RFC 8445 §5.1.1: they are never
    /// signaled; the peer learns them from the same checks). GLib thread.
    func candidateLine(_ candidate: UnsafeMutablePointer<NiceCandidate>) -> String? {
        guard CNice_address_is_ipv6_linklocal(&candidate.pointee.addr) == 0,
            candidate.pointee.type != NICE_CANDIDATE_TYPE_PEER_REFLEXIVE
        else { return nil }
        return sdpValue(candidate)
    }

    /// A candidate as an SDP attribute value, without `a=`. GLib thread.
    private func sdpValue(_ candidate: UnsafeMutablePointer<NiceCandidate>) -> String? {
        guard let sdp = nice_agent_generate_local_candidate_sdp(agent, candidate) else { return nil }
        defer { g_free(sdp) }
        let line = String(cString: sdp)
        return line.hasPrefix("a=") ? String(line.dropFirst(2)) : line
    }

    /// `transform` of each candidate of a libnice candidate list (nil ones left out); frees the
    /// list. GLib thread.
    private func lines(
        of list: UnsafeMutablePointer<GSList>?, _ transform: (UnsafeMutablePointer<NiceCandidate>) -> String?
    ) -> [String] {
        var out: [String] = []
        var node = list
        while let n = node {
            if let candidate = n.pointee.data?.assumingMemoryBound(to: NiceCandidate.self), let line = transform(candidate) {
                out.append(line)
            }
            node = n.pointee.next
        }
        CNice_free_candidate_list(list)
        return out
    }
}
