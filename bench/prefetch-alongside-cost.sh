#!/usr/bin/env bash
# What a replay alongside costs the start it runs beside, on the machine's own disk:
#   /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
# Records one cold start and makes the default plan, then in each round, interleaved, times
# the program itself under /usr/bin/time (elapsed, user and system CPU, voluntary and
# involuntary context switches of python alone, not of the replay):
#   alongside            `coldstart run --prefetch PLAN` after system eviction (the default)
#   alongside, cpu idle  the same with `--cpu idle` (replay threads SCHED_IDLE)
#   alongside, 1 cpu     the same with the replay confined to the last CPU (taskset; the
#                        program may run anywhere)
#   alongside, separate CPUs  the replay on the last CPU, the program on the first
#   alongside, 30 ms lead  `prefetch run --depth 4 PLAN &`, the program 30 ms later; timed
#                        from the replay's start
#   alongside, metadata cached  alongside after `drop_caches` 1 instead of 3 (page cache
#                        emptied, dentries and inodes kept): the most that warming the
#                        metadata the replay cannot read could give
#   ahead                `coldstart run --ahead --prefetch PLAN` (replay first, not timed)
#   warm                 the program alone, warm
#   warm + spinner       warm, pinned to the first CPU, with a CPU-bound loop on the last
#   warm + memory stream warm, pinned to the first CPU, with a 64 MiB copy loop on the last
#   warm, pinned         warm, pinned to the first CPU, alone (the reference of the two above)
# and prints, per configuration, medians and the paired ratio (geometric mean of per-round
# ratios, 95% interval of a paired t-test on their logarithms) to warm, or to "warm, pinned" for the program pinned
# to the first CPU (the separate CPUs and the two loads).
# Needs root and 2 CPUs or more. Installs its Debian packages; builds a release coldstart
# unless COLDSTART=path is given. Results in $OUT (default /tmp/coldstart-alongside-cost).
# Usage: bash bench/prefetch-alongside-cost.sh [ROUNDS]   (run it under
#   flock /var/lock/coldstart-bench.lock)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-10}
out=${OUT:-/tmp/coldstart-alongside-cost}
mkdir -p "$out"
install_packages python3-scipy python3-matplotlib python3-pandas time util-linux
use_coldstart
use_bench_stats
C=$COLDSTART
cmd=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')
cpus=$(nproc)
[ "$cpus" -ge 2 ] || { echo "needs 2 CPUs or more (this machine has $cpus)" >&2; exit 2; }
first=0
last=$((cpus - 1))
results=$out/runs.txt
: > "$results"

echo "load average at the start: $(cat /proc/loadavg)"
rm -f "$out/cold.coldstart"
"$C" record --cold --as-root -o "$out/cold.coldstart" -- "${cmd[@]}" >/dev/null 2>"$out/record.txt"
"$C" prefetch plan "$out/cold.coldstart" -o "$out/py.plan" --force 2>&1 | head -1
plan=$out/py.plan

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# timed NAME CMD...: runs CMD, which ends in "${py_timed[@]}": the program's elapsed time
# (bash's `time`, in ms) and its own CPU and context switches (/usr/bin/time)
timed() {
    local name=$1
    shift
    rm -f "$out/elapsed.txt" "$out/time.txt"
    "$@" >/dev/null 2>&1
    echo "$name|$(cat "$out/elapsed.txt") $(cat "$out/time.txt")" >> "$results"
}
export OUT_DIR=$out
py_timed=(bash -c 'TIMEFORMAT=%3R; { time "$@" >/dev/null 2>&1; } 2> "$OUT_DIR/elapsed.txt"' _
    /usr/bin/time -o "$out/time.txt" -f '%U %S %w %c' "${cmd[@]}")
# with_load NAME LOOP: the program warm on the first CPU while LOOP runs on the last
with_load() {
    local name=$1 loop=$2 pid
    taskset -c "$last" /usr/bin/python3 -c "$loop" &
    pid=$!
    sleep 0.3
    timed "$name" taskset -c "$first" "${py_timed[@]}"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}
spin='while True: pass'
stream='
b = bytearray(64 << 20)
while True: b[:] = b'

for round in $(seq "$rounds"); do
    evict
    timed "alongside" "$C" run -q --prefetch "$plan" -- "${py_timed[@]}"
    evict
    timed "alongside, cpu idle" "$C" run -q --cpu idle --prefetch "$plan" -- "${py_timed[@]}"
    evict
    timed "alongside, 1 cpu" taskset -c "$last" "$C" run -q --prefetch "$plan" -- \
        taskset -c "0-$last" "${py_timed[@]}"
    evict
    timed "alongside, separate CPUs" taskset -c "$last" "$C" run -q --prefetch "$plan" -- \
        taskset -c "$first" "${py_timed[@]}"
    evict
    start=$(now_ms)
    "$C" prefetch run -q --depth 4 "$plan" >/dev/null 2>&1 &
    replay=$!
    sleep 0.03
    timed "alongside, 30 ms lead" "${py_timed[@]}"
    end=$(now_ms)
    wait "$replay"
    # the lead counts: elapsed from the replay's start
    sed -i "\$s/|[0-9.]*/|$(printf '%d.%03d' $(((end - start) / 1000)) $(((end - start) % 1000)))/" "$results"
    "${cmd[@]}" >/dev/null 2>&1
    sync
    echo 1 > /proc/sys/vm/drop_caches
    sleep 1
    timed "alongside, metadata cached" "$C" run -q --prefetch "$plan" -- "${py_timed[@]}"
    evict
    timed "ahead" "$C" run -q --ahead --prefetch "$plan" -- "${py_timed[@]}"
    timed "warm" "${py_timed[@]}"
    timed "warm, pinned" taskset -c "$first" "${py_timed[@]}"
    with_load "warm + spinner" "$spin"
    with_load "warm + memory stream" "$stream"
    echo "round $round of $rounds done" >&2
done
echo "load average at the end: $(cat /proc/loadavg)"

/usr/bin/python3 - "$results" "$rounds" <<'EOF'
import os, statistics, subprocess, sys
path, rounds = sys.argv[1], int(sys.argv[2])
runs = {}
for line in open(path):
    name, values = line.rstrip('\n').split('|')
    runs.setdefault(name, []).append([float(v) for v in values.split()])
def compare(kind, a, b):  # ESTIMATE LOW HIGH from crates/bench/src/stats.rs
    args = [os.environ["BENCH_STATS"], kind, ",".join(map(str, a)), ",".join(map(str, b))]
    return [float(v) for v in subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()]
print(f"{'configuration':28} {'elapsed':>8} {'user':>6} {'system':>6} {'vol.':>5} {'invol.':>6}  paired ratio")
for name, rows in runs.items():
    med = [statistics.median(r[i] for r in rows) for i in range(5)]
    pinned = name.startswith('warm +') or name == 'alongside, separate CPUs'
    ref = 'warm, pinned' if pinned else 'warm'
    if name == ref:
        ratio = ''
    else:
        g, lo, hi = compare("paired-ratio", [r[0] for r in rows], [r[0] for r in runs[ref]])
        ratio = f"{g:.3f}x [{lo:.3f} … {hi:.3f}] of {ref}"
    print(f"{name:28} {med[0]:7.3f}s {med[1]:5.2f}s {med[2]:5.2f}s {med[3]:5.0f} {med[4]:6.0f}  {ratio}")
EOF
