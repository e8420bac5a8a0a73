#!/usr/bin/env bash
# Times the phases of `make test`, so a CI log says where its time went.
#
#   scripts/phase-clock.sh reset          forget earlier timings
#   scripts/phase-clock.sh begin NAME     NAME starts now
#   scripts/phase-clock.sh end NAME       NAME ends now: prints its time
#   scripts/phase-clock.sh summary        every phase that ended, in order, with the total
#                                         (wall time from the first begin to the last end: phases
#                                         may overlap)
set -euo pipefail
dir=${TETHER_PHASE_CLOCK_DIR:-.build/phase-clock}
mkdir -p "$dir"
case "$1" in
reset) rm -f "$dir"/* ;;
begin)
    date +%s >"$dir/$2.start"
    ls "$dir"/*.start | wc -l >"$dir/$2.order"
    ;;
end)
    seconds=$(($(date +%s) - $(cat "$dir/$2.start")))
    echo "$seconds" >"$dir/$2.seconds"
    date +%s >"$dir/$2.end"
    echo "==== $2: $seconds s"
    ;;
summary)
    echo "==== time by phase"
    total=0
    for f in $(ls "$dir"/*.seconds 2>/dev/null); do
        name=$(basename "$f" .seconds)
        echo "$(cat "$dir/$name.order") $name $(cat "$f")"
    done | sort -n | while read -r _ name seconds; do
        printf '  %-22s %5d s  %4d min %02d s\n' "$name" "$seconds" $((seconds / 60)) $((seconds % 60))
    done
    first=$(cat "$dir"/*.start 2>/dev/null | sort -n | head -n 1 || true)
    last=$(cat "$dir"/*.end 2>/dev/null | sort -n | tail -n 1 || true)
    [[ -n "$first" && -n "$last" ]] && total=$((last - first))
    printf "  %-22s %5d s  %4d min %02d s\n" "total (wall)" "$total" $((total / 60)) $((total % 60))
    ;;
*)
    echo "usage: scripts/phase-clock.sh reset | begin NAME | end NAME | summary" >&2
    exit 2
    ;;
esac
