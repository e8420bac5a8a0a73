/// One message decoded from an rtnetlink buffer.
public enum NetlinkEvent: Sendable, Equatable {
    /// `RTM_NEWADDR`: an address was added (or, in a dump, exists). The kernel also sends it when
    /// an address's flags change, so it can repeat for an address already known.
    case newAddress(InterfaceAddress)
    /// `RTM_DELADDR`: an address was removed.
    case deletedAddress(InterfaceAddress)
    /// `RTM_NEWLINK`: a link exists or changed (flags, name, statistics…).
    case newLink(LinkState)
    /// `RTM_DELLINK`: a link was deleted.
    case deletedLink(LinkState)
    /// `NLMSG_DONE`: the end of the dump answering request `sequence`.
    case done(sequence: UInt32)
    /// `NLMSG_ERROR`: the request `sequence` failed with the positive errno `code`
    /// (`code` 0 is an acknowledgement).
    case error(code: Int32, sequence: UInt32)
    /// `NLMSG_OVERRUN`: data was lost.
    case overrun
    /// A message (or the rest of the buffer) that does not decode; it was skipped.
    case malformed(NetlinkParseError)
}

/// Why part of a netlink buffer was skipped.
public enum NetlinkParseError: Sendable, Equatable {
    /// Fewer than 16 bytes (a `nlmsghdr`) remain at `offset`; the rest of the buffer is skipped.
    case truncatedHeader(offset: Int)
    /// `nlmsg_len` at `offset` is smaller than a header; the rest of the buffer is skipped.
    case lengthTooShort(offset: Int, length: Int)
    /// `nlmsg_len` at `offset` runs past the end of the buffer; the rest is skipped.
    case lengthBeyondBuffer(offset: Int, length: Int, available: Int)
    /// A message of `messageType` is shorter than its fixed body (`ifaddrmsg`, `ifinfomsg`, …).
    case truncatedBody(messageType: UInt16, offset: Int)
    /// An attribute's `rta_len` is below 4 bytes or runs past its message.
    case badAttributeLength(messageType: UInt16, offset: Int)
    /// An address attribute's length does not fit the family (4 bytes IPv4, 16 bytes IPv6).
    case badAddressLength(family: UInt8, length: Int)
    /// An address message has neither `IFA_LOCAL` nor `IFA_ADDRESS`.
    case missingAddress(offset: Int)

    /// Whether parsing had to give up on the rest of the buffer (not just one message).
    public var abandonsBuffer: Bool {
        switch self {
        case .truncatedHeader, .lengthTooShort, .lengthBeyondBuffer: true
        default: false
        }
    }
}

