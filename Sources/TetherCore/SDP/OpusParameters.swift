/// Opus `a=fmtp` parameters (RFC 7587 §6.1). `nil` means "absent", in which
/// case the RFC 7587 default applies (e.g. `stereo=0`, `useinbandfec=0`,
/// `maxplaybackrate=48000`). Unknown parameters — and known ones whose value
/// does not parse — are kept in ``otherParameters``.
public struct OpusParameters: Sendable, Equatable {
    /// `maxplaybackrate`: highest rate the receiver will render, in Hz.
    public var maxPlaybackRateHz: UInt32?
    /// `sprop-maxcapturerate`: highest rate the sender captures, in Hz.
    public var spropMaxCaptureRateHz: UInt32?
    /// `maxaveragebitrate`: cap on the average bitrate the receiver wants, in bits per second.
    public var maxAverageBitrateBitsPerSecond: UInt32?
    /// `minptime`: smallest packet duration the receiver accepts, in milliseconds.
    public var minPtimeMilliseconds: UInt32?
    /// `stereo`: the receiver prefers stereo.
    public var stereo: Bool?
    /// `sprop-stereo`: the sender is likely to send stereo.
    public var spropStereo: Bool?
    /// `cbr`: the receiver wants constant bitrate.
    public var cbr: Bool?
    /// `useinbandfec`: the receiver can use Opus in-band FEC.
    public var useInbandFEC: Bool?
    /// `usedtx`: the receiver wants discontinuous transmission.
    public var useDTX: Bool?
    /// Everything else, in the order written.
    public var otherParameters: [FormatParameter]

    /// Creates Opus parameters; everything absent by default.
    public init(
        maxPlaybackRateHz: UInt32? = nil, spropMaxCaptureRateHz: UInt32? = nil,
        maxAverageBitrateBitsPerSecond: UInt32? = nil, minPtimeMilliseconds: UInt32? = nil,
        stereo: Bool? = nil, spropStereo: Bool? = nil, cbr: Bool? = nil,
        useInbandFEC: Bool? = nil, useDTX: Bool? = nil, otherParameters: [FormatParameter] = []
    ) {
        self.maxPlaybackRateHz = maxPlaybackRateHz
        self.spropMaxCaptureRateHz = spropMaxCaptureRateHz
        self.maxAverageBitrateBitsPerSecond = maxAverageBitrateBitsPerSecond
        self.minPtimeMilliseconds = minPtimeMilliseconds
        self.stereo = stereo
        self.spropStereo = spropStereo
        self.cbr = cbr
        self.useInbandFEC = useInbandFEC
        self.useDTX = useDTX
        self.otherParameters = otherParameters
    }

    /// Reads Opus parameters from an fmtp parameter list (names compared
    /// case-insensitively).
    public init(formatParameters: [FormatParameter]) {
        self.init()
        for parameter in formatParameters {
            let value = parameter.value ?? ""
            let number = UInt32(value)
            let flag: Bool? = value == "1" ? true : (value == "0" ? false : nil)
            switch parameter.name.lowercased() {
            case "maxplaybackrate" where number != nil: maxPlaybackRateHz = number
            case "sprop-maxcapturerate" where number != nil: spropMaxCaptureRateHz = number
            case "maxaveragebitrate" where number != nil: maxAverageBitrateBitsPerSecond = number
            case "minptime" where number != nil: minPtimeMilliseconds = number
            case "stereo" where flag != nil: stereo = flag
            case "sprop-stereo" where flag != nil: spropStereo = flag
            case "cbr" where flag != nil: cbr = flag
            case "useinbandfec" where flag != nil: useInbandFEC = flag
            case "usedtx" where flag != nil: useDTX = flag
            default: otherParameters.append(parameter)
            }
        }
    }

    /// The parameters to put in `a=fmtp`, known ones first in a fixed order
    /// (minptime, useinbandfec, usedtx, stereo, sprop-stereo, maxplaybackrate,
    /// sprop-maxcapturerate, maxaveragebitrate, cbr), then the others.
    public var formatParameters: [FormatParameter] {
        func flag(_ value: Bool) -> String { value ? "1" : "0" }
        var result: [FormatParameter] = []
        if let minPtimeMilliseconds { result.append(.init(name: "minptime", value: "\(minPtimeMilliseconds)")) }
        if let useInbandFEC { result.append(.init(name: "useinbandfec", value: flag(useInbandFEC))) }
        if let useDTX { result.append(.init(name: "usedtx", value: flag(useDTX))) }
        if let stereo { result.append(.init(name: "stereo", value: flag(stereo))) }
        if let spropStereo { result.append(.init(name: "sprop-stereo", value: flag(spropStereo))) }
        if let maxPlaybackRateHz { result.append(.init(name: "maxplaybackrate", value: "\(maxPlaybackRateHz)")) }
        if let spropMaxCaptureRateHz {
            result.append(.init(name: "sprop-maxcapturerate", value: "\(spropMaxCaptureRateHz)"))
        }
        if let maxAverageBitrateBitsPerSecond {
            result.append(.init(name: "maxaveragebitrate", value: "\(maxAverageBitrateBitsPerSecond)"))
        }
        if let cbr { result.append(.init(name: "cbr", value: flag(cbr))) }
        return result + otherParameters
    }
}
