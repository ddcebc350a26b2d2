#!/usr/bin/env bash
# Page accesses in a recording of the scientific Python import: access events and
# rows after merging, fill origins, readahead never used, ring-buffer pages and spool
# size, for cold starts (drop_caches before each) and warm ones.
#
# With COLDSTART_OLD=binary (a coldstart built without page-access events) the cold
# starts are N interleaved pairs in ABBA order, A = recorded by the old binary, B =
# by the current one, both timed by the same bash wrapper (EPOCHREALTIME around the
# start, as bench/recorder-overhead.sh): what the access events cost the start.
# Run as root from the repository root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
N=${N:-6}
WARM=${WARM:-3}
CMD=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')
install_packages python3-scipy python3-matplotlib python3-pandas sqlite3 bc
use_coldstart
BIN=$COLDSTART
OLD=${COLDSTART_OLD:-}
work=$(mktemp -d /var/tmp/cs-accesses.XXXXXX)
trap 'rm -rf "$work"' EXIT
export MPLBACKEND=Agg
"${CMD[@]}"   # warm-up: compile .pyc files once
TIMED='t0=$EPOCHREALTIME; "$@"; t1=$EPOCHREALTIME; echo "($t1 - $t0) * 1000" | bc -l > "$OUT"'
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep "${SETTLE:-1}"; }
# record BINARY NAME [--cold]: records the timed start into $work/NAME.coldstart
record() {
    local bin=$1 name=$2
    OUT="$work/$name.ms" "$bin" record -o "$work/$name.coldstart" --spool-dir "$work/spool" -- \
        bash -c "$TIMED" timed "${CMD[@]}" 2>"$work/$name.log"
}
note() { sqlite3 "$1" "select text from note where text like '$2%'"; }
describe() {
    local t="$work/$1.coldstart" log="$work/$1.log"
    local events rows kinds origins ring spool ra lost
    events=$(note "$t" "" | sed -n 's/^\([0-9]*\) page-access events.*/\1/p')
    rows=$(sqlite3 "$t" "select count(*) from page_access")
    kinds=$(sqlite3 "$t" "select group_concat(kind || ' ' || n, ', ') from (select kind, count(*) n from page_access group by kind)")
    origins=$(sqlite3 "$t" "select group_concat(o || ' ' || n || '/' || p, ', ') from (select coalesce(origin, 'null') o, count(*) n, sum(pages) p from page_fill group by 1)")
    ring=$(note "$t" "" | sed -n 's/^\([0-9]*\) ring-buffer pages.*/\1/p')
    spool=$(note "$t" "the spool held" | sed 's/^the spool held //')
    ra=$(grep -h 'readahead ' "$log" | sed 's/^ *readahead *//' || true)
    lost=$(sqlite3 "$t" "select coalesce(sum(count), 0) from loss where source = 'tracefs'")
    printf '  %s: %s ms; access events %s -> rows %s (%s); fills (count/pages) %s; readahead: %s; ring-buffer pages %s; spool %s; tracefs losses %s\n' \
        "$1" "$(printf '%.0f' "$(cat "$work/$1.ms")")" "${events:-0}" "$rows" "$kinds" "$origins" "${ra:-none}" "$ring" "$spool" "$lost"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

echo "== cold (drop_caches before each run)"
a=(); b=(); r=()
for i in $(seq 1 "$N"); do
    if [ -n "$OLD" ]; then
        if [ $((i % 2)) -eq 1 ]; then drop; record "$OLD" "old$i"; drop; record "$BIN" "cold$i";
        else drop; record "$BIN" "cold$i"; drop; record "$OLD" "old$i"; fi
        a+=("$(cat "$work/old$i.ms")"); b+=("$(cat "$work/cold$i.ms")")
        r+=("$(echo "${b[-1]} / ${a[-1]}" | bc -l)")
        printf 'pair %d: without accesses %.0f ms (%s ring-buffer pages), with %.0f ms, ratio %.3f\n' "$i" "${a[-1]}" \
            "$(note "$work/old$i.coldstart" "" | sed -n 's/^\([0-9]*\) ring-buffer pages.*/\1/p')" "${b[-1]}" "${r[-1]}"
    else
        drop; record "$BIN" "cold$i"
    fi
    describe "cold$i"
done
if [ -n "$OLD" ]; then
    echo "median without access events $(median "${a[@]}") ms, with $(median "${b[@]}") ms; median of the per-pair ratios $(median "${r[@]}" | xargs printf '%.3f')"
fi
echo "== warm (after a warm-up run)"
"${CMD[@]}"
for i in $(seq 1 "$WARM"); do
    record "$BIN" "warm$i"
    describe "warm$i"
done
