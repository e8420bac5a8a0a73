// CTetherNet: thin C helpers for TetherFaults and TetherNetworkMonitor.
//
// Every function returns -1 and leaves `errno` set on failure unless documented otherwise, and
// retries EINTR itself. No Linux kernel header is included here, so this header imports cleanly
// next to Glibc; `CTetherNet_abi()` reports the kernel constants the Swift code relies on so
// tests can check them.
#ifndef CTETHERNET_H
#define CTETHERNET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: Clock

/// CLOCK_MONOTONIC in nanoseconds.
uint64_t CTetherNet_monotonic_nanoseconds(void);

// MARK: eventfd (wake-ups for poll loops)

/// A non-blocking, close-on-exec eventfd with counter 0.
int CTetherNet_eventfd_create(void);
/// Adds 1 to the eventfd counter (wakes a poller). Returns 0 or -1.
int CTetherNet_eventfd_signal(int fd);
/// Resets the eventfd counter to 0 (never blocks).
void CTetherNet_eventfd_drain(int fd);

// MARK: UDP over IPv4 (addresses and ports in host byte order)

/// Opens a non-blocking, close-on-exec UDP socket bound to `address_host_order:port`
/// (port 0 = ephemeral) with `receive_buffer_bytes` of SO_RCVBUF and SO_SNDBUF (0 = default).
/// Stores the bound port in `*bound_port`. Returns the fd or -1.
int CTetherNet_udp4_open(uint32_t address_host_order, uint16_t port, int buffer_bytes, uint16_t *bound_port);
/// recvfrom(2) on an IPv4 UDP socket. Returns the datagram length (bytes) or -1 (EAGAIN when
/// nothing is pending). The source address and port are stored in host byte order.
/// `*truncated` is set to 1 when the datagram was larger than `capacity` bytes.
long CTetherNet_udp4_receive(int fd, void *buffer, size_t capacity, uint32_t *source_address,
                             uint16_t *source_port, int *truncated);
/// sendto(2) on an IPv4 UDP socket. Returns the bytes sent or -1.
long CTetherNet_udp4_send(int fd, const void *buffer, size_t length, uint32_t address_host_order,
                          uint16_t port);
/// Parses dotted-quad IPv4 text into host byte order. Returns 0 or -1 (not an IPv4 address).
int CTetherNet_ipv4_parse(const char *text, uint32_t *address_host_order);

// MARK: rtnetlink

/// Opens a non-blocking, close-on-exec NETLINK_ROUTE socket bound to the multicast `groups`
/// (RTMGRP_* bit mask; 0 = no subscriptions, for dumps only) with `receive_buffer_bytes` of
/// SO_RCVBUF (0 = default). Returns the fd or -1.
int CTetherNet_netlink_route_open(uint32_t groups, int receive_buffer_bytes);
/// Sends an NLM_F_REQUEST|NLM_F_DUMP request of `message_type` (RTM_GETLINK or RTM_GETADDR) for
/// all address families with sequence number `sequence`. Returns 0 or -1.
int CTetherNet_netlink_request_dump(int fd, uint16_t message_type, uint32_t sequence);
/// recv(2) on a netlink socket. Returns bytes or -1 (EAGAIN when nothing is pending; ENOBUFS
/// when the kernel dropped messages because the receive buffer overflowed).
/// `*truncated` is set to 1 when the message batch was larger than `capacity` bytes.
long CTetherNet_netlink_receive(int fd, void *buffer, size_t capacity, int *truncated);
/// Moves the CALLING THREAD into the network namespace of `namespace_fd` (setns CLONE_NEWNET).
int CTetherNet_setns_network(int namespace_fd);

// MARK: Kernel ABI constants (for tests that check the Swift copies)

typedef struct CTetherNet_ABI {
  uint32_t rtmgrp_link, rtmgrp_ipv4_ifaddr, rtmgrp_ipv6_ifaddr;
  uint16_t rtm_newlink, rtm_dellink, rtm_getlink, rtm_newaddr, rtm_deladdr, rtm_getaddr;
  uint16_t nlmsg_noop, nlmsg_error, nlmsg_done, nlmsg_overrun;
  uint16_t ifa_address, ifa_local, ifa_label, ifa_flags;
  uint32_t ifa_f_dadfailed, ifa_f_deprecated, ifa_f_tentative;
  uint16_t ifla_ifname;
  uint32_t iff_up, iff_running, iff_loopback;
  uint32_t sizeof_nlmsghdr, sizeof_ifinfomsg, sizeof_ifaddrmsg, sizeof_rtattr, sizeof_nlmsgerr;
  uint32_t af_inet, af_inet6;
} CTetherNet_ABI;

CTetherNet_ABI CTetherNet_abi(void);

#ifdef __cplusplus
}
#endif
#endif
