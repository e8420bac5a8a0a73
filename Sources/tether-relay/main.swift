// tether-relay: a UDPImpairmentRelay as a process, for harnesses that connect two `tether call`
// processes through it.
//
//   tether-relay [--bind 127.0.0.1] [--port-a N] [--port-b N] [--seed N]
//
// Prints one JSON line {"address":…,"portA":…,"portB":…,"ready":true} on stdout, then reads one
// UDPRelayControlCommand JSON object per line on stdin and answers each with one
// UDPRelayControlReply line. Exits on {"stop":true} or end of input.
import Foundation
import TetherFaults

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("tether-relay: \(message)\n".utf8))
    exit(2)
}

/// Writes one line to stdout unbuffered, so a harness reading the pipe sees it at once.
func writeLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

var bind = "127.0.0.1"
var portA: UInt16 = 0
var portB: UInt16 = 0
var seed: UInt64 = 1
var arguments = CommandLine.arguments.dropFirst()
while let option = arguments.popFirst() {
    guard let value = arguments.popFirst() else { fail("missing value for \(option)") }
    switch option {
    case "--bind": bind = value
    case "--port-a": portA = UInt16(value) ?? { fail("bad --port-a \(value)") }()
    case "--port-b": portB = UInt16(value) ?? { fail("bad --port-b \(value)") }()
    case "--seed": seed = UInt64(value) ?? { fail("bad --seed \(value)") }()
    default: fail("unknown option \(option)")
    }
}

let relay: UDPImpairmentRelay
do {
    relay = try UDPImpairmentRelay(bindAddress: bind, portA: portA, portB: portB, seed: seed)
} catch {
    fail("\(error)")
}
writeLine(#"{"address":"\#(bind)","portA":\#(relay.portA),"portB":\#(relay.portB),"ready":true}"#)

while let line = readLine() {
    if line.allSatisfy(\.isWhitespace) { continue }
    let reply: UDPRelayControlReply
    do {
        reply = try UDPRelayControlCommand(jsonLine: line).apply(to: relay)
    } catch {
        reply = UDPRelayControlReply(ok: false, error: error.description)
    }
    writeLine(reply.jsonLine)
    if reply.stopped == true { exit(0) }
}
relay.stop()
