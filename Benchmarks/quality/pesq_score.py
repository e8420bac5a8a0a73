#!/usr/bin/env python3
"""Wideband PESQ (ITU-T P.862.2) of degraded recordings against their references.

Usage: pesq_score.py REFERENCE DEGRADED [REFERENCE DEGRADED ...]

Each file is a WAV (any rate, mono or first channel used); both are resampled to 16 kHz with
sox, then scored with the PyPI `pesq` package. Prints one JSON object per pair:
{"reference": ..., "degraded": ..., "pesq_wb": 3.71} or {..., "error": "..."}.
"""
import json
import subprocess
import sys
import tempfile
import wave

import numpy as np
from pesq import pesq


def read_16k(path, scratch):
    out = f"{scratch}/{abs(hash(path))}.wav"
    subprocess.run(["sox", "-R", path, "-r", "16000", "-c", "1", "-b", "16", out], check=True)
    with wave.open(out, "rb") as w:
        frames = w.readframes(w.getnframes())
    return np.frombuffer(frames, dtype="<i2").astype(np.float64) / 32768.0


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        for reference, degraded in zip(argv[0::2], argv[1::2]):
            result = {"reference": reference, "degraded": degraded}
            try:
                ref = read_16k(reference, scratch)
                deg = read_16k(degraded, scratch)
                result["pesq_wb"] = round(float(pesq(16000, ref, deg, "wb")), 3)
            except Exception as error:  # a silent or broken recording: report it, score the rest
                result["error"] = f"{type(error).__name__}: {error}"
            print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
