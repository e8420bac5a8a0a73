import Testing

@testable import TetherNetworkMonitor

/// The debouncer driven by a manual clock (milliseconds converted to nanoseconds).
struct NetworkChangeDebouncerTests {
    func ms(_ value: UInt64) -> UInt64 { value * 1_000_000 }

    let eth0 = LinkState(interfaceIndex: 2, interfaceName: "eth0", flags: 0x41)
    let wlan0 = LinkState(interfaceIndex: 3, interfaceName: "wlan0", flags: 0x41)
    let lo = LinkState(interfaceIndex: 1, interfaceName: "lo", flags: 0x49)

    func address(_ d: UInt8, index: UInt32 = 2) -> InterfaceAddress {
        InterfaceAddress(interfaceIndex: index, address: .v4(10, 0, 0, d), prefixLength: 24)
    }

    func debouncer(ignoring: Bool = true) -> NetworkChangeDebouncer {
        var debouncer = NetworkChangeDebouncer(
            configuration: .init(debounceMilliseconds: 300, maximumDelayMilliseconds: 2000, ignoresLoopbackAndLinkLocal: ignoring))
        debouncer.reset(addresses: [address(1)], links: [lo, eth0, wlan0])
        return debouncer
    }

    @Test func deliversOneChangeAfterTheQuietPeriodAndNotBefore() {
        var debouncer = debouncer()
        #expect(debouncer.deadline == nil)
        debouncer.handle(.newAddress(address(2)), now: ms(1000))
        #expect(debouncer.deadline == ms(1300))
        #expect(debouncer.poll(now: ms(1299)) == nil)
        var named = address(2)
        named.interfaceName = "eth0"
        #expect(debouncer.poll(now: ms(1300)) == NetworkChange(addedAddresses: [named]))
        #expect(debouncer.deadline == nil)
        #expect(debouncer.poll(now: ms(5000)) == nil)
    }

    @Test func eachRelevantEventExtendsTheWindowAndTheBurstArrivesAsOneChange() {
        var debouncer = debouncer()
        debouncer.handle(.deletedAddress(address(1)), now: ms(0))
        debouncer.handle(.newAddress(address(7, index: 3)), now: ms(200))
        debouncer.handle(.newLink(LinkState(interfaceIndex: 2, interfaceName: "eth0", flags: 0x1)), now: ms(400))
        #expect(debouncer.poll(now: ms(500)) == nil)
        let change = debouncer.poll(now: ms(700))
        #expect(change?.removedAddresses.map(\.address) == [.v4(10, 0, 0, 1)])
        #expect(change?.removedAddresses.first?.interfaceName == "eth0")
        #expect(change?.addedAddresses.map(\.interfaceName) == ["wlan0"])
        #expect(change?.linksDown.map(\.interfaceName) == ["eth0"])
        #expect(change?.linksUp == [])
    }

    @Test func anIPv6AddressCountsAsAddedWhenDuplicateAddressDetectionEndsNotWhenItAppears() {
        var debouncer = debouncer()
        let global: [UInt8] = [0xfd, 0, 0, 0x70] + [UInt8](repeating: 0, count: 11) + [1]
        var tentative = InterfaceAddress(interfaceIndex: 2, address: .v6(global), prefixLength: 64, flags: 0x40 | 0x80)
        debouncer.handle(.newAddress(tentative), now: ms(0))
        #expect(debouncer.deadline == nil)
        #expect(debouncer.addresses.count == 1)  // still only 10.0.0.1
        // Detection over: the kernel repeats RTM_NEWADDR without IFA_F_TENTATIVE.
        var settled = tentative
        settled.flags = 0x80
        debouncer.handle(.newAddress(settled), now: ms(1500))
        settled.interfaceName = "eth0"
        #expect(debouncer.poll(now: ms(1800)) == NetworkChange(addedAddresses: [settled]))
        // Tentative again (the link went down and up with keep_addr_on_down): gone until it settles.
        tentative.interfaceName = "eth0"
        debouncer.handle(.newAddress(tentative), now: ms(5000))
        #expect(debouncer.poll(now: ms(5300)) == NetworkChange(removedAddresses: [settled]))
        // A failed detection never makes it usable.
        debouncer.handle(.newAddress(InterfaceAddress(interfaceIndex: 2, address: .v6(global), prefixLength: 64, flags: 0x08)), now: ms(6000))
        #expect(debouncer.deadline == nil)
        #expect(!debouncer.addresses.contains { $0.address == .v6(global) })
    }

    @Test func aDumpLeavesTentativeAddressesOut() {
        var debouncer = NetworkChangeDebouncer()
        let global: [UInt8] = [0xfd, 0, 0, 0x70] + [UInt8](repeating: 0, count: 11) + [1]
        debouncer.reset(addresses: [address(1), InterfaceAddress(interfaceIndex: 2, address: .v6(global), prefixLength: 64, flags: 0x40)], links: [eth0])
        #expect(debouncer.addresses.map(\.address) == [.v4(10, 0, 0, 1)])
    }

