#!/usr/bin/env bash
# Runs one test command for `make test`: output is line-buffered (so a log shows the test that was
# running), a watchdog ends a run that hangs, and each test's swift-log messages go to a log of its
# own instead of the terminal (TETHER_TEST_LOG_DIR, read by Tests/TetherTestSupport), and so does the
# stderr of the `tether call` processes and peers they start. When the run fails, its failures are
# repeated at the end of the output, then the logs of the tests that failed (or were running when it
# stopped), then the failed tests' names, so a CI summary that shows only the tail still carries
# them. A passing run prints no log message.
#
#   scripts/run-tests.sh MINUTES COMMAND [ARGS...]
#
# The logs are removed after a passing run (kept, and their folder named, with
# TETHER_KEEP_TEST_LOGS=1); after a failing one they stay in the folder the summary names (under
# ${TMPDIR:-/tmp}), all of them, whole.
set -uo pipefail
minutes=$1
shift
# Lines of a failed test's log shown at the end (the whole log stays in the folder).
log_lines=200
log=$(mktemp /tmp/tether-tests.XXXXXX)
logs=$(mktemp -d "${TMPDIR:-/tmp}/tether-test-logs.XXXXXX")
export TETHER_TEST_LOG_DIR=$logs
trap 'rm -f "$log" "$log".*' EXIT
timeout --kill-after=30 "$((minutes * 60))" stdbuf -oL -eL "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
    if [ -n "${TETHER_KEEP_TEST_LOGS:-}" ]; then echo "test logs: $logs"; else rm -rf "$logs"; fi
    exit 0
fi

# "N lines" of file $1 (less $2 header lines), and ", the last 200" when only those are shown.
size() {
    local lines=$(($(wc -l < "$1") - ${2:-0}))
    echo "$lines lines$([ "$lines" -gt "$log_lines" ] && echo ", the last $log_lines")"
}

# Prints the log of every test named $1 (as swift-testing prints it: `name()` or `"display name"`).
show_log() {
    local found=0 file child process
    if [ -f "$logs/index.tsv" ]; then
        while IFS= read -r file; do
            found=1
            echo
            echo "---- log of $1: $(size "$logs/$file" 1) ($logs/$file)"
            head -n 1 "$logs/$file"
            tail -n +2 "$logs/$file" | tail -n "$log_lines"
            for child in "$logs/${file%.log}".*.stderr; do
                [ -e "$child" ] || continue
                process=${child#"$logs/${file%.log}".}
                echo "---- stderr of its process ${process%.stderr}: $(size "$child")"
                tail -n "$log_lines" "$child"
            done
        done < <(NAME="$1" awk -F'\t' '$2 == ENVIRON["NAME"] { print $1 }' "$logs/index.tsv" | sort -u)
    fi
    if [ "$found" -eq 0 ]; then
        echo
        echo "---- $1 logged nothing"
    fi
}

echo
echo "==== tests failed (exit $status): $* ===="
# Test names from swift-testing's lines (not the run's own, nor a parameterized test's cases).
# Its symbols are spelled out: in the C locale `.` is one byte of them.
names() {
    sed -nE -e '/^(◇|✔|✘) Test (run|case) /d' -e "$1" "$log" | sed -E 's/ with [0-9]+ test cases?$//'
}
names 's/^◇ Test (.*) started\.$/\1/p' | sort -u > "$log.started"
# A test that cancels itself (the machine cannot test what it asserts, as a realtime test on a
# starved machine says) has ended too.
names 's/^✔ Test (.*) passed after [0-9.]+ seconds.*/\1/p; s/^✘ Test (.*) failed after [0-9.]+ seconds.*/\1/p; s/^➜ Test (.*) was cancelled after [0-9.]+ seconds.*/\1/p' \
    | sort -u > "$log.ended"
comm -23 "$log.started" "$log.ended" > "$log.unfinished"
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "The run was stopped after $minutes minutes. Tests started and not finished:"
    sed 's/^/  /' "$log.unfinished"
elif [ -s "$log.unfinished" ]; then
    echo "Tests started and not finished (the test process ended in them):"
    sed 's/^/  /' "$log.unfinished"
fi
grep -E '✘|error:|Fatal error|fatalError' "$log" | tail -60

names 's/^✘ Test (.*) failed after [0-9.]+ seconds.*/\1/p' | awk '!seen[$0]++' > "$log.failed"
cat "$log.unfinished" >> "$log.failed"
if [ -s "$log.failed" ]; then
    echo
    echo "==== logs of the tests that failed or did not finish ===="
    while IFS= read -r name; do show_log "$name"; done < "$log.failed"
fi
if [ -s "$logs/unattributed.log" ]; then
    echo
    echo "---- messages logged outside every test: $(size "$logs/unattributed.log") ($logs/unattributed.log)"
    tail -n "$log_lines" "$logs/unattributed.log"
fi
echo
if [ -s "$log.failed" ]; then
    echo "==== failed: $(paste -sd '|' "$log.failed" | sed 's/|/, /g') (exit $status; all logs: $logs)"
else
    echo "==== failed (exit $status) with no failed test named; all logs: $logs"
fi
exit "$status"
