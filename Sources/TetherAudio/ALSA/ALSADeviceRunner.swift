import CALSA
import Glibc
import Synchronization
import TetherRealtime

/// Start/stop bookkeeping and the device thread shared by `ALSACapture` and `ALSAPlayback`.
///
/// `start` opens and configures the PCM on the caller's thread (so configuration errors throw),
/// then starts one `RealtimeThread` that moves samples between the endpoint's ring and the PCM,
/// paced by the device: non-blocking `snd_pcm_readi`/`snd_pcm_writei`, and
/// `snd_pcm_wait` with a bounded timeout when the device has nothing to give or no room, so the
/// thread notices `stop()` within `waitTimeoutMilliseconds` without any cross-thread PCM call.
/// Capture pushes whole ring frames (partial periods gathered in one frame buffer); playback takes
/// from the ring what the device has room for, a period or more at a time.
final class ALSADeviceRunner: Sendable {
    /// SCHED_FIFO priority the device threads ask for (the same as the virtual devices).
    static let realtimePriority: Int32 = 10
    /// Longest a device thread blocks in `snd_pcm_wait` before polling its stop flag again.
    static let waitTimeoutMilliseconds: Int32 = 50
    /// Xruns in a row without a single frame moved after which the device counts as lost (a stream
    /// killed by the sound server reports -EPIPE forever; this stops the thread spinning on it).
    static let maximumConsecutiveXruns = 8
    /// Interval between attempts to reopen a lost device.
    static let reopenIntervalNanoseconds: UInt64 = 250_000_000

    let counters = DeviceCounters()
    let pcmName: String
    let direction: ALSAStreamDirection
    let periodMilliseconds: Int
    let periodCount: Int
    private let threadName: String
    private let eventHandler = Mutex<(@Sendable (AudioDeviceEvent) -> Void)?>(nil)
    private let running = Mutex<Running?>(nil)
    /// Granted geometry of the current run (period, buffer), in frames; (0, 0) when stopped.
    private let geometry = Mutex<(periodFrames: Int, bufferFrames: Int)>((0, 0))

    private struct Running: Sendable {
        var thread: RealtimeThread
        var endpoint: AudioEndpoint
        var state: ALSALoopState
    }

    init(pcmName: String, direction: ALSAStreamDirection, periodMilliseconds: Int, periodCount: Int) {
        precondition((1...1_000).contains(periodMilliseconds), "ALSA period must be 1…1000 ms")
        precondition(periodCount >= 2, "ALSA buffer needs at least 2 periods")
        self.pcmName = pcmName
        self.direction = direction
        self.periodMilliseconds = periodMilliseconds
        self.periodCount = periodCount
        threadName = direction == .capture ? "tether-alsa-in" : "tether-alsa-out"
    }

    var statistics: AudioDeviceStatistics { counters.snapshot }

    var grantedGeometry: (periodFrames: Int, bufferFrames: Int) { geometry.withLock { $0 } }

    func setEventHandler(_ handler: @escaping @Sendable (AudioDeviceEvent) -> Void) {
        eventHandler.withLock { $0 = handler }
    }

    /// Calls the event handler (control path: the device thread calls it only outside its I/O loop).
    private func report(_ event: AudioDeviceEvent) {
        let handler = eventHandler.withLock { $0 }
        handler?(event)
    }

    /// Validates `endpoint`, opens the PCM and starts the device thread.
    func start(deviceName: String, endpoint: AudioEndpoint) throws(AudioDeviceError) {
        try running.withLock { (running: inout Running?) throws(AudioDeviceError) in
            guard running == nil else { throw .alreadyStarted(name: deviceName) }
            try endpoint.validateForMonoDevice(named: deviceName)
            let format = endpoint.format
            let request = ALSAPCMRequest(
                pcmName: pcmName, direction: direction, sampleRateHertz: format.sampleRateHertz,
                periodFrames: max(1, periodMilliseconds * format.sampleRateHertz / 1_000), periodCount: periodCount)
            let opened = try ALSAPCM.open(request)

            counters.reset()
            let state = ALSALoopState(opened: opened, samplesPerFrame: format.samplesPerFrame)
            let loop = ALSADeviceLoop(
                direction: direction, io: DeviceThreadIO(endpoint: endpoint, counters: counters),
                counters: .passUnretained(counters), state: state,
                reopen: { () -> ALSAOpenPCM? in try? ALSAPCM.open(request) },
                report: { [weak self] event in self?.report(event) },
                pcmName: pcmName, sampleRateHertz: format.sampleRateHertz)
            let counters = Unmanaged.passUnretained(self.counters)
            let thread = RealtimeThread(name: threadName, realtimePriority: Self.realtimePriority)
            do throws(RealtimeThread.StartError) {
                try thread.start { thread in
                    counters._withUnsafeGuaranteedRef {
                        $0.scheduling.store(DeviceCounters.schedulingCode(thread.scheduling), ordering: .relaxed)
                    }
                    loop.run(stopFlag: .passUnretained(thread))
                }
            } catch {
                state.finish()
                throw .deviceThreadFailed(code: error.code)
            }
            geometry.withLock { $0 = (opened.periodFrames, opened.bufferFrames) }
            running = Running(thread: thread, endpoint: endpoint, state: state)
        }
    }

