import Testing
import TetherAudio
import TetherRealtime

@Suite("AudioEndpoint")
struct AudioEndpointTests {
    @Test("an endpoint's ring holds at least the requested frames, rounded up to a power of two")
    func endpointRingCapacity() {
        let endpoint = AudioEndpoint(ringCapacityFrames: 8)
        #expect(endpoint.ring.capacity == 8_192)
        #expect(endpoint.ringCapacityFrames == 8)
        let small = AudioEndpoint(format: AudioFormat(sampleRateHertz: 8_000, frameDurationMilliseconds: 10), ringCapacityFrames: 3)
        #expect(small.ring.capacity == 256)
        #expect(small.ringCapacityFrames == 3)
    }

    @Test("an endpoint built from parts shares its ring and wake-up")
    func sharesRingAndWakeup() {
        let ring = SPSCRing<Int16>(capacity: 4_096)
        let wakeup = EventCount()
        let endpoint = AudioEndpoint(format: AudioFormat(), ring: ring, wakeup: wakeup)
        #expect(endpoint.ring === ring)
        #expect(endpoint.wakeup === wakeup)
        #expect(endpoint.ringCapacityFrames == 4)
    }
}
