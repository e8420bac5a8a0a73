import TetherCodec
import TetherCore
import TetherRTP

/// The inputs that reach Tether from the network, as fuzz targets.
///
/// Each target takes arbitrary bytes, feeds them to the code that parses or buffers what a peer
/// sends, and checks invariants that must hold whatever the bytes are. A violated invariant traps
/// (`preconditionFailure`), which libFuzzer reports as a crash and saves as a reproducer.
///
/// The same functions run in three places: the libFuzzer executables (`fuzz-sdp`, `fuzz-rtp`,
/// `fuzz-jitter-buffer`, `fuzz-dtmf`, `fuzz-rtcp-feedback`, built by `scripts/fuzz.sh` with `-sanitize=fuzzer,address`), the same
/// executables in an ordinary build (they replay files: `fuzz-sdp FILE|DIR…`), and the
/// `TetherFuzzingTests` suite, which replays the committed corpus and every saved crash in the
/// normal test run, so a crash found once stays a regression test.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// Session descriptions: parsing, serializing again, and offer/answer against Tether's own
    /// parameters, as `CallSession.acceptOffer` and `applyAnswer` do.
    case sdp
    /// Datagrams after SRTP: RTP/RTCP demultiplexing, the RTP header, RTCP compounds (every
    /// packet and report block) and the Opus TOC/LBRR parser that FEC accounting uses.
    case rtp
    /// The jitter buffer and the reception statistics fed a stream of packets with arbitrary
    /// sequence numbers, timestamps, payload sizes and arrival times, interleaved with pulls,
    /// and long streams from a seeded generator (continuous, lossy, or racing the playout point).
    case jitterBuffer = "jitter-buffer"
    /// The RFC 4733 DTMF receiver fed telephone-event packets, time-outs, and long runs of one
    /// event's segments.
    case dtmf
    /// RTCP compounds read as the media loop reads them (`PeerReports`) into the loss
    /// adaptation, over a call: crafted XR Loss RLE reports repeated thousands of times.
    case rtcpFeedback = "rtcp-feedback"

    /// Runs one input through the target; traps when an invariant is violated.
    public func run(_ input: UnsafeRawBufferPointer) {
        switch self {
        case .sdp: SDPFuzzing.run(input)
        case .rtp: RTPFuzzing.run(input)
        case .jitterBuffer: JitterBufferFuzzing.run(input)
        case .dtmf: DTMFFuzzing.run(input)
        case .rtcpFeedback: RTCPFeedbackFuzzing.run(input)
        }
    }

    /// Runs one input given as bytes.
    public func run(_ input: [UInt8]) {
        input.withUnsafeBytes { run($0) }
    }
}

/// Traps with a message that libFuzzer prints beside the reproducer.
@inline(never)
func fuzzInvariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() { preconditionFailure("fuzz invariant violated: \(message())") }
}
