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
    /// One endpoint frame: capture accumulates samples here until the frame is whole (empty for
    /// playback, which writes from the ring straight into the server's buffer).
    private let frame: UnsafeMutableBufferPointer<Int16>
    /// Capture: samples already in `frame`. Playback: samples taken from the ring since the last
    /// whole frame counted.
    private var position = 0
    /// Playback: the size of the server's last request, in samples.
    private var lastRequestSamples = 0
    /// Playback: the stream and a mainloop timer (created disabled with the stream) that gives a
    /// request the ring could not cover a second chance; nil for capture and while no stream is
    /// open. Set and cleared on the control path with the mainloop lock held.
    var playbackStream: OpaquePointer?
    var retryTimer: OpaquePointer?
    var api: UnsafeMutablePointer<pa_mainloop_api>?
    private var schedulingRequested = false

    /// Allocates the storage (and, for capture, the staging frame). Call `deallocate()` when the
    /// run is over.
    static func allocate(endpoint: AudioEndpoint, counters: DeviceCounters, direction: PulseDirection)
        -> UnsafeMutablePointer<PulseStreamIO>
    {
        let samplesPerFrame = direction == .capture ? endpoint.format.samplesPerFrame : 0
        let frame = UnsafeMutableBufferPointer<Int16>.allocate(capacity: samplesPerFrame)
        frame.initialize(repeating: 0)
        let pointer = UnsafeMutablePointer<PulseStreamIO>.allocate(capacity: 1)
        pointer.initialize(
            to: PulseStreamIO(
                io: DeviceThreadIO(endpoint: endpoint, counters: counters),
                counters: .passUnretained(counters), frame: frame))
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
        recordLatency(stream)
    }

    /// How long a request the ring could not cover waits for the media loop before the rest is
    /// played as silence.
    static let retryMicroseconds: UInt64 = 2_000

    /// Playback: writes what the server asks for (`requestedBytes`) from the ring, as much as the
    /// ring holds. Tells the media loop to keep two requests queued (`PlaybackDemand`), so that a
    /// request finds its samples while the loop answers the one before.
    ///
    /// A request the ring cannot cover is finished 2 ms later by a mainloop timer (the server
    /// still holds about two requests, and the media loop has usually caught up by then); what
    /// the ring still lacks then is played as silence and counted as an underrun. Records the
    /// stream's latency (`pa_stream_get_latency`) after each request.
    /// - Note: Called on the mainloop thread from the stream's write callback; must not allocate.
    mutating func fillPlaybackStream(_ stream: OpaquePointer, requestedBytes: Int) {
        let requested = requestedBytes / 2
        guard requested > 0 else { return }
        if requested != lastRequestSamples {
            lastRequestSamples = requested
            io.setDemand(queuedSamples: 2 * requested)
        }
        if write(stream, samples: requested, padWithSilence: false) > 0, let retryTimer, let restart = api?.pointee.time_restart {
            var when = timeval()
            gettimeofday(&when, nil)
            pa_timeval_add(&when, Self.retryMicroseconds)
            restart(retryTimer, &when)
        }
        recordLatency(stream)
    }

    /// The retry timer fired: what the server still wants is taken from the ring, the rest played
    /// as silence (an underrun).
    /// - Note: Called on the mainloop thread from the timer; must not allocate.
    mutating func finishShortRequest() {
        guard let stream = playbackStream, pa_stream_get_state(stream) == PA_STREAM_READY else { return }
        let writable = pa_stream_writable_size(stream)
        guard writable >= 2 else { return }  // (size_t)-1, an error, reads as -1
        _ = write(stream, samples: writable / 2, padWithSilence: true)
        recordLatency(stream)
    }

    /// Writes up to `samples` from the ring (and silence for the rest when `padWithSilence`,
    /// counting an underrun); signals the media loop when samples were taken or silence played.
    /// - Returns: the samples not written.
    /// - Note: Called on the mainloop thread; must not allocate.
    private mutating func write(_ stream: OpaquePointer, samples: Int, padWithSilence: Bool) -> Int {
        var remaining = samples
        var moved = 0
        while remaining > 0, io.availableToRead > 0 {
            guard let (data, room) = beginWrite(stream, samples: remaining) else { break }
            let taken = io.pull(into: data, count: room, residue: &position)
            if taken == 0 {
                pa_stream_cancel_write(stream)
                break
            }
            if pa_stream_write(stream, data, taken * 2, nil, 0, PA_SEEK_RELATIVE) != 0 { break }
            remaining -= taken
            moved += taken
        }
        let starved = remaining > 0 && padWithSilence
        if starved {
            var silence = 0
            while remaining > 0, let (data, room) = beginWrite(stream, samples: remaining) {
                memset(data, 0, room * 2)
                if pa_stream_write(stream, data, room * 2, nil, 0, PA_SEEK_RELATIVE) != 0 { break }
                remaining -= room
                silence += room
            }
            io.countUnderrun(silenceSamples: silence)
        }
        if moved > 0 || starved { io.signal() }  // starved: the media loop is behind, wake it
        return remaining
    }

    /// A server buffer for up to `samples` samples (`pa_stream_begin_write`), or nil.
    /// - Note: Called on the mainloop thread; must not allocate.
    private func beginWrite(_ stream: OpaquePointer, samples: Int) -> (UnsafeMutablePointer<Int16>, Int)? {
        var data: UnsafeMutableRawPointer? = nil
        var size = samples * 2
        guard pa_stream_begin_write(stream, &data, &size) == 0, let data else { return nil }
        let room = min(size / 2, samples)
        if room == 0 {
            pa_stream_cancel_write(stream)
            return nil
        }
        return (data.assumingMemoryBound(to: Int16.self), room)
    }

    /// Records the stream's latency as the server last reported it (interpolated).
    /// - Note: Called on the mainloop thread; must not allocate.
    func recordLatency(_ stream: OpaquePointer) {
        var microseconds: pa_usec_t = 0
        var negative: Int32 = 0
        guard pa_stream_get_latency(stream, &microseconds, &negative) == 0 else { return }
        io.recordLatency(microseconds: negative != 0 ? 0 : Int(clamping: microseconds))
    }
}
