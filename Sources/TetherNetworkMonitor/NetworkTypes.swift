/// An IPv4 or IPv6 address.
public enum IPAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// An IPv4 address, network byte order bytes `a.b.c.d`.
    case v4(UInt8, UInt8, UInt8, UInt8)
    /// An IPv6 address as its 16 network-order bytes.
    case v6([UInt8])

    /// Creates an address from raw network-order bytes: 4 for IPv4, 16 for IPv6, else nil.
    public init?(bytes: some Collection<UInt8>) {
        let array = Array(bytes)
        switch array.count {
        case 4: self = .v4(array[0], array[1], array[2], array[3])
        case 16: self = .v6(array)
        default: return nil
        }
    }

    /// The network-order bytes (4 or 16).
    public var bytes: [UInt8] {
        switch self {
        case .v4(let a, let b, let c, let d): [a, b, c, d]
        case .v6(let bytes): bytes
        }
    }

    /// Whether this is 127.0.0.0/8 or ::1.
    public var isLoopback: Bool {
        switch self {
        case .v4(let a, _, _, _): a == 127
        case .v6(let bytes): bytes == [UInt8](repeating: 0, count: 15) + [1]
        }
    }

    /// Whether this is link-local: 169.254.0.0/16 or fe80::/10.
    public var isLinkLocal: Bool {
        switch self {
        case .v4(let a, let b, _, _): a == 169 && b == 254
        case .v6(let bytes): bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80
        }
    }

    /// Dotted quad for IPv4; RFC 5952 text (lower case, longest zero run as `::`) for IPv6.
    public var description: String {
        switch self {
        case .v4(let a, let b, let c, let d):
            return "\(a).\(b).\(c).\(d)"
        case .v6(let bytes):
            let groups = (0..<8).map { UInt16(bytes[2 * $0]) << 8 | UInt16(bytes[2 * $0 + 1]) }
            // Longest run (≥ 2) of zero groups, first one on ties.
            var bestStart = -1
            var bestLength = 1
            var index = 0
            while index < 8 {
                guard groups[index] == 0 else {
                    index += 1
                    continue
                }
                let start = index
                while index < 8, groups[index] == 0 { index += 1 }
                if index - start > bestLength {
                    bestStart = start
                    bestLength = index - start
                }
            }
            let hex = groups.map { String($0, radix: 16) }
            guard bestStart >= 0 else { return hex.joined(separator: ":") }
            let head = hex[..<bestStart].joined(separator: ":")
            let tail = hex[(bestStart + bestLength)...].joined(separator: ":")
            return head + "::" + tail
        }
    }

    /// Orders IPv4 before IPv6, then by bytes.
    public static func < (lhs: IPAddress, rhs: IPAddress) -> Bool {
        let (l, r) = (lhs.bytes, rhs.bytes)
        return l.count != r.count ? l.count < r.count : l.lexicographicallyPrecedes(r)
    }
}

/// An address assigned to a local interface.
public struct InterfaceAddress: Sendable, Hashable, CustomStringConvertible {
    /// The kernel's interface index.
    public var interfaceIndex: UInt32
    /// The interface name when known (from the link table, or the IPv4 address label).
    public var interfaceName: String?
    /// The address.
    public var address: IPAddress
    /// The prefix length, in bits.
    public var prefixLength: UInt8
    /// The kernel's `IFA_F_*` flags (`IFA_FLAGS`, or `ifa_flags` without it).
    public var flags: UInt32

    /// Creates an interface address.
    public init(interfaceIndex: UInt32, interfaceName: String? = nil, address: IPAddress, prefixLength: UInt8, flags: UInt32 = 0) {
        self.interfaceIndex = interfaceIndex
        self.interfaceName = interfaceName
        self.address = address
        self.prefixLength = prefixLength
        self.flags = flags
    }

    /// Whether the address is loopback or link-local (see ``IPAddress``).
    public var isLoopbackOrLinkLocal: Bool { address.isLoopback || address.isLinkLocal }

    /// Whether IPv6 duplicate address detection is still running on the address
    /// (`IFA_F_TENTATIVE`): it exists but cannot be bound yet (`EADDRNOTAVAIL`). A link that comes
    /// back, or an address a router or DHCPv6 just gave, spends 1–2 s like this.
    public var isTentative: Bool { flags & NetlinkABI.addressFlagTentative != 0 }

