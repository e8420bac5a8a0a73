/// Who shares a re-gathering of ICE candidates, and who still holds the stream it made (sans-IO).
///
/// One re-gathering runs at a time: a caller that needs fresh candidates while one runs (the
/// peer's restart offer arriving while our own attempt gathers) joins it. Each caller holds a
/// claim; when the job finishes, its claims move onto the stream it made (the transport's
/// regather token). A stream whose candidates went nowhere is given up by each claimant, and
/// released only when the last one gives it up.
public struct RegatherLedger: Sendable, Equatable {
    /// The job gathering now, if any.
    public private(set) var running: Int?
    private var serial = 0
    /// Claims on jobs that have not finished, by job.
    private var waiting: [Int: Int] = [:]
    /// Claims on finished jobs' streams, by regather token.
    private var holding: [UInt64: Int] = [:]

    public init() {}

    /// A caller needs fresh candidates: it joins the job running, or starts a new one (`start`:
    /// the caller starts the gathering for `job`).
    public mutating func claim() -> (job: Int, start: Bool) {
        let start = running == nil
        if start {
            serial += 1
            running = serial
        }
        let job = running ?? serial
        waiting[job, default: 0] += 1
        return (job, start)
    }

    /// Job `job` made the stream `token`: every claim on the job now holds the stream. Each
    /// claimant reports it; the first one moves the claims.
    public mutating func finished(job: Int, token: UInt64) {
        if running == job { running = nil }
        if let claims = waiting.removeValue(forKey: job) { holding[token, default: 0] += claims }
    }

    /// A claimant gives up the stream `token` (its candidates went nowhere). Returns whether no
    /// one holds it any more: then release it.
    public mutating func abandon(_ token: UInt64) -> Bool {
        let claims = holding[token] ?? 1
        guard claims <= 1 else {
            holding[token] = claims - 1
            return false
        }
        holding[token] = nil
        return true
    }
}
