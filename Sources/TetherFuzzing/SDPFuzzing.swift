import Foundation
import TetherCore

/// Session descriptions from a peer: `SessionDescription.parse`, `serialized()` and
/// `AudioOfferAnswer` with Tether's own parameters.
enum SDPFuzzing {
    /// Tether's side of the negotiation, with fixed (not secret) keys: what `CallSession` builds.
    static let local: LocalAudioParameters = {
        func key(_ count: Int, seed: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: seed &* 31 &+ $0 &* 97 &+ 13) } }
        // Both keys have the lengths their suites need, so these initializers cannot fail.
        let crypto = [
            try! CryptoAttribute(tag: 1, suite: .AES_CM_128_HMAC_SHA1_80, keyAndSalt: key(30, seed: 7)),
            try! CryptoAttribute(tag: 2, suite: .AEAD_AES_128_GCM, keyAndSalt: key(28, seed: 9)),
        ]
        return LocalAudioParameters(
            sessionID: 4_242_424_242, originAddress: "127.0.0.1", iceUfrag: "fUzZ", icePwd: "ZnV6emluZ1Bhc3N3b3JkMTIz",
            candidates: [ICECandidate(foundation: "1", priority: 2_130_706_431, address: "127.0.0.1", port: 40_000, type: .host)],
            endOfCandidates: true, crypto: crypto)
    }()

    /// Our offer, as a peer's answer is checked against it.
    static let offer = AudioOfferAnswer.makeOffer(local)

    static func run(_ input: UnsafeRawBufferPointer) {
        let text = String(decoding: input, as: UTF8.self)
        let parsed: SessionDescription
        do {
            parsed = try SessionDescription.parse(text)
        } catch {
            checkMessage(error)
            return
        }

        // What Tether writes, it reads back as the same description.
        let written = parsed.serialized()
        let reread: SessionDescription
        do {
            reread = try SessionDescription.parse(written)
        } catch {
            fuzzInvariant(false, "a serialized description does not parse again: \(error)")
            return
        }
        let rewritten = reread.serialized()
        if rewritten != written {
            let a = written.split(separator: "\r\n", omittingEmptySubsequences: false)
            let b = rewritten.split(separator: "\r\n", omittingEmptySubsequences: false)
            let line = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
            fuzzInvariant(
                false,
                "serializing is not stable: line \(line + 1) written \(SDPError.excerpt(a.dropFirst(line).first ?? "(none)")), then \(SDPError.excerpt(b.dropFirst(line).first ?? "(none)"))")
        }

        // Answering it as an offer.
        do {
            let (answer, negotiated) = try AudioOfferAnswer.makeAnswer(to: parsed, local: local)
            let answerText = answer.serialized()
            guard let answerParsed = try? SessionDescription.parse(answerText) else {
                fuzzInvariant(false, "Tether's answer does not parse")
                return
            }
            // The offerer (Tether, or any stack that checks as Tether does) accepts that answer.
            do {
                let back = try AudioOfferAnswer.processAnswer(answerParsed, to: parsed)
                fuzzInvariant(back.opusPayloadType == negotiated.opusPayloadType, "the answer's Opus payload type differs")
            } catch {
                fuzzInvariant(false, "Tether's own answer is refused against the offer it answers: \(error)")
            }
        } catch {
            checkMessage(error)
        }

        // Taking it as the answer to our offer.
        do {
            let negotiated = try AudioOfferAnswer.processAnswer(parsed, to: offer)
            fuzzInvariant(offer.media.first?.payloadTypes.contains(negotiated.opusPayloadType) == true, "an answer chose a payload type we did not offer")
        } catch {
            checkMessage(error)
        }
    }

    /// An error's message is short (it quotes at most a bounded part of the peer's text) and one
    /// line with control characters escaped, so a hostile description cannot flood or forge logs.
    static func checkMessage(_ error: SDPError) {
        let message = error.description
        fuzzInvariant(message.utf8.count <= 4096, "an error message of \(message.utf8.count) bytes")
        fuzzInvariant(
            !message.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) },
            "an error message with a control character")
        // Key material is never quoted: whatever followed `inline:` is redacted.
        var rest = Substring(message)
        while let range = rest.range(of: "inline:", options: .caseInsensitive) {
            // "<redacted>", or as much of it as an excerpt kept before its "…".
            let after = rest[range.upperBound...]
            let kept = after.prefix { $0 != "…" }
            fuzzInvariant(
                after.isEmpty || after.hasPrefix("<redacted>") || (kept.count < 10 && "<redacted>".hasPrefix(kept) && after.dropFirst(kept.count).hasPrefix("…")),
                "an error message quotes a key: \(message)")
            rest = rest[range.upperBound...]
        }
    }
}
