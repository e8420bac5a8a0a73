import CTetherNet
import Testing

@testable import TetherNetworkMonitor

typealias B = NetlinkBuilder

struct NetlinkMessageParserTests {
    let v6: [UInt8] = [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [7]

    @Test func swiftCopiesOfKernelConstantsMatchTheCHeaders() {
        let abi = CTetherNet_abi()
        #expect(abi.rtmgrp_link == NetlinkABI.groupLink)
        #expect(abi.rtmgrp_ipv4_ifaddr == NetlinkABI.groupIPv4Address)
        #expect(abi.rtmgrp_ipv6_ifaddr == NetlinkABI.groupIPv6Address)
        #expect(abi.rtm_newlink == NetlinkABI.newLink)
        #expect(abi.rtm_dellink == NetlinkABI.deleteLink)
        #expect(abi.rtm_getlink == NetlinkABI.getLink)
        #expect(abi.rtm_newaddr == NetlinkABI.newAddress)
        #expect(abi.rtm_deladdr == NetlinkABI.deleteAddress)
        #expect(abi.rtm_getaddr == NetlinkABI.getAddress)
        #expect(abi.nlmsg_noop == NetlinkABI.noop)
        #expect(abi.nlmsg_error == NetlinkABI.error)
        #expect(abi.nlmsg_done == NetlinkABI.done)
        #expect(abi.nlmsg_overrun == NetlinkABI.overrun)
        #expect(abi.ifa_address == NetlinkABI.attributeAddress)
        #expect(abi.ifa_local == NetlinkABI.attributeLocal)
        #expect(abi.ifa_label == NetlinkABI.attributeLabel)
        #expect(abi.ifa_flags == NetlinkABI.attributeFlags)
        #expect(abi.ifa_f_dadfailed == NetlinkABI.addressFlagDADFailed)
        #expect(abi.ifa_f_deprecated == NetlinkABI.addressFlagDeprecated)
        #expect(abi.ifa_f_tentative == NetlinkABI.addressFlagTentative)
        #expect(abi.ifla_ifname == NetlinkABI.attributeInterfaceName)
        #expect(abi.iff_up == NetlinkABI.flagUp)
        #expect(abi.iff_running == NetlinkABI.flagRunning)
        #expect(abi.iff_loopback == NetlinkABI.flagLoopback)
        #expect(Int(abi.sizeof_nlmsghdr) == NetlinkABI.headerSize)
        #expect(Int(abi.sizeof_ifinfomsg) == NetlinkABI.linkMessageSize)
        #expect(Int(abi.sizeof_ifaddrmsg) == NetlinkABI.addressMessageSize)
        #expect(Int(abi.sizeof_rtattr) == NetlinkABI.attributeHeaderSize)
        #expect(abi.af_inet == UInt32(NetlinkABI.familyIPv4))
        #expect(abi.af_inet6 == UInt32(NetlinkABI.familyIPv6))
    }

    @Test func decodesAddressesLinksDoneAndErrorsInOneBuffer() {
        let buffer =
            B.ipv4(10, 77, 0, 1, prefix: 24, index: 3, label: "v0")
            + B.ipv6(v6, prefix: 64, index: 3, type: B.RTM_DELADDR)
            + B.link(index: 3, flags: B.IFF_UP | B.IFF_RUNNING, name: "v0")
            + B.link(B.RTM_DELLINK, index: 4, flags: 0, name: "v1")
            + B.done(sequence: 9)
            + B.error(13, sequence: 10)
        let events = NetlinkMessageParser.parse(buffer)
        #expect(
            events == [
                .newAddress(InterfaceAddress(interfaceIndex: 3, interfaceName: "v0", address: .v4(10, 77, 0, 1), prefixLength: 24)),
                .deletedAddress(InterfaceAddress(interfaceIndex: 3, address: IPAddress(bytes: v6)!, prefixLength: 64)),
                .newLink(LinkState(interfaceIndex: 3, interfaceName: "v0", flags: 0x41)),
                .deletedLink(LinkState(interfaceIndex: 4, interfaceName: "v1", flags: 0)),
                .done(sequence: 9),
                .error(code: 13, sequence: 10),
            ])
        if case .newLink(let link) = events[2] {
            #expect(link.isOperational)
        }
    }

