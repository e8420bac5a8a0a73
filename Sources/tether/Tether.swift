import ArgumentParser

/// The `tether` command.
@main
struct TetherCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tether",
        abstract: "Tether: the real-time audio media layer of a Linux softphone.",
        subcommands: [Demo.self, Call.self, Devices.self],
        defaultSubcommand: Demo.self)
}
