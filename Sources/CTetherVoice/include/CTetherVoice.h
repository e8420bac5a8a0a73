#ifndef CTETHER_VOICE_H
#define CTETHER_VOICE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// One instance of WebRTC's AudioProcessing module (libwebrtc-audio-processing 0.3) for one mono
/// capture stream and its far-end (playback) reference, in 10 ms chunks.
typedef struct tether_apm tether_apm;

typedef struct {
    int echo_cancellation;   ///< AEC (the full-band canceller, extended filter, delay-agnostic)
    int echo_suppression;    ///< its non-linear suppression: 0 low, 1 moderate, 2 high
    int noise_suppression;   ///< 0 off, 1 low, 2 moderate, 3 high, 4 very high
    int gain_control;        ///< adaptive digital AGC
    int high_pass_filter;
} tether_apm_settings;

typedef struct {
    int erle_valid;
    float erle_db;           ///< echo return loss enhancement, recent average (dB)
    float erl_db;            ///< echo return loss (dB)
    int delay_valid;
    int delay_median_ms;     ///< the AEC's own estimate of the echo delay
    int delay_std_ms;
    float fraction_poor_delays;
    float speech_probability;  ///< noise suppression's estimate for the last chunk
    int stream_has_echo;
} tether_apm_statistics;

/// Creates and initialises an instance for `sample_rate_hz` (8000, 16000, 32000, 48000), mono.
/// Allocates; returns NULL on failure.
tether_apm *tether_apm_create(int sample_rate_hz, tether_apm_settings settings);
void tether_apm_destroy(tether_apm *apm);

/// Far-end reference: one 10 ms chunk of what is played. Returns 0 or a library error code.
int tether_apm_analyze_reverse(tether_apm *apm, const int16_t *samples);

/// Near-end: one 10 ms chunk of capture, processed in place. `delay_ms`: the time from a far-end
/// chunk being handed to analyze_reverse to its sound reaching this capture (playback buffering
/// + acoustic path + capture buffering). Returns 0 or a library error code.
int tether_apm_process_capture(tether_apm *apm, int16_t *samples, int delay_ms);

/// Forgets what the echo canceller learned (its filter, its own delay estimate, its
/// suppressor's state), as after the far end handed to it has moved: it converges anew. Settings
/// are kept; its metrics (ERLE, the delay histogram) start again too. Allocates nothing. Returns
/// 1 when it was restarted, 0 when echo cancellation is off, or a library error code (negative).
int tether_apm_reset_echo_canceller(tether_apm *apm);

/// The latest figures (no allocation).
void tether_apm_get_statistics(tether_apm *apm, tether_apm_statistics *out);

#ifdef __cplusplus
}
#endif

#endif
