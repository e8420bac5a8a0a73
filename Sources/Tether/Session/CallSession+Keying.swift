import CoreMetrics
import Foundation
import Logging
import Synchronization
import TetherAudio
import TetherCodec
import TetherCore
import TetherDTLS
import TetherICE
import TetherNetworkMonitor
import TetherRTP
import TetherRealtime

/// Keying: SDES keys and DTLS-SRTP associations (handshake, retransmission and handshake
/// deadlines as session timers), and re-keying when a renegotiation changes them.
extension CallSession {
    /// A renegotiation keeps SRTP as it is when the SDES keys, or the DTLS association (roles and
    /// the peer's certificate: an ICE restart), are unchanged. Otherwise the call is re-keyed
    /// (RFC 8842 §5.2: a new fingerprint means a new association, as when a call is handed to
    /// another device): new SDES keys take effect at once; a new DTLS handshake runs while media
    /// keeps the old keys, and its keys replace them when it finishes.
    func rekeyIfNeeded(current: NegotiatedAudio, new: NegotiatedAudio) throws(TetherError) {
        switch current.keying.change(to: new.keying) {
        case .keep:
            return
        case let .sdes(newSuite, newLocal, newRemote):
            guard let suite = SRTPSuite(rawValue: newSuite.name) else {
                throw TetherError(
                    code: .incompatibleSessionDescription, isTerminal: false, canRetry: false,
                    message: "renegotiated SRTP suite \(newSuite.name) has no local key")
            }
            media?.replaceKeys(try SRTPContextPair.sdes(suite: suite, local: newLocal.keyAndSalt, remote: newRemote.keyAndSalt))
            disarmDTLSTimers()
            dtls = nil
            srtpSuiteInUse = suite.rawValue
            publishTelemetry()
        case let .newDTLSAssociation(newRole, newFingerprint):
            disarmDTLSTimers()
            try startDTLS(role: newRole, remoteFingerprint: newFingerprint)
            startDTLSIfClient()
        }
    }

    /// A new DTLS association in `role` with the peer whose certificate has `remoteFingerprint`,
    /// bounded by the set-up time; its keys start the media loop, or replace the running one's.
    func startDTLS(role: DTLSRole, remoteFingerprint: DTLSFingerprint) throws(TetherError) {
        let keying: DTLSKeying
        do throws(DTLSError) {
            keying = try DTLSKeying(
                role: role, remoteFingerprint: remoteFingerprint, certificate: dtlsCertificate())
        } catch {
            throw .srtpSetupFailed(error)
        }
        dtls = keying
        publishTelemetry()
        // The deadline belongs to this association: a new one re-arms it, its keys disarm it.
        arm(.dtlsHandshake, afterSeconds: configuration.connectTimeoutSeconds)
    }

    func makeLocalCrypto(suites: [SRTPSuite]) throws(TetherError) -> [CryptoAttribute] {
        var out: [CryptoAttribute] = []
        for (i, suite) in suites.enumerated() {
            let tag = UInt32(i + 1)
            let key = localKeys[tag] ?? SRTPKeyMaterial.generate(for: suite)
            localKeys[tag] = key
            // Straight into wiped storage: no plain array of the key is left behind.
            let bytes = key.withUnsafeBytes { SecretBytes($0) }
            do throws(SDPError) {
                out.append(try CryptoAttribute(tag: tag, suite: SDPCryptoSuite(name: suite.rawValue), keyAndSalt: bytes))
            } catch {
                throw .srtpSetupFailed(error)
            }
        }
        return out
    }

    /// The configured DTLS certificate, else the process's.
    func dtlsCertificate() throws(DTLSError) -> DTLSCertificate {
        if let certificate = configuration.dtlsCertificate { return certificate }
        return try DTLSCertificate.shared()
    }

