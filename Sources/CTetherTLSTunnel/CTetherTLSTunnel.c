// TURN over TLS for libnice: a loopback TCP listener whose connections are carried to the TURN
// server over TLS. See the header for why.
#define _GNU_SOURCE
#include "CTetherTLSTunnel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/// Connections one tunnel carries at once: libnice opens one per local address it gathers a
/// relayed candidate on, and one more per re-gathering while the old stream still runs.
#define TUNNEL_MAX_CONNECTIONS 32
/// Bytes buffered each way per connection: TURN frames are at most 64 KiB + 4, media frames are
/// about 200 bytes; a full buffer stops reading that side until it drains (TCP pushes back).
#define TUNNEL_BUFFER_BYTES 65536

/// CONNECTING → HANDSHAKING → OPEN; a connection that fails before OPEN goes REFUSING: it answers
/// libnice's TURN requests with an error response, and stays open until libnice closes it (or
/// 30 s). libnice 0.1.21 then ends that discovery at once; a connection closed under it instead
/// makes it drop the discovery without ever finishing its gathering (measured: no
/// `candidate-gathering-done` in 60 s, its discovery timer stopped).
enum connection_state { CONNECTING, HANDSHAKING, OPEN, REFUSING };

typedef struct {
    enum connection_state state;
    int local;   // libnice's connection, accepted on the listener
    int remote;  // ours to the server
    SSL *ssl;
    int want_write;  // the TLS layer waits for the remote socket to take bytes
    int local_eof;   // libnice closed its side: close once `up` is delivered
    time_t deadline; // CONNECTING/HANDSHAKING: fail after this; REFUSING: close after this (CLOCK_MONOTONIC seconds)
    size_t up_start, up_end;     // libnice → server, pending bytes
    size_t down_start, down_end; // server → libnice, pending bytes
    unsigned char *up;
    unsigned char *down;
} connection;

struct CTetherTLSTunnel {
    pthread_t thread;
    int listener;
    int stop_event;
    int family;
    char listen_address[16];
    uint16_t listen_port;
    struct sockaddr_storage server;
    socklen_t server_length;
    char server_address[64];
    char server_name[256];
    int handshake_timeout_seconds;
    SSL_CTX *context;
    connection connections[TUNNEL_MAX_CONNECTIONS];
    _Atomic uint64_t sessions;
    _Atomic uint64_t failures;
    _Atomic int open;
    _Atomic uint64_t bytes_sent;
    _Atomic uint64_t bytes_received;
    // Written by the tunnel's thread when a connection fails or a session starts (rare: never per
    // packet), read by the owner under the same lock.
    pthread_mutex_t text_lock;
    char last_error[256];
    char last_session[96];
};

static time_t monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void set_text(CTetherTLSTunnel *t, char *field, size_t capacity, const char *text) {
    pthread_mutex_lock(&t->text_lock);
    snprintf(field, capacity, "%s", text);
    pthread_mutex_unlock(&t->text_lock);
}

static void close_connection(CTetherTLSTunnel *t, connection *c) {
    if (c->ssl != NULL) {
        if (c->state == OPEN) (void)SSL_shutdown(c->ssl);  // one close_notify, not waited for
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->remote >= 0) close(c->remote);
    if (c->local >= 0) close(c->local);
    free(c->up);
    free(c->down);
    memset(c, 0, sizeof *c);
    c->local = -1;
    c->remote = -1;
    atomic_fetch_sub_explicit(&t->open, 1, memory_order_relaxed);
}

