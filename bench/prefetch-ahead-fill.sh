#!/usr/bin/env bash
# Prefetch ahead: how the replay fills the page cache, two builds interleaved, against warm.
#   /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
# Records one cold start and plans it (with $COLDSTART), then RUNS rounds of:
#   ahead with $OLD_COLDSTART and ahead with $COLDSTART (order alternating by round; each after
#   system eviction: sync, drop_caches 3, 1 s pause; the replay before the start is not timed),
#   then warm (no prefetch, right after).
# Every run is `coldstart run --report-json` of the build under test (time to exit). Prints medians,
# ratios of medians (bootstrap 95% interval) and paired ratios (geometric mean of per-round ratios,
# 95% interval of a paired t-test on their logarithms).
# Needs root. Installs its Debian packages. Results go to $OUT (default /tmp/coldstart-ahead-fill).
# Usage: COLDSTART=new OLD_COLDSTART=old bash bench/prefetch-ahead-fill.sh [RUNS]
#   OLD_OPTS and NEW_OPTS add replay options to each arm, so one build can be compared with
#   itself: COLDSTART=b OLD_COLDSTART=b NEW_OPTS=--stat-entries bash bench/prefetch-ahead-fill.sh 12
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
runs=${1:-10}
out=${OUT:-/tmp/coldstart-ahead-fill}
mkdir -p "$out"
install_packages python3-scipy python3-matplotlib python3-pandas
use_bench_stats
NEW=${COLDSTART:?set COLDSTART to the build under test}
OLD=${OLD_COLDSTART:?set OLD_COLDSTART to the build to compare with}
cmd=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')

echo "old: $OLD ${OLD_OPTS:-}; new: $NEW ${NEW_OPTS:-}"
echo "load average at the start: $(cat /proc/loadavg)"
"$NEW" record --cold --as-root -o "$out/python.coldstart.tmp" -- "${cmd[@]}" >/dev/null 2>"$out/record.txt"
mv "$out/python.coldstart.tmp" "$out/python.coldstart"
"$NEW" prefetch plan "$out/python.coldstart" -o "$out/python.plan" --force 2>&1 | tail -3
rm -f "$out"/round-*.json
for i in $(seq 1 "$runs"); do
    if [ $((i % 2)) -eq 1 ]; then order=(old new); else order=(new old); fi
    for which in "${order[@]}"; do
        if [ "$which" = old ]; then b=$OLD; opts=${OLD_OPTS:-}; else b=$NEW; opts=${NEW_OPTS:-}; fi
        evict
        # shellcheck disable=SC2086
        "$b" run -q --as-root --prefetch "$out/python.plan" $opts --ahead --report-json "$out/round-$i-$which.json" \
            -- "${cmd[@]}" >/dev/null 2>&1
    done
    "$NEW" run -q --as-root --report-json "$out/round-$i-warm.json" -- "${cmd[@]}" >/dev/null 2>&1
    echo "round $i done"
done
echo "load average at the end: $(cat /proc/loadavg)"
python3 - "$out" "$runs" <<'PY'
import json, os, statistics, subprocess, sys
out, runs = sys.argv[1], int(sys.argv[2])
t = {k: [] for k in ("old", "new", "warm")}
rep = {k: [] for k in ("old", "new")}
for i in range(1, runs + 1):
    for k in t:
        j = json.load(open(f"{out}/round-{i}-{k}.json"))
        t[k].append(j["time_s"])
        if k in rep:
            rep[k].append(j)
med = {k: statistics.median(v) for k, v in t.items()}
for k, v in t.items():
    print(f"{k:5s} median {med[k]:.3f} s  runs {' '.join(f'{x:.3f}' for x in v)}")
for k in ("old", "new"):
    r = [j["replay"] for j in rep[k]]
    print(f"{k}: replay before the start median {statistics.median(j['ahead_s'] for j in rep[k]):.3f} s, "
          f"fetched {statistics.median(x['fetched']['bytes'] for x in r) / 2**20:.1f} MiB, "
          f"sequential {statistics.median(x.get('sequential', {}).get('bytes', 0) for x in r) / 2**20:.1f} MiB, "
          f"read ahead beyond {statistics.median(x.get('read_ahead_beyond', 0) for x in r) / 2**20:.1f} MiB, "
          f"fill {r[0]['options'].get('fill', 'exact (old build)')}")
def compare(kind, a, b):  # ESTIMATE LOW HIGH from crates/bench/src/stats.rs
    args = [os.environ["BENCH_STATS"], kind, ",".join(map(str, a)), ",".join(map(str, b))]
    return [float(v) for v in subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()]
for name, a, b in (("old ahead / warm", t["old"], t["warm"]), ("new ahead / warm", t["new"], t["warm"]),
                   ("new ahead / old ahead", t["new"], t["old"])):
    m, ml, mh = compare("median-ratio", a, b)
    p, pl, ph = compare("paired-ratio", a, b)
    print(f"{name}: {m:.3f}x [{ml:.2f} … {mh:.2f}] by medians; paired {p:.3f}x [{pl:.2f} … {ph:.2f}]")
PY