    /// Stops and joins the thread, then closes the PCM and frees the buffers. Idempotent.
    func stop() {
        running.withLock { running in
            guard let current = running else { return }
            current.thread.stop()
            current.state.finish()
            current.endpoint.demand.set(queuedSamples: 0)  // a sink started after this one says its own
            geometry.withLock { $0 = (0, 0) }
            running = nil
        }
    }
}

/// Storage the device thread owns while it runs: the current PCM (replaced on recovery) and the
/// frame and silence buffers, allocated at start. The control thread frees it (`finish`) only
/// after joining the thread.
final class ALSALoopState: @unchecked Sendable {
    /// The open PCM, or `nil` while the device is lost.
    var pcm: OpaquePointer?
    var periodFrames: Int
    var bufferFrames: Int
    /// One ring frame.
    let frame: UnsafeMutableBufferPointer<Int16>
    /// Zeros for the playback prefill, one period long (re-allocated only on reopen with a larger period).
    var silence: UnsafeMutableBufferPointer<Int16>

    init(opened: ALSAOpenPCM, samplesPerFrame: Int) {
        pcm = opened.pcm
        periodFrames = opened.periodFrames
        bufferFrames = opened.bufferFrames
        frame = .allocate(capacity: samplesPerFrame)
        frame.initialize(repeating: 0)
        silence = .allocate(capacity: opened.periodFrames)
        silence.initialize(repeating: 0)
    }

    /// Adopts a reopened PCM. Control path (may allocate).
    func adopt(_ opened: ALSAOpenPCM) {
        pcm = opened.pcm
        periodFrames = opened.periodFrames
        bufferFrames = opened.bufferFrames
        if silence.count < opened.periodFrames {
            silence.deallocate()
            silence = .allocate(capacity: opened.periodFrames)
            silence.initialize(repeating: 0)
        }
    }

    /// Closes the PCM, if any, and frees the buffers. Called once, after the thread has ended.
    func finish() {
        if let pcm {
            ALSAPCM.close(pcm)
            self.pcm = nil
        }
        frame.deallocate()
        silence.deallocate()
    }
}

/// The device thread's work.
struct ALSADeviceLoop: Sendable {
    let direction: ALSAStreamDirection
    let io: DeviceThreadIO
    let counters: Unmanaged<DeviceCounters>
    let state: ALSALoopState
    /// Opens the PCM again with the original request (control path).
    let reopen: @Sendable () -> ALSAOpenPCM?
    /// Posts an event to the handler (control path).
    let report: @Sendable (AudioDeviceEvent) -> Void
    let pcmName: String
    let sampleRateHertz: Int

    private enum Outcome {
        case stopped
        case lost(Int32)
    }

    /// Runs I/O until stopped; when the device is lost, reports `.failed`, retries opening it every
    /// 250 ms, reports `.recovered` and resumes.
    func run(stopFlag: Unmanaged<RealtimeThread>) {
        while let pcm = state.pcm {
            let outcome =
                direction == .capture
                ? captureLoop(pcm: pcm, stopFlag: stopFlag) : playbackLoop(pcm: pcm, stopFlag: stopFlag)
            guard case let .lost(code) = outcome else { return }
            // Out of the I/O loop: allocation and the handler are fine from here on.
            if let pcm = state.pcm {
                ALSAPCM.close(pcm)
                state.pcm = nil
            }
            io.recordError(-code)
            report(.failed(.deviceUnavailable(name: pcmName, reason: ALSAPCM.message(code))))
            guard let opened = waitForReopen(stopFlag: stopFlag) else { return }
            state.adopt(opened)
            report(.recovered(deviceName: pcmName))
        }
    }

