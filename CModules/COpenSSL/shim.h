// COpenSSL: OpenSSL 3 (Debian's libssl-dev) for DTLS-SRTP keying (RFC 5763/5764).
// Macros and variadic APIs wrapped as static inline functions Swift can call.
#ifndef TETHER_COPENSSL_SHIM_H
#define TETHER_COPENSSL_SHIM_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/// Makes an ECDSA P-256 key and a self-signed certificate for it (common name `cn`, valid from a
/// day ago for `days` days, random 64-bit serial, signed with SHA-256). Returns 1 on success.
static inline int COpenSSL_make_certificate(const char *cn, long days, EVP_PKEY **keyOut, X509 **certOut) {
    *keyOut = NULL;
    *certOut = NULL;
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, NULL);
    if (kctx == NULL) return 0;
    int ok = EVP_PKEY_keygen_init(kctx) > 0
        && EVP_PKEY_CTX_set_ec_paramgen_curve_nid(kctx, NID_X9_62_prime256v1) > 0
        && EVP_PKEY_keygen(kctx, &key) > 0;
    EVP_PKEY_CTX_free(kctx);
    if (!ok) { EVP_PKEY_free(key); return 0; }

    X509 *cert = X509_new();
    unsigned char serial[8];
    ASN1_INTEGER *sn = NULL;
    BIGNUM *bn = NULL;
    ok = cert != NULL && X509_set_version(cert, 2) == 1 && RAND_bytes(serial, sizeof serial) == 1;
    if (ok) {
        serial[0] &= 0x7f; // positive
        bn = BN_bin2bn(serial, sizeof serial, NULL);
        sn = bn != NULL ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
        ok = sn != NULL && X509_set_serialNumber(cert, sn) == 1;
    }
    if (ok) {
        ok = X509_gmtime_adj(X509_getm_notBefore(cert), -86400L) != NULL
            && X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400L) != NULL
            && X509_set_pubkey(cert, key) == 1;
    }
    if (ok) {
        X509_NAME *name = X509_get_subject_name(cert);
        ok = X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) == 1
            && X509_set_issuer_name(cert, name) == 1
            && X509_sign(cert, key, EVP_sha256()) > 0;
    }
    ASN1_INTEGER_free(sn);
    BN_free(bn);
    if (!ok) {
        X509_free(cert);
        EVP_PKEY_free(key);
        return 0;
    }
    *keyOut = key;
    *certOut = cert;
    return 1;
}

/// The certificate's SHA-256 digest (32 bytes into `out`). Returns 1 on success.
static inline int COpenSSL_sha256_fingerprint(X509 *cert, unsigned char out[32]) {
    unsigned int len = 0;
    return X509_digest(cert, EVP_sha256(), out, &len) == 1 && len == 32;
}

/// What a DTLS connection expects of the peer's certificate: the digest its description carried.
typedef struct {
    const EVP_MD *md;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length;
    int mismatch; // set when the peer presented a certificate with another digest
} COpenSSL_expectation;

static pthread_once_t COpenSSL_index_once = PTHREAD_ONCE_INIT;
static int COpenSSL_expectation_index = -1;
static inline void COpenSSL_make_index(void) {
    COpenSSL_expectation_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/// Self-signed certificates are the rule in DTLS-SRTP, so no chain is verified: the peer's own
/// certificate (depth 0) must have the digest of the fingerprint in its description (RFC 8122),
/// and the handshake fails with a bad_certificate alert when it does not.
static inline int COpenSSL_verify_fingerprint(int preverifyOK, X509_STORE_CTX *store) {
    (void)preverifyOK;
    if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    COpenSSL_expectation *e = ssl != NULL ? SSL_get_ex_data(ssl, COpenSSL_expectation_index) : NULL;
    X509 *cert = X509_STORE_CTX_get_current_cert(store);
    if (e == NULL || cert == NULL) return 0;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    if (X509_digest(cert, e->md, digest, &length) != 1 || length != e->length
        || CRYPTO_memcmp(digest, e->digest, length) != 0) {
        e->mismatch = 1;
        return 0;
    }
    return 1;
}

/// Handshake retransmission: 50 ms first (as WebRTC stacks do on a LAN-to-Internet path), then
/// doubling up to 2 s. OpenSSL's default starts at 1 s, which makes one lost flight cost a second.
static inline unsigned int COpenSSL_dtls_timer(SSL *ssl, unsigned int previousMicroseconds) {
    (void)ssl;
    if (previousMicroseconds == 0) return 50000;
    unsigned int next = previousMicroseconds * 2;
    return next > 2000000 ? 2000000 : next;
}

/// A DTLS context: DTLS 1.2 (the highest OpenSSL 3.0 speaks; Chromium falls back to it), the
/// certificate and key presented in both roles, the peer's certificate required (a server asks
/// the client for one), and the SRTP protection profiles offered in `profiles` (RFC 5764).
static inline SSL_CTX *COpenSSL_make_dtls_context(X509 *cert, EVP_PKEY *key, const char *profiles) {
    SSL_CTX *ctx = SSL_CTX_new(DTLS_method());
    if (ctx == NULL) return NULL;
    int ok = SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION) == 1
        && SSL_CTX_use_certificate(ctx, cert) == 1
        && SSL_CTX_use_PrivateKey(ctx, key) == 1
        && SSL_CTX_check_private_key(ctx) == 1
        && SSL_CTX_set_tlsext_use_srtp(ctx, profiles) == 0 // 0 is success here
        && SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                                         "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-SHA") == 1;
    if (!ok) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, COpenSSL_verify_fingerprint);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    // No renegotiation either way: WebRTC stacks never renegotiate DTLS-SRTP (a new handshake is
    // a new association, RFC 8842), and a peer's ClientHello on an established association would
    // make us redo a handshake on the peer's say. Refused with a no_renegotiation alert.
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    return ctx;
}

