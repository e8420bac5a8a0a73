/// The `a=setup` attribute (RFC 4145, RFC 8842): which side of a DTLS association opens it.
public enum DTLSSetup: String, Sendable, Equatable, CaseIterable {
    /// Either role (offers only).
    case actpass
    /// This side is the DTLS client: it sends the ClientHello.
    case active
    /// This side is the DTLS server.
    case passive
    /// No connection yet (RFC 4145); Tether refuses it in DTLS-SRTP.
    case holdconn
}

/// A side's role in a DTLS association.
public enum DTLSRole: String, Sendable, Equatable {
    /// Sends the ClientHello (`a=setup:active`).
    case client
    /// Answers it (`a=setup:passive`).
    case server

    /// The `a=setup` value that announces this role.
    public var setup: DTLSSetup { self == .client ? .active : .passive }
    /// The peer's role.
    public var opposite: DTLSRole { self == .client ? .server : .client }
}

/// Decisions about DTLS roles and associations across offers and answers (RFC 5763 §5,
/// RFC 8842 §5). Pure functions.
///
/// | event | decision |
/// |---|---|
/// | we offer (first or later) | `a=setup:actpass` |
/// | we answer `actpass`, no association yet | `active`: we are the client (as browsers do: the offerer learns our role from the answer, and our ClientHello may reach it before the answer does) |
/// | we answer `actpass`, an association exists | the role we hold, so the association survives (an ICE restart) |
/// | we answer `active` / `passive` | the other role |
/// | the answer says `active` / `passive` | we take the other role |
/// | an answer says `actpass` or `holdconn`, or an offer `holdconn` | refused (`answerDoesNotMatchOffer` / `unsupportedDTLSSetup`) |
///
/// An association is kept when the new negotiation has the same roles and the peer's fingerprint
/// is unchanged; anything else needs a new handshake (RFC 8842 §5.2).
public enum DTLSNegotiation {
    /// Our role when answering an offer whose setup is `offered`, keeping `current` when possible.
    public static func answererRole(offered: DTLSSetup, current: DTLSRole?) throws(SDPError) -> DTLSRole {
        switch offered {
        case .actpass: return current ?? .client
        case .active: return .server
        case .passive: return .client
        case .holdconn: throw .unsupportedDTLSSetup(offered.rawValue)
        }
    }

    /// Our role as offerer, from the answer's setup.
    public static func offererRole(answered: DTLSSetup) throws(SDPError) -> DTLSRole {
        switch answered {
        case .active: return .server
        case .passive: return .client
        case .actpass, .holdconn:
            throw .answerDoesNotMatchOffer(reason: "answer has a=setup:\(answered.rawValue); an answer must be active or passive")
        }
    }

    /// Whether a negotiation (`role`, `remoteFingerprint`) can keep the association made with
    /// `currentRole` and `currentFingerprint`.
    public static func keepsAssociation(
        currentRole: DTLSRole, currentFingerprint: DTLSFingerprint, role: DTLSRole, remoteFingerprints: [DTLSFingerprint]
    ) -> Bool {
        currentRole == role && remoteFingerprints.contains(currentFingerprint)
    }
}
