// COpus: libopus, with non-variadic wrappers for the opus_*_ctl macros.
#ifndef TETHER_COPUS_SHIM_H
#define TETHER_COPUS_SHIM_H
#include <opus/opus.h>

static inline int COpus_encoder_set_bitrate(OpusEncoder *e, opus_int32 bitsPerSecond) {
    return opus_encoder_ctl(e, OPUS_SET_BITRATE(bitsPerSecond));
}
static inline int COpus_encoder_set_complexity(OpusEncoder *e, opus_int32 complexity) {
    return opus_encoder_ctl(e, OPUS_SET_COMPLEXITY(complexity));
}
static inline int COpus_encoder_set_inband_fec(OpusEncoder *e, opus_int32 enabled) {
    return opus_encoder_ctl(e, OPUS_SET_INBAND_FEC(enabled));
}
static inline int COpus_encoder_set_packet_loss_perc(OpusEncoder *e, opus_int32 percent) {
    return opus_encoder_ctl(e, OPUS_SET_PACKET_LOSS_PERC(percent));
}
static inline int COpus_encoder_set_dtx(OpusEncoder *e, opus_int32 enabled) {
    return opus_encoder_ctl(e, OPUS_SET_DTX(enabled));
}
static inline int COpus_encoder_set_signal_voice(OpusEncoder *e) {
    return opus_encoder_ctl(e, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE));
}
static inline int COpus_encoder_set_vbr(OpusEncoder *e, opus_int32 enabled) {
    return opus_encoder_ctl(e, OPUS_SET_VBR(enabled));
}
static inline int COpus_encoder_set_max_bandwidth(OpusEncoder *e, opus_int32 bandwidth) {
    return opus_encoder_ctl(e, OPUS_SET_MAX_BANDWIDTH(bandwidth));
}
static inline int COpus_encoder_get_lookahead(OpusEncoder *e, opus_int32 *samples) {
    return opus_encoder_ctl(e, OPUS_GET_LOOKAHEAD(samples));
}
static inline int COpus_encoder_get_bitrate(OpusEncoder *e, opus_int32 *bitsPerSecond) {
    return opus_encoder_ctl(e, OPUS_GET_BITRATE(bitsPerSecond));
}
static inline int COpus_encoder_reset(OpusEncoder *e) {
    return opus_encoder_ctl(e, OPUS_RESET_STATE);
}
static inline int COpus_decoder_reset(OpusDecoder *d) {
    return opus_decoder_ctl(d, OPUS_RESET_STATE);
}
static inline int COpus_decoder_get_last_packet_duration(OpusDecoder *d, opus_int32 *samples) {
    return opus_decoder_ctl(d, OPUS_GET_LAST_PACKET_DURATION(samples));
}
#endif
