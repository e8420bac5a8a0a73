/// What a real audio device reports while it runs (virtual devices report nothing).
public enum AudioDeviceEvent: Sendable, Equatable {
    /// The device stopped delivering or accepting audio (removed, daemon gone, I/O error).
    /// The device keeps trying to come back by itself.
    case failed(AudioDeviceError)
    /// The device (or its replacement) works again.
    case recovered(deviceName: String)
    /// The stream now runs on another device (the default changed, or a fallback after removal).
    case moved(deviceName: String)
}

/// A device that reports `AudioDeviceEvent`s. Sources and sinks that can fail adopt it.
public protocol AudioDeviceEventReporting: AnyObject, Sendable {
    /// Sets the handler for this device's events. Called before `start`.
    /// - Note: The handler is called on the device's control thread, never on its audio thread;
    ///   it must return quickly.
    func setEventHandler(_ handler: @escaping @Sendable (AudioDeviceEvent) -> Void)
}
