import TetherCore
import TetherRTP

/// The SRTP contexts of one keying, both ways: built here and nowhere else, whichever way the
/// keys came (SDES in a first answer or a re-key, or a DTLS handshake), and handed from the
/// session to the media thread together.
final class SRTPContextPair {
    let outbound: SRTPContext
    let inbound: SRTPContext

    init(outbound: SRTPContext, inbound: SRTPContext) {
        self.outbound = outbound
        self.inbound = inbound
    }

    /// Contexts that protect with our key and unprotect with the peer's; a failure is
    /// ``TetherError/Code/srtpSetupFailed`` (`isTerminal` for a running call that cannot go on
    /// without them).
    convenience init(local: SRTPKeyMaterial, remote: SRTPKeyMaterial, isTerminal: Bool = false) throws(TetherError) {
        do throws(SRTPError) {
            self.init(
                outbound: try SRTPContext(direction: .outbound, key: local),
                inbound: try SRTPContext(direction: .inbound, key: remote))
        } catch {
            throw .srtpSetupFailed(error, isTerminal: isTerminal)
        }
    }

    /// The pair an SDES negotiation keys: ours and the peer's key for `suite`, from the
    /// `a=crypto` lines' key and salt.
    static func sdes(suite: SRTPSuite, local: SecretBytes, remote: SecretBytes) throws(TetherError) -> SRTPContextPair {
        let keys: (local: SRTPKeyMaterial, remote: SRTPKeyMaterial)
        do throws(SRTPError) {
            keys = (try SRTPKeyMaterial(suite: suite, keyAndSalt: local), try SRTPKeyMaterial(suite: suite, keyAndSalt: remote))
        } catch {
            throw .srtpSetupFailed(error)
        }
        return try SRTPContextPair(local: keys.local, remote: keys.remote)
    }
}

extension TetherError {
    /// Keys or contexts could not be made (SRTP, SDES or DTLS): not retryable unless the call is
    /// over (a re-key of a running call that failed ends it; calling again can work).
    static func srtpSetupFailed(_ error: any Error & Sendable, isTerminal: Bool = false) -> TetherError {
        TetherError(code: .srtpSetupFailed, isTerminal: isTerminal, canRetry: isTerminal, message: "\(error)", cause: error)
    }
}
