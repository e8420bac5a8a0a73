#!/usr/bin/env bash
# Installs the Debian packages Tether needs, only when some are missing.
# Safe to run repeatedly; needs root (or sudo) only when something is missing.
set -euo pipefail

PACKAGES=(
    pkg-config
    libopus-dev libsrtp2-dev libnice-dev libasound2-dev libpulse-dev   # C libraries (CModules/)
    pulseaudio pulseaudio-utils alsa-utils libasound2-plugins                      # user-space audio devices for device tests
    sox                                                               # audio checks in tests and tools
    iproute2                                                          # network-namespace fault tests
)

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
