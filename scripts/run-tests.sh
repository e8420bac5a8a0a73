#!/usr/bin/env bash
# Runs one test command for `make test`: output is line-buffered (so a log shows the test that was
# running), a watchdog ends a run that hangs, and when the run fails its failures are repeated at
# the end of the output, where a CI summary that shows only the tail will still carry them.
#
#   scripts/run-tests.sh MINUTES COMMAND [ARGS...]
set -uo pipefail
minutes=$1
shift
log=$(mktemp /tmp/tether-tests.XXXXXX)
trap 'rm -f "$log"' EXIT
timeout --kill-after=30 "$((minutes * 60))" stdbuf -oL -eL "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo
    echo "==== tests failed (exit $status): $* ===="
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        echo "The run was stopped after $minutes minutes. Tests started and not finished:"
        grep -E '^◇ Test .* started' "$log" | sed -E 's/^◇ Test (.*) started\.?$/\1/' | sort -u > "$log.started"
        grep -E '^[✔✘] Test ' "$log" | sed -E 's/^. Test (.*) (passed|failed|recorded).*/\1/' | sort -u > "$log.ended"
        comm -23 "$log.started" "$log.ended" | sed 's/^/  /'
        rm -f "$log.started" "$log.ended"
    fi
    grep -E '✘|error:|Fatal error|fatalError' "$log" | tail -60
fi
exit "$status"
