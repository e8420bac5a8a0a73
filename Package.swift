// swift-tools-version:6.0
// Tether: the real-time audio media layer of a Linux softphone.
import PackageDescription

let package = Package(
    name: "Tether",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Tether", targets: ["Tether"]),
        .executable(name: "tether", targets: ["tether"]),
        .executable(name: "tether-bench", targets: ["tether-bench"]),
        .executable(name: "tether-relay", targets: ["tether-relay"]),
    ],
    dependencies: [
        // Command-line parsing for `tether` and `tether-bench`.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // The embedder's log stream: every message the library emits goes to a per-call `Logger`,
        // handled by whatever backend the embedder bootstrapped.
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // Counters and gauges for embedders that run many calls in one process (a no-op until
        // the embedder bootstraps a backend).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // `swift package generate-documentation`: the DocC documentation (Sources/Tether/Tether.docc), built in CI.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // MARK: C system libraries (Debian packages through pkg-config)
        .systemLibrary(
            name: "COpus", path: "CModules/COpus", pkgConfig: "opus",
            providers: [.apt(["libopus-dev"])]),
        .systemLibrary(
            name: "CSRTP", path: "CModules/CSRTP", pkgConfig: "libsrtp2",
            providers: [.apt(["libsrtp2-dev"])]),
        // libnice's headers are under /usr/include/nice (reached as <nice/agent.h>); GLib's need
        // their include paths, which gobject-2.0.pc gives without the -pthread of nice.pc's
        // private requirements (gthread, gmodule) that SwiftPM refuses with a warning in every
        // build, ours and an embedder's. The libraries are linked by the module map.
        .systemLibrary(
            name: "CNice", path: "CModules/CNice", pkgConfig: "gobject-2.0",
            providers: [.apt(["libnice-dev"])]),
        .systemLibrary(
            name: "COpenSSL", path: "CModules/COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CALSA", path: "CModules/CALSA", pkgConfig: "alsa",
            providers: [.apt(["libasound2-dev"])]),
        // No pkg-config: libpulse's headers need no include path, and libpulse.pc's
        // -D_REENTRANT/-pthread only draw SwiftPM's warning. Linked by the module map.
        .systemLibrary(name: "CPulse", path: "CModules/CPulse"),
        // Voice processing on the capture path: WebRTC's AudioProcessing module (C++, reached
        // through CTetherVoice) and speexdsp (measured against it by `tether-bench voice`).
        .systemLibrary(
            name: "CWebRTCAudioProcessing", path: "CModules/CWebRTCAudioProcessing", pkgConfig: "webrtc-audio-processing",
            providers: [.apt(["libwebrtc-audio-processing-dev"])]),
        .systemLibrary(
            name: "CSpeexDSP", path: "CModules/CSpeexDSP", pkgConfig: "speexdsp",
            providers: [.apt(["libspeexdsp-dev"])]),
        // FFTW 3 in single precision (Debian's libfftw3-dev): the FFTs of Tether's own echo
        // canceller (TetherAudio's EchoCanceller).
        .systemLibrary(
            name: "CFFTW", path: "CModules/CFFTW", pkgConfig: "fftw3f",
            providers: [.apt(["libfftw3-dev"])]),
        // SwiftPM drops the -D flags of pkg-config's Cflags: the ones webrtc-audio-processing.pc
        // gives are set here.
        .target(
            name: "CTetherVoice", dependencies: ["CWebRTCAudioProcessing"],
            cxxSettings: [.define("WEBRTC_POSIX"), .define("WEBRTC_AUDIO_PROCESSING_ONLY_BUILD")]),

        // MARK: Layers
        // Lock-free rings, wake-ups, realtime threads, monotonic time.
        .target(name: "CTetherSystem"),
        .target(name: "TetherRealtime", dependencies: ["CTetherSystem"]),
        // Opus encoder/decoder owners.
        .target(name: "TetherCodec", dependencies: ["COpus"]),
        // RTP/RTCP (sans-IO parsing and statistics) and SRTP (libsrtp2).
        .target(name: "TetherRTP", dependencies: ["CSRTP", "CTetherSystem"]),
        // DTLS-SRTP keying (OpenSSL): the process certificate and handshakes driven by datagrams.
        .target(name: "TetherDTLS", dependencies: ["COpenSSL", "TetherCore", "TetherRTP", "CTetherSystem"]),
        // TURN over TLS: libnice's TCP connections to a loopback listener, carried to the TURN
        // server over TLS (libnice speaks TLS to TURN servers only in its Google/Microsoft modes).
        .target(name: "CTetherTLSTunnel", dependencies: ["COpenSSL"]),
        // ICE transport over libnice with its own GLib main-context thread.
        .target(name: "TetherICE", dependencies: ["CNice", "TetherRealtime", "CTetherTLSTunnel"]),
        // Audio sources and sinks: test signal, WAV files, (devices later).
        .target(name: "TetherAudio", dependencies: ["TetherRealtime", "CALSA", "CPulse", "CTetherVoice", "CSpeexDSP", "CFFTW"]),
        // The sans-IO core: SDP, jitter buffer, decisions. No clocks, no sockets.
        .target(name: "TetherCore"),
        // Thin C helpers for sockets, eventfd, netlink and setns.
        .target(name: "CTetherNet"),
        // Fault injection: the UDP impairment relay used by tests, the demo and the bench.
        .target(name: "TetherFaults", dependencies: ["CTetherNet"]),
        // rtnetlink monitor of local addresses and links (debounced).
        .target(name: "TetherNetworkMonitor", dependencies: ["CTetherNet"]),
        // The public API: CallSession, errors, statistics, the media loop.
        .target(
            name: "Tether",
            dependencies: [
                "TetherRealtime", "TetherCodec", "TetherRTP", "TetherICE", "TetherAudio", "TetherCore",
                "TetherNetworkMonitor", "TetherDTLS", .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]),
        // Fuzz targets for what comes from the network (SDP, RTP/RTCP, the jitter buffer, DTMF, the
        // peer's reports read as the media loop reads them), shared by
        // the libFuzzer executables below and the corpus-replay tests. scripts/fuzz.sh builds them.
        .target(name: "TetherFuzzing", dependencies: ["TetherCore", "TetherRTP", "TetherCodec"]),
        .executableTarget(name: "fuzz-sdp", dependencies: ["TetherFuzzing"]),
        .executableTarget(name: "fuzz-rtp", dependencies: ["TetherFuzzing"]),
        .executableTarget(name: "fuzz-jitter-buffer", dependencies: ["TetherFuzzing"]),
        .executableTarget(name: "fuzz-dtmf", dependencies: ["TetherFuzzing"]),
        .executableTarget(name: "fuzz-rtcp-feedback", dependencies: ["TetherFuzzing"]),
        // The fault matrix: `tether call` processes in network namespaces and real kernel faults
        // (tests and `tether-bench faults`).
        .target(name: "TetherFaultLab"),
        // Two in-process sessions joined by signaling and (optionally) the impairment relay.
        .target(name: "TetherTestbed", dependencies: ["Tether", "TetherCore", "TetherFaults", "TetherRealtime", "TetherAudio", "CTetherSystem"]),
        // `tether-relay`: the impairment relay as a process controlled by JSON lines.
        .executableTarget(name: "tether-relay", dependencies: ["TetherFaults"]),
        // The `tether` command.
        .executableTarget(
            name: "tether",
            dependencies: [
                "Tether", "TetherAudio", "TetherTestbed", "TetherFaults",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The bench executable.
        .executableTarget(
            name: "tether-bench",
            dependencies: [
                "TetherCodec", "TetherRTP", "TetherCore", "TetherRealtime", "CSRTP", "COpus", "CAllocationCounter", "CTetherVoice",
                "Tether", "TetherTestbed", "TetherFaults", "TetherAudio", "TetherFaultLab",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/tether-bench"),

        // MARK: Tests
        .target(name: "CAllocationCounter", path: "Tests/CAllocationCounter"),
        // The tests' swift-log handler: each test's messages in its own file, which
        // scripts/run-tests.sh prints only when that test fails.
        .target(
            name: "TetherTestSupport", dependencies: [.product(name: "Logging", package: "swift-log")],
            path: "Tests/TetherTestSupport"),
        .testTarget(
            name: "TetherTestSupportTests",
            dependencies: ["TetherTestSupport", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "TetherRealtimeTests", dependencies: ["TetherRealtime"]),
        .testTarget(name: "TetherCodecTests", dependencies: ["TetherCodec"]),
        .testTarget(name: "TetherRTPTests", dependencies: ["TetherRTP", "CAllocationCounter"]),
        .testTarget(name: "TetherICETests", dependencies: ["TetherICE", "TetherFaultLab"]),
        .testTarget(name: "TetherDTLSTests", dependencies: ["TetherDTLS", "TetherCore", "TetherRTP"]),
        .testTarget(name: "TetherAudioTests", dependencies: ["TetherAudio", "CAllocationCounter"]),
        .testTarget(name: "TetherCoreTests", dependencies: ["TetherCore"]),
        .testTarget(
            name: "TetherTests",
            dependencies: [
                "Tether", "TetherAudio", "TetherTestbed", "TetherFaults", "TetherFaultLab", "CAllocationCounter", "TetherTestSupport",
                .product(name: "Logging", package: "swift-log"), .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]),
        .testTarget(name: "TetherFaultsTests", dependencies: ["TetherFaults", "CTetherNet"]),
        .testTarget(name: "TetherNetworkMonitorTests", dependencies: ["TetherNetworkMonitor", "CTetherNet"]),
        .testTarget(name: "TetherFuzzingTests", dependencies: ["TetherFuzzing"]),
        .testTarget(name: "TetherFaultLabTests", dependencies: ["TetherFaultLab"]),
    ],
    swiftLanguageModes: [.v6]
)
