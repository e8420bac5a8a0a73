/// What one row of the fault matrix measured, and whether it showed what it must.
public struct FaultRowResult: Sendable, Codable {
    /// One requirement of the row, checked.
    public struct Check: Sendable, Codable {
        public var name: String
        public var passed: Bool
        public var detail: String
    }

    /// The row (``FaultScenario/description``).
    public var scenario: String
    /// What it must show.
    public var requirement: String
    /// Named figures, in seconds unless the name says otherwise ("A detected", "gap at B", …).
    public var measurements: [String: Double] = [:]
    /// The requirements checked.
    public var checks: [Check] = []
    /// Set when the row could not be run to the end (the lab itself failed).
    public var error: String?
    /// Where the row's processes' logs and recordings are.
    public var directory: String = ""
    /// How long the row took, in seconds.
    public var wallSeconds: Double = 0

    /// Every check passed and the row ran to the end.
    public var passed: Bool { error == nil && !checks.isEmpty && checks.allSatisfy(\.passed) }

    /// The measured figures in one line, for the table.
    public var measured: String {
        measurements.sorted { $0.key < $1.key }.map { key, value in
            if key.hasSuffix(" MB") { return "\(key.dropLast(3)) \(String(format: "%+.2f", value)) MB" }
            if key.hasSuffix(" ms") { return "\(key.dropLast(3)) \(Int(value.rounded())) ms" }
            if key.hasSuffix(" code") || key.hasSuffix(" count") { return "\(key) \(Int(value.rounded()))" }
            return value < 0 ? "\(key) never" : "\(key) \(String(format: "%.2f", value)) s"
        }.joined(separator: ", ")
    }

    mutating func check(_ name: String, _ condition: Bool, _ detail: String) {
        checks.append(Check(name: name, passed: condition, detail: detail))
    }
}
