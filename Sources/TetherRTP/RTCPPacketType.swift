/// Well-known RTCP packet type values (the second byte of each RTCP packet).
public enum RTCPPacketType {
    /// Sender report (RFC 3550 §6.4.1).
    public static let senderReport: UInt8 = 200
    /// Receiver report (RFC 3550 §6.4.2).
    public static let receiverReport: UInt8 = 201
    /// Source description (RFC 3550 §6.5).
    public static let sourceDescription: UInt8 = 202
    /// Goodbye (RFC 3550 §6.6).
    public static let bye: UInt8 = 203
    /// Application-defined (RFC 3550 §6.7).
    public static let application: UInt8 = 204
    /// Transport-layer feedback, e.g. generic NACK (RFC 4585).
    public static let transportFeedback: UInt8 = 205
    /// Payload-specific feedback, e.g. PLI (RFC 4585).
    public static let payloadSpecificFeedback: UInt8 = 206

    /// SDES item type of CNAME (RFC 3550 §6.5.1).
    public static let sdesItemCNAME: UInt8 = 1
}
