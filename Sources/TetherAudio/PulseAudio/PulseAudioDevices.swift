import CPulse
import Glibc
import TetherRealtime

/// Lists the PulseAudio sinks and sources.
public enum PulseAudioDevices {
    /// The sinks (direction `.playback`) and sources (direction `.capture`, monitors included) of
    /// the PulseAudio daemon, with the server's defaults marked. Sinks come first, each group in
    /// the daemon's order.
    ///
    /// Opens a short-lived connection on the calling thread (a plain `pa_mainloop`).
    /// - Parameter timeoutSeconds: how long to wait for the daemon, in seconds.
    /// - Throws: `.backendFailed` when the daemon cannot be reached or does not answer in time.
    public static func list(applicationName: String = "Tether", timeoutSeconds: Double = 5)
        throws(AudioDeviceError) -> [AudioDeviceInfo]
    {
        guard let loop = pa_mainloop_new() else { throw .backendFailed(reason: "cannot create a PulseAudio mainloop") }
        defer { pa_mainloop_free(loop) }
        guard let context = pa_context_new(pa_mainloop_get_api(loop), applicationName) else {
            throw .backendFailed(reason: "cannot create a PulseAudio context")
        }
        defer {
            pa_context_set_state_callback(context, nil, nil)
            pa_context_disconnect(context)
            pa_context_unref(context)
        }
        let collector = PulseDeviceCollector()
        return try withExtendedLifetime(collector) { () throws(AudioDeviceError) -> [AudioDeviceInfo] in
            let userdata = Unmanaged.passUnretained(collector).toOpaque()
            let deadlineNanoseconds = MonotonicClock.nanoseconds() + UInt64(min(3600, max(0, timeoutSeconds)) * 1e9)
            guard pa_context_connect(context, nil, PA_CONTEXT_NOAUTOSPAWN, nil) >= 0 else {
                throw .backendFailed(reason: "cannot connect to PulseAudio: \(errorMessage(context))")
            }
            let connected = iterate(loop, untilNanoseconds: deadlineNanoseconds) {
                let state = pa_context_get_state(context)
                return state == PA_CONTEXT_READY || state == PA_CONTEXT_FAILED || state == PA_CONTEXT_TERMINATED
            }
            guard connected, pa_context_get_state(context) == PA_CONTEXT_READY else {
                let reason = connected ? errorMessage(context) : "timed out"
                throw .backendFailed(reason: "cannot connect to PulseAudio: \(reason)")
            }
            let operations: [OpaquePointer?] = [
                pa_context_get_server_info(
                    context,
                    { _, info, userdata in
                        let collector = Unmanaged<PulseDeviceCollector>.fromOpaque(userdata!).takeUnretainedValue()
                        if let info {
                            collector.defaultSink = info.pointee.default_sink_name.map { String(cString: $0) }
                            collector.defaultSource = info.pointee.default_source_name.map { String(cString: $0) }
                        }
                        collector.pending -= 1
                    }, userdata),
                pa_context_get_sink_info_list(
                    context,
                    { _, info, eol, userdata in
                        let collector = Unmanaged<PulseDeviceCollector>.fromOpaque(userdata!).takeUnretainedValue()
                        if let info {
                            collector.sinks.append(
                                (String(cString: info.pointee.name), info.pointee.description.map { String(cString: $0) } ?? ""))
                        }
                        if eol != 0 { collector.pending -= 1 }
                    }, userdata),
                pa_context_get_source_info_list(
                    context,
                    { _, info, eol, userdata in
                        let collector = Unmanaged<PulseDeviceCollector>.fromOpaque(userdata!).takeUnretainedValue()
                        if let info {
                            collector.sources.append(
                                (
                                    String(cString: info.pointee.name),
                                    info.pointee.description.map { String(cString: $0) } ?? "",
                                    info.pointee.monitor_of_sink != UInt32.max
                                ))
                        }
                        if eol != 0 { collector.pending -= 1 }
                    }, userdata),
            ]
            defer { for case let operation? in operations { pa_operation_unref(operation) } }
            guard operations.allSatisfy({ $0 != nil }) else {
                throw .backendFailed(reason: "cannot query PulseAudio devices: \(errorMessage(context))")
            }
            let answered = iterate(loop, untilNanoseconds: deadlineNanoseconds) {
                collector.pending == 0 || pa_context_get_state(context) != PA_CONTEXT_READY
            }
            guard answered, collector.pending == 0 else {
                throw .backendFailed(
                    reason: "PulseAudio did not list its devices: \(answered ? errorMessage(context) : "timed out")")
            }
            return collector.devices
        }
    }

    /// Runs the mainloop until `done` holds or the deadline passes. Returns whether `done` holds.
    private static func iterate(_ loop: OpaquePointer, untilNanoseconds deadline: UInt64, _ done: () -> Bool) -> Bool {
        while !done() {
            let now = MonotonicClock.nanoseconds()
            guard now < deadline else { return false }
            let timeoutMicroseconds = Int32(min((deadline - now) / 1000 + 1, 100_000))
            guard pa_mainloop_prepare(loop, timeoutMicroseconds) >= 0, pa_mainloop_poll(loop) >= 0,
                pa_mainloop_dispatch(loop) >= 0
            else { return done() }
        }
        return true
    }

    private static func errorMessage(_ context: OpaquePointer) -> String {
        let code = pa_context_errno(context)
        guard let text = pa_strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }
}

/// What the enumeration callbacks gather (used only on the listing thread).
private final class PulseDeviceCollector {
    var sinks: [(name: String, description: String)] = []
    var sources: [(name: String, description: String, isMonitor: Bool)] = []
    var defaultSink: String?
    var defaultSource: String?
    /// Queries not yet finished (server info, sinks, sources).
    var pending = 3

    var devices: [AudioDeviceInfo] {
        sinks.map {
            AudioDeviceInfo(
                backend: "pulse", name: $0.name, description: $0.description, direction: .playback,
                isDefault: $0.name == defaultSink, isMonitor: false)
        }
            + sources.map {
                AudioDeviceInfo(
                    backend: "pulse", name: $0.name, description: $0.description, direction: .capture,
                    isDefault: $0.name == defaultSource, isMonitor: $0.isMonitor)
            }
    }
}