    @Test func readsAddressFlagsFromTheHeaderAndFromIFAFlags() {
        // ifa_flags (8 bits) in the header: tentative (0x40).
        let tentative = B.message(B.RTM_NEWADDR, body: [B.AF_INET6, 64, 0x40, 0] + B.bytes(UInt32(2)) + B.attribute(B.IFA_ADDRESS, v6))
        // IFA_FLAGS (32 bits) wins over the header: permanent (0x80) only, so usable, though the
        // header says tentative.
        let settled = B.message(
            B.RTM_NEWADDR, body: [B.AF_INET6, 64, 0x40, 0] + B.bytes(UInt32(2)) + B.attribute(B.IFA_ADDRESS, v6) + B.attribute(B.IFA_FLAGS, B.bytes(UInt32(0x80))))
        // A failed duplicate address detection.
        let duplicate = B.message(
            B.RTM_NEWADDR, body: [B.AF_INET6, 64, 0, 0] + B.bytes(UInt32(2)) + B.attribute(B.IFA_ADDRESS, v6) + B.attribute(B.IFA_FLAGS, B.bytes(UInt32(0x08))))
        let events = (tentative + settled + duplicate).withUnsafeBytes { NetlinkMessageParser.parse($0) }
        let addresses = events.compactMap { event -> InterfaceAddress? in
            if case .newAddress(let a) = event { return a }
            return nil
        }
        #expect(addresses.map(\.flags) == [0x40, 0x80, 0x08])
        #expect(addresses.map(\.isTentative) == [true, false, false])
        #expect(addresses.map(\.isDuplicate) == [false, false, true])
        #expect(addresses.map(\.isUsable) == [false, true, false])
    }