    @Test func changesThatCancelOutWithinTheWindowAreNotReported() {
        var debouncer = debouncer()
        debouncer.handle(.deletedAddress(address(1)), now: ms(0))
        debouncer.handle(.newAddress(address(1)), now: ms(50))
        debouncer.handle(.newLink(LinkState(interfaceIndex: 3, interfaceName: "wlan0", flags: 0x1)), now: ms(60))
        debouncer.handle(.newLink(wlan0), now: ms(70))
        #expect(debouncer.deadline == ms(370))
        #expect(debouncer.poll(now: ms(370)) == nil)
        #expect(debouncer.deadline == nil)
    }

    @Test func aFlappingNetworkIsStillReportedAfterTheMaximumDelay() {
        var debouncer = debouncer()
        var now: UInt64 = 0
        var delivered: NetworkChange?
        var deliveredAt: UInt64 = 0
        var d: UInt8 = 10
        while delivered == nil, now < ms(10_000) {
            debouncer.handle(.newAddress(address(d)), now: now)
            d += 1
            now += ms(100)
            if let change = debouncer.poll(now: now) {
                delivered = change
                deliveredAt = now
            }
        }
        #expect(deliveredAt == ms(2000))
        #expect(delivered?.addedAddresses.count == 20)
    }

    @Test func repeatedNewAddressAndStatisticsOnlyLinkUpdatesDoNotOpenAWindow() {
        var debouncer = debouncer()
        debouncer.handle(.newAddress(address(1)), now: 0)  // flags update of a known address
        debouncer.handle(.newLink(LinkState(interfaceIndex: 2, interfaceName: "eth0", flags: 0x41 | 0x1000)), now: 0)
        #expect(debouncer.deadline == nil)
    }

    @Test func ignoresLoopbackAndLinkLocalUnlessAskedNotTo() {
        let linkLocal = InterfaceAddress(interfaceIndex: 2, address: .v4(169, 254, 1, 1), prefixLength: 16)
        let v6LinkLocal = InterfaceAddress(
            interfaceIndex: 2, address: IPAddress(bytes: [0xfe, 0x80] + [UInt8](repeating: 0, count: 13) + [1])!,
            prefixLength: 64)
        let loopback = InterfaceAddress(interfaceIndex: 1, address: .v4(127, 0, 0, 2), prefixLength: 8)
        let loDown = LinkState(interfaceIndex: 1, interfaceName: "lo", flags: 0x8)

        var ignoring = debouncer()
        for event in [NetlinkEvent.newAddress(linkLocal), .newAddress(v6LinkLocal), .newAddress(loopback), .newLink(loDown)] {
            ignoring.handle(event, now: 0)
        }
        #expect(ignoring.deadline == nil)
        #expect(ignoring.addresses.count == 4)  // tracked, just not reported

        var keeping = debouncer(ignoring: false)
        for event in [NetlinkEvent.newAddress(linkLocal), .newAddress(v6LinkLocal), .newAddress(loopback), .newLink(loDown)] {
            keeping.handle(event, now: 0)
        }
        let change = keeping.poll(now: ms(300))
        #expect(change?.addedAddresses.count == 3)
        #expect(change?.linksDown.map(\.interfaceName) == ["lo"])
    }

    @Test func aDeletedLinkIsReportedDownWithItsNameAndItsAddressesRemoved() {
        var debouncer = debouncer()
        debouncer.handle(.deletedLink(LinkState(interfaceIndex: 2, flags: 0)), now: 0)
        let change = debouncer.poll(now: ms(300))
        #expect(change?.linksDown.map(\.interfaceName) == ["eth0"])
        #expect(change?.linksDown.first?.isOperational == false)
        #expect(change?.removedAddresses.map(\.address) == [.v4(10, 0, 0, 1)])
        #expect(change?.removedAddresses.first?.interfaceName == "eth0")
    }

    @Test func aNewLinkThatComesUpIsReportedUp() {
        var debouncer = debouncer()
        debouncer.handle(.newLink(LinkState(interfaceIndex: 9, interfaceName: "usb0", flags: 0x2)), now: 0)
        #expect(debouncer.deadline != nil)  // appears (not operational): relevant, nothing to report
        debouncer.handle(.newLink(LinkState(interfaceIndex: 9, flags: 0x43)), now: ms(10))
        let change = debouncer.poll(now: ms(310))
        #expect(change?.linksUp.map(\.interfaceName) == ["usb0"])
    }

    @Test func resynchronizingAfterLostEventsReportsTheDifference() {
        var debouncer = debouncer()
        debouncer.resynchronize(addresses: [address(5)], links: [lo, eth0, wlan0], now: ms(10))
        let change = debouncer.poll(now: ms(310))
        #expect(change?.addedAddresses.map(\.address) == [.v4(10, 0, 0, 5)])
        #expect(change?.removedAddresses.map(\.address) == [.v4(10, 0, 0, 1)])
    }
}
