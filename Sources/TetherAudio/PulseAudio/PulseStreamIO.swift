import CPulse
import Glibc
import TetherRealtime

/// What the PulseAudio stream callbacks of one run touch: the ring, wake-up and counters (held
/// unretained through `DeviceThreadIO`), a one-frame staging buffer and plain values.
///
/// Allocated (as an `UnsafeMutablePointer`) at start and passed to libpulse as the read or write
/// callback's userdata; freed at stop, after the mainloop thread has ended. The callbacks never
/// retain, release or allocate: a stream reopened after a failure keeps using the same storage.
struct PulseStreamIO {
    /// SCHED_FIFO priority asked for the mainloop thread (as `ClockedDeviceRunner` asks).
    static let realtimePriority: Int32 = 10

    let io: DeviceThreadIO
    private let counters: Unmanaged<DeviceCounters>
    /// One endpoint frame: capture accumulates samples here until the frame is whole; playback
    /// holds the frame being played.
    private let frame: UnsafeMutableBufferPointer<Int16>
    /// Capture: samples already in `frame`. Playback: samples of `frame` already written to the
    /// stream (`frame.count` means "take the next frame from the ring").
    private var position: Int
    private var schedulingRequested = false

    /// Allocates the staging frame. Call `deallocate()` when the run is over.
    static func allocate(endpoint: AudioEndpoint, counters: DeviceCounters, direction: PulseDirection)
        -> UnsafeMutablePointer<PulseStreamIO>
    {
        let samplesPerFrame = endpoint.format.samplesPerFrame
        let frame = UnsafeMutableBufferPointer<Int16>.allocate(capacity: samplesPerFrame)
        frame.initialize(repeating: 0)
        let pointer = UnsafeMutablePointer<PulseStreamIO>.allocate(capacity: 1)
        pointer.initialize(
            to: PulseStreamIO(
                io: DeviceThreadIO(endpoint: endpoint, counters: counters),
                counters: .passUnretained(counters), frame: frame,
                position: direction == .capture ? 0 : samplesPerFrame))
        return pointer
    }

    /// Frees the staging frame and the storage itself.
    static func deallocate(_ pointer: UnsafeMutablePointer<PulseStreamIO>) {
        pointer.pointee.frame.deallocate()
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }

    /// The server ran out of our playback data (it played silence) or dropped capture data we
    /// did not read in time: counted with the ring's own underruns and overruns.
    /// - Note: Called on the mainloop thread; must not allocate.
    func countServerXrun(_ direction: PulseDirection) {
        counters._withUnsafeGuaranteedRef {
            _ = direction == .capture ? $0.overruns.add(1, ordering: .relaxed) : $0.underruns.add(1, ordering: .relaxed)
        }
    }

    /// On the first callback of a run, asks SCHED_FIFO for the calling (mainloop) thread, falling
    /// back quietly to normal scheduling, and records what was granted.
    /// - Note: Called on the mainloop thread; must not allocate.
    @inline(__always)
    mutating func requestRealtimeOnce() {
        guard !schedulingRequested else { return }
        schedulingRequested = true
        var parameters = sched_param(sched_priority: Self.realtimePriority)
        let granted: ThreadScheduling =
            pthread_setschedparam(pthread_self(), Int32(SCHED_FIFO), &parameters) == 0 ? .realtimeFIFO : .normal
        counters._withUnsafeGuaranteedRef {
            $0.scheduling.store(DeviceCounters.schedulingCode(granted), ordering: .relaxed)
        }
    }

    /// Capture: moves everything the record stream holds into the staging frame; each completed
    /// frame goes into the ring (or is dropped and counted as an overrun) and the wake-up is
    /// signalled. A hole in the stream (lost data) is filled with silence.
    /// - Note: Called on the mainloop thread from the stream's read callback; must not allocate.
    mutating func drainRecordStream(_ stream: OpaquePointer) {
        var data: UnsafeRawPointer? = nil
        var byteCount = 0
        while pa_stream_peek(stream, &data, &byteCount) == 0, byteCount > 0 {
            let sampleCount = byteCount / MemoryLayout<Int16>.size
            var consumed = 0
            while consumed < sampleCount {
                let take = min(sampleCount - consumed, frame.count - position)
                let destination = UnsafeMutableRawPointer(frame.baseAddress! + position)
                if let data {
                    destination.copyMemory(from: data + consumed * 2, byteCount: take * 2)
                } else {
                    memset(destination, 0, take * 2)
                }
                position += take
                consumed += take
                if position == frame.count {
                    io.pushFrame(UnsafeBufferPointer(frame))
                    io.signal()
                    position = 0
                }
            }
            pa_stream_drop(stream)
        }
    }

    /// Playback: writes `requestedBytes` into the playback stream, taking whole frames from the
    /// ring; when the ring holds less than a frame a frame of silence is played and counted as an
    /// underrun. The wake-up is signalled after each frame taken.
    /// - Note: Called on the mainloop thread from the stream's write callback; must not allocate.
    mutating func fillPlaybackStream(_ stream: OpaquePointer, requestedBytes: Int) {
        var remaining = requestedBytes & ~1
        while remaining > 0 {
            var data: UnsafeMutableRawPointer? = nil
            var size = remaining
            guard pa_stream_begin_write(stream, &data, &size) == 0, let data else { return }
            size = min(size, remaining) & ~1
            if size == 0 {
                pa_stream_cancel_write(stream)
                return
            }
            var offset = 0
            while offset < size {
                if position == frame.count {
                    io.pullFrame(into: frame)
                    io.signal()
                    position = 0
                }
                let take = min((size - offset) / 2, frame.count - position)
                (data + offset).copyMemory(from: frame.baseAddress! + position, byteCount: take * 2)
                position += take
                offset += take * 2
            }
            if pa_stream_write(stream, data, size, nil, 0, PA_SEEK_RELATIVE) != 0 { return }
            remaining -= size
        }
    }
}
