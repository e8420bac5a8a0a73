// Audio sources and sinks (test signal, WAV files, devices) are part of Tether's public surface:
// an embedder configures a call with them through `import Tether` alone.
@_exported import TetherAudio
// DTLS certificates and fingerprints (`CallConfiguration.dtlsCertificate`).
@_exported import TetherDTLS