/// Decodes rtnetlink buffers (as received from a `NETLINK_ROUTE` socket) into ``NetlinkEvent``s.
/// Pure: no system calls, no state.
///
/// Defensive: every length is checked before it is used. A message whose body or attributes do
/// not fit yields one ``NetlinkEvent/malformed(_:)`` and parsing continues with the next message;
/// a header whose length field lies (too short, or beyond the buffer) yields one `malformed`
/// and ends parsing, because the next message's position is unknown. Message types other than
/// links, addresses, done, error and overrun are ignored, as are address families other than
/// IPv4 and IPv6. Multi-byte fields are read in host byte order, as the kernel writes them.
public enum NetlinkMessageParser {
    /// Decodes every message in `bytes`.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> [NetlinkEvent] {
        var events: [NetlinkEvent] = []
        var offset = 0
        while offset < bytes.count {
            let available = bytes.count - offset
            guard available >= NetlinkABI.headerSize else {
                events.append(.malformed(.truncatedHeader(offset: offset)))
                break
            }
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            guard length >= NetlinkABI.headerSize else {
                events.append(.malformed(.lengthTooShort(offset: offset, length: length)))
                break
            }
            guard length <= available else {
                events.append(.malformed(.lengthBeyondBuffer(offset: offset, length: length, available: available)))
                break
            }
            let type = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self)
            let sequence = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            let message = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length)])
            if let event = parseMessage(type: type, sequence: sequence, message: message, offset: offset) {
                events.append(event)
            }
            offset += NetlinkABI.align(length)
        }
        return events
    }

    /// Decodes every message in `bytes`.
    public static func parse(_ bytes: [UInt8]) -> [NetlinkEvent] {
        bytes.withUnsafeBytes { parse($0) }
    }

    private static func parseMessage(
        type: UInt16, sequence: UInt32, message: UnsafeRawBufferPointer, offset: Int
    ) -> NetlinkEvent? {
        let body = UnsafeRawBufferPointer(rebasing: message[NetlinkABI.headerSize...])
        switch type {
        case NetlinkABI.newAddress, NetlinkABI.deleteAddress:
            return parseAddress(type: type, body: body, offset: offset)
        case NetlinkABI.newLink, NetlinkABI.deleteLink:
            return parseLink(type: type, body: body, offset: offset)
        case NetlinkABI.done:
            return .done(sequence: sequence)
        case NetlinkABI.error:
            guard body.count >= 4 else { return .malformed(.truncatedBody(messageType: type, offset: offset)) }
            let code = body.loadUnaligned(as: Int32.self)
            // The kernel stores -errno; guard the one value whose negation overflows.
            return .error(code: code == Int32.min ? Int32.max : -code, sequence: sequence)
        case NetlinkABI.overrun:
            return .overrun
        default:
            return nil
        }
    }

    private static func parseAddress(type: UInt16, body: UnsafeRawBufferPointer, offset: Int) -> NetlinkEvent? {
        guard body.count >= NetlinkABI.addressMessageSize else {
            return .malformed(.truncatedBody(messageType: type, offset: offset))
        }
        let family = body[0]
        let prefixLength = body[1]
        var flags = UInt32(body[2])
        let index = body.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        let expectedLength: Int
        switch family {
        case NetlinkABI.familyIPv4: expectedLength = 4
        case NetlinkABI.familyIPv6: expectedLength = 16
        default: return nil
        }
        var local: UnsafeRawBufferPointer?
        var address: UnsafeRawBufferPointer?
        var label: String?
        let walk = walkAttributes(body, from: NetlinkABI.align(NetlinkABI.addressMessageSize)) { attributeType, payload in
            switch attributeType {
            case NetlinkABI.attributeLocal: local = payload
            case NetlinkABI.attributeAddress: address = payload
            case NetlinkABI.attributeLabel: label = cString(payload)
            case NetlinkABI.attributeFlags where payload.count >= 4: flags = payload.loadUnaligned(as: UInt32.self)
            default: break
            }
        }
        guard walk else { return .malformed(.badAttributeLength(messageType: type, offset: offset)) }
        // IFA_LOCAL is the local address; IFA_ADDRESS is the peer's on point-to-point links.
        guard let raw = local ?? address else { return .malformed(.missingAddress(offset: offset)) }
        guard raw.count == expectedLength, let ip = IPAddress(bytes: raw) else {
            return .malformed(.badAddressLength(family: family, length: raw.count))
        }
        let value = InterfaceAddress(interfaceIndex: index, interfaceName: label, address: ip, prefixLength: prefixLength, flags: flags)
        return type == NetlinkABI.newAddress ? .newAddress(value) : .deletedAddress(value)
    }

    private static func parseLink(type: UInt16, body: UnsafeRawBufferPointer, offset: Int) -> NetlinkEvent? {
        guard body.count >= NetlinkABI.linkMessageSize else {
            return .malformed(.truncatedBody(messageType: type, offset: offset))
        }
        let index = UInt32(bitPattern: body.loadUnaligned(fromByteOffset: 4, as: Int32.self))
        let flags = body.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
        var name: String?
        let walk = walkAttributes(body, from: NetlinkABI.linkMessageSize) { attributeType, payload in
            if attributeType == NetlinkABI.attributeInterfaceName { name = cString(payload) }
        }
        guard walk else { return .malformed(.badAttributeLength(messageType: type, offset: offset)) }
        let link = LinkState(interfaceIndex: index, interfaceName: name, flags: flags)
        return type == NetlinkABI.newLink ? .newLink(link) : .deletedLink(link)
    }

    /// Calls `visit(type, payload)` for each `rtattr` from `start`; false if a length lies.
    /// Fewer than 4 trailing bytes (padding) end the walk quietly.
    private static func walkAttributes(
        _ body: UnsafeRawBufferPointer, from start: Int, _ visit: (UInt16, UnsafeRawBufferPointer) -> Void
    ) -> Bool {
        var position = start
        while position + NetlinkABI.attributeHeaderSize <= body.count {
            let length = Int(body.loadUnaligned(fromByteOffset: position, as: UInt16.self))
            let type = body.loadUnaligned(fromByteOffset: position + 2, as: UInt16.self) & NetlinkABI.attributeTypeMask
            guard length >= NetlinkABI.attributeHeaderSize, position + length <= body.count else { return false }
            visit(type, UnsafeRawBufferPointer(rebasing: body[(position + NetlinkABI.attributeHeaderSize)..<(position + length)]))
            position += NetlinkABI.align(length)
        }
        return true
    }

    /// The bytes up to the first NUL (or all of them), as UTF-8 (invalid bytes replaced).
    private static func cString(_ payload: UnsafeRawBufferPointer) -> String {
        let end = payload.firstIndex(of: 0) ?? payload.count
        return String(decoding: payload[..<end], as: UTF8.self)
    }
}
