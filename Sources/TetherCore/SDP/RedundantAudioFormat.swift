/// RFC 2198 redundant audio (RED) in a description, as Chromium offers it for Opus:
/// `a=rtpmap:63 red/48000/2` and `a=fmtp:63 111/111` (the blocks are Opus on payload type 111).
public struct RedundantAudioFormat: Sendable, Equatable {
    /// RED's payload type (dynamic, as either side chose).
    public var payloadType: UInt8
    /// The payload type of the blocks it carries: the negotiated Opus.
    public var blockPayloadType: UInt8

    /// The payload type Tether offers RED on (Chromium's).
    public static let defaultPayloadType: UInt8 = 63

    public init(payloadType: UInt8, blockPayloadType: UInt8) {
        self.payloadType = payloadType
        self.blockPayloadType = blockPayloadType
    }

    var rtpMap: RTPMapAttribute {
        RTPMapAttribute(payloadType: payloadType, encodingName: "red", clockRateHz: 48_000, channelCount: 2)
    }

    /// `111/111`: a primary and one redundant block, both Opus (the usual form; a receiver takes
    /// any number of Opus blocks).
    var formatParameters: FormatParametersAttribute {
        FormatParametersAttribute(payloadType: payloadType, parameters: [FormatParameter(name: "\(blockPayloadType)/\(blockPayloadType)", value: nil)])
    }

    /// The section's `red/48000/2` format whose blocks are all `opusPayloadType` (an fmtp naming
    /// any other payload type is not for us; without an fmtp, RFC 2198 leaves the blocks open and
    /// each block's own payload type is checked when it arrives).
    static func find(in section: MediaDescription, opusPayloadType: UInt8) -> RedundantAudioFormat? {
        for pt in section.payloadTypes {
            guard let map = section.rtpMap(forPayloadType: pt), map.isEncoding("red"), map.clockRateHz == 48_000 else { continue }
            if let listed = section.formatParameters(forPayloadType: pt).first {
                let types = (listed.value.map { listed.name + "=" + $0 } ?? listed.name).split(separator: "/").map { UInt8($0) }
                guard !types.isEmpty, types.allSatisfy({ $0 == opusPayloadType }) else { continue }
            }
            return RedundantAudioFormat(payloadType: pt, blockPayloadType: opusPayloadType)
        }
        return nil
    }

    /// Whether the section lists RED before Opus (its preferred send format: Chromium sends RED
    /// only when it comes first).
    static func isPreferred(in section: MediaDescription, format: RedundantAudioFormat) -> Bool {
        let order = section.payloadTypes
        guard let red = order.firstIndex(of: format.payloadType), let opus = order.firstIndex(of: format.blockPayloadType) else { return false }
        return red < opus
    }
}
