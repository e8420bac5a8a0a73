/// An RFC 4733 `telephone-event` format in a description: its payload type, clock rate and the
/// events it carries (`a=rtpmap:<pt> telephone-event/<rate>`, `a=fmtp:<pt> 0-15`).
public struct TelephoneEventFormat: Sendable, Equatable {
    /// The RTP payload type (dynamic, 96…127, as either side chose).
    public var payloadType: UInt8
    /// The clock rate: 48000 (the Opus clock, RFC 4733 §2.1's match) or 8000 (what many SIP
    /// peers offer beside any codec).
    public var clockRateHz: UInt32
    /// The events, as the fmtp lists them; DTMF needs 0–15.
    public var events: String

    public init(payloadType: UInt8, clockRateHz: UInt32, events: String = "0-15") {
        self.payloadType = payloadType
        self.clockRateHz = clockRateHz
        self.events = events
    }

    /// What Tether offers: 48000 on 101, then 8000 on 100.
    public static let defaultOffer = [
        TelephoneEventFormat(payloadType: 101, clockRateHz: 48_000), TelephoneEventFormat(payloadType: 100, clockRateHz: 8000),
    ]

    /// The clock rates Tether sends and receives telephone events at.
    public static let supportedClockRates: Set<UInt32> = [48_000, 8000]

    var rtpMap: RTPMapAttribute {
        RTPMapAttribute(payloadType: payloadType, encodingName: "telephone-event", clockRateHz: clockRateHz)
    }

    var formatParameters: FormatParametersAttribute {
        FormatParametersAttribute(payloadType: payloadType, parameters: [FormatParameter(name: events, value: nil)])
    }

    /// The section's telephone-event formats at a supported rate that carry the DTMF events, in
    /// the section's order.
    static func all(in section: MediaDescription) -> [TelephoneEventFormat] {
        section.payloadTypes.compactMap { pt in
            guard let map = section.rtpMap(forPayloadType: pt), map.isEncoding("telephone-event"),
                supportedClockRates.contains(map.clockRateHz)
            else { return nil }
            // RFC 4733 §2.4.1: without an fmtp the events are 0–15.
            let listed = section.formatParameters(forPayloadType: pt).first.map { $0.value.map { "\($0)" } ?? $0.name } ?? "0-15"
            guard coversDTMF(listed) else { return nil }
            return TelephoneEventFormat(payloadType: pt, clockRateHz: map.clockRateHz, events: "0-15")
        }
    }

    /// The offer's format to answer with: the one at 48000 (the Opus clock), else at 8000.
    static func preferred(in offer: MediaDescription) -> TelephoneEventFormat? {
        let offered = all(in: offer)
        return offered.first { $0.clockRateHz == 48_000 } ?? offered.first
    }

    /// The answer's formats that we offered at the same rate, the one at 48000 (the Opus clock)
    /// first (anything else: no DTMF).
    static func answered(in answer: MediaDescription, offered: MediaDescription) -> [TelephoneEventFormat] {
        let ours = all(in: offered)
        let theirs = all(in: answer).filter { format in ours.contains { $0.payloadType == format.payloadType && $0.clockRateHz == format.clockRateHz } }
        return theirs.filter { $0.clockRateHz == 48_000 } + theirs.filter { $0.clockRateHz != 48_000 }
    }

    /// Whether an event list such as `0-15`, `0-16`, `0-11,12-15` names every event 0…15.
    static func coversDTMF(_ list: String) -> Bool {
        var covered = Set<Int>()
        for item in list.split(separator: ",") {
            let bounds = item.split(separator: "-", maxSplits: 1).map { Int(String($0.filter { $0 != " " })) }
            guard let low = bounds.first ?? nil else { continue }
            let high = bounds.count > 1 ? (bounds[1] ?? low) : low
            guard low <= high, low >= 0, low <= 15 else { continue }
            for e in low...min(high, 15) { covered.insert(e) }
        }
        return covered.count == 16
    }
}
