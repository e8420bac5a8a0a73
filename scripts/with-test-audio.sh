#!/usr/bin/env bash
# Runs a command with a private sound server and ALSA devices that reach it through the `pulse`
# plugin, so device tests use real, clocked devices without sound hardware.
#
#   [TETHER_TEST_AUDIO_SERVER=pulseaudio|pipewire] scripts/with-test-audio.sh COMMAND [ARGS...]
#
# The server (default `pulseaudio`):
# - pulseaudio: a private PulseAudio daemon.
# - pipewire: a private PipeWire daemon with WirePlumber (the session manager that links streams
#   to devices) and pipewire-pulse (the PulseAudio protocol, which Tether's backend speaks), under
#   its own session bus (dbus-run-session): what Debian 12's GNOME, Ubuntu since 22.10 and Fedora
#   since 34 run.
# Either way on a runtime folder of its own, PULSE_SERVER=unix:$DIR/runtime/native.
#
# Devices (48 kHz mono null sinks): sinks `spk` and `spk2` (playback), their monitors are the
# capture sources; `mic` is a sink whose monitor `mic.monitor` is the default source (tests play
# a tone into `mic` to "speak into the microphone"); `room_spk` and `room_mic`, the same pair for
# the echo tests and bench, which join them with an echo path (module-loopback) that must not
# reach the other tests' devices. ALSA PCMs: `tether_spk`, `tether_spk2`, `tether_mic` (capture
# from mic.monitor), `tether_spk_monitor` (capture from spk.monitor), `default`.
#
# Exported: PULSE_SERVER, PULSE_COOKIE, PULSE_CLIENTCONFIG, ALSA_CONFIG_PATH, TETHER_TEST_AUDIO=1,
# TETHER_TEST_AUDIO_SERVER, TETHER_TEST_AUDIO_DIR (the server's folder: logs), and
# TETHER_TEST_AUDIO_CONTROL, a script that tests run to act on the server as a user's system would:
#   control kill                   the server's processes killed (SIGKILL), as in a crash
#   control start                  started again with the same devices, ready when it returns
#   control kill-source-output N   the server ends one recording stream (pactl's index N)
#   control kill-sink-input N      the server ends one playback stream (pactl's index N)
#   control stop-session-manager   PipeWire only: WirePlumber stopped, so nothing links new streams
# TETHER_TEST_AUDIO_KEEP=1 keeps the folder (logs) after the run.
set -euo pipefail

# Run as the session bus daemon (see dbus-run-session below).
if [[ -n "${TETHER_TEST_AUDIO_BUS:-}" && "${1:-}" == --nofork ]]; then
    exec dbus-daemon "$@" 2>/dev/null
fi

SERVER=${TETHER_TEST_AUDIO_SERVER:-pulseaudio}
case "$SERVER" in
    pulseaudio) NEEDED=(pulseaudio pactl parecord) ;;
    pipewire) NEEDED=(pipewire wireplumber pipewire-pulse pw-cli pactl parecord dbus-run-session) ;;
    *)
        echo "with-test-audio: TETHER_TEST_AUDIO_SERVER must be pulseaudio or pipewire, not '$SERVER'" >&2
        exit 2
        ;;
esac
for tool in "${NEEDED[@]}"; do
    if ! command -v "$tool" >/dev/null; then
        if [[ -n "${CI:-}" || "$SERVER" != pulseaudio ]]; then
            echo "with-test-audio: $tool is required for the $SERVER devices (scripts/setup-debian.sh devices installs it)" >&2
            exit 1
        fi
        echo "with-test-audio: $tool is not installed; running without test audio devices" >&2
        exec "$@"
    fi
done

# WirePlumber needs a session bus; give the run one of its own (it ends with the run). The bus
# daemon is this script again (below), so that its one complaint, that it may not raise its file
# limit, stays out of the output.
if [[ "$SERVER" == pipewire && -z "${TETHER_TEST_AUDIO_BUS:-}" ]]; then
    export TETHER_TEST_AUDIO_BUS=1
    exec dbus-run-session --dbus-daemon="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" -- "$0" "$@"
fi

DIR=$(mktemp -d /tmp/tether-audio.XXXXXX)
mkdir -p "$DIR/runtime" "$DIR/state" "$DIR/home" "$DIR/config/pipewire/pipewire.conf.d" "$DIR/config/wireplumber/bluetooth.lua.d"
SINKS=(spk spk2 mic room_spk room_mic)
declare -A DESCRIPTION=([spk]=Speaker [spk2]=Headset [mic]=MicrophoneFeed [room_spk]=RoomSpeaker [room_mic]=RoomMicrophoneFeed)

