// CSRTP: libsrtp2 (Debian's build uses NSS for its ciphers).
#ifndef TETHER_CSRTP_SHIM_H
#define TETHER_CSRTP_SHIM_H
#include <string.h>
#include <srtp2/srtp.h>

/// Tether's SRTP crypto suites (RFC 4568 / RFC 7714 names).
typedef enum {
    CSRTP_SUITE_AES_CM_128_HMAC_SHA1_80 = 0,
    CSRTP_SUITE_AEAD_AES_128_GCM = 1,
} CSRTP_suite;

/// Creates a session with one key-sharing stream (any inbound or any outbound SSRC).
/// `key` points to the concatenated master key and salt (30 bytes for AES-CM-128, 28 for GCM-128).
static inline srtp_err_status_t CSRTP_create_session(srtp_t *session, CSRTP_suite suite, int outbound,
                                                     const unsigned char *key, unsigned long replayWindowPackets) {
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    if (suite == CSRTP_SUITE_AEAD_AES_128_GCM) {
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
    } else {
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
    }
    policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound;
    policy.ssrc.value = 0;
    policy.key = (unsigned char *)key;
    policy.window_size = replayWindowPackets;
    policy.allow_repeat_tx = 0;
    policy.next = NULL;
    return srtp_create(session, &policy);
}
#endif