/// CRC-32 (IEEE 802.3), for STUN's FINGERPRINT (RFC 8489 §14.7).
static uint32_t crc32_ieee(const unsigned char *bytes, size_t length) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < length; i++) {
        crc ^= bytes[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/// Answers every complete STUN request libnice has sent on `c` (waiting in `up`) with a
/// 400 error response carrying FINGERPRINT, as a TURN server that refuses would: libnice ends
/// that discovery at once. Returns how many it answered.
static int refuse_requests(connection *c) {
    static const char reason[] = "TURN over TLS failed";  // 20 bytes: no padding
    int answered = 0;
    size_t at = c->up_start;
    while (c->up_end - at >= 4) {
        const unsigned char *m = c->up + at;
        size_t body = ((size_t)m[2] << 8) | m[3];
        int stun = (m[0] & 0xC0) == 0;
        size_t length = stun ? 20 + body : 4 + ((body + 3) & ~(size_t)3);  // ChannelData over TCP is padded
        if (c->up_end - at < length || (stun && length < 20)) break;
        uint16_t type = (uint16_t)((m[0] << 8) | m[1]);
        int request = stun && (type & 0x0110) == 0 && m[4] == 0x21 && m[5] == 0x12 && m[6] == 0xA4 && m[7] == 0x42;
        if (request) {
            unsigned char r[20 + 4 + 4 + sizeof reason - 1 + 8];
            size_t n = 0;
            uint16_t error_type = (uint16_t)(type | 0x0110);
            size_t attributes = 4 + 4 + (sizeof reason - 1) + 8;
            r[n++] = (unsigned char)(error_type >> 8);
            r[n++] = (unsigned char)error_type;
            r[n++] = (unsigned char)(attributes >> 8);
            r[n++] = (unsigned char)attributes;
            memcpy(r + n, m + 4, 16);  // magic cookie and transaction ID
            n += 16;
            r[n++] = 0x00; r[n++] = 0x09;  // ERROR-CODE
            r[n++] = 0x00; r[n++] = (unsigned char)(4 + sizeof reason - 1);
            r[n++] = 0; r[n++] = 0; r[n++] = 4; r[n++] = 0;  // class 4, number 0: 400
            memcpy(r + n, reason, sizeof reason - 1);
            n += sizeof reason - 1;
            uint32_t fingerprint = crc32_ieee(r, n) ^ 0x5354554Eu;
            r[n++] = 0x80; r[n++] = 0x28; r[n++] = 0x00; r[n++] = 0x04;  // FINGERPRINT
            r[n++] = (unsigned char)(fingerprint >> 24); r[n++] = (unsigned char)(fingerprint >> 16);
            r[n++] = (unsigned char)(fingerprint >> 8); r[n++] = (unsigned char)fingerprint;
            if (send(c->local, r, n, MSG_NOSIGNAL) == (ssize_t)n) answered++;
        }
        at += length;
    }
    c->up_start = at;
    if (c->up_start == c->up_end) c->up_start = c->up_end = 0;
    return answered;
}

/// Ends `c` because of `why`, and keeps the reason for the owner. Before its session was up,
/// libnice's TURN requests are refused (``refuse_requests``) before the connection closes; after,
/// libnice sees its TCP connection close, as it would if the server had closed it.
static void fail_connection(CTetherTLSTunnel *t, connection *c, const char *why) {
    char text[256];
    snprintf(text, sizeof text, "TURN over TLS to %s port %u: %s", t->server_address,
             (unsigned)ntohs(t->server.ss_family == AF_INET ? ((struct sockaddr_in *)&t->server)->sin_port
                                                             : ((struct sockaddr_in6 *)&t->server)->sin6_port),
             why);
    set_text(t, t->last_error, sizeof t->last_error, text);
    atomic_fetch_add_explicit(&t->failures, 1, memory_order_relaxed);
    if (c->state == OPEN || c->local < 0 || c->up == NULL) {
        close_connection(t, c);
        return;
    }
    if (c->ssl != NULL) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->remote >= 0) close(c->remote);
    c->remote = -1;
    c->state = REFUSING;
    c->deadline = monotonic_seconds() + 30;
    (void)refuse_requests(c);
}

static void fail_with_openssl(CTetherTLSTunnel *t, connection *c, const char *what) {
    char detail[200];
    long verify = c->ssl != NULL ? SSL_get_verify_result(c->ssl) : X509_V_OK;
    unsigned long e = ERR_peek_last_error();
    if (verify != X509_V_OK) {
        snprintf(detail, sizeof detail, "%s: the server's certificate was refused (%s)", what,
                 X509_verify_cert_error_string(verify));
    } else if (e != 0) {
        char reason[160];
        ERR_error_string_n(e, reason, sizeof reason);
        snprintf(detail, sizeof detail, "%s: %s", what, reason);
    } else {
        snprintf(detail, sizeof detail, "%s: %s", what, errno != 0 ? strerror(errno) : "the server closed the connection");
    }
    ERR_clear_error();
    fail_connection(t, c, detail);
}

static void set_nonblocking_nodelay(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// Takes one connection from the listener and starts its connection to the server, from the
/// address libnice's connection came from.
static void accept_connection(CTetherTLSTunnel *t) {
    struct sockaddr_storage source;
    socklen_t source_length = sizeof source;
    int local = accept4(t->listener, (struct sockaddr *)&source, &source_length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (local < 0) return;
    connection *c = NULL;
    for (int i = 0; i < TUNNEL_MAX_CONNECTIONS; i++) {
        if (t->connections[i].local < 0) {
            c = &t->connections[i];
            break;
        }
    }
    if (c == NULL) {
        close(local);
        set_text(t, t->last_error, sizeof t->last_error, "TURN over TLS: too many connections at once");
        atomic_fetch_add_explicit(&t->failures, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&t->open, 1, memory_order_relaxed);
    c->local = local;
    c->remote = -1;
    c->up = malloc(TUNNEL_BUFFER_BYTES);
    c->down = malloc(TUNNEL_BUFFER_BYTES);
    c->deadline = monotonic_seconds() + t->handshake_timeout_seconds;
    c->state = CONNECTING;
    if (c->up == NULL || c->down == NULL) {
        fail_connection(t, c, "out of memory");
        return;
    }
    set_nonblocking_nodelay(local);
    c->remote = socket(t->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->remote < 0) {
        fail_connection(t, c, strerror(errno));
        return;
    }
    set_nonblocking_nodelay(c->remote);
    // Leave from libnice's base address (not when it is loopback: the server is not there).
    int loopback = (source.ss_family == AF_INET && ((struct sockaddr_in *)&source)->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
        || (source.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&source)->sin6_addr));
    if (source.ss_family == t->family && !loopback) {
        if (source.ss_family == AF_INET) ((struct sockaddr_in *)&source)->sin_port = 0;
        else ((struct sockaddr_in6 *)&source)->sin6_port = 0;
        if (bind(c->remote, (struct sockaddr *)&source, source_length) != 0) {
            char why[128];
            snprintf(why, sizeof why, "cannot leave from the candidate's address: %s", strerror(errno));
            fail_connection(t, c, why);
            return;
        }
    }
    if (connect(c->remote, (struct sockaddr *)&t->server, t->server_length) != 0 && errno != EINPROGRESS) {
        char why[128];
        snprintf(why, sizeof why, "connect: %s", strerror(errno));
        fail_connection(t, c, why);
    }
}

/// Moves `c` on as far as its sockets allow without blocking.
static void pump(CTetherTLSTunnel *t, connection *c) {
    // libnice → buffer, in every state (what it sends before the session is up waits here).
    while (!c->local_eof && c->up_end < TUNNEL_BUFFER_BYTES) {
        ssize_t n = recv(c->local, c->up + c->up_end, TUNNEL_BUFFER_BYTES - c->up_end, 0);
        if (n > 0) {
            c->up_end += (size_t)n;
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            c->local_eof = 1;
        } else {
            break;
        }
    }
    if (c->state == REFUSING) {
        (void)refuse_requests(c);
        if (c->local_eof) close_connection(t, c);
        return;
    }
    if (c->state == CONNECTING) {
        struct pollfd p = {.fd = c->remote, .events = POLLOUT};
        if (poll(&p, 1, 0) <= 0) return;
        int error = 0;
        socklen_t length = sizeof error;
        if (getsockopt(c->remote, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
            char why[128];
            snprintf(why, sizeof why, "connect: %s", strerror(error != 0 ? error : errno));
            fail_connection(t, c, why);
            return;
        }
        c->ssl = SSL_new(t->context);
        if (c->ssl == NULL || SSL_set_fd(c->ssl, c->remote) != 1) {
            fail_with_openssl(t, c, "cannot make a TLS connection");
            return;
        }
        SSL_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        int named = t->server_name[0] != 0;
        int ok = named ? (SSL_set_tlsext_host_name(c->ssl, t->server_name) == 1 && SSL_set1_host(c->ssl, t->server_name) == 1)
                       : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), t->server_address) == 1;
        if (!ok) {
            fail_with_openssl(t, c, "cannot set the name to verify");
            return;
        }
        SSL_set_connect_state(c->ssl);
        c->state = HANDSHAKING;
    }
    if (c->state == HANDSHAKING) {
        errno = 0;
        int r = SSL_do_handshake(c->ssl);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                c->want_write = e == SSL_ERROR_WANT_WRITE;
                return;
            }
            fail_with_openssl(t, c, "handshake");
            return;
        }
        c->state = OPEN;
        c->want_write = 0;
        atomic_fetch_add_explicit(&t->sessions, 1, memory_order_relaxed);
        char text[96];
        snprintf(text, sizeof text, "%s %s", SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl));
        set_text(t, t->last_session, sizeof t->last_session, text);
    }
    // buffer → server
    c->want_write = 0;
    while (c->up_start < c->up_end) {
        errno = 0;
        int n = SSL_write(c->ssl, c->up + c->up_start, (int)(c->up_end - c->up_start));
        if (n > 0) {
            c->up_start += (size_t)n;
            atomic_fetch_add_explicit(&t->bytes_sent, (uint64_t)n, memory_order_relaxed);
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_WRITE) c->want_write = 1;
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) break;
        fail_with_openssl(t, c, "sending");
        return;
    }
    if (c->up_start == c->up_end) c->up_start = c->up_end = 0;
    // server → buffer
    while (c->down_end < TUNNEL_BUFFER_BYTES) {
        errno = 0;
        int n = SSL_read(c->ssl, c->down + c->down_end, (int)(TUNNEL_BUFFER_BYTES - c->down_end));
        if (n > 0) {
            c->down_end += (size_t)n;
            atomic_fetch_add_explicit(&t->bytes_received, (uint64_t)n, memory_order_relaxed);
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ) break;
        if (e == SSL_ERROR_WANT_WRITE) {
            c->want_write = 1;
            break;
        }
        if (e == SSL_ERROR_ZERO_RETURN) {
            fail_connection(t, c, "the server closed the connection");
        } else {
            fail_with_openssl(t, c, "receiving");
        }
        return;
    }
    // buffer → libnice
    while (c->down_start < c->down_end) {
        ssize_t n = send(c->local, c->down + c->down_start, c->down_end - c->down_start, MSG_NOSIGNAL);
        if (n > 0) {
            c->down_start += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            break;
        } else {
            c->local_eof = 1;
            c->down_start = c->down_end;
        }
    }
    if (c->down_start == c->down_end) c->down_start = c->down_end = 0;
    // libnice hung up and everything it sent has gone out: done (not a failure).
    if (c->local_eof && c->up_start == c->up_end) close_connection(t, c);
}

