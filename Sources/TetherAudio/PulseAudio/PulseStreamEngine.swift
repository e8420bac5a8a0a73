import CPulse
import Glibc
import Synchronization
import TetherRealtime

/// Which way a PulseAudio stream moves audio.
enum PulseDirection: Sendable {
    /// A record stream from a source into the capture ring.
    case capture
    /// A playback stream from the playback ring into a sink.
    case playback
}

/// The shared machinery of `PulseAudioCapture` and `PulseAudioPlayback`: one
/// `pa_threaded_mainloop`, one context and one stream per run, plus the recovery logic.
///
/// Threading: `start` and `stop` run on a control thread (any thread but the mainloop's),
/// serialized by `lifecycle`. Every other mutable property is guarded by the mainloop lock: the
/// control thread takes it with `pa_threaded_mainloop_lock`, and libpulse holds it while it runs
/// callbacks on the mainloop thread. Hence `@unchecked Sendable`.
///
/// Recovery:
/// - explicit device killed or removed: `.failed(.deviceUnavailable)`; playback reopens on the
///   default sink at once (`.moved`), and again (backing off) whenever that stream fails; capture
///   waits. When a device of that name appears again the stream is reopened on it (`.recovered`).
/// - daemon gone (context FAILED/TERMINATED): `.failed(.backendFailed)`, then a new context every
///   250 ms until one connects; the stream is reopened (`.recovered`).
/// - stream following the default moved by the server: `.moved`.
final class PulseStreamEngine: @unchecked Sendable {
    /// Delay between reconnection attempts after the daemon went away, in microseconds.
    static let reconnectIntervalMicroseconds: UInt64 = 250_000
    /// Longest `start` waits for the daemon, the device lookup and the stream, in microseconds.
    static let startTimeoutMicroseconds: UInt64 = 5_000_000

    /// What to report when the stream being opened becomes ready.
    private enum Announcement {
        case none
        case recovered
        case moved
    }

    let direction: PulseDirection
    /// The device asked for, or `nil` to follow the system default.
    let requestedDeviceName: String?
    let periodMilliseconds: Int
    let applicationName: String
    /// Name used in errors and logs.
    let displayName: String
    let counters = DeviceCounters()
    private let eventHandler = Mutex<(@Sendable (AudioDeviceEvent) -> Void)?>(nil)
    /// Serializes `start` and `stop`.
    private let lifecycle = Mutex<Void>(())

    // Guarded by the mainloop lock (or owned by the control thread while no mainloop runs).
    private var mainloop: OpaquePointer?
    private var api: UnsafeMutablePointer<pa_mainloop_api>?
    private var context: OpaquePointer?
    private var stream: OpaquePointer?
    /// The stream is the playback fallback on the default sink, not on the requested device.
    private var streamIsFallback = false
    private var io: UnsafeMutablePointer<PulseStreamIO>?
    private var endpoint: AudioEndpoint?
    private var sampleSpec = pa_sample_spec()
    /// True from a successful start until stop: callbacks act on failures only while running.
    private var running = false
    /// A `.failed` event was reported and no `.recovered` since.
    private var failureReported = false
    private var announcement = Announcement.none
    /// Fallback streams opened since the requested playback device was lost (for the back-off).
    private var fallbackAttempts = 0
    private var retryTimer: OpaquePointer?
    private var deadlinePassed = false

    init(direction: PulseDirection, deviceName: String?, periodMilliseconds: Int, applicationName: String) {
        precondition(
            periodMilliseconds == 10 || periodMilliseconds == 20, "PulseAudio period must be 10 or 20 ms")
        self.direction = direction
        self.requestedDeviceName = deviceName
        self.periodMilliseconds = periodMilliseconds
        self.applicationName = applicationName
        let kind = direction == .capture ? "capture" : "playback"
        self.displayName = "PulseAudio \(kind) (\(deviceName ?? "default"))"
    }

    deinit { stop() }

    var statistics: AudioDeviceStatistics { counters.snapshot }

    func setEventHandler(_ handler: @escaping @Sendable (AudioDeviceEvent) -> Void) {
        eventHandler.withLock { $0 = handler }
    }

    // MARK: - Start and stop (control thread)

