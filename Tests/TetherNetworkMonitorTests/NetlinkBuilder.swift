/// Hand-built rtnetlink messages (host byte order, as the kernel writes them).
enum NetlinkBuilder {
    static let AF_INET: UInt8 = 2
    static let AF_INET6: UInt8 = 10
    static let RTM_NEWLINK: UInt16 = 16
    static let RTM_DELLINK: UInt16 = 17
    static let RTM_NEWADDR: UInt16 = 20
    static let RTM_DELADDR: UInt16 = 21
    static let NLMSG_ERROR: UInt16 = 2
    static let NLMSG_DONE: UInt16 = 3
    static let IFA_ADDRESS: UInt16 = 1
    static let IFA_LOCAL: UInt16 = 2
    static let IFA_LABEL: UInt16 = 3
    static let IFA_FLAGS: UInt16 = 8
    static let IFLA_IFNAME: UInt16 = 3
    static let IFF_UP: UInt32 = 0x1
    static let IFF_LOOPBACK: UInt32 = 0x8
    static let IFF_RUNNING: UInt32 = 0x40

    static func bytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value, Array.init)
    }

    static func padded(_ bytes: [UInt8]) -> [UInt8] {
        bytes + [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4)
    }

    static func attribute(_ type: UInt16, _ payload: [UInt8], lengthOverride: UInt16? = nil) -> [UInt8] {
        padded(bytes(lengthOverride ?? UInt16(4 + payload.count)) + bytes(type) + payload)
    }

    static func string(_ type: UInt16, _ text: String) -> [UInt8] {
        attribute(type, Array(text.utf8) + [0])
    }

    static func message(_ type: UInt16, sequence: UInt32 = 0, body: [UInt8], lengthOverride: UInt32? = nil) -> [UInt8] {
        let length = lengthOverride ?? UInt32(16 + body.count)
        return padded(bytes(length) + bytes(type) + bytes(UInt16(0)) + bytes(sequence) + bytes(UInt32(0)) + body)
    }

    static func address(
        _ type: UInt16 = RTM_NEWADDR, family: UInt8 = AF_INET, prefix: UInt8 = 24, index: UInt32,
        attributes: [[UInt8]]
    ) -> [UInt8] {
        message(type, body: [family, prefix, 0, 0] + bytes(index) + attributes.flatMap { $0 })
    }

    static func ipv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, prefix: UInt8 = 24, index: UInt32, label: String? = nil, type: UInt16 = RTM_NEWADDR) -> [UInt8] {
        var attributes = [attribute(IFA_ADDRESS, [a, b, c, d]), attribute(IFA_LOCAL, [a, b, c, d])]
        if let label { attributes.append(string(IFA_LABEL, label)) }
        return address(type, family: AF_INET, prefix: prefix, index: index, attributes: attributes)
    }

    static func ipv6(_ bytes16: [UInt8], prefix: UInt8 = 64, index: UInt32, type: UInt16 = RTM_NEWADDR) -> [UInt8] {
        address(type, family: AF_INET6, prefix: prefix, index: index, attributes: [attribute(IFA_ADDRESS, bytes16)])
    }

    static func link(_ type: UInt16 = RTM_NEWLINK, index: UInt32, flags: UInt32, name: String?) -> [UInt8] {
        let body: [UInt8] = [0, 0] + bytes(UInt16(1)) + bytes(Int32(index)) + bytes(flags) + bytes(UInt32.max)
        return message(type, body: body + (name.map { string(IFLA_IFNAME, $0) } ?? []))
    }

    static func done(sequence: UInt32) -> [UInt8] {
        message(NLMSG_DONE, sequence: sequence, body: bytes(Int32(0)))
    }

    static func error(_ code: Int32, sequence: UInt32) -> [UInt8] {
        message(NLMSG_ERROR, sequence: sequence, body: bytes(-code) + [UInt8](repeating: 0, count: 16))
    }
}
