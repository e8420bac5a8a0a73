#!/usr/bin/env bash
# Runs a command with a private PulseAudio daemon and ALSA devices that reach it through the
# `pulse` plugin, so device tests use real, clocked devices without sound hardware.
#
#   scripts/with-test-audio.sh COMMAND [ARGS...]
#
# Devices (48 kHz mono s16le null sinks): sinks `spk` and `spk2` (playback), their monitors are
# the capture sources; `mic` is a sink whose monitor `mic.monitor` is the default source (tests
# play a tone into `mic` to "speak into the microphone"); `room_spk` and `room_mic`, the same
# pair for the echo tests and bench, which join them with an echo path (module-loopback) that
# must not reach the other tests' devices. ALSA PCMs: `tether_spk`, `tether_spk2`,
# `tether_mic` (capture from mic.monitor), `tether_spk_monitor` (capture from spk.monitor), `default`.
# Exported: PULSE_SERVER, PULSE_COOKIE, PULSE_CLIENTCONFIG, ALSA_CONFIG_PATH, TETHER_TEST_AUDIO=1,
# TETHER_TEST_PULSE_DIR (the daemon's folder), TETHER_TEST_PULSE_CLI (pacmd socket).
set -euo pipefail

if ! command -v pulseaudio >/dev/null || ! command -v pactl >/dev/null; then
    if [[ -n "${CI:-}" ]]; then
        echo "with-test-audio: pulseaudio and pactl are required in CI (scripts/setup-debian.sh installs them)" >&2
        exit 1
    fi
    echo "with-test-audio: pulseaudio is not installed; running without test audio devices" >&2
    exec "$@"
fi

DIR=$(mktemp -d /tmp/tether-audio.XXXXXX)
mkdir -p "$DIR/runtime" "$DIR/state" "$DIR/home"
cat > "$DIR/daemon.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$DIR/native
load-module module-cli-protocol-unix socket=$DIR/cli
load-module module-null-sink sink_name=spk rate=48000 channels=1 format=s16le sink_properties=device.description=Speaker
load-module module-null-sink sink_name=spk2 rate=48000 channels=1 format=s16le sink_properties=device.description=Headset
load-module module-null-sink sink_name=mic rate=48000 channels=1 format=s16le sink_properties=device.description=MicrophoneFeed
load-module module-null-sink sink_name=room_spk rate=48000 channels=1 format=s16le sink_properties=device.description=RoomSpeaker
load-module module-null-sink sink_name=room_mic rate=48000 channels=1 format=s16le sink_properties=device.description=RoomMicrophoneFeed
set-default-sink spk
set-default-source mic.monitor
PA
cat > "$DIR/client.conf" <<CONF
autospawn = no
enable-shm = no
default-server = unix:$DIR/native
CONF
cat > "$DIR/asound.conf" <<ALSA
pcm.tether_spk { type pulse; device "spk" }
pcm.tether_spk2 { type pulse; device "spk2" }
pcm.tether_mic { type pulse; device "mic.monitor" }
pcm.tether_spk_monitor { type pulse; device "spk.monitor" }
pcm.tether_spk2_monitor { type pulse; device "spk2.monitor" }
pcm.tether_mic_feed { type pulse; device "mic" }
pcm.!default { type pulse }
ctl.!default { type pulse }
ALSA

export HOME="$DIR/home" XDG_RUNTIME_DIR="$DIR/runtime" PULSE_RUNTIME_PATH="$DIR/runtime" PULSE_STATE_PATH="$DIR/state"
export PULSE_SERVER="unix:$DIR/native" PULSE_CLIENTCONFIG="$DIR/client.conf" PULSE_COOKIE="$DIR/cookie"
export ALSA_CONFIG_PATH="/usr/share/alsa/alsa.conf:$DIR/asound.conf"
export TETHER_TEST_AUDIO=1 TETHER_TEST_PULSE_DIR="$DIR" TETHER_TEST_PULSE_CLI="$DIR/cli"

pulseaudio -n -F "$DIR/daemon.pa" --daemonize=no --exit-idle-time=-1 --log-target=file:"$DIR/pulse.log" &
PULSE_PID=$!
echo "$PULSE_PID" > "$DIR/pulse.pid"
KEEPERS=()
cleanup() {
    for k in "${KEEPERS[@]}"; do kill "$k" 2>/dev/null || true; done
    # The daemon may be one a test restarted (not this shell's child): wait until it is gone.
    local daemon
    daemon=$(cat "$DIR/pulse.pid" 2>/dev/null || echo "$PULSE_PID")
    kill "$daemon" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$daemon" 2>/dev/null || true
    wait "$PULSE_PID" 2>/dev/null || true
    rm -rf "$DIR" 2>/dev/null || true
}
trap cleanup EXIT

for _ in $(seq 1 100); do
    if pactl info >/dev/null 2>&1; then break; fi
    sleep 0.05
done
pactl info >/dev/null
# An idle null sink renders ahead: keep one recorder on each monitor and suspend/resume each sink
# once, so a new capture stream gets its first data in tens of milliseconds rather than up to 2 s.
for s in spk spk2 mic room_spk room_mic; do
    parecord --device="$s.monitor" --rate=48000 --channels=1 --format=s16le --latency-msec=10 --raw /dev/null &
    KEEPERS+=($!)
done
sleep 0.2
for s in spk spk2 mic room_spk room_mic; do pactl suspend-sink "$s" 1; pactl suspend-sink "$s" 0; done
# Ready when a fresh capture stream delivers 100 ms of audio.
timeout 5 parecord --device=mic.monitor --rate=48000 --channels=1 --format=s16le --raw 2>/dev/null | head -c 9600 >/dev/null || true

"$@"
