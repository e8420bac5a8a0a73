import Testing
import TetherICE
import TetherNetworkMonitor
import TetherTestSupport

@testable import Tether

@Suite("What a local network change means for the media path", .keepsLogPerTest)
struct NetworkPathJudgeTests {
    let wifi = InterfaceAddress(interfaceIndex: 2, interfaceName: "wlan0", address: .v4(10, 77, 0, 1), prefixLength: 24)
    let ethernet = InterfaceAddress(interfaceIndex: 3, interfaceName: "eth0", address: .v4(10, 78, 0, 1), prefixLength: 24)
    let loopback = InterfaceAddress(interfaceIndex: 1, interfaceName: "lo", address: .v4(127, 0, 0, 1), prefixLength: 8)
    let judge = NetworkPathJudge()

    func pair(on base: String, type: String = "host") -> ICESelectedPair {
        ICESelectedPair(local: "\(base):40000", remote: "10.77.0.2:40002", localType: type, remoteType: "host", localBase: base)
    }

    @Test func thePathsLinkDownWithNothingElseUpMeansWaitingForANetwork() {
        // The link is down: its address stays, but it is not usable.
        let down = NetworkChange(linksDown: [LinkState(interfaceIndex: 2, interfaceName: "wlan0", flags: 0)])
        #expect(judge.verdict(change: down, usable: [loopback], pair: pair(on: "10.77.0.1"), gatheredAddresses: ["10.77.0.1"], disrupted: false) == .lost)
    }

    @Test func thePathsLinkDownWithAnotherUpMeansRenewingOnIt() {
        let down = NetworkChange(linksDown: [LinkState(interfaceIndex: 2, interfaceName: "wlan0", flags: 0)])
        #expect(judge.verdict(change: down, usable: [loopback, ethernet], pair: pair(on: "10.77.0.1"), gatheredAddresses: ["10.77.0.1", "10.78.0.1"], disrupted: false) == .renew)
    }

    @Test func aNewLeaseOnTheSameLinkMeansRenewing() {
        let renumbered = InterfaceAddress(interfaceIndex: 2, interfaceName: "wlan0", address: .v4(10, 77, 0, 11), prefixLength: 24)
        let change = NetworkChange(addedAddresses: [renumbered], removedAddresses: [wifi])
        #expect(judge.verdict(change: change, usable: [renumbered], pair: pair(on: "10.77.0.1"), gatheredAddresses: ["10.77.0.1"], disrupted: false) == .renew)
    }

    @Test func aChangeElsewhereLeavesAWorkingPathAlone() {
        let otherDown = NetworkChange(linksDown: [LinkState(interfaceIndex: 3, interfaceName: "eth0", flags: 0)])
        #expect(judge.verdict(change: otherDown, usable: [wifi], pair: pair(on: "10.77.0.1"), gatheredAddresses: ["10.77.0.1", "10.78.0.1"], disrupted: false) == .ignore)
        // A link back while media flows again on the old path: nothing to renew.
        let back = NetworkChange(linksUp: [LinkState(interfaceIndex: 2, interfaceName: "wlan0", flags: 0)])
        #expect(judge.verdict(change: back, usable: [wifi], pair: pair(on: "10.77.0.1"), gatheredAddresses: ["10.77.0.1"], disrupted: false) == .ignore)
    }

    @Test func aNetworkBackWhileDisruptedMeansRenewingOnIt() {
        let back = NetworkChange(linksUp: [LinkState(interfaceIndex: 2, interfaceName: "wlan0", flags: 0)])
        #expect(judge.verdict(change: back, usable: [wifi], pair: pair(on: "10.77.0.1"), gatheredAddresses: ["10.77.0.1"], disrupted: true) == .renew)
        let added = NetworkChange(addedAddresses: [ethernet])
        #expect(judge.verdict(change: added, usable: [ethernet], pair: pair(on: "10.77.0.1"), gatheredAddresses: ["10.77.0.1"], disrupted: true) == .renew)
    }

    @Test func aRelayedPathFollowsTheInterfaceThatReachesTheServer() {
        let down = NetworkChange(linksDown: [LinkState(interfaceIndex: 3, interfaceName: "eth0", flags: 0)])
        let relay = pair(on: "10.77.0.1", type: "relay")
        #expect(judge.verdict(change: down, usable: [wifi], pair: relay, gatheredAddresses: ["10.77.0.1", "10.78.0.1"], disrupted: false) == .ignore)
        #expect(judge.verdict(change: down, usable: [ethernet], pair: relay, gatheredAddresses: ["10.77.0.1", "10.78.0.1"], disrupted: false) == .renew)
        #expect(judge.verdict(change: down, usable: [], pair: relay, gatheredAddresses: ["10.77.0.1", "10.78.0.1"], disrupted: false) == .lost)
    }

    @Test func beforeAnyPairTheGatheredAddressesCount() {
        let removed = NetworkChange(removedAddresses: [wifi])
        #expect(judge.verdict(change: removed, usable: [ethernet], pair: nil, gatheredAddresses: ["10.77.0.1"], disrupted: false) == .renew)
        #expect(judge.verdict(change: removed, usable: [ethernet], pair: nil, gatheredAddresses: ["10.77.0.1", "10.78.0.1"], disrupted: false) == .ignore)
    }

    @Test func aCallPinnedToLoopbackIgnoresTheMachinesInterfaces() {
        let pinned = NetworkPathJudge(pinnedAddresses: ["127.0.0.1"])
        let down = NetworkChange(linksDown: [LinkState(interfaceIndex: 2, interfaceName: "wlan0", flags: 0)])
        #expect(pinned.verdict(change: down, usable: [loopback], pair: pair(on: "127.0.0.1"), gatheredAddresses: ["127.0.0.1"], disrupted: false) == .ignore)
    }
}
