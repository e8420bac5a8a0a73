// CNice: libnice and GLib, with non-variadic, type-checked wrappers for the
// GObject property setters and signal connections Swift cannot call directly.
#ifndef TETHER_CNICE_SHIM_H
#define TETHER_CNICE_SHIM_H
#include <nice/agent.h>
#include <glib.h>
#include <glib-object.h>
#include <glib-unix.h>
#include <sys/eventfd.h>
#include <string.h>
#include <stun/usages/ice.h>

typedef void (*CNice_GatheringDoneFunc)(NiceAgent *agent, guint stream_id, gpointer user_data);
typedef void (*CNice_StateChangedFunc)(NiceAgent *agent, guint stream_id, guint component_id,
                                       guint state, gpointer user_data);
typedef void (*CNice_SelectedPairFunc)(NiceAgent *agent, guint stream_id, guint component_id,
                                       NiceCandidate *lcand, NiceCandidate *rcand, gpointer user_data);

typedef void (*CNice_NewCandidateFunc)(NiceAgent *agent, NiceCandidate *candidate, gpointer user_data);
static inline gulong CNice_connect_new_candidate(NiceAgent *agent, CNice_NewCandidateFunc fn, gpointer data) {
    return g_signal_connect_data(agent, "new-candidate-full", G_CALLBACK(fn), data, NULL, (GConnectFlags)0);
}
static inline gulong CNice_connect_gathering_done(NiceAgent *agent, CNice_GatheringDoneFunc fn, gpointer data) {
    return g_signal_connect_data(agent, "candidate-gathering-done", G_CALLBACK(fn), data, NULL, (GConnectFlags)0);
}
static inline gulong CNice_connect_state_changed(NiceAgent *agent, CNice_StateChangedFunc fn, gpointer data) {
    return g_signal_connect_data(agent, "component-state-changed", G_CALLBACK(fn), data, NULL, (GConnectFlags)0);
}
static inline gulong CNice_connect_selected_pair(NiceAgent *agent, CNice_SelectedPairFunc fn, gpointer data) {
    return g_signal_connect_data(agent, "new-selected-pair-full", G_CALLBACK(fn), data, NULL, (GConnectFlags)0);
}
static inline void CNice_disconnect_all(NiceAgent *agent, gpointer data) {
    g_signal_handlers_disconnect_matched(agent, G_SIGNAL_MATCH_DATA, 0, 0, NULL, NULL, data);
}

static inline void CNice_set_bool(NiceAgent *agent, const char *name, gboolean value) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, G_TYPE_BOOLEAN);
    g_value_set_boolean(&v, value);
    g_object_set_property(G_OBJECT(agent), name, &v);
    g_value_unset(&v);
}
static inline gboolean CNice_get_bool(NiceAgent *agent, const char *name) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, G_TYPE_BOOLEAN);
    g_object_get_property(G_OBJECT(agent), name, &v);
    gboolean value = g_value_get_boolean(&v);
    g_value_unset(&v);
    return value;
}
static inline void CNice_set_uint(NiceAgent *agent, const char *name, guint value) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, G_TYPE_UINT);
    g_value_set_uint(&v, value);
    g_object_set_property(G_OBJECT(agent), name, &v);
    g_value_unset(&v);
}
static inline void CNice_set_string(NiceAgent *agent, const char *name, const char *value) {
    GValue v = G_VALUE_INIT;
    g_value_init(&v, G_TYPE_STRING);
    g_value_set_string(&v, value);
    g_object_set_property(G_OBJECT(agent), name, &v);
    g_value_unset(&v);
}

/// Runs `fn(data)` once on the thread that iterates `ctx` (or at once if the
/// caller already owns it). libnice emits signals on the calling thread, so
/// every agent call that can emit one goes through here.
typedef gboolean (*CNice_SourceFunc)(gpointer data);
static inline void CNice_invoke(GMainContext *ctx, CNice_SourceFunc fn, gpointer data) {
    g_main_context_invoke(ctx, (GSourceFunc)fn, data);
}

/// Watches `fd` for input on `ctx`, calling `fn(fd, condition, data)` on the loop thread.
typedef gboolean (*CNice_FDFunc)(gint fd, GIOCondition condition, gpointer data);
static inline GSource *CNice_add_fd_watch(GMainContext *ctx, gint fd, CNice_FDFunc fn, gpointer data) {
    GSource *source = g_unix_fd_source_new(fd, G_IO_IN);
    g_source_set_callback(source, (GSourceFunc)(void (*)(void))fn, data, NULL);
    g_source_set_priority(source, G_PRIORITY_HIGH);
    g_source_attach(source, ctx);
    return source;
}