    /// Our DTLS side for a first negotiation: our certificate's fingerprint.
    func localDTLS() throws(TetherError) -> LocalDTLSParameters {
        do throws(DTLSError) {
            return LocalDTLSParameters(fingerprint: try dtlsCertificate().fingerprint)
        } catch {
            throw .srtpSetupFailed(error)
        }
    }

    /// Sends what a DTLS step produced, takes its keys, ends the call on a failure, and sets the
    /// retransmission timer.
    func handleDTLS(_ output: DTLSConnection.Output) {
        guard let dtls, let transport else { return }
        for datagram in output.datagrams { transport.sendControl(datagram) }
        if let keys = output.keys { dtlsKeysReady(keys) }
        if case let .failed(error) = dtls.connection.state {
            deadlines.disarm(.dtlsRetransmission)
            guard dtls.keys == nil || error != .closedByPeer else {
                // The peer closed the association (a browser's pc.close()): a hang-up.
                if !state.isClosing { remoteHangUpByDTLS() }
                return
            }
            guard dtls.keys == nil else { return }  // after the handshake: liveness judges the path
            let code: TetherError.Code = error == .fingerprintMismatch ? .dtlsFingerprintMismatch : .dtlsHandshakeFailed
            end(dueTo: TetherError(
                code: code, isTerminal: true, canRetry: code == .dtlsHandshakeFailed, message: "\(error)", cause: error))
            return
        }
        if let delay = dtls.connection.retransmitDelaySeconds {
            arm(.dtlsRetransmission, afterSeconds: delay + 0.001)
        } else {
            deadlines.disarm(.dtlsRetransmission)
        }
    }

    /// DTLS handshakes this call completed: one per association (ICE restarts add none; a peer
    /// whose certificate changed, as when the call moves to another device, adds one).
    public var dtlsHandshakesCompleted: Int { dtlsHandshakes }

    /// Whether the current DTLS association's handshake deadline is still armed (tests: a
    /// finished handshake disarms it, so no stale timer outlives its association).
    var dtlsHandshakeDeadlineArmed: Bool { deadlines.isArmed(.dtlsHandshake) }

    /// The association is replaced or the call ends: its timers go with it.
    func disarmDTLSTimers() {
        deadlines.disarm(.dtlsRetransmission)
        deadlines.disarm(.dtlsHandshake)
    }

    /// The client opens the handshake once ICE has a pair to send it on.
    func startDTLSIfClient() {
        guard let dtls, !dtls.started, dtls.role == .client, !state.isEnded else { return }
        dtls.started = true
        handleDTLS(dtls.connection.start())
    }

    func dtlsKeysReady(_ keys: DTLSSRTPKeys) {
        guard let dtls, dtls.keys == nil, let negotiated, !state.isEnded else { return }
        dtls.keys = keys
        deadlines.disarm(.dtlsHandshake)
        dtlsHandshakes += 1
        if let media {
            // A new association of a running call (the peer's certificate changed): its keys
            // replace the old ones from the media thread's next pass.
            do throws(TetherError) {
                media.replaceKeys(try SRTPContextPair(local: keys.local, remote: keys.remote, isTerminal: true))
                srtpSuiteInUse = keys.suite.rawValue
                publishTelemetry()
            } catch {
                end(dueTo: error)
            }
            return
        }
        do throws(TetherError) {
            try installMedia(negotiated, keys: try SRTPContextPair(local: keys.local, remote: keys.remote))
            if startRequested { try startMedia() }
        } catch {
            end(dueTo: error)
        }
    }

    func remoteHangUpByDTLS() {
        transition(to: .ending)
        finish(CallTerminationReason(cause: .remoteHangup), sendBye: false)
    }

    func dtlsHandshakeTimedOut(after seconds: Double) {
        guard let dtls, dtls.keys == nil, !state.isClosing else { return }
        let error = DTLSError.handshakeTimedOut(seconds: seconds)
        end(dueTo: TetherError(code: .dtlsHandshakeFailed, isTerminal: true, canRetry: true, message: "\(error)", cause: error))
    }
}