    @Test func prefersTheLocalAddressOverThePeerAddress() {
        let buffer = B.address(
            index: 2, attributes: [B.attribute(B.IFA_ADDRESS, [10, 0, 0, 2]), B.attribute(B.IFA_LOCAL, [10, 0, 0, 1])])
        #expect(
            NetlinkMessageParser.parse(buffer)
                == [.newAddress(InterfaceAddress(interfaceIndex: 2, address: .v4(10, 0, 0, 1), prefixLength: 24))])
    }

    @Test func ignoresUnknownMessageTypesFamiliesAndAttributesAndMasksAttributeFlags() {
        let nested = B.attribute(0x8000 | B.IFA_ADDRESS, [192, 168, 1, 9])  // NLA_F_NESTED set
        let buffer =
            B.message(99, body: [1, 2, 3, 4])
            + B.address(family: 7, index: 1, attributes: [B.attribute(B.IFA_ADDRESS, [1, 2])])
            + B.address(index: 5, attributes: [B.attribute(42, [1, 2, 3]), nested])
        #expect(
            NetlinkMessageParser.parse(buffer)
                == [.newAddress(InterfaceAddress(interfaceIndex: 5, address: .v4(192, 168, 1, 9), prefixLength: 24))])
    }

    /// Three messages; cutting the buffer at every length must give the events of the complete
    /// messages, then at most one `malformed`, and never crash.
    @Test func truncatingAtEveryLengthYieldsCompleteMessagesThenOneMalformed() {
        let messages = [
            B.ipv4(10, 0, 0, 1, index: 2, label: "eth0"),
            B.link(index: 2, flags: B.IFF_UP, name: "eth0"),
            B.ipv6(v6, index: 2),
        ]
        let buffer = messages.flatMap { $0 }
        let all = NetlinkMessageParser.parse(buffer)
        #expect(all.count == 3)
        var boundaries = [0]
        for message in messages { boundaries.append(boundaries.last! + message.count) }
        for length in 0...buffer.count {
            let events = Array(buffer[0..<length]).withUnsafeBytes { NetlinkMessageParser.parse($0) }
            let complete = boundaries.lastIndex { $0 <= length }!
            #expect(Array(events.prefix(complete)) == Array(all.prefix(complete)), "length \(length)")
            if boundaries.contains(length) {
                #expect(events.count == complete, "length \(length)")
            } else {
                #expect(events.count == complete + 1, "length \(length)")
                if case .malformed(let error)? = events.last {
                    #expect(error.abandonsBuffer)
                } else {
                    Issue.record("length \(length): expected a trailing malformed, got \(events)")
                }
            }
        }
    }

    @Test func headerLengthFieldsThatLieEndParsingWithOneMalformed() {
        let good = B.ipv4(10, 0, 0, 1, index: 2)
        for lie: UInt32 in [0, 1, 15] {
            let events = NetlinkMessageParser.parse(good + B.message(B.RTM_NEWADDR, body: [], lengthOverride: lie) + good)
            #expect(events.count == 2)
            #expect(events.last == .malformed(.lengthTooShort(offset: good.count, length: Int(lie))))
        }
        for lie: UInt32 in [UInt32(good.count + 4), 0xFFFF_FFFF] {
            var bytes = good + good
            bytes.replaceSubrange(good.count..<(good.count + 4), with: B.bytes(lie))
            let events = NetlinkMessageParser.parse(bytes)
            #expect(events.count == 2)
            #expect(events.last == .malformed(.lengthBeyondBuffer(offset: good.count, length: Int(lie), available: good.count)))
        }
    }

    @Test func bodyAndAttributeLengthsThatLieSkipOnlyThatMessage() {
        let good = B.ipv4(10, 0, 0, 1, index: 2)
        let cases: [[UInt8]] = [
            B.message(B.RTM_NEWADDR, body: [2, 24, 0]),  // ifaddrmsg cut short
            B.message(B.RTM_NEWLINK, body: [UInt8](repeating: 0, count: 12)),  // ifinfomsg cut short
            B.message(B.NLMSG_ERROR, body: [1, 2]),  // nlmsgerr cut short
            B.address(index: 2, attributes: [B.attribute(B.IFA_ADDRESS, [10, 0, 0, 1], lengthOverride: 0)]),
            B.address(index: 2, attributes: [B.attribute(B.IFA_ADDRESS, [10, 0, 0, 1], lengthOverride: 3)]),
            B.address(index: 2, attributes: [B.attribute(B.IFA_ADDRESS, [10, 0, 0, 1], lengthOverride: 200)]),
            B.address(index: 2, attributes: [B.attribute(B.IFA_ADDRESS, [10, 0, 1])]),  // 3-byte IPv4
            B.address(family: B.AF_INET6, index: 2, attributes: [B.attribute(B.IFA_ADDRESS, [1, 2, 3, 4])]),
            B.address(index: 2, attributes: [B.string(B.IFA_LABEL, "eth0")]),  // no address at all
        ]
        let goodEvent = NetlinkMessageParser.parse(good)[0]
        for (number, bad) in cases.enumerated() {
            let events = NetlinkMessageParser.parse(good + bad + good)
            #expect(events.count == 3, "case \(number): \(events)")
            guard events.count == 3 else { continue }
            #expect(events[0] == goodEvent && events[2] == goodEvent, "case \(number)")
            if case .malformed(let error) = events[1] {
                #expect(!error.abandonsBuffer, "case \(number)")
            } else {
                Issue.record("case \(number): expected malformed, got \(events[1])")
            }
        }
        // A link without a name is valid.
        #expect(NetlinkMessageParser.parse(B.link(index: 2, flags: 0, name: nil)) == [.newLink(LinkState(interfaceIndex: 2, flags: 0))])
    }

    @Test func randomAndMutatedBuffersNeverCrash() {
        var generator = SplitMix(state: 0x7E7)
        let valid =
            B.ipv4(10, 0, 0, 1, index: 2, label: "eth0") + B.link(index: 2, flags: 0x41, name: "eth0") + B.ipv6(v6, index: 2)
        var decoded = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<Int(generator.next() % 96)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            } else {
                bytes = valid
                for _ in 0..<(1 + generator.next() % 4) {
                    bytes[Int(generator.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
            }
            decoded += NetlinkMessageParser.parse(bytes).count
        }
        #expect(decoded > 0)
    }

    @Test func formatsIPv6AddressesCanonically() {
        func v6(_ groups: [UInt16]) -> IPAddress { IPAddress(bytes: groups.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] })! }
        #expect(v6([0, 0, 0, 0, 0, 0, 0, 1]).description == "::1")
        #expect(v6([0, 0, 0, 0, 0, 0, 0, 0]).description == "::")
        #expect(v6([0xfe80, 0, 0, 0, 0x1, 0x2, 0x3, 0x4]).description == "fe80::1:2:3:4")
        #expect(v6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 0]).description == "2001:db8:0:0:1::")
        #expect(v6([1, 0, 2, 3, 4, 5, 6, 7]).description == "1:0:2:3:4:5:6:7")
        #expect(IPAddress.v4(10, 77, 0, 1).description == "10.77.0.1")
        #expect(v6([0xfe80, 0, 0, 0, 0, 0, 0, 1]).isLinkLocal)
        #expect(v6([0xfebf, 0, 0, 0, 0, 0, 0, 1]).isLinkLocal)
        #expect(!v6([0xfec0, 0, 0, 0, 0, 0, 0, 1]).isLinkLocal)
        #expect(IPAddress.v4(169, 254, 3, 4).isLinkLocal)
        #expect(IPAddress.v4(127, 9, 0, 1).isLoopback)
    }
}

/// SplitMix64 for fuzzing (the test's own copy; deterministic).
struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
