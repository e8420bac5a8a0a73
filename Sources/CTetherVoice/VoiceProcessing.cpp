// A C face for libwebrtc-audio-processing 0.3's AudioProcessing (C++), so Swift can use it.
// Everything is allocated in tether_apm_create; the per-chunk calls reuse two AudioFrames.

#include "CTetherVoice.h"

#include <new>
#include <string.h>

#include <webrtc/modules/audio_processing/include/audio_processing.h>
#include <webrtc/modules/interface/module_common_types.h>

struct tether_apm {
    webrtc::AudioProcessing *apm;
    webrtc::AudioFrame capture;
    webrtc::AudioFrame reverse;
    int samples_per_chunk;
    int sample_rate_hz;
    tether_apm_settings settings;
};

static void prepare(webrtc::AudioFrame &frame, int rate, int samples) {
    frame.sample_rate_hz_ = rate;
    frame.samples_per_channel_ = samples;
    frame.num_channels_ = 1;
}

extern "C" tether_apm *tether_apm_create(int sample_rate_hz, tether_apm_settings settings) {
    if (sample_rate_hz != 8000 && sample_rate_hz != 16000 && sample_rate_hz != 32000 && sample_rate_hz != 48000) return nullptr;
    webrtc::Config config;
    // The canceller's robust modes: a 128 ms filter, and delay estimation of its own (the
    // reported delay is a hint; device switches move the real one).
    config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(true));
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(true));
    webrtc::AudioProcessing *apm = webrtc::AudioProcessing::Create(config);
    if (!apm) return nullptr;
    tether_apm *p = new (std::nothrow) tether_apm();
    if (!p) {
        delete apm;
        return nullptr;
    }
    p->apm = apm;
    p->sample_rate_hz = sample_rate_hz;
    p->samples_per_chunk = sample_rate_hz / 100;
    p->settings = settings;
    if (apm->Initialize(sample_rate_hz, sample_rate_hz, sample_rate_hz, webrtc::AudioProcessing::kMono,
                        webrtc::AudioProcessing::kMono, webrtc::AudioProcessing::kMono) != 0) {
        delete apm;
        delete p;
        return nullptr;
    }
    apm->echo_cancellation()->Enable(settings.echo_cancellation != 0);
    apm->echo_cancellation()->enable_drift_compensation(false);
    apm->echo_cancellation()->set_suppression_level(
        settings.echo_suppression <= 0   ? webrtc::EchoCancellation::kLowSuppression
        : settings.echo_suppression == 1 ? webrtc::EchoCancellation::kModerateSuppression
                                         : webrtc::EchoCancellation::kHighSuppression);
    apm->echo_cancellation()->enable_metrics(true);
    apm->echo_cancellation()->enable_delay_logging(true);
    if (settings.noise_suppression > 0) {
        static const webrtc::NoiseSuppression::Level levels[] = {
            webrtc::NoiseSuppression::kLow, webrtc::NoiseSuppression::kModerate, webrtc::NoiseSuppression::kHigh,
            webrtc::NoiseSuppression::kVeryHigh};
        int index = settings.noise_suppression > 4 ? 3 : settings.noise_suppression - 1;
        apm->noise_suppression()->set_level(levels[index]);
        apm->noise_suppression()->Enable(true);
    }
    if (settings.gain_control) {
        apm->gain_control()->set_mode(webrtc::GainControl::kAdaptiveDigital);
        apm->gain_control()->set_target_level_dbfs(3);
        apm->gain_control()->set_compression_gain_db(9);
        apm->gain_control()->enable_limiter(true);
        apm->gain_control()->Enable(true);
    }
    apm->high_pass_filter()->Enable(settings.high_pass_filter != 0);
    prepare(p->capture, sample_rate_hz, p->samples_per_chunk);
    prepare(p->reverse, sample_rate_hz, p->samples_per_chunk);
    return p;
}

extern "C" void tether_apm_destroy(tether_apm *p) {
    if (!p) return;
    delete p->apm;
    delete p;
}

extern "C" int tether_apm_analyze_reverse(tether_apm *p, const int16_t *samples) {
    prepare(p->reverse, p->sample_rate_hz, p->samples_per_chunk);
    memcpy(p->reverse.data_, samples, sizeof(int16_t) * p->samples_per_chunk);
    return p->apm->AnalyzeReverseStream(&p->reverse);
}

extern "C" int tether_apm_process_capture(tether_apm *p, int16_t *samples, int delay_ms) {
    prepare(p->capture, p->sample_rate_hz, p->samples_per_chunk);
    memcpy(p->capture.data_, samples, sizeof(int16_t) * p->samples_per_chunk);
    p->apm->set_stream_delay_ms(delay_ms < 0 ? 0 : delay_ms);
    int result = p->apm->ProcessStream(&p->capture);
    memcpy(samples, p->capture.data_, sizeof(int16_t) * p->samples_per_chunk);
    return result;
}

extern "C" int tether_apm_reset_echo_canceller(tether_apm *p) {
    webrtc::EchoCancellation *aec = p->apm->echo_cancellation();
    if (!aec->is_enabled()) return 0;
    // Enabling a disabled component initialises its handles again (WebRtcAec_Init): the
    // handles and the settings stay.
    int result = aec->Enable(false);
    if (result != 0) return result;
    result = aec->Enable(true);
    return result == 0 ? 1 : result;
}

extern "C" void tether_apm_get_statistics(tether_apm *p, tether_apm_statistics *out) {
    memset(out, 0, sizeof(*out));
    webrtc::EchoCancellation *aec = p->apm->echo_cancellation();
    if (aec->is_enabled()) {
        webrtc::EchoCancellation::Metrics metrics;
        if (aec->GetMetrics(&metrics) == 0) {
            out->erle_valid = 1;
            out->erle_db = (float)metrics.echo_return_loss_enhancement.average;
            out->erl_db = (float)metrics.echo_return_loss.average;
        }
        int median = 0, deviation = 0;
        float poor = 0;
        if (aec->GetDelayMetrics(&median, &deviation, &poor) == 0) {
            out->delay_valid = 1;
            out->delay_median_ms = median;
            out->delay_std_ms = deviation;
            out->fraction_poor_delays = poor;
        }
        out->stream_has_echo = aec->stream_has_echo() ? 1 : 0;
    }
    if (p->apm->noise_suppression()->is_enabled()) out->speech_probability = p->apm->noise_suppression()->speech_probability();
}
