#!/usr/bin/env bash
# Runs an AddressSanitizer build of `tether demo` with leak detection: a clean 5 s call, an
# 8 s call with a 3 s outage (ICE restart through signaling), and a 5 s call with DTMF digits and
# a hold and resume (re-offers through signaling). Fails when the demo fails, when
# AddressSanitizer reports an error or a leak (exit code 1 and a report on stderr), or when the
# demo's output is cut short.
#
#   scripts/asan-demo.sh PATH/TO/ASAN/tether
set -uo pipefail
tether=${1:?usage: scripts/asan-demo.sh PATH/TO/ASAN/tether}
dir=$(mktemp -d /tmp/tether-asan-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export ASAN_OPTIONS=detect_leaks=1
status=0
run() {
    local name=$1
    shift
    echo "asan-demo: tether demo $*" >&2
    "$tether" demo --output-directory "$dir/$name" "$@" >"$dir/$name.out" 2>"$dir/$name.err"
    local code=$?
    if ((code != 0)) || grep -q "Sanitizer" "$dir/$name.err" || ! grep -q "Received audio" "$dir/$name.out"; then
        echo "asan-demo: FAILED (exit $code): tether demo $*" >&2
        tail -n 20 "$dir/$name.out" >&2
        grep -A 40 "Sanitizer" "$dir/$name.err" | head -n 120 >&2
        status=1
    else
        echo "asan-demo: ok, no AddressSanitizer report" >&2
    fi
}
run clean --duration 5
run outage --duration 8 --outage 3 --outage-at 2
run hold --duration 5 --dtmf 159# --dtmf-at 0.5 --hold-at 2 --hold-for 1.5
exit $status
