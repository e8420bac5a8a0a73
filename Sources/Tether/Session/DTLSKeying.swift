import TetherCore
import TetherDTLS

/// A call's DTLS-SRTP association: the connection, its role and the peer's fingerprint, the keys
/// once exported (its timers are the session's deadlines). One per call: ICE restarts keep it (RFC 8842).
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
