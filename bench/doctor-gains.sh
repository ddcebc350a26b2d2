#!/usr/bin/env bash
# The doctor's estimated gains against gains measured after applying its suggestions
# (issue 7), on a real program whose start is I/O-bound: python3 importing scipy.stats,
# matplotlib.pyplot and pandas from the copy of dist-packages on the slow-disk rig
# (bench/slow-disk-rig.sh: a loop device throttled to 100 read requests/s, 60 MB/s).
#
# Steps, all inside the rig's throttled cgroup:
#   1. record a cold start (`coldstart record --cold`), run `coldstart doctor` on it
#      (JSON), make the default prefetch plan;
#   2. ROUNDS interleaved rounds, each run after `sync; drop_caches` and a 1 s pause,
#      timed by `coldstart run` (time to exit):
#        none         the cold start as it is
#        small-ahead  the files of the doctor's largest `many_small_files` finding read
#                     (cat) after the eviction and before the start, not timed: its
#                     "prefetch them" suggestion, whose estimate is the finding's
#                     `gain.ahead_ns`
#        plan-ahead   the whole prefetch plan replayed before the start, not timed
#                     (`coldstart run --prefetch PLAN --ahead`): the what-if's prediction
#                     `with_prefetch_ahead_ns` on the recorded disk, i.e. an estimated gain
#                     of the critical path's I/O wait
#   3. prints each estimate, the measured gain (median of none − median of the
#      configuration, with a bootstrap 95% interval) and their ratio.
# `coldstart bench` is not used for the runs: it moves the command into a blkio cgroup
# of its own to count bytes, which would take it out of the rig's throttle.
#
# Usage (as root): bash bench/doctor-gains.sh [ROUNDS]   (default 5)
#   Takes /var/lock/coldstart-bench.lock itself (do not wrap it in flock). COLDSTART=path
#   uses that binary (a release build) instead of building one. Output in $OUT
#   (default /tmp/coldstart-doctor-gains).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-5}
if [ -z "${RIG_MNT:-}" ]; then
    install_packages python3-scipy python3-matplotlib python3-pandas
    use_coldstart
    use_bench_stats
    exec flock /var/lock/coldstart-bench.lock bash bench/slow-disk-rig.sh run -- bash "$0" "$rounds"
fi

# Inside the rig from here on.
C=$COLDSTART
out=${OUT:-/tmp/coldstart-doctor-gains}
rm -rf "$out"
mkdir -p "$out"
echo "== $(date -u +%FT%TZ) load average at start: $(cat /proc/loadavg)" | tee "$out/load.txt"
cmd=(env "PYTHONPATH=$RIG_PYTHONPATH" /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')

echo "== recording a cold start on the rig ($RIG_LOOP, $RIG_DEV)"
evict
"$C" record --cold --as-root -o "$out/py.coldstart" -- "${cmd[@]}" >/dev/null 2>"$out/record.txt"
tail -3 "$out/record.txt"
"$C" doctor "$out/py.coldstart" > "$out/doctor.txt"
"$C" doctor "$out/py.coldstart" --format json -o "$out/doctor.json"
"$C" prefetch plan "$out/py.coldstart" -o "$out/py.plan" --force

# The files of the largest many_small_files finding: the doctor lists only the top 12,
# so select them again as docs/doctor.md defines them (regular, at most 64 KiB, not a
# shared object, read during the start, under the finding's tree).
python3 - "$out" <<'EOF'
import json, re, sys
out = sys.argv[1]
d = json.load(open(f"{out}/doctor.json"))
small = [f for f in d["doctor"]["findings"] if f["kind"] == "many_small_files"]
if not small:
    sys.exit("doctor-gains: no many_small_files finding in this trace")
f = max(small, key=lambda f: f["gain"]["ns"])
tree = re.search(r" read from (\S+)$", f["title"]).group(1).rstrip("/") + "/"
files = {x["id"]: x for x in d["files"]}
so = re.compile(r"\.so$|\.so\.[0-9.]+$")
paths = sorted(
    files[b["file"]]["path"] for b in d["by_file"]
    if (x := files.get(b["file"])) and x.get("kind") == "regular" and x.get("path", "").startswith(tree)
    and (x.get("size_bytes") if x.get("size_bytes") is not None else b["bytes"]) <= 64 * 1024
    and not so.search(x["path"])
)
open(f"{out}/small-files.list", "w").write("\0".join(paths))
json.dump({"tree": tree, "files_doctor": f["evidence"]["files_total"], "files_listed": len(paths),
           "gain_ns": f["gain"]["ns"], "ahead_ns": f["gain"]["ahead_ns"]}, open(f"{out}/small.json", "w"))
print(f"many_small_files: {f['title']}; {len(paths)} files selected again; estimate ahead {f['gain']['ahead_ns']/1e9:.3f} s")
EOF
grep -A3 'What-if' "$out/doctor.txt" | head -4

# Where the gain of the small files comes from: the same start recorded with them read
# ahead (not a timed run): its I/O wait on the critical path against the cold one's.
evict
xargs -0 cat -- < "$out/small-files.list" > /dev/null
"$C" record --as-root -o "$out/py-small-ahead.coldstart" -- "${cmd[@]}" >/dev/null 2>"$out/record-small-ahead.txt" || true
"$C" doctor "$out/py-small-ahead.coldstart" --format json -o "$out/doctor-small-ahead.json" || true

run() { # NAME ROUND [coldstart run options...]
    local name=$1 r=$2
    shift 2
    "$C" run -q --as-root --report-json "$out/run-$name-$r.json" "$@" -- "${cmd[@]}" >/dev/null 2>&1 || true
}
configs=(none small-ahead plan-ahead)
for r in $(seq 1 "$rounds"); do
    for name in "${configs[@]}"; do
        evict
        case "$name" in
            none) run none "$r" ;;
            small-ahead) xargs -0 cat -- < "$out/small-files.list" > /dev/null; run small-ahead "$r" ;;
            plan-ahead) run plan-ahead "$r" --prefetch "$out/py.plan" --ahead ;;
        esac
        printf '%s round %s: %s\n' "$name" "$r" \
            "$(grep -o '"time_s": [0-9.]*' "$out/run-$name-$r.json" 2>/dev/null || echo failed)"
    done
