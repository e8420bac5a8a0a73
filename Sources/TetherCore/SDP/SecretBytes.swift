import Glibc

/// Secret bytes (an SDES master key and salt from a description), held in storage allocated for
/// them and wiped with `explicit_bzero` when the last copy goes away. Copies share the storage;
/// there is no way to change the bytes in place. The description never shows them.
public struct SecretBytes: Sendable, RandomAccessCollection, Equatable, CustomStringConvertible {
    private final class Storage: @unchecked Sendable {
        let bytes: UnsafeMutableRawBufferPointer

        init(count: Int) {
            bytes = .allocate(byteCount: Swift.max(count, 1), alignment: 16)
        }

        deinit {
            explicit_bzero(bytes.baseAddress!, bytes.count)
            bytes.deallocate()
        }
    }

    private let storage: Storage
    public let count: Int

    /// A copy of `bytes` in wiped storage.
    public init(_ bytes: some Collection<UInt8>) {
        count = bytes.count
        storage = Storage(count: count)
        _ = UnsafeMutableRawBufferPointer(rebasing: storage.bytes[0..<count]).initializeMemory(as: UInt8.self, from: bytes)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < count, "index out of range")
        return storage.bytes[position]
    }

    /// Calls `body` with the bytes. Do not copy them out longer than needed.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage.bytes[0..<count]))
    }

    /// Redacted.
    public var description: String { "<redacted \(count) bytes>" }

    /// Whether the bytes are equal (every byte is compared, whatever the first difference).
    public static func == (a: SecretBytes, b: SecretBytes) -> Bool { a.equals(b) }
    public static func == (a: SecretBytes, b: [UInt8]) -> Bool { a.equals(b) }
    public static func == (a: [UInt8], b: SecretBytes) -> Bool { b.equals(a) }

    private func equals(_ other: some Collection<UInt8>) -> Bool {
        guard other.count == count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(self, other) { difference |= x ^ y }
        return difference == 0
    }
}
