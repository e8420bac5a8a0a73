/// The Linux rtnetlink ABI values this module relies on (stable kernel UAPI; checked against the
/// C headers by the tests through `CTetherNet_abi()`).
enum NetlinkABI {
    /// `RTMGRP_LINK`: link (interface) changes.
    static let groupLink: UInt32 = 0x1
    /// `RTMGRP_IPV4_IFADDR`: IPv4 address changes.
    static let groupIPv4Address: UInt32 = 0x10
    /// `RTMGRP_IPV6_IFADDR`: IPv6 address changes.
    static let groupIPv6Address: UInt32 = 0x100

    /// `NLMSG_NOOP`.
    static let noop: UInt16 = 1
    /// `NLMSG_ERROR` (also an acknowledgement when the error code is 0).
    static let error: UInt16 = 2
    /// `NLMSG_DONE`: end of a multipart (dump) reply.
    static let done: UInt16 = 3
    /// `NLMSG_OVERRUN`.
    static let overrun: UInt16 = 4
    /// `RTM_NEWLINK`.
    static let newLink: UInt16 = 16
    /// `RTM_DELLINK`.
    static let deleteLink: UInt16 = 17
    /// `RTM_GETLINK`.
    static let getLink: UInt16 = 18
    /// `RTM_NEWADDR`.
    static let newAddress: UInt16 = 20
    /// `RTM_DELADDR`.
    static let deleteAddress: UInt16 = 21
    /// `RTM_GETADDR`.
    static let getAddress: UInt16 = 22

    /// `IFA_ADDRESS`: the address (the peer's on point-to-point links).
    static let attributeAddress: UInt16 = 1
    /// `IFA_LOCAL`: the local address (present on IPv4 addresses).
    static let attributeLocal: UInt16 = 2
    /// `IFA_LABEL`: the IPv4 address label (usually the interface name).
    static let attributeLabel: UInt16 = 3
    /// `IFA_FLAGS`: the address's flags, all 32 bits (`ifa_flags` holds only the low 8).
    static let attributeFlags: UInt16 = 8
    /// `IFLA_IFNAME`: the interface name.
    static let attributeInterfaceName: UInt16 = 3
    /// `NLA_TYPE_MASK`: attribute type bits without `NLA_F_NESTED`/`NLA_F_NET_BYTEORDER`.
    static let attributeTypeMask: UInt16 = 0x3FFF

    /// `IFF_UP`: administratively up.
    static let flagUp: UInt32 = 0x1
    /// `IFF_LOOPBACK`.
    static let flagLoopback: UInt32 = 0x8
    /// `IFF_RUNNING`: operationally up (carrier).
    static let flagRunning: UInt32 = 0x40

    /// `IFA_F_DADFAILED`: duplicate address detection found another host using the address.
    static let addressFlagDADFailed: UInt32 = 0x08
    /// `IFA_F_DEPRECATED`: past its preferred lifetime (still works; new connections avoid it).
    static let addressFlagDeprecated: UInt32 = 0x20
    /// `IFA_F_TENTATIVE`: duplicate address detection still running; the address cannot be
    /// bound yet.
    static let addressFlagTentative: UInt32 = 0x40

    /// `AF_INET`.
    static let familyIPv4: UInt8 = 2
    /// `AF_INET6`.
    static let familyIPv6: UInt8 = 10

    /// `sizeof(struct nlmsghdr)`, bytes.
    static let headerSize = 16
    /// `sizeof(struct ifinfomsg)`, bytes.
    static let linkMessageSize = 16
    /// `sizeof(struct ifaddrmsg)`, bytes.
    static let addressMessageSize = 8
    /// `sizeof(struct rtattr)`, bytes.
    static let attributeHeaderSize = 4

    /// `NLMSG_ALIGN` / `RTA_ALIGN`: rounds up to 4 bytes.
    static func align(_ length: Int) -> Int { (length + 3) & ~3 }
}
