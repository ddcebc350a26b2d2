#!/usr/bin/env bash
# What a start still reads from disk after its plan was replayed ahead, by kind (file data,
# filesystem metadata), for replay variants given as option strings:
#   /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
# Records one cold start and plans it, then ROUNDS rounds of, for each variant: system
# eviction (sync, drop_caches 3, 1 s pause), `coldstart prefetch run PLAN <options>`, then
# `coldstart record` of the start (no eviction). Counts from each trace: pages filled of
# regular files and of block devices (metadata), block read requests (under the recorder: counts, not timing).
# A warm recording closes each round.
# Needs root. Installs its Debian packages. Results in $OUT (default /tmp/coldstart-ahead-leftovers).
# Usage: COLDSTART=path bash bench/prefetch-ahead-leftovers.sh [ROUNDS] ['' '--stat-entries' ...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-3}
shift || true
variants=("$@")
[ "${#variants[@]}" -gt 0 ] || variants=("" "--stat-entries")
out=${OUT:-/tmp/coldstart-ahead-leftovers}
mkdir -p "$out"
install_packages python3-scipy python3-matplotlib python3-pandas
use_coldstart
C=$COLDSTART
cmd=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')

echo "load average at the start: $(cat /proc/loadavg)"
rm -f "$out/cold.coldstart"
"$C" record --cold --as-root -o "$out/cold.coldstart" -- "${cmd[@]}" >/dev/null 2>"$out/record.txt"
"$C" prefetch plan "$out/cold.coldstart" -o "$out/python.plan" --force 2>&1 | tail -2
rm -f "$out"/round-*.coldstart "$out"/round-*.replay.txt
for i in $(seq 1 "$rounds"); do
    for v in "${!variants[@]}"; do
        evict
        # shellcheck disable=SC2086
        "$C" prefetch run "$out/python.plan" ${variants[$v]} > "$out/round-$i-v$v.replay.txt" 2>&1
        "$C" record --as-root -o "$out/round-$i-v$v.coldstart" -- "${cmd[@]}" >/dev/null 2>&1
    done
    "$C" record --as-root -o "$out/round-$i-warm.coldstart" -- "${cmd[@]}" >/dev/null 2>&1
    echo "round $i done"
done
echo "load average at the end: $(cat /proc/loadavg)"
/usr/bin/python3 - "$out" "$rounds" "${variants[@]}" <<'PY'
import glob, sqlite3, statistics, sys
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def counts(path):
    c = sqlite3.connect(path)
    q = lambda sql: c.execute(sql).fetchone()[0] or 0
    meta = q("select sum(pages) from page_fill join file on file.id = file_id where file.kind != 'regular'")
    data = q("select sum(pages) from page_fill join file on file.id = file_id where file.kind = 'regular'")
    reqs = q("select count(*) from block_io where op = 'read'")
    return meta, data, reqs
names = [f"v{i}" for i in range(len(variants))] + ["warm"]
labels = [v or "(default)" for v in variants] + ["warm"]
print(f"{'variant':24s} {'metadata pages':>15s} {'data pages':>11s} {'block reads':>12s}   (medians of {rounds} rounds)")
for n, label in zip(names, labels):
    rows = [counts(f"{out}/round-{i}-{n}.coldstart") for i in range(1, rounds + 1)]
    med = [statistics.median(r[k] for r in rows) for k in range(3)]
    print(f"{label:24s} {med[0]:15.0f} {med[1]:11.0f} {med[2]:12.0f}   runs: {rows}")
PY
