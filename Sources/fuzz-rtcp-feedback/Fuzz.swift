import TetherFuzzing

/// libFuzzer's entry point (`scripts/fuzz.sh` builds this executable with `-sanitize=fuzzer,address`
/// and `-DTETHER_LIBFUZZER`, and libFuzzer supplies `main`). See `FuzzTarget.rtcpFeedback`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafeRawPointer, _ count: Int) -> Int32 {
    FuzzTarget.rtcpFeedback.run(UnsafeRawBufferPointer(start: data, count: count))
    return 0
}

#if !TETHER_LIBFUZZER
/// In an ordinary build: replays files of inputs, or writes the seeds (`--help`).
@main
enum Replay {
    static func main() { FuzzTarget.rtcpFeedback.replayMain() }
}
#endif