static void *tunnel_thread(void *argument) {
    CTetherTLSTunnel *t = argument;
    struct pollfd fds[2 + 2 * TUNNEL_MAX_CONNECTIONS];
    int owner[2 + 2 * TUNNEL_MAX_CONNECTIONS];
    for (;;) {
        int count = 0;
        fds[count++] = (struct pollfd){.fd = t->stop_event, .events = POLLIN};
        fds[count++] = (struct pollfd){.fd = t->listener, .events = POLLIN};
        time_t now = monotonic_seconds();
        for (int i = 0; i < TUNNEL_MAX_CONNECTIONS; i++) {
            connection *c = &t->connections[i];
            if (c->local < 0) continue;
            if (c->state == REFUSING && now >= c->deadline) {
                close_connection(t, c);
                continue;
            }
            if (c->state != OPEN && c->state != REFUSING && now >= c->deadline) {
                fail_connection(t, c, c->state == CONNECTING ? "no connection within the time-out" : "no TLS session within the time-out");
                if (c->local < 0) continue;
            }
            short local = 0, remote = 0;
            if (!c->local_eof && c->up_end < TUNNEL_BUFFER_BYTES) local |= POLLIN;
            if (c->down_start < c->down_end) local |= POLLOUT;
            if (c->state == REFUSING) {
                remote = 0;
            } else if (c->state == CONNECTING) {
                remote = POLLOUT;
            } else {
                if (c->down_end < TUNNEL_BUFFER_BYTES) remote |= POLLIN;
                if (c->want_write || (c->state == OPEN && c->up_start < c->up_end)) remote |= POLLOUT;
            }
            owner[count] = i;
            // After libnice's end of stream the socket would report a hang-up on every poll.
            fds[count++] = (struct pollfd){.fd = c->local_eof ? -1 : c->local, .events = local};
            owner[count] = i;
            fds[count++] = (struct pollfd){.fd = c->remote, .events = remote};
        }
        int ready = poll(fds, (nfds_t)count, 1000);
        if (ready < 0 && errno != EINTR) break;
        if (fds[0].revents != 0) break;
        if (fds[1].revents & POLLIN) accept_connection(t);
        // Pump every connection whose sockets reported anything (pumping one twice is harmless);
        // also those whose TLS layer holds decrypted bytes no socket event will announce.
        for (int k = 2; k < count; k += 2) {
            connection *c = &t->connections[owner[k]];
            if (c->local < 0) continue;
            int pending = c->ssl != NULL && c->state == OPEN && SSL_pending(c->ssl) > 0;
            if (fds[k].revents != 0 || fds[k + 1].revents != 0 || pending) pump(t, c);
        }
    }
    for (int i = 0; i < TUNNEL_MAX_CONNECTIONS; i++) {
        if (t->connections[i].local >= 0) close_connection(t, &t->connections[i]);
    }
    return NULL;
}