done
echo "== $(date -u +%FT%TZ) load average at end: $(cat /proc/loadavg)" | tee -a "$out/load.txt"

python3 - "$out" "${configs[@]}" <<'EOF' | tee "$out/summary.txt"
import glob, json, os, statistics, subprocess, sys
out, configs = sys.argv[1], sys.argv[2:]
times = {c: [j["time_s"] for f in sorted(glob.glob(f"{out}/run-{c}-*.json")) if (j := json.load(open(f))).get("met")]
         for c in configs}
d = json.load(open(f"{out}/doctor.json"))["doctor"]
small = json.load(open(f"{out}/small.json"))
measured = next(w for w in d["what_if"] if w["disk"]["class"] == "measured") if any(
    w["disk"]["class"] == "measured" for w in d["what_if"]) else None
estimates = {"small-ahead": small["ahead_ns"] / 1e9,
             "plan-ahead": (measured["time_to_ready_ns"] - measured["with_prefetch_ahead_ns"]) / 1e9 if measured else None}
what = {"small-ahead": f"many_small_files ({small['files_doctor']} files under {small['tree']}) read ahead: gain.ahead_ns",
        "plan-ahead": "whole prefetch plan ahead: recorded time to ready − with_prefetch_ahead_ns"}
med = {c: statistics.median(t) for c, t in times.items() if t}
print(f"recorded trace: {d['what_if'][0]['time_to_ready_ns']/1e9:.2f} s to ready" if d["what_if"] else "")
for c in configs:
    t = times[c]
    print(f"{c:<12} {len(t)} runs, median {statistics.median(t):.2f} s, min {min(t):.2f}, max {max(t):.2f}" if t else f"{c}: no run")
def compare(kind, a, b):  # ESTIMATE LOW HIGH from crates/bench/src/stats.rs
    args = [os.environ["BENCH_STATS"], kind, ",".join(map(str, a)), ",".join(map(str, b))]
    return [float(v) for v in subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()]
print(f"\n{'suggestion':<78} {'estimate':>9} {'measured [95% CI]':>24} {'est/meas':>8}")
for c in configs[1:]:
    if c not in med or "none" not in med or estimates[c] is None:
        continue
    gain, lo, hi = compare("median-difference", times["none"], times[c])
    print(f"{what[c]:<78} {estimates[c]:>8.2f}s {gain:>8.2f}s [{lo:5.2f} … {hi:5.2f}] {estimates[c]/gain if gain else float('nan'):>8.2f}")
def breakdown(path):
    try:
        a = json.load(open(path))
    except (OSError, ValueError):
        return None
    segs = a["critical_path"]["segments"] if a.get("critical_path") else []
    by = {}
    for s in segs:
        by[s["kind"]] = by.get(s["kind"], 0) + s["end_ns"] - s["start_ns"]
    ttr = a["doctor"]["what_if"][0]["time_to_ready_ns"] if a["doctor"]["what_if"] else sum(by.values())
    return ttr, by
print("\ncritical path of the recordings (s): to ready, and by kind")
for name, path in (("cold", f"{out}/doctor.json"), ("small files ahead", f"{out}/doctor-small-ahead.json")):
    b = breakdown(path)
    if b:
        print(f"  {name:<18} {b[0]/1e9:6.2f}  " + ", ".join(f"{k} {v/1e9:.2f}" for k, v in sorted(b[1].items())))
EOF