/// Runs `fn(data)` on the loop thread at its next iteration (never at once, unlike
/// `CNice_invoke` from the loop thread itself): for work a libnice signal handler must not do
/// while the agent is still emitting.
static inline void CNice_defer(GMainContext *ctx, CNice_SourceFunc fn, gpointer data) {
    GSource *source = g_idle_source_new();
    g_source_set_callback(source, (GSourceFunc)fn, data, NULL);
    g_source_attach(source, ctx);
    g_source_unref(source);
}

/// `nice_agent_close_async` with a typed callback: frees what the agent holds on remote servers
/// (TURN allocations and permissions) and calls `fn(agent, result, data)` on the loop thread.
typedef void (*CNice_AsyncReadyFunc)(GObject *source, GAsyncResult *result, gpointer data);
static inline void CNice_close_async(NiceAgent *agent, CNice_AsyncReadyFunc fn, gpointer data) {
    nice_agent_close_async(agent, (GAsyncReadyCallback)fn, data);
}

/// Builds an ICE connectivity check (RFC 8445 §7.2.2: a STUN Binding request with USERNAME
/// `remote-ufrag:local-ufrag`, PRIORITY, ICE-CONTROLLING or ICE-CONTROLLED, optionally
/// USE-CANDIDATE, MESSAGE-INTEGRITY keyed with the peer's password, FINGERPRINT) into `buffer`.
/// Returns its length, 0 when it does not fit.
static inline size_t CNice_build_connectivity_check(uint8_t *buffer, size_t size, const char *username,
                                                    const char *password, int use_candidate, int controlling,
                                                    uint32_t priority, uint64_t tie_breaker) {
    static const uint16_t known[] = {
        STUN_ATTRIBUTE_USERNAME, STUN_ATTRIBUTE_MESSAGE_INTEGRITY, STUN_ATTRIBUTE_ERROR_CODE,
        STUN_ATTRIBUTE_UNKNOWN_ATTRIBUTES, STUN_ATTRIBUTE_PRIORITY, STUN_ATTRIBUTE_USE_CANDIDATE,
        STUN_ATTRIBUTE_ICE_CONTROLLED, STUN_ATTRIBUTE_ICE_CONTROLLING, STUN_ATTRIBUTE_XOR_MAPPED_ADDRESS, 0};
    StunAgent stun;
    StunMessage message;
    stun_agent_init(&stun, known, STUN_COMPATIBILITY_RFC5389,
                    STUN_AGENT_USAGE_SHORT_TERM_CREDENTIALS | STUN_AGENT_USAGE_USE_FINGERPRINT);
    return stun_usage_ice_conncheck_create(&stun, &message, buffer, size, (const uint8_t *)username, strlen(username),
                                           (const uint8_t *)password, strlen(password), use_candidate != 0,
                                           controlling != 0, priority, tie_breaker, NULL,
                                           STUN_USAGE_ICE_COMPATIBILITY_RFC5245);
}

/// Whether the peer's consent to receive on `stream`'s selected pair is lost (RFC 7675; only with
/// the agent's `consent-freshness` on): libnice refuses every send on that pair then, and a
/// send of no message asks exactly that question without sending anything.
static inline gboolean CNice_consent_revoked(NiceAgent *agent, guint stream) {
    GError *error = NULL;
    (void)nice_agent_send_messages_nonblocking(agent, stream, 1, NULL, 0, NULL, &error);
    gboolean revoked = error != NULL && error->domain == G_IO_ERROR && error->code == G_IO_ERROR_PERMISSION_DENIED;
    if (error != NULL) g_error_free(error);
    return revoked;
}

/* Whether an address is IPv6 link-local (fe80::/10). libnice's own nice_address_is_linklocal is
 * not exported by Debian's libnice 0.1.21. */
static inline gboolean CNice_address_is_ipv6_linklocal(const NiceAddress *address) {
  if (address->s.addr.sa_family != AF_INET6) return FALSE;
  const uint8_t *bytes = address->s.ip6.sin6_addr.s6_addr;
  return bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80;
}

static inline void CNice_free_candidate_list(GSList *list) {
    g_slist_free_full(list, (GDestroyNotify)nice_candidate_free);
}
#endif
