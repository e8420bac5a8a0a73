"""What the interop peers heard: the dominant frequency of received audio (shared by the peers)."""
import array, math


def dominant_hertz(samples, rate):
    """Goertzel scan in 10 Hz steps, 100 Hz–4 kHz, over the last quarter second of `samples`
    (16-bit mono at `rate`), decimated to about 12 kHz. 0 when there is too little."""
    step = max(1, rate // 12000)
    block = list(samples)[-(rate // 4):][::step]
    rate //= step
    if len(block) < 500:
        return 0
    best, best_power = 0, 0.0
    for hz in range(100, 4000, 10):
        k = 2 * math.cos(2 * math.pi * hz / rate)
        s1 = s2 = 0.0
        for x in block:
            s1, s2 = x + k * s1 - s2, s1
        power = s1 * s1 + s2 * s2 - k * s1 * s2
        if power > best_power:
            best, best_power = hz, power
    return best


def wav_samples(path):
    """First-channel 16-bit samples and rate of a WAV file that may still be written (its sizes
    not yet filled in): everything after the data chunk's header. ([], 48000) when unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return [], 48000
    fmt, start = data.find(b"fmt "), data.find(b"data")
    if fmt < 0 or start < 0:
        return [], 48000
    channels = max(1, int.from_bytes(data[fmt + 10:fmt + 12], "little"))
    rate = int.from_bytes(data[fmt + 12:fmt + 16], "little") or 48000
    body = data[start + 8:]
    body = body[:len(body) - len(body) % (2 * channels)]
    return array.array("h", body)[::channels], rate
