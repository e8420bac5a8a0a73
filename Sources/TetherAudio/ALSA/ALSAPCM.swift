import CALSA
import Glibc

/// Direction of an ALSA PCM stream.
enum ALSAStreamDirection: Sendable {
    case capture
    case playback

    var alsaStream: snd_pcm_stream_t {
        switch self {
        case .capture: SND_PCM_STREAM_CAPTURE
        case .playback: SND_PCM_STREAM_PLAYBACK
        }
    }

    var label: String {
        switch self {
        case .capture: "capture"
        case .playback: "playback"
        }
    }
}

/// What a PCM was opened with and granted.
struct ALSAPCMRequest: Sendable {
    /// The ALSA PCM name (`default`, `tether_spk`, `plughw:0,0`, …).
    let pcmName: String
    let direction: ALSAStreamDirection
    /// Sample rate asked for, in hertz (the plug layer converts when the device runs at another).
    let sampleRateHertz: Int
    /// Period length asked for, in frames (one sample each: the stream is mono).
    let periodFrames: Int
    /// Periods per buffer asked for.
    let periodCount: Int
}

/// An open, configured, prepared PCM in non-blocking mode.
struct ALSAOpenPCM: @unchecked Sendable {
    /// The `snd_pcm_t *`; owned by whoever holds this value (closed with `ALSAPCM.close`).
    let pcm: OpaquePointer
    /// The period length the device granted, in frames.
    let periodFrames: Int
    /// The buffer length the device granted, in frames.
    let bufferFrames: Int
}

/// Opening and configuring ALSA PCMs (control paths only: these allocate).
enum ALSAPCM {
    /// Message for a negative ALSA or errno result.
    static func message(_ code: Int32) -> String {
        String(cString: snd_strerror(code))
    }

    /// Opens `request.pcmName` (blocking open), sets RW interleaved S16_LE mono at the requested
    /// rate, period and buffer, sets the start threshold (first read for capture, a full buffer
    /// for playback) and switches the PCM to non-blocking mode so the device loop can wait with a
    /// bounded timeout and notice `stop()`.
    ///
    /// When the PCM refuses the format, channel count or rate as is (a raw `hw:` device), it is
    /// opened again through the `plug` layer (`plug:NAME`), which converts.
    /// - Throws: `.deviceUnavailable` when the PCM cannot be opened or configured.
    static func open(_ request: ALSAPCMRequest) throws(AudioDeviceError) -> ALSAOpenPCM {
        do {
            return try openOnce(name: request.pcmName, request: request)
        } catch let error {
            guard case .formatRefused = error, !request.pcmName.hasPrefix("plug") else {
                throw .deviceUnavailable(name: request.pcmName, reason: error.reason)
            }
        }
        do {
            return try openOnce(name: "plug:\(request.pcmName)", request: request)
        } catch let error {
            throw .deviceUnavailable(name: request.pcmName, reason: error.reason)
        }
    }

    /// Stops the stream at once (dropping pending frames) and closes the PCM.
    static func close(_ pcm: OpaquePointer) {
        _ = snd_pcm_drop(pcm)
        _ = snd_pcm_close(pcm)
    }

    private enum OpenFailure: Error {
        /// Opening, the buffer geometry, or committing the parameters failed.
        case failed(String)
        /// Access, format, channel count or rate were refused: the plug layer may help.
        case formatRefused(String)

        var reason: String {
            switch self {
            case let .failed(reason), let .formatRefused(reason): reason
            }
        }
    }

    private static func openOnce(name: String, request: ALSAPCMRequest) throws(OpenFailure) -> ALSAOpenPCM {
        var handle: OpaquePointer?
        let openResult = snd_pcm_open(&handle, name, request.direction.alsaStream, 0)
        guard openResult >= 0, let pcm = handle else {
            throw .failed("snd_pcm_open(\(name)): \(message(openResult))")
        }
        do {
            let (periodFrames, bufferFrames) = try configure(pcm, request: request)
            return ALSAOpenPCM(pcm: pcm, periodFrames: periodFrames, bufferFrames: bufferFrames)
        } catch {
            _ = snd_pcm_close(pcm)
            throw error
        }
    }

    private static func configure(_ pcm: OpaquePointer, request: ALSAPCMRequest) throws(OpenFailure) -> (Int, Int) {
        var hwPointer: OpaquePointer?
        guard snd_pcm_hw_params_malloc(&hwPointer) >= 0, let hw = hwPointer else {
            throw .failed("cannot allocate hardware parameters")
        }
        defer { snd_pcm_hw_params_free(hw) }

        func check(_ result: Int32, _ what: String, refused: Bool = false) throws(OpenFailure) {
            guard result >= 0 else {
                let reason = "\(what): \(message(result))"
                throw refused ? .formatRefused(reason) : .failed(reason)
            }
        }
        try check(snd_pcm_hw_params_any(pcm, hw), "snd_pcm_hw_params_any")
        try check(snd_pcm_hw_params_set_rate_resample(pcm, hw, 1), "allow resampling", refused: true)
        try check(
            snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED), "RW interleaved access",
            refused: true)
        try check(snd_pcm_hw_params_set_format(pcm, hw, SND_PCM_FORMAT_S16_LE), "S16_LE format", refused: true)
        try check(snd_pcm_hw_params_set_channels(pcm, hw, 1), "1 channel", refused: true)
        try check(
            snd_pcm_hw_params_set_rate(pcm, hw, UInt32(request.sampleRateHertz), 0),
            "rate \(request.sampleRateHertz) Hz", refused: true)
        var period = snd_pcm_uframes_t(request.periodFrames)
        var direction: Int32 = 0
        try check(snd_pcm_hw_params_set_period_size_near(pcm, hw, &period, &direction), "period size")
        var buffer = snd_pcm_uframes_t(request.periodFrames * request.periodCount)
        try check(snd_pcm_hw_params_set_buffer_size_near(pcm, hw, &buffer), "buffer size")
        try check(snd_pcm_hw_params(pcm, hw), "snd_pcm_hw_params")
        try check(snd_pcm_hw_params_get_period_size(hw, &period, &direction), "granted period size")
        try check(snd_pcm_hw_params_get_buffer_size(hw, &buffer), "granted buffer size")
        guard period > 0, buffer >= period else {
            throw .failed("unusable geometry: period \(period), buffer \(buffer) frames")
        }

        var swPointer: OpaquePointer?
        guard snd_pcm_sw_params_malloc(&swPointer) >= 0, let sw = swPointer else {
            throw .failed("cannot allocate software parameters")
        }
        defer { snd_pcm_sw_params_free(sw) }
        try check(snd_pcm_sw_params_current(pcm, sw), "snd_pcm_sw_params_current")
        // Capture starts with the first read; playback once the buffer is full (the device loop
        // prefills all but one period with silence, so the first real frame starts it).
        let startThreshold: snd_pcm_uframes_t = request.direction == .capture ? 1 : buffer
        try check(snd_pcm_sw_params_set_start_threshold(pcm, sw, startThreshold), "start threshold")
        try check(snd_pcm_sw_params_set_avail_min(pcm, sw, period), "avail min")
        try check(snd_pcm_sw_params(pcm, sw), "snd_pcm_sw_params")
        try check(snd_pcm_prepare(pcm), "snd_pcm_prepare")
        try check(snd_pcm_nonblock(pcm, 1), "non-blocking mode")
        return (Int(period), Int(buffer))
    }
}
