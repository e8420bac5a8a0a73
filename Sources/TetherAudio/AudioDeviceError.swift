/// Why a source or sink could not start, or why a WAV file could not be read or written.
public enum AudioDeviceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A file could not be opened or read (`reason` is the system's message).
    case cannotOpenFile(path: String, reason: String)
    /// A file could not be written, or its header patched (`reason` is the system's message).
    case cannotWriteFile(path: String, reason: String)
    /// The file is a well-formed WAV file in an encoding or at a sample rate this module does not take.
    case unsupportedWAVFormat(reason: String)
    /// The file is not a WAV file, or is truncated or corrupt.
    case invalidWAVFile(reason: String)
    /// The endpoint's format does not suit the device (for example more than one channel).
    case unsupportedFormat(reason: String)
    /// The endpoint's ring cannot hold one whole frame.
    case ringTooSmall(capacitySamples: Int, samplesPerFrame: Int)
    /// `start` was called on a device that is already running.
    case alreadyStarted(name: String)
    /// The device thread could not be created (`code` is the `pthread_create` errno value).
    case deviceThreadFailed(code: Int32)
    /// The named device could not be opened or configured, or was lost while running
    /// (`reason` is the backend's message).
    case deviceUnavailable(name: String, reason: String)
    /// The audio backend itself failed (sound server unreachable, library error).
    case backendFailed(reason: String)

    public var description: String {
        switch self {
        case let .cannotOpenFile(path, reason):
            "cannot open \(path): \(reason)"
        case let .cannotWriteFile(path, reason):
            "cannot write \(path): \(reason)"
        case let .unsupportedWAVFormat(reason):
            "unsupported WAV format: \(reason)"
        case let .invalidWAVFile(reason):
            "invalid WAV file: \(reason)"
        case let .unsupportedFormat(reason):
            "unsupported audio format: \(reason)"
        case let .ringTooSmall(capacitySamples, samplesPerFrame):
            "ring of \(capacitySamples) samples cannot hold a frame of \(samplesPerFrame) samples"
        case let .alreadyStarted(name):
            "\(name) is already started"
        case let .deviceThreadFailed(code):
            "cannot create the device thread: \(SystemError.message(code))"
        case let .deviceUnavailable(name, reason):
            "audio device \(name) is unavailable: \(reason)"
        case let .backendFailed(reason):
            "audio backend failed: \(reason)"
        }
    }
}
