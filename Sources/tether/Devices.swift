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
        print("backend  direction  default  name                                 description")
        for r in rows {
            let name = (r["name"] as? String ?? "")
            let padded = name.count < 36 ? name + String(repeating: " ", count: 36 - name.count) : name
            let description = (r["description"] as? String ?? "").replacingOccurrences(of: "\n", with: " ")
            print(
                String(
                    format: "%-8@ %-10@ %-8@ %@ %@", r["backend"] as? String ?? "", r["direction"] as? String ?? "",
                    (r["default"] as? Bool ?? false) ? "yes" : "", padded, description))
        }
    }
}