    /// Whether duplicate address detection found the address in use elsewhere (`IFA_F_DADFAILED`):
    /// it will never be usable.
    public var isDuplicate: Bool { flags & NetlinkABI.addressFlagDADFailed != 0 }

    /// Whether a socket can use the address now: neither tentative nor a duplicate.
    public var isUsable: Bool { !isTentative && !isDuplicate }

    /// `"10.0.0.1/24 on eth0 (#2)"`.
    public var description: String {
        "\(address)/\(prefixLength) on \(interfaceName ?? "?") (#\(interfaceIndex))"
    }

    /// Identity ignoring the name: the same address on the same interface.
    var key: AddressKey { AddressKey(interfaceIndex: interfaceIndex, address: address, prefixLength: prefixLength) }
}

/// An address's identity: interface index, address, prefix length (not the name).
struct AddressKey: Hashable, Comparable {
    var interfaceIndex: UInt32
    var address: IPAddress
    var prefixLength: UInt8

    static func < (lhs: AddressKey, rhs: AddressKey) -> Bool {
        if lhs.interfaceIndex != rhs.interfaceIndex { return lhs.interfaceIndex < rhs.interfaceIndex }
        if lhs.address != rhs.address { return lhs.address < rhs.address }
        return lhs.prefixLength < rhs.prefixLength
    }
}

/// The state of a local network interface (link) as the kernel reports it.
public struct LinkState: Sendable, Hashable, CustomStringConvertible {
    /// The kernel's interface index.
    public var interfaceIndex: UInt32
    /// The interface name (`IFLA_IFNAME`) when known.
    public var interfaceName: String?
    /// The `IFF_*` flag bits.
    public var flags: UInt32

    /// Creates a link state.
    public init(interfaceIndex: UInt32, interfaceName: String? = nil, flags: UInt32) {
        self.interfaceIndex = interfaceIndex
        self.interfaceName = interfaceName
        self.flags = flags
    }

    /// `IFF_UP`: administratively up.
    public var isUp: Bool { flags & NetlinkABI.flagUp != 0 }
    /// `IFF_RUNNING`: operationally up (has carrier).
    public var isRunning: Bool { flags & NetlinkABI.flagRunning != 0 }
    /// `IFF_LOOPBACK`.
    public var isLoopback: Bool { flags & NetlinkABI.flagLoopback != 0 }
    /// Up and running: able to carry traffic. "Link up/down" in ``NetworkChange`` means this.
    public var isOperational: Bool { isUp && isRunning }

    /// `"eth0 (#2) up"`.
    public var description: String {
        "\(interfaceName ?? "?") (#\(interfaceIndex)) \(isOperational ? "up" : isUp ? "up, not running" : "down")"
    }
}

/// One debounced change of the local network: what differs between the state before the first
/// raw event of a burst and the state after the burst went quiet. Changes that cancel out within
/// the burst (an address removed and re-added, a link bounced) do not appear.
public struct NetworkChange: Sendable, Equatable, CustomStringConvertible {
    /// Addresses present now that were not before, sorted by interface index then address.
    public var addedAddresses: [InterfaceAddress]
    /// Addresses present before that are gone now, sorted by interface index then address.
    public var removedAddresses: [InterfaceAddress]
    /// Links that were operational (up and running) and are not now, or were deleted.
    public var linksDown: [LinkState]
    /// Links that are operational now and were not (or did not exist).
    public var linksUp: [LinkState]

    /// Creates a change.
    public init(
        addedAddresses: [InterfaceAddress] = [], removedAddresses: [InterfaceAddress] = [],
        linksDown: [LinkState] = [], linksUp: [LinkState] = []
    ) {
        self.addedAddresses = addedAddresses
        self.removedAddresses = removedAddresses
        self.linksDown = linksDown
        self.linksUp = linksUp
    }

    /// Whether nothing changed.
    public var isEmpty: Bool {
        addedAddresses.isEmpty && removedAddresses.isEmpty && linksDown.isEmpty && linksUp.isEmpty
    }

    /// A one-line summary.
    public var description: String {
        var parts: [String] = []
        if !addedAddresses.isEmpty { parts.append("added \(addedAddresses)") }
        if !removedAddresses.isEmpty { parts.append("removed \(removedAddresses)") }
        if !linksDown.isEmpty { parts.append("down \(linksDown)") }
        if !linksUp.isEmpty { parts.append("up \(linksUp)") }
        return parts.isEmpty ? "no change" : parts.joined(separator: "; ")
    }
}
