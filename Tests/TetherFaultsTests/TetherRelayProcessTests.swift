import Foundation
import Testing

@testable import TetherFaults

/// The `tether-relay` executable built next to the test bundle, if any.
let relayExecutable: URL? = {
    guard let directory = Bundle.main.executableURL?.deletingLastPathComponent() else { return nil }
    for candidate in [directory, directory.deletingLastPathComponent()] {
        let url = candidate.appendingPathComponent("tether-relay")
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    return nil
}()

/// Reads one newline-terminated line from a pipe (blocking).
func readLine(from handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while true {
        let chunk = handle.readData(ofLength: 1)
        guard let byte = chunk.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct TetherRelayProcessTests {
    @Test(.enabled(if: relayExecutable != nil, "tether-relay not built next to the tests"))
    func relayProcessForwardsAndObeysJSONLineCommands() throws {
        let process = Process()
        process.executableURL = relayExecutable
        process.arguments = ["--seed", "5"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        struct Ready: Decodable { var portA: UInt16; var portB: UInt16; var ready: Bool }
        let readyLine = try #require(readLine(from: output.fileHandleForReading))
        let ready = try JSONDecoder().decode(Ready.self, from: Data(readyLine.utf8))
        #expect(ready.ready)

        let a = try TestPeer()
        let b = try TestPeer()
        func command(_ json: String) throws -> UDPRelayControlReply {
            input.fileHandleForWriting.write(Data((json + "\n").utf8))
            guard let line = readLine(from: output.fileHandleForReading) else { throw UDPRelayError.invalidCommand("no reply to \(json)") }
            return try JSONDecoder().decode(UDPRelayControlReply.self, from: Data(line.utf8))
        }
        #expect(try command(#"{"peerA":"127.0.0.1:\#(a.port)","peerB":"127.0.0.1:\#(b.port)"}"#).ok)
        a.send(sequence: 7, toPort: ready.portA)
        #expect(b.receive().map { TestPeer.sequence(of: $0.bytes) } == 7)

        #expect(try command(#"{"blackHole":true}"#).ok)
        a.send(sequence: 8, toPort: ready.portA)
        #expect(waitUntil { (try? command(#"{"statistics":true}"#).statistics?.aToB.droppedByBlackHole) == 1 })
        #expect(try command("not json").ok == false)
        #expect(try command(#"{"stop":true}"#).stopped == true)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }
}
