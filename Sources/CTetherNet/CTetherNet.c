// CTetherNet: thin C helpers for TetherFaults and TetherNetworkMonitor (see CTetherNet.h).
#define _GNU_SOURCE
#include "CTetherNet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t CTetherNet_monotonic_nanoseconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int CTetherNet_eventfd_create(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int CTetherNet_eventfd_signal(int fd) {
  uint64_t one = 1;
  for (;;) {
    ssize_t n = write(fd, &one, sizeof one);
    if (n == (ssize_t)sizeof one) return 0;
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN means the counter is saturated: the poller is already woken.
    if (n < 0 && errno == EAGAIN) return 0;
    return -1;
  }
}

void CTetherNet_eventfd_drain(int fd) {
  uint64_t value;
  for (;;) {
    ssize_t n = read(fd, &value, sizeof value);
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

int CTetherNet_udp4_open(uint32_t address_host_order, uint16_t port, int buffer_bytes, uint16_t *bound_port) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (buffer_bytes > 0) {
    // Best effort: the kernel caps these at net.core.[rw]mem_max.
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
  }
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(address_host_order);
  if (bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  socklen_t len = sizeof sin;
  if (getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  if (bound_port) *bound_port = ntohs(sin.sin_port);
  return fd;
}

long CTetherNet_udp4_receive(int fd, void *buffer, size_t capacity, uint32_t *source_address,
                             uint16_t *source_port, int *truncated) {
  struct sockaddr_in sin;
  struct iovec iov = {.iov_base = buffer, .iov_len = capacity};
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_name = &sin;
  msg.msg_namelen = sizeof sin;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  for (;;) {
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (source_address) *source_address = ntohl(sin.sin_addr.s_addr);
    if (source_port) *source_port = ntohs(sin.sin_port);
    if (truncated) *truncated = (msg.msg_flags & MSG_TRUNC) ? 1 : 0;
    return (long)n;
  }
}

long CTetherNet_udp4_send(int fd, const void *buffer, size_t length, uint32_t address_host_order,
                          uint16_t port) {
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(address_host_order);
  for (;;) {
    ssize_t n = sendto(fd, buffer, length, 0, (struct sockaddr *)&sin, sizeof sin);
    if (n < 0 && errno == EINTR) continue;
    return (long)n;
  }
}

int CTetherNet_ipv4_parse(const char *text, uint32_t *address_host_order) {
  struct in_addr a;
  if (inet_pton(AF_INET, text, &a) != 1) return -1;
  *address_host_order = ntohl(a.s_addr);
  return 0;
}

int CTetherNet_netlink_route_open(uint32_t groups, int receive_buffer_bytes) {
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return -1;
  if (receive_buffer_bytes > 0) {
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof receive_buffer_bytes);
  }
  struct sockaddr_nl snl;
  memset(&snl, 0, sizeof snl);
  snl.nl_family = AF_NETLINK;
  snl.nl_groups = groups;
  if (bind(fd, (struct sockaddr *)&snl, sizeof snl) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

int CTetherNet_netlink_request_dump(int fd, uint16_t message_type, uint32_t sequence) {
  struct {
    struct nlmsghdr header;
    union {
      struct ifinfomsg link;
      struct ifaddrmsg address;
    } body;
  } request;
  memset(&request, 0, sizeof request);
  size_t body = message_type == RTM_GETLINK ? sizeof(struct ifinfomsg) : sizeof(struct ifaddrmsg);
  request.header.nlmsg_len = NLMSG_LENGTH(body);
  request.header.nlmsg_type = message_type;
  request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request.header.nlmsg_seq = sequence;
  // Family AF_UNSPEC (0) in either body: every family.
  struct sockaddr_nl kernel;
  memset(&kernel, 0, sizeof kernel);
  kernel.nl_family = AF_NETLINK;
  for (;;) {
    ssize_t n = sendto(fd, &request, request.header.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel);
    if (n < 0 && errno == EINTR) continue;
    return n < 0 ? -1 : 0;
  }
}

long CTetherNet_netlink_receive(int fd, void *buffer, size_t capacity, int *truncated) {
  struct sockaddr_nl from;
  struct iovec iov = {.iov_base = buffer, .iov_len = capacity};
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_name = &from;
  msg.msg_namelen = sizeof from;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  for (;;) {
    ssize_t n = recvmsg(fd, &msg, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (truncated) *truncated = (msg.msg_flags & MSG_TRUNC) ? 1 : 0;
    // Only the kernel (port id 0) is trusted; anything else is treated as empty.
    if (from.nl_pid != 0) return 0;
    return (long)n;
  }
}

int CTetherNet_setns_network(int namespace_fd) { return setns(namespace_fd, CLONE_NEWNET); }

CTetherNet_ABI CTetherNet_abi(void) {
  CTetherNet_ABI abi;
  memset(&abi, 0, sizeof abi);
  abi.rtmgrp_link = RTMGRP_LINK;
  abi.rtmgrp_ipv4_ifaddr = RTMGRP_IPV4_IFADDR;
  abi.rtmgrp_ipv6_ifaddr = RTMGRP_IPV6_IFADDR;
  abi.rtm_newlink = RTM_NEWLINK;
  abi.rtm_dellink = RTM_DELLINK;
  abi.rtm_getlink = RTM_GETLINK;
  abi.rtm_newaddr = RTM_NEWADDR;
  abi.rtm_deladdr = RTM_DELADDR;
  abi.rtm_getaddr = RTM_GETADDR;
  abi.nlmsg_noop = NLMSG_NOOP;
  abi.nlmsg_error = NLMSG_ERROR;
  abi.nlmsg_done = NLMSG_DONE;
  abi.nlmsg_overrun = NLMSG_OVERRUN;
  abi.ifa_address = IFA_ADDRESS;
  abi.ifa_local = IFA_LOCAL;
  abi.ifa_label = IFA_LABEL;
  abi.ifa_flags = IFA_FLAGS;
  abi.ifa_f_dadfailed = IFA_F_DADFAILED;
  abi.ifa_f_deprecated = IFA_F_DEPRECATED;
  abi.ifa_f_tentative = IFA_F_TENTATIVE;
  abi.ifla_ifname = IFLA_IFNAME;
  abi.iff_up = IFF_UP;
  abi.iff_running = IFF_RUNNING;
  abi.iff_loopback = IFF_LOOPBACK;
  abi.sizeof_nlmsghdr = sizeof(struct nlmsghdr);
  abi.sizeof_ifinfomsg = sizeof(struct ifinfomsg);
  abi.sizeof_ifaddrmsg = sizeof(struct ifaddrmsg);
  abi.sizeof_rtattr = sizeof(struct rtattr);
  abi.sizeof_nlmsgerr = sizeof(struct nlmsgerr);
  abi.af_inet = AF_INET;
  abi.af_inet6 = AF_INET6;
  return abi;
}
