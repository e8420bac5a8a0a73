import TetherAudio
import TetherRealtime

/// The call's capture source and playback sink: which devices, whether each runs, and the rings
/// they run on. Opens, closes and switches them; what a failure means for the call (listen-only,
/// an error event) is the session's.
struct AudioDevices {
    private(set) var source: any AudioSource
    private(set) var sink: any AudioSink
    private(set) var sourceRunning = false
    private(set) var sinkRunning = false
    /// Where the source writes and the media loop reads.
    let capture: AudioEndpoint
    /// Where the media loop writes and the sink reads (with the sink's demand hint).
    let playback: AudioEndpoint

    init(source: any AudioSource, sink: any AudioSink, format: AudioFormat, wakeup: EventCount) {
        self.source = source
        self.sink = sink
        capture = AudioEndpoint(format: format, ringCapacityFrames: 8, wakeup: wakeup)
        playback = AudioEndpoint(format: format, ringCapacityFrames: 4, wakeup: wakeup)
    }

    /// Opens the capture device unless it runs; `events` hears its failures and recoveries.
    mutating func startSource(events: @escaping @Sendable (AudioDeviceEvent) -> Void) throws(AudioDeviceError) {
        guard !sourceRunning else { return }
        (source as? any AudioDeviceEventReporting)?.setEventHandler(events)
        try source.start(capture)
        sourceRunning = true
    }

    mutating func stopSource() {
        if sourceRunning { source.stop() }
        sourceRunning = false
    }

    /// Opens the playback device unless it runs; `events` hears its failures and recoveries.
    mutating func startSink(events: @escaping @Sendable (AudioDeviceEvent) -> Void) throws(AudioDeviceError) {
        guard !sinkRunning else { return }
        (sink as? any AudioDeviceEventReporting)?.setEventHandler(events)
        try sink.start(playback)
        sinkRunning = true
    }

    mutating func stopSink() {
        if sinkRunning { sink.stop() }
        sinkRunning = false
    }

    /// Another capture device, the current one closed. Returns whether that one ran.
    mutating func replaceSource(with newSource: any AudioSource) -> Bool {
        let ran = sourceRunning
        stopSource()
        source = newSource
        return ran
    }

    /// Another playback device, the current one closed. Returns whether that one ran.
    mutating func replaceSink(with newSink: any AudioSink) -> Bool {
        let ran = sinkRunning
        stopSink()
        sink = newSink
        return ran
    }
}
