import Synchronization
import TetherRealtime

/// How much a playback device wants queued in its ring, in samples: the media loop keeps at least
/// this much decoded ahead of the device, and no more than a frame beyond it.
///
/// A device that takes samples as it needs them (PulseAudio's requests, ALSA's free room) sets it
/// at start from what it takes at once; 0 (a device that takes whole frames on its own clock, or
/// none started) means "two frames", the media loop's cushion for such devices. Written by the
/// device (at start, and on its thread when its requests change size), read by the media loop:
/// relaxed, a hint that orders no other memory.
///
/// It also counts the silence the device played in the ring's place (`silenceSamples`), which the
/// echo canceller's reference must hold too.
public final class PlaybackDemand: Sendable {
    private let samples = Atomic<Int>(0)
    private let silence = Atomic<Int>(0)

    public init() {}

    /// The samples wanted queued; 0 when the device has not said.
    public var queuedSamples: Int { samples.load(ordering: .relaxed) }

    /// Sets the samples wanted queued (0: not said).
    /// - Note: Called on device threads; does not allocate.
    public func set(queuedSamples: Int) { samples.store(queuedSamples, ordering: .relaxed) }

    /// The samples of silence the device has played so far because the ring ran dry. The device
    /// plays silence only once it has taken everything the ring held, so silence counted before
    /// the media loop queues a frame was played after every frame queued before it.
    public var silenceSamples: Int { silence.load(ordering: .relaxed) }

    /// Counts silence the device played in the ring's place.
    /// - Note: Called on device threads; does not allocate.
    public func add(silenceSamples: Int) { _ = silence.add(silenceSamples, ordering: .relaxed) }
}

/// What a source or sink is given at start: the format, the ring it fills or drains, and the
/// wake-up it signals after each frame.
///
/// For a source the ring is the capture ring (the device thread is its producer, the media loop
/// its consumer); for a sink it is the playback ring (the media loop produces, the device thread
/// consumes). The endpoint is shared by reference: both sides hold the same ring and wake-up.
public struct AudioEndpoint: Sendable {
    /// The PCM format of the samples in `ring`.
    public let format: AudioFormat
    /// The ring of 16-bit samples (interleaved if `format.channelCount` > 1).
    public let ring: SPSCRing<Int16>
    /// Signalled by the device thread after each frame it produced or consumed.
    public let wakeup: EventCount
    /// Playback: how much the device wants queued in `ring` (unused by sources).
    public let demand: PlaybackDemand

    /// Uses an existing ring and wake-up (and the media loop's demand hint, for a sink).
    public init(format: AudioFormat, ring: SPSCRing<Int16>, wakeup: EventCount, demand: PlaybackDemand = PlaybackDemand()) {
        self.format = format
        self.ring = ring
        self.wakeup = wakeup
        self.demand = demand
    }

    /// Creates a ring holding at least `ringCapacityFrames` frames of `format` (its capacity in
    /// samples is rounded up to a power of two) and, unless given, a new wake-up (and demand hint).
    /// - Precondition: `ringCapacityFrames` ≥ 1.
    public init(
        format: AudioFormat = AudioFormat(), ringCapacityFrames: Int = 8, wakeup: EventCount = EventCount(),
        demand: PlaybackDemand = PlaybackDemand()
    ) {
        precondition(ringCapacityFrames >= 1, "AudioEndpoint ring must hold at least one frame")
        let wantedSamples = ringCapacityFrames * format.samplesPerFrame
        var capacitySamples = 1
        while capacitySamples < wantedSamples { capacitySamples <<= 1 }
        self.init(format: format, ring: SPSCRing<Int16>(capacity: capacitySamples), wakeup: wakeup, demand: demand)
    }

    /// Whole frames the ring can hold.
    public var ringCapacityFrames: Int { ring.capacity / format.samplesPerFrame }

    /// What every device checks at start: mono, and a ring that holds a whole frame.
    /// - Throws: `.unsupportedFormat` (naming `deviceName`) or `.ringTooSmall`.
    func validateForMonoDevice(named deviceName: String) throws(AudioDeviceError) {
        guard format.channelCount == 1 else {
            throw .unsupportedFormat(reason: "\(deviceName) handles mono only, not \(format.channelCount) channels")
        }
        guard ring.capacity >= format.samplesPerFrame else {
            throw .ringTooSmall(capacitySamples: ring.capacity, samplesPerFrame: format.samplesPerFrame)
        }
    }
}
