#!/usr/bin/env bash
# Recorder overhead on a cold start: N interleaved pairs (default 10) of
#   A: the start alone, B: the start under `coldstart record`,
# each after drop_caches, in ABBA order. Both are timed the same way: a bash
# wrapper (itself the traced command in B) takes EPOCHREALTIME just before
# running the start and just after it exits.
# Prints every pair and the medians; run as root from the repository root.
# With OTHER='--no-cpu-samples' (any options of `coldstart record`), a third start of each
# round, C, is recorded with those options too (order ABC, then CBA), and the ratios B/C say
# what B costs against C: above 1 when OTHER turns something off (--no-cpu-samples), below 1
# when it turns something on (--syscalls).
# RECORD_ARGS adds arguments to every `coldstart record` (RECORD_ARGS=--syscalls: with system
# calls, off by default; --no-cpu-samples: without CPU stack samples, on by default).
# OTHER=--no-offcpu-stacks: B/C is what the off-CPU kernel stacks (on by default) cost.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
N=${N:-10}
CMD=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')
install_packages python3-scipy python3-matplotlib python3-pandas sqlite3
use_coldstart
BIN=$COLDSTART
work=$(mktemp -d /var/tmp/cs-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT
export MPLBACKEND=Agg
"${CMD[@]}"   # warm-up: compile .pyc files once, so every run below starts from the same files
TIMED='t0=$EPOCHREALTIME; "$@"; t1=$EPOCHREALTIME; echo "($t1 - $t0) * 1000" | bc -l > "$OUT"'
# The cache is dropped the same way before A and B, then the machine gets SETTLE
# seconds (default 1) to finish the aftermath of drop_caches (without that pause
# whichever run starts right after the drop is the slower one, by ~10%).
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep "${SETTLE:-1}"; }
run_a() { drop; OUT="$work/a$1" bash -c "$TIMED" timed "${CMD[@]}"; }
run_b() {
    drop
    # shellcheck disable=SC2086 # RECORD_ARGS is a list of words
    OUT="$work/b$1" "$BIN" record ${RECORD_ARGS:-} -o "$work/run$1.coldstart" --spool-dir "$work/spool" -- \
        bash -c "$TIMED" timed "${CMD[@]}" 2>"$work/record$1.log"
}
OTHER=${OTHER:-}
run_c() {
    [ -n "$OTHER" ] || return 0
    drop
    # shellcheck disable=SC2086 # OTHER is a list of options
    OUT="$work/c$1" "$BIN" record ${RECORD_ARGS:-} $OTHER -o "$work/less$1.coldstart" --spool-dir "$work/spool" -- \
        bash -c "$TIMED" timed "${CMD[@]}" 2>"$work/less$1.log"
}
a=(); b=(); c=(); r=(); rc=()
for i in $(seq 1 "$N"); do
    if [ $((i % 2)) -eq 1 ]; then run_a "$i"; run_b "$i"; run_c "$i"; else run_c "$i"; run_b "$i"; run_a "$i"; fi
    a+=("$(cat "$work/a$i")"); b+=("$(cat "$work/b$i")")
    if [ -n "$OTHER" ]; then
        c+=("$(cat "$work/c$i")")
        rc+=("$(echo "${b[-1]} / ${c[-1]}" | bc -l)")
        printf 'pair %2d  recorded with %s %8.1f ms  ratio recorded / that %.3f\n' "$i" "$OTHER" "${c[-1]}" "${rc[-1]}"
    fi
    lost=$(sqlite3 "$work/run$i.coldstart" "select coalesce(sum(count), 0) from loss where source = 'tracefs'")
    fills=$(sqlite3 "$work/run$i.coldstart" "select count(*) from page_fill")
    cpu=$(sqlite3 "$work/run$i.coldstart" "select text from note where text like 'capture threads used%'" | awk '{print $4}')
    r+=("$(echo "${b[-1]} / ${a[-1]}" | bc -l)")
    printf 'pair %2d  untraced %8.1f ms  recorded %8.1f ms  ratio %.3f  (%s page fills, tracefs losses %s, capture CPU %s ms)\n' \
        "$i" "${a[-1]}" "${b[-1]}" "${r[-1]}" "$fills" "$lost" "$cpu"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
echo "median untraced ${ma} ms, recorded ${mb} ms, overhead of the medians $(echo "($mb / $ma - 1) * 100" | bc -l | xargs printf '%.1f')%"
echo "median of the per-pair ratios recorded/untraced: $(median "${r[@]}" | xargs printf '%.3f')"
if [ -n "$OTHER" ]; then
    mc=$(median "${c[@]}")
    echo "median recorded with $OTHER ${mc} ms; recorded against that: $(echo "($mb / $mc - 1) * 100" | bc -l | xargs printf '%+.1f')% of the medians, per-pair ratio median $(median "${rc[@]}" | xargs printf '%.3f')"
fi