cat >"$DIR/daemon.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$DIR/runtime/native
load-module module-cli-protocol-unix socket=$DIR/runtime/cli
PA
for s in "${SINKS[@]}"; do
    echo "load-module module-null-sink sink_name=$s rate=48000 channels=1 format=s16le sink_properties=device.description=${DESCRIPTION[$s]}" >>"$DIR/daemon.pa"
done
echo "set-default-sink spk" >>"$DIR/daemon.pa"
echo "set-default-source mic.monitor" >>"$DIR/daemon.pa"

# PipeWire: the same sinks as nodes of the daemon's own configuration, so they come back when the
# daemon is restarted (a sink loaded through pipewire-pulse would not).
{
    echo "context.objects = ["
    for s in "${SINKS[@]}"; do
        cat <<NODE
    { factory = adapter
      args = {
          factory.name = support.null-audio-sink
          node.name = "$s"
          node.description = "${DESCRIPTION[$s]}"
          media.class = "Audio/Sink"
          audio.rate = 48000
          audio.channels = 1
          audio.position = [ MONO ]
          object.linger = true
          monitor.channel-volumes = true
      }
    }
NODE
    done
    echo "]"
} >"$DIR/config/pipewire/pipewire.conf.d/tether-test-devices.conf"

# WirePlumber's Bluetooth monitor watches logind's seats, and WirePlumber exits when
# /run/systemd/seats is missing (a container whose /run is an empty tmpfs): not needed here.
echo 'bluez_monitor.properties["with-logind"] = false' >"$DIR/config/wireplumber/bluetooth.lua.d/51-tether-test.lua"

cat >"$DIR/client.conf" <<CONF
autospawn = no
enable-shm = no
default-server = unix:$DIR/runtime/native
CONF
cat >"$DIR/asound.conf" <<ALSA
pcm.tether_spk { type pulse; device "spk" }
pcm.tether_spk2 { type pulse; device "spk2" }
pcm.tether_mic { type pulse; device "mic.monitor" }
pcm.tether_spk_monitor { type pulse; device "spk.monitor" }
pcm.tether_spk2_monitor { type pulse; device "spk2.monitor" }
pcm.tether_mic_feed { type pulse; device "mic" }
pcm.!default { type pulse }
ctl.!default { type pulse }
ALSA

export HOME="$DIR/home" XDG_RUNTIME_DIR="$DIR/runtime" PIPEWIRE_RUNTIME_DIR="$DIR/runtime"
export XDG_CONFIG_HOME="$DIR/config" XDG_STATE_HOME="$DIR/state"
export PULSE_RUNTIME_PATH="$DIR/runtime" PULSE_STATE_PATH="$DIR/state"
export PULSE_SERVER="unix:$DIR/runtime/native" PULSE_CLIENTCONFIG="$DIR/client.conf" PULSE_COOKIE="$DIR/cookie"
export ALSA_CONFIG_PATH="/usr/share/alsa/alsa.conf:$DIR/asound.conf"
export TETHER_TEST_AUDIO=1 TETHER_TEST_AUDIO_SERVER="$SERVER" TETHER_TEST_AUDIO_DIR="$DIR"
export TETHER_TEST_AUDIO_CONTROL="$DIR/control"

# The control script: the server's life, as tests and this script act on it. Background processes
# get their own stdin/stdout/stderr, so a caller that waits for the script's output is not held
# open by them.
cat >"$DIR/control" <<'CONTROL'
#!/usr/bin/env bash
set -euo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
SERVER=$TETHER_TEST_AUDIO_SERVER
SINKS=(spk spk2 mic room_spk room_mic)

