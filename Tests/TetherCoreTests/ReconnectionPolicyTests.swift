import Testing
import TetherCore

@Suite("ReconnectionPolicy")
struct ReconnectionPolicyTests {
    @Test func defaultsMatchTheDesignAndAreValid() {
        let policy = ReconnectionPolicy()
        #expect(policy.validate() == nil)
        #expect(policy.disruptionThresholdSeconds == 1.0)
        #expect(policy.renewalDelaySeconds == 0.25)
        #expect(policy.giveUpSeconds == 50)
        #expect(policy.renewalAttemptTimeoutSeconds == 6)
        #expect(policy.onHoldDisruptionThresholdSeconds == 12)
        #expect(policy.outboundStallSeconds == 4)
    }

    @Test func retryDelayStartsAtOneSecondDoublesAndCapsAtEight() {
        let policy = ReconnectionPolicy()
        #expect((1...7).map { policy.retryDelaySeconds(afterAttempt: $0) } == [1, 2, 4, 8, 8, 8, 8])
        let flat = ReconnectionPolicy(firstRetryDelaySeconds: 3, retryDelayMultiplier: 1, maximumRetryDelaySeconds: 5)
        #expect(flat.retryDelaySeconds(afterAttempt: 4) == 3)
    }

    @Test func zeroRenewalDelayIsAllowed() {
        #expect(ReconnectionPolicy(renewalDelaySeconds: 0).validate() == nil)
    }

    @Test(arguments: [
        (ReconnectionPolicy(disruptionThresholdSeconds: 0), "disruptionThresholdSeconds must be positive"),
        (ReconnectionPolicy(giveUpSeconds: -1), "giveUpSeconds must be between 0 and 86400.0 seconds (got -1.0)"),
        (ReconnectionPolicy(renewalAttemptTimeoutSeconds: .nan), "renewalAttemptTimeoutSeconds must be between 0 and 86400.0 seconds (got nan)"),
        (ReconnectionPolicy(outboundStallSeconds: .infinity), "outboundStallSeconds must be between 0 and 86400.0 seconds (got inf)"),
        (ReconnectionPolicy(retryDelayMultiplier: 0.5), "retryDelayMultiplier must be at least 1 (got 0.5)"),
        (ReconnectionPolicy(firstRetryDelaySeconds: 10), "firstRetryDelaySeconds (10.0) must not exceed maximumRetryDelaySeconds (8.0)"),
        (ReconnectionPolicy(disruptionThresholdSeconds: 50), "disruptionThresholdSeconds (50.0) must be shorter than giveUpSeconds (50.0)"),
        (ReconnectionPolicy(giveUpSeconds: 10), "onHoldDisruptionThresholdSeconds (12.0) must be shorter than giveUpSeconds (10.0)"),
        (ReconnectionPolicy(outboundStallReports: 1), "outboundStallReports must be at least 2 (got 1)"),
    ])
    func invalidPoliciesAreDescribed(policy: ReconnectionPolicy, problem: String) {
        #expect(policy.validate() == problem)
    }
}