    /// Retries opening every 250 ms until it works or a stop is requested.
    private func waitForReopen(stopFlag: Unmanaged<RealtimeThread>) -> ALSAOpenPCM? {
        while true {
            let next = MonotonicClock.nanoseconds() &+ ALSADeviceRunner.reopenIntervalNanoseconds
            while MonotonicClock.nanoseconds() < next {
                if stopFlag._withUnsafeGuaranteedRef({ $0.isStopRequested }) { return nil }
                MonotonicClock.sleep(untilNanoseconds: min(next, MonotonicClock.nanoseconds() &+ 50_000_000))
            }
            if stopFlag._withUnsafeGuaranteedRef({ $0.isStopRequested }) { return nil }
            if let opened = reopen() { return opened }
        }
    }

    /// Reads the device into whole ring frames.
    /// - Note: Called on the device thread; must not allocate.
    private func captureLoop(pcm: OpaquePointer, stopFlag: Unmanaged<RealtimeThread>) -> Outcome {
        let frame = state.frame
        let base = frame.baseAddress!
        let samplesPerFrame = frame.count
        var filled = 0
        var xruns = 0
        while !stopFlag._withUnsafeGuaranteedRef({ $0.isStopRequested }) {
            let result = snd_pcm_readi(pcm, base + filled, snd_pcm_uframes_t(samplesPerFrame - filled))
            if result > 0 {
                xruns = 0
                filled += result
                if filled == samplesPerFrame {
                    io.pushFrame(UnsafeBufferPointer(frame))
                    io.signal()
                    filled = 0
                    recordDelay(pcm: pcm)
                }
                continue
            }
            if let lost = waitOrRecover(pcm: pcm, result: result, xruns: &xruns) { return .lost(lost) }
        }
        return .stopped
    }

    /// Moves samples from the ring to the device as the device frees room, a period or more at a
    /// time: what sits in the ring waits there, not in the device, so the media loop decodes
    /// close to when it is played (it keeps one period queued: `PlaybackDemand`). When the ring
    /// is empty while the running device still holds a period or more, the thread waits for the
    /// media loop a millisecond at a time, up to half a period; then, or when the device holds
    /// less or has not started, it plays silence for the room there is (an underrun). A stream
    /// not yet started takes what room it has, so that it fills and starts.
    /// - Note: Called on the device thread; must not allocate.
    private func playbackLoop(pcm: OpaquePointer, stopFlag: Unmanaged<RealtimeThread>) -> Outcome {
        let staging = state.frame
        let base = staging.baseAddress!
        var residue = 0
        var xruns = 0
        /// Samples' worth of time spent waiting for the media loop with the ring empty.
        var waitedForRing = 0
        prefill(pcm: pcm)
        io.setDemand(queuedSamples: state.periodFrames)
        while !stopFlag._withUnsafeGuaranteedRef({ $0.isStopRequested }) {
            let room = snd_pcm_avail_update(pcm)
            if room < 0 {
                if let lost = recover(pcm: pcm, code: Int32(truncatingIfNeeded: room), xruns: &xruns) { return .lost(lost) }
                continue
            }
            let period = state.periodFrames
            let running = snd_pcm_state(pcm) == SND_PCM_STATE_RUNNING
            // A stream that has not started takes what room it has (it starts when full).
            if room < period && (running || room == 0) {
                let waited = snd_pcm_wait(pcm, ALSADeviceRunner.waitTimeoutMilliseconds)
                if waited < 0, let lost = recover(pcm: pcm, code: waited, xruns: &xruns) { return .lost(lost) }
                // The pulse plugin reports the stream ready as soon as any room is free, not a
                // period: sleep until a period should be, rather than spin at realtime priority.
                let free = snd_pcm_avail_update(pcm)
                if waited >= 0, free >= 0, free < period {
                    let missing = UInt64(period - Int(free))
                    MonotonicClock.sleep(
                        untilNanoseconds: MonotonicClock.nanoseconds() &+ missing * 1_000_000_000 / UInt64(max(1, sampleRateHertz)))
                }
                continue
            }
            var source = UnsafePointer(base)
            var count = io.pull(into: base, count: min(Int(room), staging.count), residue: &residue)
            if count > 0 {
                io.signal()
                waitedForRing = 0
            } else if waitedForRing < period / 2, state.bufferFrames - Int(room) >= period, running {
                // The device still plays a period or more: give the media loop a moment.
                MonotonicClock.sleep(untilNanoseconds: MonotonicClock.nanoseconds() &+ 1_000_000)
                waitedForRing += sampleRateHertz / 1000
                continue
            } else {
                waitedForRing = 0
                source = UnsafePointer(state.silence.baseAddress!)
                count = min(Int(room), state.silence.count)
                io.countUnderrun(silenceSamples: count)
                io.signal()  // the media loop is behind: wake it
            }
            var written = 0
            while written < count {
                let result = snd_pcm_writei(pcm, source + written, snd_pcm_uframes_t(count - written))
                if result > 0 {
                    xruns = 0
                    written += result
                } else if let lost = waitOrRecover(pcm: pcm, result: result, xruns: &xruns) {
                    return .lost(lost)
                }
                if stopFlag._withUnsafeGuaranteedRef({ $0.isStopRequested }) { return .stopped }
            }
            recordDelay(pcm: pcm)
        }
        return .stopped
    }

