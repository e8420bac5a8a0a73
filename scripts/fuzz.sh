#!/usr/bin/env bash
# Coverage-guided fuzzing of what reaches Tether from the network, with libFuzzer and
# AddressSanitizer (Swift's -sanitize=fuzzer,address).
#
#   scripts/fuzz.sh SECONDS [TARGET...]      TARGET: sdp, rtp, jitter-buffer, dtmf, rtcp-feedback (default: all)
#
# Each target starts from the committed corpus (Fuzz/corpus/TARGET) and runs for SECONDS. New
# inputs that reach new code go to .build-fuzz/corpus/TARGET (kept between runs, not committed).
# A crash or a violated invariant is saved to Fuzz/regressions/TARGET/, where the normal test run
# (TetherFuzzingTests) replays it from then on: commit it with the fix. Exits non-zero on a crash.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
targets=("$@")
if ((${#targets[@]} == 0)); then targets=(sdp rtp jitter-buffer dtmf rtcp-feedback); fi
SWIFT=${SWIFT:-swift}
SCRATCH=.build-fuzz

# -sanitize=fuzzer links libFuzzer but instruments only the executable's own module; the
# coverage flags instrument every module (TetherCore, TetherRTP, …) the way clang's does.
mkdir -p "$SCRATCH"
for t in "${targets[@]}"; do
    echo "fuzz: building fuzz-$t (libFuzzer + AddressSanitizer)" >&2
    if ! "$SWIFT" build -c debug --scratch-path "$SCRATCH" --sanitize=fuzzer --sanitize=address \
        -Xswiftc -DTETHER_LIBFUZZER -Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table --product "fuzz-$t" >"$SCRATCH/build.log" 2>&1; then
        cat "$SCRATCH/build.log" >&2
        exit 1
    fi
done

# libFuzzer reports crashes itself; Swift's interactive backtracer would only delay it.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
status=0
for t in "${targets[@]}"; do
    work="$SCRATCH/corpus/$t"
    saved="Fuzz/regressions/$t"
    mkdir -p "$work" "$saved"
    log="$SCRATCH/fuzz-$t.log"
    echo "fuzz: $t for $seconds s (corpus Fuzz/corpus/$t, $(ls "$work" | wc -l) inputs found earlier)" >&2
    "$SCRATCH/debug/fuzz-$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$saved/" "$work" "Fuzz/corpus/$t" >"$log" 2>&1
    code=$?
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+' || echo "?")
    if ((code != 0)); then
        status=1
        echo "fuzz: $t FAILED (exit $code) after $runs inputs; the end of libFuzzer's log:" >&2
        tail -n 60 "$log" >&2
        echo "fuzz: the input is saved in $saved/ (ls -t $saved | head -1); TetherFuzzingTests now replays it." >&2
        echo "fuzz: reproduce: swift build --product fuzz-$t && .build/debug/fuzz-$t $saved/FILE" >&2
    else
        echo "fuzz: $t ok: $runs inputs, $cov coverage points, corpus now $(ls "$work" | wc -l) inputs" >&2
    fi
done
exit $status
