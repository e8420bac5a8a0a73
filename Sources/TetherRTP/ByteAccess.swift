// Internal big-endian (network byte order) accessors over raw buffers.
// Callers are responsible for bounds checks; these helpers never allocate.

extension UnsafeRawBufferPointer {
    /// Reads a big-endian `UInt16` starting at `offset` bytes.
    @inline(__always)
    func loadBigEndianUInt16(at offset: Int) -> UInt16 {
        UInt16(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    /// Reads a big-endian `UInt32` starting at `offset` bytes.
    @inline(__always)
    func loadBigEndianUInt32(at offset: Int) -> UInt32 {
        UInt32(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    /// Reads a big-endian `UInt64` starting at `offset` bytes.
    @inline(__always)
    func loadBigEndianUInt64(at offset: Int) -> UInt64 {
        UInt64(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// Returns the sub-buffer `[start, end)` (byte offsets) without copying.
    @inline(__always)
    func slice(from start: Int, to end: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: self[start..<end])
    }
}

extension UnsafeMutableRawBufferPointer {
    /// Writes `value` in big-endian order starting at `offset` bytes.
    @inline(__always)
    func storeBigEndian(_ value: UInt16, at offset: Int) {
        storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt16.self)
    }

    /// Writes `value` in big-endian order starting at `offset` bytes.
    @inline(__always)
    func storeBigEndian(_ value: UInt32, at offset: Int) {
        storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self)
    }

    /// Writes `value` in big-endian order starting at `offset` bytes.
    @inline(__always)
    func storeBigEndian(_ value: UInt64, at offset: Int) {
        storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt64.self)
    }

    /// Writes `count` zero bytes starting at `offset` bytes.
    @inline(__always)
    func zero(from offset: Int, count: Int) {
        var index = offset
        let end = offset + count
        while index < end {
            self[index] = 0
            index += 1
        }
    }
}
