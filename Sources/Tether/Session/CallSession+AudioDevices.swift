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

/// Audio devices (`AudioDevices` owns them): opening and switching them for the call, and their
/// failures degrading the call (listen-only) instead of ending it.
extension CallSession {
    /// Opens the capture device; on failure the call goes on listen-only (silence is sent).
    /// - Returns: whether capture runs.
    @discardableResult
    func startSource() -> Bool {
        guard !devices.sourceRunning else { return true }
        do throws(AudioDeviceError) {
            try devices.startSource { [weak self] event in Task { await self?.deviceEvent(event, capture: true) } }
            media?.captureActive.store(true, ordering: .releasing)
            return true
        } catch {
            media?.captureActive.store(false, ordering: .releasing)
            eventSink.yield(
                .error(
                    TetherError(
                        code: .captureDeviceFailed, isTerminal: false, canRetry: true,
                        message: "capture '\(devices.source.name)' failed: \(error); the call goes on listen-only", cause: error)))
            return false
        }
    }

    func stopSource() {
        media?.captureActive.store(false, ordering: .releasing)
        devices.stopSource()
    }

    func startSink() {
        do throws(AudioDeviceError) {
            try devices.startSink { [weak self] event in Task { await self?.deviceEvent(event, capture: false) } }
        } catch {
            eventSink.yield(
                .error(
                    TetherError(
                        code: .playbackDeviceFailed, isTerminal: false, canRetry: true,
                        message: "playback '\(devices.sink.name)' failed: \(error)", cause: error)))
        }
    }

    /// Switches the capture device mid-call (the microphone stays released while muted).
    public func setAudioSource(_ source: any AudioSource) {
        media?.captureActive.store(false, ordering: .releasing)
        let ran = devices.replaceSource(with: source)
        publishTelemetry()
        if (ran || mediaRunning) && negotiation.capturesNow(muted: isMuted) { startSource() }
    }

    /// Switches the playback device mid-call.
    public func setAudioSink(_ sink: any AudioSink) {
        let ran = devices.replaceSink(with: sink)
        publishTelemetry()
        if ran || mediaRunning { startSink() }
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
                            ? "capture '\(devices.source.name)' failed: \(error); the call goes on listen-only"
                            : "playback '\(devices.sink.name)' failed: \(error)",
                        cause: error)))
        case .recovered, .moved:
            if capture && devices.sourceRunning && !isMuted { media?.captureActive.store(true, ordering: .releasing) }
        }
    }
}