# A process that has ended but not been reaped (a zombie) counts as gone.
alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null && [[ "$(ps -o stat= -p "$1" 2>/dev/null)" != Z* ]]; }
pids() { cat "$DIR"/*.pid 2>/dev/null || true; }
launch() { # NAME COMMAND...: started in the background, its pid in NAME.pid
    local name=$1
    shift
    "$@" </dev/null >>"$DIR/$name.log" 2>&1 &
    echo $! >"$DIR/$name.pid"
}
wait_until() { # TRIES COMMAND...: every 50 ms
    local tries=$1
    shift
    for _ in $(seq 1 "$tries"); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.05
    done
    return 1
}
sinks_ready() {
    local listed
    listed=$(pactl list short sinks)
    for s in "${SINKS[@]}"; do grep -q "^[0-9]*[[:space:]]$s[[:space:]]" <<<"$listed" || return 1; done
}
defaults_set() {
    pactl set-default-sink spk && pactl set-default-source mic.monitor &&
        [[ "$(pactl get-default-sink)" == spk && "$(pactl get-default-source)" == mic.monitor ]]
}

start() {
    case "$SERVER" in
    pulseaudio)
        # A daemon killed with SIGKILL leaves its pid file; this machine's init may not reap it.
        rm -f "$PULSE_RUNTIME_PATH/pid"
        launch server pulseaudio -n -F "$DIR/daemon.pa" --daemonize=no --exit-idle-time=-1 --log-target=stderr
        ;;
    pipewire)
        # WirePlumber's remembered defaults and routes would outlive a restart; start from none.
        rm -rf "$XDG_STATE_HOME/wireplumber"
        # A killed server leaves its socket file behind: waiting for the file alone let
        # WirePlumber start before the new server listened, fail to connect and exit (2 restarts
        # in 15). Remove it, and start WirePlumber once the server answers.
        rm -f "$PIPEWIRE_RUNTIME_DIR"/pipewire-0 "$PIPEWIRE_RUNTIME_DIR"/pipewire-0.lock \
            "$PIPEWIRE_RUNTIME_DIR"/pipewire-0-manager "$PIPEWIRE_RUNTIME_DIR"/pipewire-0-manager.lock
        launch server pipewire
        wait_until 200 pw-cli info 0 || { echo "control: the pipewire server did not answer" >&2; return 1; }
        launch session-manager wireplumber
        launch pulse pipewire-pulse
        ;;
    esac
    wait_until 200 pactl info || { echo "control: the $SERVER server did not answer" >&2; return 1; }
    wait_until 200 sinks_ready || { echo "control: the $SERVER server has not made its sinks" >&2; return 1; }
    wait_until 200 defaults_set || { echo "control: could not set the default devices" >&2; return 1; }
    # An idle null sink renders ahead: keep one low-latency recorder on each monitor (they end with
    # the server), so a new capture stream gets its first data in tens of milliseconds rather than
    # up to 2 s. PulseAudio applies the small latency only after one suspend/resume of the sink;
    # PipeWire needs none, and a suspend there silenced streams that reconnected after a restart.
    for s in "${SINKS[@]}"; do
        parecord --device="$s.monitor" --rate=48000 --channels=1 --format=s16le --latency-msec=10 --raw /dev/null \
            </dev/null >/dev/null 2>&1 &
        echo $! >"$DIR/keeper-$s.pid"
    done
    if [[ "$SERVER" == pulseaudio ]]; then
        sleep 0.2
        for s in "${SINKS[@]}"; do pactl suspend-sink "$s" 1; pactl suspend-sink "$s" 0; done
    fi
    # Ready when a fresh capture stream delivers 100 ms of audio.
    timeout 5 parecord --device=mic.monitor --rate=48000 --channels=1 --format=s16le --raw 2>/dev/null </dev/null |
        head -c 9600 >/dev/null || true
}

stop_all() { # SIGNAL
    local p
    for p in $(pids); do kill "-$1" "$p" 2>/dev/null || true; done
    for _ in $(seq 1 100); do
        local left=0
        for p in $(pids); do if alive "$p"; then left=1; fi; done
        ((left)) || break
        sleep 0.05
    done
    for p in $(pids); do kill -9 "$p" 2>/dev/null || true; done
    rm -f "$DIR"/*.pid
}

case "${1:-}" in
start) start ;;
kill) stop_all KILL ;;
stop) stop_all TERM ;;
kill-source-output | kill-sink-input)
    case "$SERVER" in
    pulseaudio) pacmd "$1" "$2" ;;
    pipewire)
        # pactl's index is the node's object.serial; pw-cli destroys by object id.
        id=$(pw-cli ls Node | awk -v serial="$2" '
            /^[[:space:]]*id [0-9]+,/ { id = $2; sub(",", "", id) }
            /object.serial = / { s = $3; gsub("\"", "", s); if (s == serial) { print id; exit } }')
        [[ -n "$id" ]] || { echo "control: no node with serial $2" >&2; exit 1; }
        pw-cli destroy "$id" >/dev/null
        ;;
    esac
    ;;
stop-session-manager)
    [[ "$SERVER" == pipewire ]] || { echo "control: $SERVER has no session manager" >&2; exit 2; }
    p=$(cat "$DIR/session-manager.pid")
    kill "$p"
    for _ in $(seq 1 100); do alive "$p" || break; sleep 0.05; done
    rm -f "$DIR/session-manager.pid"
    ;;
*)
    echo "usage: control start | kill | stop | kill-source-output INDEX | kill-sink-input INDEX | stop-session-manager" >&2
    exit 2
    ;;
esac
CONTROL
chmod +x "$DIR/control"

cleanup() {
    "$DIR/control" stop || true
    if [[ -z "${TETHER_TEST_AUDIO_KEEP:-}" ]]; then rm -rf "$DIR" 2>/dev/null || true; fi
}
trap cleanup EXIT

"$DIR/control" start
"$@"
