#!/usr/bin/env bash
# The doctor's what-if model against a real slow disk (issue 7): python3 importing
# scipy.stats, matplotlib.pyplot and pandas from the copy of dist-packages on the
# slow-disk rig (bench/slow-disk-rig.sh, a loop device; the system's libraries stay on
# the machine's disk).
#
#   1. the rig with its throttle off (RIG_IOPS=0 RIG_BPS=0: no blkio limit on the loop
#      device): one cold start recorded (`coldstart record --cold`);
#   2. the doctor predicts that start with the loop device alone on the throttle's disk,
#      `--disk custom:request=10ms,seek=0,near_seek=0,rotation=0,bandwidth=60MB/s,queue_depth=1
#      --only-dev <loop device>` (100 requests/s, one at a time, 60 MB/s);
#   3. the rig with its throttle on (100 read requests/s, 60 MB/s): ROUNDS cold starts
#      timed by `coldstart run` (after `sync; drop_caches` and a 1 s pause), and one cold
#      start recorded, whose own model check (the recorded disks' models, the loop
#      device's request cost fitted to its waits) is printed too;
#   4. prints the prediction, the measured median and their ratio.
# The recordings are not timed runs: their time to ready is printed for reference only.
#
# Usage (as root): bash bench/doctor-whatif.sh [ROUNDS]   (default 5)
#   Takes /var/lock/coldstart-bench.lock itself (do not wrap it in flock). COLDSTART=path
#   uses that binary (a release build) instead of building one. Output in $OUT
#   (default /tmp/coldstart-doctor-whatif).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
phase=${1:-}
DISK=${DISK:-custom:request=10ms,seek=0,near_seek=0,rotation=0,bandwidth=60MB/s,queue_depth=1}
out=${OUT:-/tmp/coldstart-doctor-whatif}
export DISK OUT=$out
record() { # NAME
    evict
    "$COLDSTART" record --cold --as-root -o "$out/$1.coldstart" -- env "PYTHONPATH=$RIG_PYTHONPATH" \
        /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas' >/dev/null 2>"$out/$1.record.txt"
    echo "$RIG_DEV" > "$out/$1.dev"
    tail -2 "$out/$1.record.txt"
}

case "$phase" in
    --free)
        echo "== throttle off: $(cat "$RIG_CGROUP/blkio.throttle.read_iops_device" | wc -l) iops rules; recording ($RIG_LOOP, $RIG_DEV)"
        record free
        exit 0
        ;;
    --throttled)
        rounds=$2
        echo "== throttle on: $(cat "$RIG_CGROUP/blkio.throttle.read_iops_device")"
        record throttled
        for r in $(seq 1 "$rounds"); do
            evict
            "$COLDSTART" run -q --as-root --report-json "$out/run-$r.json" -- env "PYTHONPATH=$RIG_PYTHONPATH" \
                /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas' >/dev/null 2>&1 || true
            printf 'cold round %s: %s\n' "$r" "$(grep -o '"time_s": [0-9.]*' "$out/run-$r.json" 2>/dev/null || echo failed)"
        done
        exit 0
        ;;
    --locked)
        rounds=$2
        rm -rf "$out"
        mkdir -p "$out"
        echo "== $(date -u +%FT%TZ) load average at start: $(cat /proc/loadavg)" | tee "$out/load.txt"
        RIG_IOPS=0 RIG_BPS=0 bash bench/slow-disk-rig.sh run -- bash "$0" --free
        bash bench/slow-disk-rig.sh run -- bash "$0" --throttled "$rounds"
        echo "== $(date -u +%FT%TZ) load average at end: $(cat /proc/loadavg)" | tee -a "$out/load.txt"
        ;;
    *)
        rounds=${1:-5}
        install_packages python3-scipy python3-matplotlib python3-pandas
        use_coldstart
        flock /var/lock/coldstart-bench.lock bash "$0" --locked "$rounds"
        ;;
esac
[ "$phase" = --locked ] || exit 0

# The predictions and the summary (outside the rig; the traces are files).
dev=$(cat "$out/free.dev")
"$COLDSTART" doctor "$out/free.coldstart" --disk "$DISK" --only-dev "$dev" > "$out/free.doctor.txt"
"$COLDSTART" doctor "$out/free.coldstart" --disk "$DISK" --only-dev "$dev" --format json -o "$out/free.doctor.json"
"$COLDSTART" doctor "$out/throttled.coldstart" > "$out/throttled.doctor.txt"
"$COLDSTART" doctor "$out/throttled.coldstart" --format json -o "$out/throttled.doctor.json"
python3 - "$out" "$dev" <<'EOF' | tee "$out/summary.txt"
import glob, json, statistics, sys
out, dev = sys.argv[1], sys.argv[2]
runs = [j["time_s"] for f in sorted(glob.glob(f"{out}/run-*.json")) if (j := json.load(open(f))).get("met")]
def load(name):
    d = json.load(open(f"{out}/{name}.doctor.json"))
    return d, {w["disk"]["class"]: w for w in d["doctor"]["what_if"]}
free, free_w = load("free")
thr, thr_w = load("throttled")
def cpu_wait(d):
    s = d["start"]
    return s["cpu_wait_ns"] / 1e9
p = free_w["custom"]
m = statistics.median(runs) if runs else float("nan")
print(f"recorded, throttle off: {p['time_to_ready_ns']/1e9:.2f} s to ready, {p['path_io_wait_ns']/1e9:.2f} s I/O wait on the "
      f"critical path, {cpu_wait(free):.2f} s of the start waiting for a CPU; {p['requests']} requests costed, "
      f"{p['requests_left_out']} left out, {p['path_waits_kept']} of {p['path_waits']} waits kept")
print(f"predicted on the throttle ({dev} only): {p['predicted_ns']/1e9:.2f} s to ready "
      f"(I/O wait on the path {p['predicted_path_io_wait_ns']/1e9:.2f} s); with the plan ahead {p['with_prefetch_ahead_ns']/1e9:.2f} s, "
      f"replay {p['prefetch_replay_ns']/1e9:.2f} s")
print(f"measured on the throttle: {len(runs)} cold runs, median {m:.2f} s (min {min(runs):.2f}, max {max(runs):.2f})")
print(f"ratio predicted / measured: {p['predicted_ns']/1e9/m:.2f}")
t = thr_w["measured"]
print(f"recorded with the throttle on: {t['time_to_ready_ns']/1e9:.2f} s to ready, {t['path_io_wait_ns']/1e9:.2f} s I/O wait on "
      f"the path, {cpu_wait(thr):.2f} s waiting for a CPU; its own model check (each disk as recorded) predicts "
      f"{t['predicted_ns']/1e9:.2f} s (I/O wait {t['predicted_path_io_wait_ns']/1e9:.2f} s), ratio {t['predicted_ns']/t['time_to_ready_ns']:.2f}")
for disk in thr["doctor"]["disks"]:
    mo = disk["model"]
    src = next((s["source"] for s in mo["sources"] if s["param"] == "request_ns"), "")
    print(f"  throttled trace, {disk['name']} {disk['dev']}: request {mo['request_ns']/1e6:.2f} ms, queue depth {mo['queue_depth']} ({src[:60]}…)")
EOF
