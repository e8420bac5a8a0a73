/// Errors thrown by `RTCPCompoundWriter`.
public enum RTCPWriteError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// The output buffer is smaller than the compound packet; carries the needed size in bytes.
    case bufferTooSmall(requiredBytes: Int)
    /// A BYE reason longer than 255 bytes; carries its length in bytes.
    case byeReasonTooLong(lengthBytes: Int)

    public var description: String {
        switch self {
        case .bufferTooSmall(let requiredBytes): return "RTCP output buffer too small, \(requiredBytes) bytes needed"
        case .byeReasonTooLong(let lengthBytes): return "BYE reason of \(lengthBytes) bytes exceeds 255 bytes"
        }
    }
}
