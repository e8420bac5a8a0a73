import TetherCore
import TetherDTLS

/// A call's DTLS-SRTP association: the connection, its role and the peer's fingerprint, the keys
/// once exported, and the retransmission timer. One per call: ICE restarts keep it (RFC 8842).
/// Owned and used by the `CallSession` actor only.
final class DTLSKeying {
    let connection: DTLSConnection
    let role: DTLSRole
    let remoteFingerprint: DTLSFingerprint
    let localFingerprint: DTLSFingerprint
    /// The client has sent its first flight.
    var started = false
    /// The exported keys, once the handshake finished.
    var keys: DTLSSRTPKeys?
    /// Fires when a flight is due again.
    var retransmission: Task<Void, Never>?
    /// Ends the call if this association's handshake has not finished within the set-up time;
    /// cancelled when its keys arrive or the association is replaced.
    var handshakeDeadline: Task<Void, Never>?

    /// Stops both timers (the association is replaced or the call ends).
    func cancelTimers() {
        retransmission?.cancel()
        retransmission = nil
        handshakeDeadline?.cancel()
        handshakeDeadline = nil
    }

    init(role: DTLSRole, remoteFingerprint: DTLSFingerprint, certificate: DTLSCertificate) throws(DTLSError) {
        connection = try DTLSConnection(
            role: role, certificate: certificate, remoteFingerprint: remoteFingerprint)
        self.role = role
        self.remoteFingerprint = remoteFingerprint
        localFingerprint = certificate.fingerprint
    }

    /// What our descriptions say while this association holds: its fingerprint and role.
    var localParameters: LocalDTLSParameters { LocalDTLSParameters(fingerprint: localFingerprint, currentRole: role) }
}