CTetherTLSTunnel *CTetherTLSTunnel_start(const CTetherTLSTunnelOptions *o, char *error, size_t error_capacity) {
    CTetherTLSTunnel *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(error, error_capacity, "out of memory");
        return NULL;
    }
    t->listener = -1;
    t->stop_event = -1;
    pthread_mutex_init(&t->text_lock, NULL);
    for (int i = 0; i < TUNNEL_MAX_CONNECTIONS; i++) {
        t->connections[i].local = -1;
        t->connections[i].remote = -1;
    }
    t->handshake_timeout_seconds = o->handshake_timeout_seconds > 0 ? o->handshake_timeout_seconds : 10;
    snprintf(t->server_address, sizeof t->server_address, "%s", o->server_address);
    snprintf(t->server_name, sizeof t->server_name, "%s", o->server_name != NULL ? o->server_name : "");

    struct sockaddr_in *v4 = (struct sockaddr_in *)&t->server;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&t->server;
    if (inet_pton(AF_INET, o->server_address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(o->server_port);
        t->server_length = sizeof *v4;
        t->family = AF_INET;
        snprintf(t->listen_address, sizeof t->listen_address, "127.0.0.1");
    } else if (inet_pton(AF_INET6, o->server_address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(o->server_port);
        t->server_length = sizeof *v6;
        t->family = AF_INET6;
        snprintf(t->listen_address, sizeof t->listen_address, "::1");
    } else {
        snprintf(error, error_capacity, "'%s' is not an IP literal", o->server_address);
        goto fail;
    }

    t->context = SSL_CTX_new(TLS_client_method());
    if (t->context == NULL || SSL_CTX_set_min_proto_version(t->context, TLS1_2_VERSION) != 1) {
        snprintf(error, error_capacity, "cannot make a TLS context");
        goto fail;
    }
    SSL_CTX_set_verify(t->context, SSL_VERIFY_PEER, NULL);
    int loaded = o->ca_file != NULL && o->ca_file[0] != 0 ? SSL_CTX_load_verify_locations(t->context, o->ca_file, NULL)
                                                          : SSL_CTX_set_default_verify_paths(t->context);
    if (loaded != 1) {
        snprintf(error, error_capacity, "cannot load trusted certificates from %s",
                 o->ca_file != NULL && o->ca_file[0] != 0 ? o->ca_file : "the system's store");
        goto fail;
    }

    t->listener = socket(t->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_storage local = {0};
    socklen_t local_length;
    if (t->family == AF_INET) {
        struct sockaddr_in *l = (struct sockaddr_in *)&local;
        l->sin_family = AF_INET;
        l->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        local_length = sizeof *l;
    } else {
        struct sockaddr_in6 *l = (struct sockaddr_in6 *)&local;
        l->sin6_family = AF_INET6;
        l->sin6_addr = in6addr_loopback;
        local_length = sizeof *l;
    }
    if (t->listener < 0 || bind(t->listener, (struct sockaddr *)&local, local_length) != 0
        || listen(t->listener, TUNNEL_MAX_CONNECTIONS) != 0
        || getsockname(t->listener, (struct sockaddr *)&local, &local_length) != 0) {
        snprintf(error, error_capacity, "cannot listen on %s: %s", t->listen_address, strerror(errno));
        goto fail;
    }
    t->listen_port = ntohs(t->family == AF_INET ? ((struct sockaddr_in *)&local)->sin_port : ((struct sockaddr_in6 *)&local)->sin6_port);
    t->stop_event = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->stop_event < 0) {
        snprintf(error, error_capacity, "eventfd: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&t->thread, NULL, tunnel_thread, t) != 0) {
        snprintf(error, error_capacity, "cannot start the tunnel's thread");
        goto fail;
    }
    (void)pthread_setname_np(t->thread, "tether-turn-tls");
    return t;
fail:
    if (t->listener >= 0) close(t->listener);
    if (t->stop_event >= 0) close(t->stop_event);
    if (t->context != NULL) SSL_CTX_free(t->context);
    pthread_mutex_destroy(&t->text_lock);
    free(t);
    return NULL;
}

const char *CTetherTLSTunnel_listen_address(const CTetherTLSTunnel *t) { return t->listen_address; }
uint16_t CTetherTLSTunnel_listen_port(const CTetherTLSTunnel *t) { return t->listen_port; }
uint64_t CTetherTLSTunnel_sessions(const CTetherTLSTunnel *t) { return atomic_load_explicit(&t->sessions, memory_order_relaxed); }
uint64_t CTetherTLSTunnel_failures(const CTetherTLSTunnel *t) { return atomic_load_explicit(&t->failures, memory_order_relaxed); }
int CTetherTLSTunnel_open_connections(const CTetherTLSTunnel *t) { return atomic_load_explicit(&t->open, memory_order_relaxed); }
uint64_t CTetherTLSTunnel_bytes_sent(const CTetherTLSTunnel *t) { return atomic_load_explicit(&t->bytes_sent, memory_order_relaxed); }
uint64_t CTetherTLSTunnel_bytes_received(const CTetherTLSTunnel *t) { return atomic_load_explicit(&t->bytes_received, memory_order_relaxed); }

static int copy_text(CTetherTLSTunnel *t, const char *field, char *buffer, size_t capacity) {
    pthread_mutex_lock(&t->text_lock);
    int any = field[0] != 0;
    snprintf(buffer, capacity, "%s", field);
    pthread_mutex_unlock(&t->text_lock);
    return any;
}

int CTetherTLSTunnel_last_session(CTetherTLSTunnel *t, char *buffer, size_t capacity) {
    return copy_text(t, t->last_session, buffer, capacity);
}

int CTetherTLSTunnel_last_error(CTetherTLSTunnel *t, char *buffer, size_t capacity) {
    return copy_text(t, t->last_error, buffer, capacity);
}

void CTetherTLSTunnel_stop(CTetherTLSTunnel *t) {
    if (t == NULL) return;
    uint64_t one = 1;
    (void)!write(t->stop_event, &one, sizeof one);
    pthread_join(t->thread, NULL);
    close(t->listener);
    close(t->stop_event);
    SSL_CTX_free(t->context);
    pthread_mutex_destroy(&t->text_lock);
    free(t);
}
