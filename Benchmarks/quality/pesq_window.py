#!/usr/bin/env python3
"""Wideband PESQ (ITU-T P.862.2) of a window of a recording against the speech that was sent.

Usage: pesq_window.py REFERENCE DEGRADED START SECONDS

DEGRADED is what a receiver recorded of REFERENCE, which its sender played in a loop from an
unknown point on. The window DEGRADED[START, START + SECONDS) (seconds) is matched to the part
of the (looped) reference it carries by cross-correlating 10 ms energy envelopes, then both are
scored at 16 kHz with the PyPI `pesq` package. Prints one JSON object:
{"pesq_wb": 3.71, "offset_seconds": 12.34} or {"error": "..."}.
"""
import json
import subprocess
import sys
import tempfile
import wave

import numpy as np
from pesq import pesq

RATE = 16000


def read_16k(path, scratch, name):
    out = f"{scratch}/{name}.wav"
    subprocess.run(["sox", "-R", path, "-r", str(RATE), "-c", "1", "-b", "16", out], check=True)
    with wave.open(out, "rb") as w:
        frames = w.readframes(w.getnframes())
    return np.frombuffer(frames, dtype="<i2").astype(np.float64) / 32768.0


def envelope(x, hop=RATE // 100):
    n = len(x) // hop
    e = np.sqrt(np.mean(x[: n * hop].reshape(n, hop) ** 2, axis=1) + 1e-12)
    e = np.log(e)
    return (e - e.mean()) / (e.std() + 1e-9)


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    reference, degraded, start, seconds = argv[0], argv[1], float(argv[2]), float(argv[3])
    try:
        with tempfile.TemporaryDirectory() as scratch:
            ref = read_16k(reference, scratch, "ref")
            deg = read_16k(degraded, scratch, "deg")
        a, b = int(start * RATE), int((start + seconds) * RATE)
        if b > len(deg):
            raise ValueError(f"the recording is {len(deg) / RATE:.1f} s, the window ends at {start + seconds:.1f} s")
        window = deg[a:b]
        looped = np.concatenate([ref, ref, ref])  # the sender loops its file
        e_win, e_ref = envelope(window), envelope(looped)
        scores = np.correlate(e_ref, e_win, mode="valid")
        hop = RATE // 100
        offset = int(np.argmax(scores)) * hop
        matched = looped[offset : offset + len(window)]
        score = float(pesq(RATE, matched, window, "wb"))
        print(json.dumps({"pesq_wb": round(score, 3), "offset_seconds": round(offset / RATE % (len(ref) / RATE), 3)}), flush=True)
    except Exception as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