/// Tests only: starts a renegotiation as a peer that allows it would, to check that the other
/// side refuses it.
static inline int COpenSSL_renegotiate_for_testing(SSL *ssl) {
    SSL_clear_options(ssl, SSL_OP_NO_RENEGOTIATION);
    if (SSL_renegotiate(ssl) != 1) return 0;
    (void)SSL_do_handshake(ssl);  // writes the ClientHello (client) or HelloRequest (server)
    return 1;
}

/// A DTLS connection over two memory BIOs (datagrams in, records out) with a fixed path MTU,
/// expecting the peer's certificate to have `digest` under `hashName` (`sha-256`, `sha-384`,
/// `sha-512`). Free it with `COpenSSL_free_dtls`.
static inline SSL *COpenSSL_make_dtls(SSL_CTX *ctx, int client, long mtu, const char *hashName,
                                      const unsigned char *digest, unsigned int digestLength,
                                      BIO **inbound, BIO **outbound) {
    pthread_once(&COpenSSL_index_once, COpenSSL_make_index);
    if (COpenSSL_expectation_index < 0) return NULL;
    const EVP_MD *md = strcmp(hashName, "sha-256") == 0 ? EVP_sha256()
        : strcmp(hashName, "sha-384") == 0 ? EVP_sha384()
        : strcmp(hashName, "sha-512") == 0 ? EVP_sha512() : NULL;
    if (md == NULL || digestLength != (unsigned int)EVP_MD_get_size(md)) return NULL;
    COpenSSL_expectation *e = calloc(1, sizeof *e);
    if (e == NULL) return NULL;
    e->md = md;
    memcpy(e->digest, digest, digestLength);
    e->length = digestLength;
    SSL *ssl = SSL_new(ctx);
    BIO *in = BIO_new(BIO_s_mem());
    BIO *out = BIO_new(BIO_s_mem());
    if (ssl == NULL || in == NULL || out == NULL || SSL_set_ex_data(ssl, COpenSSL_expectation_index, e) != 1) {
        BIO_free(in);
        BIO_free(out);
        SSL_free(ssl);
        free(e);
        return NULL;
    }
    BIO_set_mem_eof_return(in, -1);
    BIO_set_mem_eof_return(out, -1);
    SSL_set_bio(ssl, in, out); // the SSL owns both from here
    SSL_set_options(ssl, SSL_OP_NO_QUERY_MTU);
    SSL_set_mtu(ssl, mtu);
    DTLS_set_link_mtu(ssl, mtu);
    DTLS_set_timer_cb(ssl, COpenSSL_dtls_timer);
    if (client) SSL_set_connect_state(ssl); else SSL_set_accept_state(ssl);
    *inbound = in;
    *outbound = out;
    return ssl;
}

/// Whether the handshake failed because the peer's certificate did not match its fingerprint.
static inline int COpenSSL_fingerprint_mismatch(SSL *ssl) {
    COpenSSL_expectation *e = SSL_get_ex_data(ssl, COpenSSL_expectation_index);
    return e != NULL && e->mismatch;
}

static inline void COpenSSL_free_dtls(SSL *ssl) {
    COpenSSL_expectation *e = SSL_get_ex_data(ssl, COpenSSL_expectation_index);
    SSL_set_ex_data(ssl, COpenSSL_expectation_index, NULL);
    SSL_free(ssl);
    if (e != NULL) {
        OPENSSL_cleanse(e, sizeof *e);
        free(e);
    }
}

/// Microseconds until the handshake timer fires, or -1 when none runs.
static inline long long COpenSSL_dtls_timeout_us(SSL *ssl) {
    struct timeval tv;
    if (DTLSv1_get_timeout(ssl, &tv) != 1) return -1;
    return (long long)tv.tv_sec * 1000000LL + tv.tv_usec;
}

static inline int COpenSSL_dtls_handle_timeout(SSL *ssl) { return (int)DTLSv1_handle_timeout(ssl); }

static inline long COpenSSL_bio_pending(BIO *bio) { return (long)BIO_ctrl_pending(bio); }

/// The SRTP protection profile the handshake chose (RFC 5764 id), or 0.
static inline unsigned long COpenSSL_selected_srtp_profile(SSL *ssl) {
    SRTP_PROTECTION_PROFILE *p = SSL_get_selected_srtp_profile(ssl);
    return p != NULL ? p->id : 0;
}

/// RFC 5764 §4.2 keying material.
static inline int COpenSSL_export_srtp_keys(SSL *ssl, unsigned char *out, size_t length) {
    static const char label[] = "EXTRACTOR-dtls_srtp";
    return SSL_export_keying_material(ssl, out, length, label, sizeof label - 1, NULL, 0, 0);
}

/// The last OpenSSL error on this thread as text (queue cleared). `buffer` gets a C string.
static inline void COpenSSL_last_error(char *buffer, size_t size) {
    unsigned long e = ERR_get_error();
    unsigned long next;
    while ((next = ERR_get_error()) != 0) e = next;
    if (e == 0) {
        snprintf(buffer, size, "no OpenSSL error queued");
        return;
    }
    ERR_error_string_n(e, buffer, size);
}

#endif
