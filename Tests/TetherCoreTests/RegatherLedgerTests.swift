import Testing

@testable import TetherCore

/// One re-gathering shared by every caller that needs fresh candidates meanwhile, and its stream
/// released only when the last claimant gives it up.
@Suite("Regather ledger")
struct RegatherLedgerTests {
    @Test func callersDuringAGatheringShareItAndItsStreamIsReleasedByTheLastToGiveItUp() {
        var ledger = RegatherLedger()
        let ours = ledger.claim()
        let peers = ledger.claim()  // the peer's restart offer, while our attempt gathers
        #expect(ours.start && !peers.start)
        #expect(ours.job == peers.job && ledger.running == ours.job)
        ledger.finished(job: ours.job, token: 7)
        ledger.finished(job: peers.job, token: 7)  // each claimant reports it; claims move once
        #expect(ledger.running == nil)
        let released1 = ledger.abandon(7)
        #expect(!released1)  // the other claimant still holds the stream
        let released2 = ledger.abandon(7)
        #expect(released2)  // the last one: release it
        // The next caller starts a new job.
        let next = ledger.claim()
        #expect(next.start && next.job != ours.job)
    }

    @Test func aStreamOneClaimantUsedIsNeverReleasedByTheOthers() {
        var ledger = RegatherLedger()
        let a = ledger.claim()
        _ = ledger.claim()
        _ = ledger.claim()
        ledger.finished(job: a.job, token: 3)
        // Three claimants: one put the candidates in a description, two give up.
        let released3 = ledger.abandon(3)
        #expect(!released3)
        let released4 = ledger.abandon(3)
        #expect(!released4)
        // A job that finished with another token holds nothing of token 3.
        let b = ledger.claim()
        ledger.finished(job: b.job, token: 4)
        let released5 = ledger.abandon(4)
        #expect(released5)
    }
}
