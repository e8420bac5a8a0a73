import ArgumentParser
import Foundation
import Tether

/// `tether devices`: the capture and playback devices of both backends.
struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List capture and playback devices (PulseAudio and ALSA).",
        discussion: "Use the names with --input/--output pulse:NAME or alsa:PCM in `tether call` and `tether demo`.")

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    func run() throws {
        var rows: [[String: Any]] = []
        do {
            for d in try PulseAudioDevices.list() {
                rows.append([
                    "backend": "pulse", "name": d.name, "description": d.description,
                    "direction": "\(d.direction)", "default": d.isDefault, "monitor": d.isMonitor,
                ])
            }
        } catch {
            FileHandle.standardError.write(Data("tether: PulseAudio: \(error)\n".utf8))
        }
        for d in ALSADevices.list() {
            let direction = d.supportsCapture && d.supportsPlayback ? "both" : d.supportsCapture ? "capture" : "playback"
            rows.append(["backend": "alsa", "name": d.name, "description": d.description, "direction": direction, "default": d.name == "default", "monitor": false])
        }
        if json {
            let data = try JSONSerialization.data(withJSONObject: rows, options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        func pad(_ s: String, _ width: Int) -> String { s.count >= width ? s + " " : s + String(repeating: " ", count: width - s.count) }
        print(pad("backend", 9) + pad("direction", 11) + pad("default", 9) + pad("name", 37) + "description")
        for r in rows {
            let description = (r["description"] as? String ?? "").replacingOccurrences(of: "\n", with: " ")
            print(
                pad(r["backend"] as? String ?? "", 9) + pad(r["direction"] as? String ?? "", 11)
                    + pad((r["default"] as? Bool ?? false) ? "yes" : "", 9) + pad(r["name"] as? String ?? "", 36) + description)
        }
    }
}