    /// Records the device's delay (`snd_pcm_delay`): for playback, the samples between the
    /// application and the listener; for capture, between the microphone and the application.
    /// - Note: Called on the device thread; must not allocate.
    private func recordDelay(pcm: OpaquePointer) {
        var delay: snd_pcm_sframes_t = 0
        guard snd_pcm_delay(pcm, &delay) == 0 else { return }
        // A driver's nonsense (beyond a minute) is no latency to record, nor a reason to trap.
        guard delay >= 0, delay < 60 * max(1, sampleRateHertz) else { return }
        io.recordLatency(microseconds: Int(delay) * 1_000_000 / max(1, sampleRateHertz))
    }

    /// After a read or write that moved nothing: waits for the device when it is only not ready
    /// (-EAGAIN or 0), otherwise recovers from the error.
    /// - Returns: `nil` to go on, or the error that lost the device.
    /// - Note: Called on the device thread; must not allocate.
    private func waitOrRecover(pcm: OpaquePointer, result: snd_pcm_sframes_t, xruns: inout Int) -> Int32? {
        let code = Int32(truncatingIfNeeded: result)
        if code == -EAGAIN || code == 0 {
            let waited = snd_pcm_wait(pcm, ALSADeviceRunner.waitTimeoutMilliseconds)
            return waited >= 0 ? nil : recover(pcm: pcm, code: waited, xruns: &xruns)
        }
        return recover(pcm: pcm, code: code, xruns: &xruns)
    }

    /// Writes silence for all of the buffer but one period, so that the first real period fills
    /// the buffer and starts the stream with a full period of margin.
    /// - Returns: the frames of silence written.
    /// - Note: Called on the device thread; must not allocate.
    @discardableResult
    private func prefill(pcm: OpaquePointer) -> Int {
        var remaining = state.bufferFrames - state.periodFrames
        let silence = state.silence
        var written = 0
        while remaining > 0 {
            let chunk = min(remaining, silence.count)
            let result = snd_pcm_writei(pcm, silence.baseAddress!, snd_pcm_uframes_t(chunk))
            guard result > 0 else { break }
            remaining -= result
            written += result
        }
        return written
    }

    /// Recovers from `code` (a negative ALSA result) when it is an xrun or a suspend.
    /// - Parameter xruns: xruns in a row since the last frame moved (updated here).
    /// - Returns: `nil` when the stream can go on, otherwise the error that lost the device.
    /// - Note: Called on the device thread; must not allocate.
    private func recover(pcm: OpaquePointer, code: Int32, xruns: inout Int) -> Int32? {
        switch code {
        case -EINTR, -EAGAIN:
            return nil
        case -EPIPE:
            xruns += 1
            if xruns > ALSADeviceRunner.maximumConsecutiveXruns { return code }
            counters._withUnsafeGuaranteedRef { counters in
                _ = direction == .capture
                    ? counters.overruns.add(1, ordering: .relaxed)
                    : counters.underruns.add(1, ordering: .relaxed)
            }
            return restart(pcm: pcm)
        case -ESTRPIPE:
            var resumed = snd_pcm_resume(pcm)
            var attempts = 0
            while resumed == -EAGAIN && attempts < 200 {
                MonotonicClock.sleep(untilNanoseconds: MonotonicClock.nanoseconds() &+ 10_000_000)
                resumed = snd_pcm_resume(pcm)
                attempts += 1
            }
            if resumed >= 0 { return nil }
            return restart(pcm: pcm)
        default:
            return code
        }
    }

    /// Prepares the stream again after an xrun (refilling the playback margin, silence that is
    /// counted as played in the ring's place; the silence the device played before the xrun was
    /// noticed is not known here, and is not counted).
    /// - Note: Called on the device thread; must not allocate.
    private func restart(pcm: OpaquePointer) -> Int32? {
        let prepared = snd_pcm_prepare(pcm)
        guard prepared >= 0 else { return prepared }
        if direction == .playback { io.countSilence(samples: prefill(pcm: pcm)) }
        return nil
    }
}
