/// An audio device as a backend lists it.
public struct AudioDeviceInfo: Sendable, Hashable {
    /// Which way a device moves audio.
    public enum Direction: String, Sendable, Hashable {
        /// A source of audio (microphone, monitor of a sink).
        case capture
        /// A destination of audio (loudspeaker, headset).
        case playback
    }

    /// The backend that lists the device (for example `"pulse"`).
    public var backend: String
    /// The name to open the device with (for example `spk` or `mic.monitor`).
    public var name: String
    /// The human-readable description (for example `Speaker`).
    public var description: String
    public var direction: Direction
    /// The device is the system default for its direction.
    public var isDefault: Bool
    /// The device is a monitor (the loopback of a sink's output), not a real input.
    public var isMonitor: Bool

    public init(
        backend: String, name: String, description: String, direction: Direction, isDefault: Bool, isMonitor: Bool
    ) {
        self.backend = backend
        self.name = name
        self.description = description
        self.direction = direction
        self.isDefault = isDefault
        self.isMonitor = isMonitor
    }
}
