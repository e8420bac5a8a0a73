import CALSA
import Glibc

/// An ALSA PCM as listed by the configuration's device-name hints.
public struct ALSADeviceInfo: Sendable, Equatable, CustomStringConvertible {
    /// The PCM name to pass to `ALSACapture` / `ALSAPlayback` (`default`, `tether_spk`, `hw:CARD=…`).
    public let name: String
    /// The human-readable description (lines joined with " — "), or the name when there is none.
    public let description: String
    /// The PCM can capture (its IOID hint is absent or `Input`).
    public let supportsCapture: Bool
    /// The PCM can play (its IOID hint is absent or `Output`).
    public let supportsPlayback: Bool

    public init(name: String, description: String, supportsCapture: Bool, supportsPlayback: Bool) {
        self.name = name
        self.description = description
        self.supportsCapture = supportsCapture
        self.supportsPlayback = supportsPlayback
    }
}

/// Enumeration of ALSA PCMs (control path: allocates).
public enum ALSADevices {
    /// The PCMs of every card and of the configuration (`snd_device_name_hint(-1, "pcm", …)`), in
    /// the order ALSA gives them; empty when the hints cannot be read.
    public static func list() -> [ALSADeviceInfo] {
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        guard snd_device_name_hint(-1, "pcm", &hints) >= 0, let hints else { return [] }
        defer { snd_device_name_free_hint(hints) }
        var devices: [ALSADeviceInfo] = []
        var index = 0
        while let hint = hints[index] {
            index += 1
            guard let name = value(hint, "NAME"), !name.isEmpty, name != "null" else { continue }
            let description = value(hint, "DESC")?
                .split(separator: "\n").joined(separator: " — ") ?? name
            let direction = value(hint, "IOID")
            devices.append(
                ALSADeviceInfo(
                    name: name, description: description.isEmpty ? name : description,
                    supportsCapture: direction == nil || direction == "Input",
                    supportsPlayback: direction == nil || direction == "Output"))
        }
        return devices
    }

    /// One hint field (`snd_device_name_get_hint` returns a malloc'ed copy, freed here).
    private static func value(_ hint: UnsafeMutableRawPointer, _ id: String) -> String? {
        guard let raw = snd_device_name_get_hint(hint, id) else { return nil }
        defer { free(raw) }
        return String(cString: raw)
    }
}
