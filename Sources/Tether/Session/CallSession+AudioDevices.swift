import CoreMetrics
import Foundation
import Logging
import Synchronization
import TetherAudio
import TetherCodec
import TetherCore
import TetherDTLS
import TetherICE
import TetherNetworkMonitor
import TetherRTP
import TetherRealtime

/// Audio devices: the capture source and playback sink, switching them mid-call, and their
/// failures degrading the call (listen-only) instead of ending it.
extension CallSession {
    var audioFormat: AudioFormat { AudioFormat(frameDurationMilliseconds: configuration.opus.frameDurationMilliseconds) }

    /// Opens the capture device; on failure the call goes on listen-only (silence is sent).
    /// - Returns: whether capture runs.
    @discardableResult
    func startSource() -> Bool {
        guard !sourceRunning else { return true }
        if let reporting = currentSource as? any AudioDeviceEventReporting {
            reporting.setEventHandler { [weak self] event in Task { await self?.deviceEvent(event, capture: true) } }
        }
        do throws(AudioDeviceError) {
            try currentSource.start(AudioEndpoint(format: audioFormat, ring: captureRing, wakeup: wakeup))
            sourceRunning = true
            media?.captureActive.store(true, ordering: .releasing)
            return true
        } catch {
            media?.captureActive.store(false, ordering: .releasing)
            eventSink.yield(
                .error(
                    TetherError(
                        code: .captureDeviceFailed, isTerminal: false, canRetry: true,
                        message: "capture '\(currentSource.name)' failed: \(error); the call goes on listen-only", cause: error)))
            return false
        }
    }

    func stopSource() {
        media?.captureActive.store(false, ordering: .releasing)
        if sourceRunning { currentSource.stop() }
        sourceRunning = false
    }

    func startSink() {
        guard !sinkRunning else { return }
        if let reporting = currentSink as? any AudioDeviceEventReporting {
            reporting.setEventHandler { [weak self] event in Task { await self?.deviceEvent(event, capture: false) } }
        }
        do throws(AudioDeviceError) {
            try currentSink.start(AudioEndpoint(format: audioFormat, ring: playbackRing, wakeup: wakeup, demand: playbackDemand))
            sinkRunning = true
        } catch {
            eventSink.yield(
                .error(
                    TetherError(
                        code: .playbackDeviceFailed, isTerminal: false, canRetry: true,
                        message: "playback '\(currentSink.name)' failed: \(error)", cause: error)))
        }
    }

    /// Switches the capture device mid-call (the microphone stays released while muted).
    public func setAudioSource(_ source: any AudioSource) {
        let wasRunning = sourceRunning
        stopSource()
        currentSource = source
        publishTelemetry()
        if (wasRunning || mediaRunning) && negotiation.capturesNow(muted: isMuted) { startSource() }
    }

    /// Switches the playback device mid-call.
    public func setAudioSink(_ sink: any AudioSink) {
        let wasRunning = sinkRunning
        if sinkRunning { currentSink.stop() }
        sinkRunning = false
        currentSink = sink
        publishTelemetry()
        if wasRunning || mediaRunning { startSink() }
    }

    /// A device reported a failure or a recovery.
    func deviceEvent(_ event: AudioDeviceEvent, capture: Bool) {
        guard !state.isEnded else { return }
        eventSink.yield(.audioDevice(capture ? .capture : .playback, event))
        switch event {
        case .failed(let error):
            if capture { media?.captureActive.store(false, ordering: .releasing) }
            eventSink.yield(
                .error(
                    TetherError(
                        code: capture ? .captureDeviceFailed : .playbackDeviceFailed, isTerminal: false, canRetry: true,
                        message: capture
                            ? "capture '\(currentSource.name)' failed: \(error); the call goes on listen-only"
                            : "playback '\(currentSink.name)' failed: \(error)",
                        cause: error)))
        case .recovered, .moved:
            if capture && sourceRunning && !isMuted { media?.captureActive.store(true, ordering: .releasing) }
        }
    }
}
