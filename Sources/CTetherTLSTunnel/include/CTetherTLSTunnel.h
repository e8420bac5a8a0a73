// CTetherTLSTunnel: TURN over TLS (RFC 8656 §3.1, `turns:`) for libnice.
//
// libnice 0.1.21's TURN-TLS relay type speaks TLS only in its Google and Microsoft
// compatibility modes (a "pseudo-SSL" greeting, not TLS); in RFC 5245 mode it sends TURN over
// plain TCP. So Tether gives libnice a TURN-over-TCP server on the loopback interface, and this
// tunnel carries each of libnice's TCP connections to the real server over TLS (OpenSSL), leaving
// from the address libnice's connection came from (the candidate's base), so a relayed candidate
// still follows the interface it was gathered on.
//
// One thread per tunnel polls the listener, its connections and a stop event. Buffers are
// allocated per connection when it is accepted; forwarding allocates nothing per packet.
#ifndef TETHER_CTETHERTLSTUNNEL_H
#define TETHER_CTETHERTLSTUNNEL_H
#include <stddef.h>
#include <stdint.h>

typedef struct CTetherTLSTunnel CTetherTLSTunnel;

/// Where the tunnel leads and how the server's certificate is checked.
typedef struct {
    /// The TURN server's IPv4 or IPv6 literal (the loopback listener takes the same family).
    const char *server_address;
    /// The server's TLS port (443 or 5349 usually).
    uint16_t server_port;
    /// The name the certificate must carry, also sent as SNI; NULL or empty: the certificate must
    /// carry `server_address` as an IP address.
    const char *server_name;
    /// PEM file of trusted certificates; NULL or empty: the system's store.
    const char *ca_file;
    /// Seconds a connection may take to connect and finish its handshake.
    int handshake_timeout_seconds;
} CTetherTLSTunnelOptions;

/// Starts a tunnel: a listener on the loopback address of the server's family, an ephemeral port,
/// and its thread. Returns NULL with a message in `error` when it cannot.
CTetherTLSTunnel *CTetherTLSTunnel_start(const CTetherTLSTunnelOptions *options, char *error, size_t error_capacity);

/// The loopback address libnice is given as its TURN server (`127.0.0.1` or `::1`).
const char *CTetherTLSTunnel_listen_address(const CTetherTLSTunnel *tunnel);
/// The listener's port.
uint16_t CTetherTLSTunnel_listen_port(const CTetherTLSTunnel *tunnel);

/// TLS sessions established with the server so far.
uint64_t CTetherTLSTunnel_sessions(const CTetherTLSTunnel *tunnel);
/// Connections that failed so far: connect, handshake, certificate, or the server closing.
uint64_t CTetherTLSTunnel_failures(const CTetherTLSTunnel *tunnel);
/// Connections open now.
int CTetherTLSTunnel_open_connections(const CTetherTLSTunnel *tunnel);
/// Bytes carried each way so far (to the server, from the server).
uint64_t CTetherTLSTunnel_bytes_sent(const CTetherTLSTunnel *tunnel);
uint64_t CTetherTLSTunnel_bytes_received(const CTetherTLSTunnel *tunnel);
/// The protocol and cipher of the last session established (`TLSv1.3 TLS_AES_256_GCM_SHA384`),
/// empty before one. Returns 1 when there was one.
int CTetherTLSTunnel_last_session(CTetherTLSTunnel *tunnel, char *buffer, size_t capacity);
/// Why the last failed connection failed. Returns 1 when one has failed.
int CTetherTLSTunnel_last_error(CTetherTLSTunnel *tunnel, char *buffer, size_t capacity);

/// Stops the thread, closes every connection and the listener, and frees the tunnel.
void CTetherTLSTunnel_stop(CTetherTLSTunnel *tunnel);

#endif
