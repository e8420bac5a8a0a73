#!/usr/bin/env bash
# What `tether-bench quality` needs beyond scripts/setup-debian.sh: espeak-ng (speech), sox
# (resampling) and a Python venv with PyPI's `pesq` (ITU-T P.862 / P.862.2) and numpy.
# Prints the venv's python on standard output.
set -euo pipefail

VENV=${QUALITY_VENV:-.build/quality-venv}
PACKAGES=(espeak-ng sox python3 python3-venv python3-dev gcc)
missing=()
for p in "${PACKAGES[@]}"; do
    # python3 from another source (pyenv) counts; Debian's python3-venv/-dev then are not needed.
    if [[ $p == python3* ]] && command -v python3 >/dev/null && python3 -c 'import venv, sysconfig; import os; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null; then
        continue
    fi
    if [[ $p == gcc ]] && command -v gcc >/dev/null; then continue; fi
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if ((${#missing[@]} > 0)); then
    echo "setup-quality: installing ${missing[*]}" >&2
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import pesq, numpy' 2>/dev/null; then
    echo "setup-quality: creating $VENV with pesq and numpy (PyPI)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check numpy >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check pesq==0.0.4 >&2
fi
echo "$VENV/bin/python"
