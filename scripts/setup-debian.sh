#!/usr/bin/env bash
# Installs the Debian packages Tether needs, only when some are missing, in three tiers:
#
#   scripts/setup-debian.sh build     building and running Tether (`make demo`, `make build`)
#   scripts/setup-debian.sh devices   build + the sound servers and tools of the device tests
#   scripts/setup-debian.sh [all]     devices + the laboratory of the interop and fault tests
#                                     (`make test`, `.ci/run`)
#
# Safe to run repeatedly; needs root (or sudo) only when something is missing.
# Quiet: one line per step on stderr; apt's own output goes to a log file that is
# printed only when a step fails.
set -euo pipefail

TIER=${1:-all}

# Building and running Tether: the C libraries of CModules/ and pkg-config. The demo needs
# nothing else (its audio is a test signal, its network 127.0.0.1).
BUILD=(
    pkg-config
    libopus-dev libsrtp2-dev libnice-dev libasound2-dev libpulse-dev   # C libraries (CModules/)
    libssl-dev                                                          # DTLS-SRTP (CModules/COpenSSL)
    libwebrtc-audio-processing-dev libspeexdsp-dev                      # echo cancellation, noise suppression, gain control
    libfftw3-dev                                                        # the FFTs of Tether's own echo canceller
)
# The device tests: private sound servers (scripts/with-test-audio.sh) and their tools.
DEVICES=(
    pulseaudio pulseaudio-utils alsa-utils libasound2-plugins           # PulseAudio, pactl/parecord, ALSA's pulse plugin
    pipewire pipewire-bin pipewire-pulse wireplumber dbus-daemon        # PipeWire, its session manager and a session bus
    sox                                                                 # audio checks in tests and tools
)
# The interop and fault tests: real peers and real network faults.
LAB=(
    iproute2 nftables conntrack coturn                                  # fault matrix: namespaces, drops, NAT, TURN
    openssl                                                             # the lab TURN server's TLS certificate
    chromium                                                            # a real WebRTC peer for the DTLS-SRTP interop tests
    baresip-core                                                        # a real SIP softphone (SDES-SRTP) for the interop tests
    python3-gi gir1.2-gstreamer-1.0 gir1.2-nice-0.1 gstreamer1.0-nice       # GStreamer + libnice peer (SDES-SRTP) for the interop tests
    gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
)

case "$TIER" in
    build) PACKAGES=("${BUILD[@]}") ;;
    devices) PACKAGES=("${BUILD[@]}" "${DEVICES[@]}") ;;
    all) PACKAGES=("${BUILD[@]}" "${DEVICES[@]}" "${LAB[@]}") ;;
    *)
        echo "usage: scripts/setup-debian.sh [build|devices|all]" >&2
        exit 2
        ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} > 0)); then
    SUDO=""
    if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    LOG="${TETHER_SETUP_LOG:-${TMPDIR:-/tmp}/tether-setup-apt.log}"
    : >"$LOG"

    step() {
        local what="$1"
        shift
        echo "setup: $what" >&2
        if ! "$@" >>"$LOG" 2>&1; then
            echo "setup: failed: $what (apt's log, $LOG):" >&2
            tail -n 60 "$LOG" >&2
            exit 1
        fi
    }

    step "updating the package lists" $SUDO apt-get update -q
    step "installing ${missing[*]}" $SUDO apt-get install -y -q --no-install-recommends \
        -o Dpkg::Use-Pty=0 "${missing[@]}"
    echo "setup: done (apt's log: $LOG)" >&2
fi

# aiortc (PyPI), a second DTLS-SRTP peer for the interop tests, for the python3 on PATH.
if [[ "$TIER" == all ]] && ! python3 -c "import aiortc" >/dev/null 2>&1; then
    echo "setup: installing aiortc (PyPI)" >&2
    # Not fatal: without PyPI the aiortc tests say they were skipped and why; everything else runs.
    if ! python3 -m pip install --quiet --disable-pip-version-check "aiortc>=1.9,<2" >>"${TETHER_SETUP_LOG:-${TMPDIR:-/tmp}/tether-setup-pip.log}" 2>&1; then
        echo "setup: warning: pip install aiortc failed; its interop tests will be skipped (log: ${TETHER_SETUP_LOG:-${TMPDIR:-/tmp}/tether-setup-pip.log})" >&2
    fi
fi