    /// Connects to the daemon, checks the requested device, opens the stream and waits until it
    /// runs.
    func start(_ endpoint: AudioEndpoint) throws(AudioDeviceError) {
        try lifecycle.withLock { (_: inout Void) throws(AudioDeviceError) in
            guard mainloop == nil else { throw .alreadyStarted(name: displayName) }
            try endpoint.validateForMonoDevice(named: displayName)
            let format = endpoint.format
            guard let loop = pa_threaded_mainloop_new() else {
                throw .backendFailed(reason: "cannot create a PulseAudio mainloop")
            }
            counters.reset()
            mainloop = loop
            api = pa_threaded_mainloop_get_api(loop)
            sampleSpec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(format.sampleRateHertz), channels: 1)
            self.endpoint = endpoint
            io = PulseStreamIO.allocate(endpoint: endpoint, counters: counters, direction: direction)
            pa_threaded_mainloop_set_name(loop, direction == .capture ? "tether-pa-in" : "tether-pa-out")
            guard pa_threaded_mainloop_start(loop) >= 0 else {
                shutDown()
                throw .backendFailed(reason: "cannot start the PulseAudio mainloop thread")
            }
            pa_threaded_mainloop_lock(loop)
            do throws(AudioDeviceError) {
                try openAtStart()
            } catch {
                pa_threaded_mainloop_unlock(loop)
                shutDown()
                throw error
            }
            running = true
            pa_threaded_mainloop_unlock(loop)
        }
    }

    /// Closes the stream and the context, ends the mainloop thread and frees the run's storage.
    /// Idempotent.
    /// - Note: Must not be called on the mainloop thread (for example from the event handler).
    func stop() {
        lifecycle.withLock { _ in shutDown() }
    }

    /// Called with `lifecycle` held and the mainloop lock not held.
    private func shutDown() {
        guard let loop = mainloop else { return }
        precondition(pa_threaded_mainloop_in_thread(loop) == 0, "\(displayName): stop called on its mainloop thread")
        pa_threaded_mainloop_lock(loop)
        running = false
        closeStream()
        cancelRetry()
        closeContext()
        pa_threaded_mainloop_unlock(loop)
        pa_threaded_mainloop_stop(loop)
        pa_threaded_mainloop_free(loop)
        mainloop = nil
        api = nil
        if let io { PulseStreamIO.deallocate(io) }
        io = nil
        endpoint?.demand.set(queuedSamples: 0)  // a sink started after this one says its own
        endpoint = nil
        failureReported = false
        announcement = .none
        streamIsFallback = false
    }

    /// Called with the mainloop lock held, on the control thread.
    private func openAtStart() throws(AudioDeviceError) {
        guard createContext() else {
            throw .backendFailed(reason: "cannot connect to PulseAudio: \(contextErrorMessage())")
        }
        let connected = waitLocked {
            guard let context = self.context else { return true }
            let state = pa_context_get_state(context)
            return state == PA_CONTEXT_READY || state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
        }
        guard connected, let context, pa_context_get_state(context) == PA_CONTEXT_READY else {
            let reason = connected ? contextErrorMessage() : "timed out"
            throw .backendFailed(reason: "cannot connect to PulseAudio: \(reason)")
        }
        subscribe()
        if let name = requestedDeviceName {
            let found = try lookUpAtStart(name)
            guard found else {
                throw .deviceUnavailable(
                    name: name, reason: "no PulseAudio \(direction == .capture ? "source" : "sink") of that name")
            }
        }
        guard openStream(fallback: false) else {
            throw .deviceUnavailable(name: requestedDeviceName ?? "default", reason: contextErrorMessage())
        }
        let settled = waitLocked {
            guard let stream = self.stream else { return true }
            let state = pa_stream_get_state(stream)
            return state == PA_STREAM_READY || state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED
        }
        guard settled, let stream, pa_stream_get_state(stream) == PA_STREAM_READY else {
            // A server that takes the stream and never links it to a device: on PipeWire, no
            // session manager (WirePlumber) is running, which a user can meet too.
            let reason =
                settled
                ? contextErrorMessage()
                : "the server took the stream but did not connect it to a device within \(Self.startTimeoutMicroseconds / 1_000_000) s (on PipeWire: no session manager, such as WirePlumber, is running to link it)"
            throw .deviceUnavailable(name: requestedDeviceName ?? "default", reason: reason)
        }
    }

    /// Whether a sink (playback) or source (capture) called `name` exists.
    /// Called with the mainloop lock held, on the control thread.
    private func lookUpAtStart(_ name: String) throws(AudioDeviceError) -> Bool {
        guard let context, let loop = mainloop else { return false }
        let lookup = UnsafeMutablePointer<PulseLookup>.allocate(capacity: 1)
        lookup.initialize(to: PulseLookup(mainloop: loop))
        defer { lookup.deallocate() }
        let operation: OpaquePointer? =
            switch direction {
            case .capture:
                pa_context_get_source_info_by_name(
                    context, name,
                    { _, info, eol, userdata in
                        PulseLookup.record(userdata, found: info != nil, finished: eol != 0)
                    }, lookup)
            case .playback:
                pa_context_get_sink_info_by_name(
                    context, name,
                    { _, info, eol, userdata in
                        PulseLookup.record(userdata, found: info != nil, finished: eol != 0)
                    }, lookup)
            }
        guard let operation else {
            throw .backendFailed(reason: "cannot query PulseAudio devices: \(contextErrorMessage())")
        }
        let finished = waitLocked { lookup.pointee.finished || pa_operation_get_state(operation) != PA_OPERATION_RUNNING }
        pa_operation_cancel(operation)
        pa_operation_unref(operation)
        guard finished else { throw .backendFailed(reason: "timed out querying PulseAudio devices") }
        return lookup.pointee.found
    }

    /// Waits on the mainloop condition until `done` holds or the start timeout passes.
    /// Called with the mainloop lock held, on the control thread.
    private func waitLocked(_ done: () -> Bool) -> Bool {
        guard let loop = mainloop else { return done() }
        deadlinePassed = false
        let timer = addTimer(afterMicroseconds: Self.startTimeoutMicroseconds) { _, _, _, userdata in
            let engine = Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue()
            engine.deadlinePassed = true
            if let loop = engine.mainloop { pa_threaded_mainloop_signal(loop, 0) }
        }
        while !done() && !deadlinePassed { pa_threaded_mainloop_wait(loop) }
        if let timer, let api { api.pointee.time_free?(timer) }
        return done()
    }

    // MARK: - Context (mainloop lock held)

    /// Creates a context and starts connecting it. Returns false when the connection failed at once
    /// (the context is then closed).
    private func createContext() -> Bool {
        guard let api, let context = pa_context_new(api, applicationName) else { return false }
        self.context = context
        pa_context_set_state_callback(
            context,
            { context, userdata in
                Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue().contextStateChanged(context!)
            }, selfPointer)
        // A connection that fails at once calls the state callback (FAILED) from inside
        // `pa_context_connect`, which may already close the context: hold a reference meanwhile.
        pa_context_ref(context)
        defer { pa_context_unref(context) }
        if pa_context_connect(context, nil, PA_CONTEXT_NOAUTOSPAWN, nil) < 0 {
            lastContextError = pa_context_errno(context)
            if self.context == context { closeContext() }
            return false
        }
        return self.context == context
    }

    /// The last error of a context that was closed since (for messages).
    private var lastContextError: Int32 = 0

    private func contextErrorMessage() -> String {
        let code = context.map { pa_context_errno($0) } ?? lastContextError
        guard let text = pa_strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }

    private func closeContext() {
        guard let context else { return }
        lastContextError = pa_context_errno(context)
        pa_context_set_state_callback(context, nil, nil)
        pa_context_set_subscribe_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
        self.context = nil
    }

    private func subscribe() {
        guard let context else { return }
        pa_context_set_subscribe_callback(
            context,
            { _, event, index, userdata in
                Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue()
                    .subscriptionEvent(event, index: index)
            }, selfPointer)
        let mask = pa_subscription_mask_t(
            rawValue: PA_SUBSCRIPTION_MASK_SINK.rawValue | PA_SUBSCRIPTION_MASK_SOURCE.rawValue
                | PA_SUBSCRIPTION_MASK_SERVER.rawValue)
        if let operation = pa_context_subscribe(context, mask, nil, nil) { pa_operation_unref(operation) }
    }

    /// - Note: Called on the mainloop thread.
    private func contextStateChanged(_ changed: OpaquePointer) {
        guard changed == context else { return }
        if let mainloop { pa_threaded_mainloop_signal(mainloop, 0) }
        guard running else { return }
        switch pa_context_get_state(changed) {
        case PA_CONTEXT_READY:
            // A reconnection succeeded.
            subscribe()
            announcement = .recovered
            if !openStream(fallback: false) { streamLost(reason: contextErrorMessage()) }
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            let reason = contextErrorMessage()
            closeStream()
            closeContext()
            if !failureReported {
                failureReported = true
                report(.failed(.backendFailed(reason: "PulseAudio connection lost: \(reason)")))
            }
            scheduleRetry()
        default:
            break
        }
    }

    /// Arms the retry timer: a new context when the daemon is gone, else the playback fallback
    /// on the default sink (after 250 ms, doubling with each failed fallback up to 4 s).
    private func scheduleRetry() {
        guard retryTimer == nil else { return }
        let backoff = context == nil ? 0 : min(max(fallbackAttempts - 1, 0), 4)
        retryTimer = addTimer(afterMicroseconds: Self.reconnectIntervalMicroseconds << backoff) { _, _, _, userdata in
            Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue().retryFired()
        }
    }

    private func cancelRetry() {
        if let retryTimer, let api { api.pointee.time_free?(retryTimer) }
        retryTimer = nil
    }

    /// - Note: Called on the mainloop thread.
    private func retryFired() {
        cancelRetry()
        guard running else { return }
        guard let context else {
            if !createContext() { scheduleRetry() }
            return
        }
        // The playback fallback failed; try it again unless a stream runs or the requested device
        // came back meanwhile.
        guard direction == .playback, requestedDeviceName != nil, stream == nil,
            pa_context_get_state(context) == PA_CONTEXT_READY
        else { return }
        if !openFallback() { scheduleRetry() }
    }

    /// A one-shot timer on the mainloop calling `callback` with this engine as userdata.
    private func addTimer(afterMicroseconds delay: UInt64, _ callback: pa_time_event_cb_t) -> OpaquePointer? {
        guard let api, let timeNew = api.pointee.time_new else { return nil }
        var when = timeval()
        gettimeofday(&when, nil)
        pa_timeval_add(&when, delay)
        return timeNew(api, &when, callback, selfPointer)
    }

    private var selfPointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    // MARK: - Stream (mainloop lock held)

    /// Creates and connects a stream on the requested device (or the default when none was asked
    /// for, or when `fallback`). Returns false when it could not even be created or connected.
    private func openStream(fallback: Bool) -> Bool {
        guard let context, let io else { return false }
        closeStream()
        let streamName = "\(applicationName) \(direction == .capture ? "capture" : "playback")"
        guard let stream = pa_stream_new(context, streamName, &sampleSpec, nil) else { return false }
        self.stream = stream
        streamIsFallback = fallback
        pa_stream_set_state_callback(
            stream,
            { stream, userdata in
                Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue().streamStateChanged(stream!)
            }, selfPointer)
        pa_stream_set_moved_callback(
            stream,
            { stream, userdata in
                Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue().streamMoved(stream!)
            }, selfPointer)
        let periodBytes = UInt32(Int(sampleSpec.rate) * periodMilliseconds / 1000 * 2)
        let device = fallback ? nil : requestedDeviceName
        // Interpolated timing: the latency recorded after each request or read is current, not
        // as of the last timing update (every 100 ms or so).
        var flags =
            PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue
        if device != nil { flags |= PA_STREAM_DONT_MOVE.rawValue }
        let result: Int32
        switch direction {
        case .capture:
            pa_stream_set_read_callback(
                stream,
                { stream, _, userdata in
                    let io = userdata!.assumingMemoryBound(to: PulseStreamIO.self)
                    io.pointee.requestRealtimeOnce()
                    io.pointee.drainRecordStream(stream!)
                }, io)
            pa_stream_set_overflow_callback(
                stream,
                { _, userdata in userdata!.assumingMemoryBound(to: PulseStreamIO.self).pointee.countServerXrun(.capture) }, io)
            var attributes = pa_buffer_attr(
                maxlength: 4 * periodBytes, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
                fragsize: periodBytes)
            result = withOptionalCString(device) {
                pa_stream_connect_record(stream, $0, &attributes, pa_stream_flags_t(rawValue: flags))
            }
        case .playback:
            pa_stream_set_write_callback(
                stream,
                { stream, requestedBytes, userdata in
                    let io = userdata!.assumingMemoryBound(to: PulseStreamIO.self)
                    io.pointee.requestRealtimeOnce()
                    io.pointee.fillPlaybackStream(stream!, requestedBytes: requestedBytes)
                }, io)
            pa_stream_set_underflow_callback(
                stream,
                { _, userdata in userdata!.assumingMemoryBound(to: PulseStreamIO.self).pointee.countServerXrun(.playback) }, io)
            // The timer that finishes a request the ring could not cover (created disabled).
            io.pointee.api = api
            io.pointee.playbackStream = stream
            io.pointee.retryTimer = api?.pointee.time_new?(
                api, nil,
                { _, _, _, userdata in userdata!.assumingMemoryBound(to: PulseStreamIO.self).pointee.finishShortRequest() }, io)
            // Two periods queued in the server: with one (tried first) the server ran dry 8–18
            // times in 10 s through the loopback devices; with two, 1–2 (`tether-bench latency`).
            var attributes = pa_buffer_attr(
                maxlength: 8 * periodBytes, tlength: 2 * periodBytes, prebuf: (periodBytes / 2) & ~1,
                minreq: UInt32.max, fragsize: UInt32.max)
            result = withOptionalCString(device) {
                pa_stream_connect_playback(stream, $0, &attributes, pa_stream_flags_t(rawValue: flags), nil, nil)
            }
        }
        if result < 0 {
            closeStream()
            return false
        }
        return true
    }

    private func closeStream() {
        guard let stream else { return }
        if let io {
            if let timer = io.pointee.retryTimer { api?.pointee.time_free?(timer) }
            io.pointee.retryTimer = nil
            io.pointee.playbackStream = nil
        }
        pa_stream_set_state_callback(stream, nil, nil)
        pa_stream_set_moved_callback(stream, nil, nil)
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_set_write_callback(stream, nil, nil)
        pa_stream_set_overflow_callback(stream, nil, nil)
        pa_stream_set_underflow_callback(stream, nil, nil)
        if pa_stream_get_state(stream) == PA_STREAM_READY || pa_stream_get_state(stream) == PA_STREAM_CREATING {
            pa_stream_disconnect(stream)
        }
        pa_stream_unref(stream)
        self.stream = nil
        streamIsFallback = false
    }

    /// - Note: Called on the mainloop thread.
    private func streamStateChanged(_ changed: OpaquePointer) {
        guard changed == stream else { return }
        if let mainloop { pa_threaded_mainloop_signal(mainloop, 0) }
        guard running else { return }
        switch pa_stream_get_state(changed) {
        case PA_STREAM_READY:
            let name = deviceName(of: changed)
            switch announcement {
            case .none: break
            case .moved: report(.moved(deviceName: name))
            case .recovered:
                failureReported = false
                report(.recovered(deviceName: name))
            }
            announcement = .none
        case PA_STREAM_FAILED, PA_STREAM_TERMINATED:
            // When the whole context went away, `contextStateChanged` handles it.
            guard let context, pa_context_get_state(context) == PA_CONTEXT_READY else { return }
            streamLost(reason: contextErrorMessage())
        default:
            break
        }
    }

    /// The stream died (device killed or removed) or could not be opened.
    private func streamLost(reason: String) {
        let wasFallback = streamIsFallback
        closeStream()
        let name = requestedDeviceName ?? "default"
        if !failureReported {
            failureReported = true
            report(.failed(.deviceUnavailable(name: name, reason: reason)))
        }
        guard direction == .playback, requestedDeviceName != nil else {
            // Wait for a device of that name (or any device, when following the default).
            announcement = .recovered
            return
        }
        // Playback goes on on the default sink while it waits for its own. A fallback that fails
        // is tried again: pipewire-pulse fails a stream opened on the default while the removed
        // sink is still being taken down ("Bad state"; 3 of 15 removals in the test rig).
        if !wasFallback { fallbackAttempts = 0 }
        if wasFallback || !openFallback() { scheduleRetry() }
    }

    /// Opens the playback stream on the default sink, to announce `.moved` when it is ready.
    private func openFallback() -> Bool {
        fallbackAttempts += 1
        announcement = .moved
        if openStream(fallback: true) { return true }
        announcement = .recovered
        return false
    }

    /// - Note: Called on the mainloop thread.
    private func streamMoved(_ moved: OpaquePointer) {
        guard moved == stream, running else { return }
        report(.moved(deviceName: deviceName(of: moved)))
    }

    private func deviceName(of stream: OpaquePointer) -> String {
        guard let text = pa_stream_get_device_name(stream) else { return requestedDeviceName ?? "default" }
        return String(cString: text)
    }

    /// Whether the stream should be (re)opened on the requested device when one appears.
    private var awaitingDevice: Bool { stream == nil || streamIsFallback }

    // MARK: - Device appearance and removal (mainloop thread)

    /// - Note: Called on the mainloop thread.
    private func subscriptionEvent(_ event: pa_subscription_event_type_t, index: UInt32) {
        guard running, let context, pa_context_get_state(context) == PA_CONTEXT_READY else { return }
        let facility = event.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
        let kind = event.rawValue & PA_SUBSCRIPTION_EVENT_TYPE_MASK.rawValue
        let ours = direction == .capture ? PA_SUBSCRIPTION_EVENT_SOURCE.rawValue : PA_SUBSCRIPTION_EVENT_SINK.rawValue
        guard facility == ours else { return }
        if kind == PA_SUBSCRIPTION_EVENT_REMOVE.rawValue {
            // Normally the server kills a DONT_MOVE stream first; this covers a missed kill.
            if let stream, requestedDeviceName != nil, !streamIsFallback,
                pa_stream_get_state(stream) == PA_STREAM_READY, pa_stream_get_device_index(stream) == index
            {
                streamLost(reason: "device removed")
            }
        } else if kind == PA_SUBSCRIPTION_EVENT_NEW.rawValue, awaitingDevice {
            guard let name = requestedDeviceName else {
                if stream == nil, !openStream(fallback: false) { streamLost(reason: contextErrorMessage()) }
                return
            }
            let operation: OpaquePointer? =
                switch direction {
                case .capture:
                    pa_context_get_source_info_by_name(
                        context, name,
                        { _, info, _, userdata in
                            guard info != nil else { return }
                            Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue().requestedDeviceAppeared()
                        }, selfPointer)
                case .playback:
                    pa_context_get_sink_info_by_name(
                        context, name,
                        { _, info, _, userdata in
                            guard info != nil else { return }
                            Unmanaged<PulseStreamEngine>.fromOpaque(userdata!).takeUnretainedValue().requestedDeviceAppeared()
                        }, selfPointer)
                }
            if let operation { pa_operation_unref(operation) }
        }
    }

    /// - Note: Called on the mainloop thread.
    private func requestedDeviceAppeared() {
        guard running, context != nil, awaitingDevice else { return }
        announcement = .recovered
        if !openStream(fallback: false) { streamLost(reason: contextErrorMessage()) }
    }

    /// Delivers an event to the handler.
    /// - Note: Called on the mainloop thread, with the mainloop lock held.
    private func report(_ event: AudioDeviceEvent) {
        let handler = eventHandler.withLock { $0 }
        handler?(event)
    }
}

/// Result of a device lookup made while `start` waits.
struct PulseLookup {
    let mainloop: OpaquePointer
    var found = false
    var finished = false

    init(mainloop: OpaquePointer) {
        self.mainloop = mainloop
    }

    /// - Note: Called on the mainloop thread from an info callback.
    static func record(_ userdata: UnsafeMutableRawPointer?, found: Bool, finished: Bool) {
        let lookup = userdata!.assumingMemoryBound(to: PulseLookup.self)
        if found { lookup.pointee.found = true }
        if finished { lookup.pointee.finished = true }
        pa_threaded_mainloop_signal(lookup.pointee.mainloop, 0)
    }
}

/// Calls `body` with a C string of `string`, or with `nil`.
func withOptionalCString<Result>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> Result) -> Result {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
