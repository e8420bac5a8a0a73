import COpus

/// A failure reported by libopus, with its C error code.
public struct OpusCodecError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The libopus error code (`OPUS_BAD_ARG` = -1 … `OPUS_ALLOC_FAIL` = -7).
    public let code: Int32
    /// What Tether was doing.
    public let operation: StaticString

    public init(code: Int32, operation: StaticString) {
        self.code = code
        self.operation = operation
    }

    public var description: String {
        "\(operation) failed: \(String(cString: opus_strerror(code))) (\(code))"
    }

    public static func == (a: Self, b: Self) -> Bool {
        a.code == b.code && a.operation.description == b.operation.description
    }
}
