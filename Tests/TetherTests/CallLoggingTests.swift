import Foundation
import InMemoryLogging
import Logging
import Testing
import TetherRealtime
import TetherTestSupport

@testable import Tether

/// The embedder's logger: every message of the call reaches it with the call id, at the level the
/// embedder set, and without key material.
@Suite("Call logging", .keepsLogPerTest, .serialized)
struct CallLoggingTests {
    func logger(_ handler: InMemoryLogHandler, level: Logger.Level) -> Logger {
        var logger = Logger(label: "embedder") { _ in handler }
        logger.logLevel = level
        return logger
    }

    /// A (DTLS-SRTP, logger at trace, call id given) calls B (logger at notice, no id: a random
    /// UUID). A's log has the call's progress with `call-id` on every entry, and nothing that
    /// looks like a description; B's has only notice and above: its hang-up, none of the progress.
    @Test func theEmbeddersLoggerGetsEveryMessageWithTheCallIdAtItsOwnLevel() async throws {
        let logA = InMemoryLogHandler()
        let logB = InMemoryLogHandler()
        var ca = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        ca.keying = .dtls
        ca.callId = "embedder-42"
        ca.logger = logger(logA, level: .trace)
        var cb = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        cb.logger = logger(logB, level: .notice)
        let a = try CallSession(configuration: ca)
        let b = try CallSession(configuration: cb)
        #expect(a.callId == "embedder-42")
        #expect(b.callId.wholeMatch(of: /[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/) != nil, "\(b.callId)")
        let ra = EventRecorder(a)
        let rb = EventRecorder(b)
        try await connect(a, b)
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        #expect(await rb.waitFor("established", timeoutSeconds: 10) != nil)
        await a.hangUp()
        await ra.finished()
        await rb.finished()

        let entriesA = logA.entries
        let entriesB = logB.entries
        for e in entriesA { #expect(e.metadata["call-id"] == "embedder-42", "\(e)") }
        for e in entriesB { #expect(e.metadata["call-id"] == .string(b.callId), "\(e)") }
        func has(_ entries: [InMemoryLogHandler.Entry], _ level: Logger.Level, _ message: String) -> Bool {
            entries.contains { $0.level == level && $0.message.description == message }
        }
        #expect(has(entriesA, .debug, "sent offer"))
        #expect(has(entriesA, .info, "media negotiated"))
        #expect(entriesA.first { $0.message.description == "media negotiated" }?.metadata["srtp-suite"] != nil)
        #expect(has(entriesA, .info, "call established"))
        #expect(has(entriesA, .info, "media: first packet from the peer"))
        #expect(has(entriesA, .notice, "call ended: local hang-up"))
        #expect(has(entriesB, .notice, "call ended: remote hang-up"))
        #expect(entriesB.allSatisfy { $0.level >= .notice }, "\(entriesB.map(\.message))")
        // No description in the log: SDES descriptions carry keys (the process test checks keys).
        for e in entriesA + entriesB {
            let text = e.message.description + e.metadata.values.map { "\($0)" }.joined()
            #expect(!text.contains("a=") && !text.contains("inline:"), "\(e)")
        }
    }

    /// After the call: the user's feedback beside the automatic findings, and the call's last log
    /// messages attached to the report at info even though the embedder logs only errors.
    @Test func feedbackAndTheLastLogMessagesGoInTheReport() async throws {
        let quiet = InMemoryLogHandler()
        var ca = CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0)
        ca.logger = logger(quiet, level: .error)
        let a = try CallSession(configuration: ca)
        let b = try CallSession(configuration: CallConfiguration(localAddresses: ["127.0.0.1"], statisticsIntervalSeconds: 0))
        let ra = EventRecorder(a)
        try await connect(a, b)
        #expect(await ra.waitFor("established", timeoutSeconds: 10) != nil)
        await a.hangUp()
        await ra.finished()

        #expect(throws: TetherError.self) { try a.submitFeedback(rating: 0) }
        #expect(throws: TetherError.self) { try a.submitFeedback(rating: 3, comment: String(repeating: "x", count: 2001)) }
        try a.submitFeedback(rating: 2, issues: [.echo, .choppyAudio], comment: "I heard myself")
        let report = a.report(logRecords: 5)
        #expect(report.feedback?.rating == 2 && report.feedback?.issues == [.choppyAudio, .echo] && report.feedback?.comment == "I heard myself")
        #expect(report.findings.isEmpty, "\(report.findings)")
        let log = try #require(report.log)
        #expect(log.count == 5)
        #expect(log.last?.message == "user feedback" && log.contains { $0.message == "call ended: local hang-up" })
        #expect(log.allSatisfy { $0.metadata["call-id"] == nil && $0.level != "debug" })
        #expect(zip(log, log.dropFirst()).allSatisfy { $0.atSeconds <= $1.atSeconds })
        #expect(a.report().log == nil)
        #expect(quiet.entries.isEmpty, "the embedder's handler at error got \(quiet.entries.map(\.message))")
        await b.hangUp()
    }

    @Test func anEmptyCallIdIsRefused() {
        var c = CallConfiguration(localAddresses: ["127.0.0.1"])
        c.callId = ""
        #expect(throws: TetherError.self) { try CallSession(configuration: c) }
    }

    /// The realtime log: records come out in order; a full ring drops and counts, never blocks.
    @Test func realtimeLogKeepsOrderAndCountsWhatAFullRingDrops() {
        let log = RealtimeLog(capacity: 4)
        for i in 0..<6 { log.post(RealtimeLogRecord(event: 7, nanoseconds: UInt64(i), a: Int64(i))) }
        var seen: [Int64] = []
        let lost = log.drain { seen.append($0.a) }
        #expect(seen == [0, 1, 2, 3])
        #expect(lost == 2)
        log.post(RealtimeLogRecord(event: 7, nanoseconds: 9, a: 9))
        seen = []
        #expect(log.drain { seen.append($0.a) } == 0)
        #expect(seen == [9])
    }
}
