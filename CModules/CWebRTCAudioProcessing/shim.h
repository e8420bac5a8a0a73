// Debian's libwebrtc-audio-processing (0.3, the AudioProcessing module PulseAudio's echo-cancel
// uses) is C++: Sources/CTetherVoice wraps it in a C API. This module only carries its
// pkg-config flags and library to that target.
