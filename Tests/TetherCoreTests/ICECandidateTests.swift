import Testing
@testable import TetherCore

@Suite("ICECandidate parsing and serialization")
struct ICECandidateTests {
    @Test func parsesHostCandidateWithOrWithoutPrefix() throws {
        let expected = ICECandidate(
            foundation: "1", componentID: 1, transport: .udp, priority: 2_130_706_431,
            address: "192.168.1.20", port: 10_000, type: .host)
        #expect(try ICECandidate.parse("1 1 UDP 2130706431 192.168.1.20 10000 typ host") == expected)
        #expect(try ICECandidate.parse("candidate:1 1 UDP 2130706431 192.168.1.20 10000 typ host") == expected)
        #expect(try ICECandidate.parse("a=candidate:1 1 udp 2130706431 192.168.1.20 10000 typ host\r\n") == expected)
    }

    @Test func parsesServerReflexiveCandidateWithRelatedAddress() throws {
        let candidate = try ICECandidate.parse(
            "candidate:1510613869 1 udp 1686052607 198.51.100.9 56143 typ srflx raddr 192.168.1.34 rport 56143 generation 0 network-id 1")
        #expect(candidate.foundation == "1510613869")
        #expect(candidate.priority == 1_686_052_607)
        #expect(candidate.type == .srflx)
        #expect(candidate.relatedAddress == "192.168.1.34")
        #expect(candidate.relatedPort == 56_143)
        #expect(candidate.extensions == [
            .init(name: "generation", value: "0"), .init(name: "network-id", value: "1"),
        ])
        #expect(candidate.generation == 0)
    }

    @Test func keepsExtensionAttributesInOrder() throws {
        let candidate = try ICECandidate.parse(
            "candidate:4233069003 1 udp 2122262783 2001:db8::5 57522 typ host generation 2 ufrag EsAw network-id 2 network-cost 10")
        #expect(candidate.extensions.map(\.name) == ["generation", "ufrag", "network-id", "network-cost"])
        #expect(candidate.extensionValue("ufrag") == "EsAw")
        #expect(candidate.extensionValue("network-cost") == "10")
        #expect(candidate.generation == 2)
        #expect(candidate.addressKind == .ipv6)
    }

    @Test func relayCandidateAndAddressKinds() throws {
        let relay = try ICECandidate.parse("candidate:7 1 UDP 41885439 203.0.113.99 3478 typ relay raddr 198.51.100.9 rport 50000")
        #expect(relay.type == .relay)
        #expect(relay.addressKind == .ipv4)
        let mdns = try ICECandidate.parse(
            "candidate:842163049 1 udp 2122194687 3f2a9c41-5b1e-4d0c-8f2e-0a1b2c3d4e5f.local 59001 typ host")
        #expect(mdns.address == "3f2a9c41-5b1e-4d0c-8f2e-0a1b2c3d4e5f.local")
        #expect(mdns.addressKind == .hostname)
        let prflx = try ICECandidate.parse("candidate:9 1 UDP 1845501695 10.1.2.3 4000 typ prflx")
        #expect(prflx.type == .prflx)
        #expect(try ICECandidate.parse("candidate:9 1 UDP 1 10.1.2.3 4000 typ weird").type == .other("weird"))
    }

    @Test func tcpCandidateIsKeptButMarkedNonUDP() throws {
        let tcp = try ICECandidate.parse("candidate:2999745851 1 tcp 1518280447 192.168.1.34 9 typ host tcptype active")
        #expect(tcp.transport == .other("tcp"))
        #expect(!tcp.transport.isUDP)
        #expect(tcp.extensionValue("tcptype") == "active")
        #expect(tcp.serialized() == "2999745851 1 tcp 1518280447 192.168.1.34 9 typ host tcptype active")
    }

    @Test func serializesBackToTheAttributeValue() throws {
        let text = "2 1 UDP 1694498815 203.0.113.50 10000 typ srflx raddr 192.168.1.20 rport 10000 generation 0"
        let candidate = try ICECandidate.parse(text)
        #expect(candidate.serialized() == text)
        #expect(candidate.description == "candidate:" + text)
        #expect(try ICECandidate.parse(candidate.description) == candidate)
    }

    @Test(arguments: [
        ("candidate:1 1 UDP 2130706431 192.168.1.20", "expected at least 8 fields"),
        ("candidate:1 1 UDP 2130706431 192.168.1.20 10000 host x", "expected \"typ\""),
        ("candidate:1 1 UDP 2130706431 192.168.1.20 99999 typ host", "port 99999"),
        ("candidate:1 0 UDP 2130706431 192.168.1.20 10000 typ host", "component id 0"),
        ("candidate:1 1 UDP 99999999999 192.168.1.20 10000 typ host", "priority 99999999999"),
        ("candidate:1 1 UDP 2130706431 192.168.1.20 10000 typ host generation", "generation has no value"),
        ("candidate:f#o 1 UDP 2130706431 192.168.1.20 10000 typ host", "foundation f#o"),
        ("candidate:1 1 UDP 2130706431 192.168.1.20 10000 typ srflx raddr 10.0.0.1 rport x", "rport x"),
    ])
    func malformedCandidatesAreRejectedWithReason(text: String, reasonFragment: String) {
        let error = #expect(throws: SDPError.self) { try ICECandidate.parse(text) }
        guard case let .invalidCandidate(line, reason) = error else {
            Issue.record("expected invalidCandidate, got \(String(describing: error))")
            return
        }
        #expect(line == text)
        #expect(reason.contains(reasonFragment))
    }
}
