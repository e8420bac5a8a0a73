import Testing
import TetherRTP

struct RTPParseErrorTests {
    @Test func descriptionsMentionTheOffendingValue() {
        #expect(RTPParseError.badVersion(3).description.contains("3"))
        #expect(RTPParseError.unexpectedPayloadType(97).description.contains("97"))
        #expect(RTPParseError.unexpectedSSRC(123_456).description.contains("123456"))
        #expect(RTPParseError.unknownPacketType(150).description.contains("150"))
        #expect(RTPParseError.unexpectedFirstPacketType(202).description.contains("202"))
    }

    @Test func descriptionsAreDistinct() {
        let all: [RTPParseError] = [
            .tooShort, .badVersion(1), .csrcListTooLong, .badExtension, .badPadding,
            .unexpectedPayloadType(1), .unexpectedSSRC(1), .badLength, .unknownPacketType(1),
            .unexpectedFirstPacketType(1), .paddingNotLast, .badReportCount,
            .badSourceDescription, .badBye,
        ]
        #expect(Set(all.map(\.description)).count == all.count)
    }
}
