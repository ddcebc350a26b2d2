#!/usr/bin/env bash
# A plan made from a fleet against a boot's own plan, on the Debian container boot
# (systemd-nspawn, to multi-user.target): RECORDINGS cold recordings of the boot (21 by
# default); the first RECORDINGS-1 exported as a dataset and planned with
# `prefetch plan --dataset --min-share SHARE`; the last one planned from its own trace. Then,
# on an emulated disk (PROFILE, hdd by default), ROUNDS rounds, each one `coldstart bench`
# per plan (order alternating, A B B A …), each measuring the boot cold, with its plan
# alongside and ahead. Prints each round, then the fleet plan against the own plan: ratio
# of the medians and the paired ratio of the alongside times (and of alongside/cold, which
# takes out the round's drift). BENCHMARKS.md.
#
#   bash bench/fleet-plan-boot.sh [ROUNDS]              # ROUNDS=5 by default
#   RECORDINGS=6 SHARE=0.5 bash bench/fleet-plan-boot.sh 3
#
# The rootfs is made once (mmdebstrap) and kept in /var/cache/coldstart-tests, as the tests
# keep it. Needs root. KEEP=DIR keeps the traces, dataset and plans in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-5}
recordings=${RECORDINGS:-21}
share=${SHARE:-0.5}
profile=${PROFILE:-hdd}
install_packages mmdebstrap systemd-container e2fsprogs python3
use_coldstart
use_bench_stats
rootfs=${ROOTFS:-/var/cache/coldstart-tests/bookworm-boot}
ensure_boot_rootfs "$rootfs"
work=${KEEP:-$(mktemp -d /var/tmp/coldstart-fleet-plan.XXXXXX)}
mkdir -p "$work"
cleanup() {
    stop_boots "$rootfs"
    [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
boot=(bash "$PWD/bench/nspawn-boot.sh" "$rootfs")
until=unit:multi-user.target

echo "# recording the boot $recordings times (cold, on the machine's disk)"
for i in $(seq 1 "$recordings"); do
    trace=$work/boot-$i.coldstart
    [ -s "$trace" ] && continue
    "$COLDSTART" record --cold --until "$until" --timeout 120 -o "$trace" -- "${boot[@]}" >/dev/null 2>&1
    stop_boots "$rootfs" >/dev/null 2>&1
    printf '  %2d: %s\n' "$i" "$("$COLDSTART" info "$trace" 2>/dev/null | grep -m1 -i 'ready' || echo recorded)"
done
last=$work/boot-$recordings.coldstart
fleet_traces=()
for i in $(seq 1 $((recordings - 1))); do fleet_traces+=("$work/boot-$i.coldstart"); done
rm -rf "$work/dataset"
"$COLDSTART" export --format parquet --build bookworm --machine-class "bench-$profile" -o "$work/dataset" \
    "${fleet_traces[@]}" 2>&1 | tail -1
"$COLDSTART" prefetch plan --force --dataset "$work/dataset" --min-share "$share" -o "$work/fleet.plan"
"$COLDSTART" prefetch plan --force "$last" -o "$work/own.plan"

# bench_one PLAN OUT: one round of one plan (cold, alongside, ahead) on the emulated disk.
bench_one() {
    "$COLDSTART" bench --runs 1 --no-progress --storage "$profile" --trace "$last" --prefetch "$1" \
        --until "$until" --timeout 180 --export-json "$2" -c "${boot[*]}" >/dev/null 2>"$2.log" \
        || { cat "$2.log" >&2; return 1; }
    stop_boots "$rootfs" >/dev/null 2>&1
}

for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order=(own fleet); else order=(fleet own); fi
    for name in "${order[@]}"; do
        bench_one "$work/$name.plan" "$work/round-$r-$name.json"
    done
done

python3 - "$work" "$rounds" <<'PY'
import json, os, subprocess, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def times(path):
    doc = json.load(open(path))
    out = {}
    for c in doc["results"]:
        key = c.get("prefetch") or ("cold" if c["cache"] == "cold" else c["cache"])
        out[key] = c["times"][0]
    return out
rows = {name: [times(f"{work}/round-{r}-{name}.json") for r in range(1, rounds + 1)] for name in ("own", "fleet")}
print(f"{'round':>5} {'own cold':>9} {'own along':>10} {'own ahead':>10} {'fleet cold':>11} {'fleet along':>12} {'fleet ahead':>12}")
for r in range(rounds):
    o, f = rows["own"][r], rows["fleet"][r]
    print(f"{r + 1:>5} {o['cold']:>9.3f} {o['alongside']:>10.3f} {o['ahead']:>10.3f} {f['cold']:>11.3f} {f['alongside']:>12.3f} {f['ahead']:>12.3f}")
def stats(kind, a, b):
    args = [os.environ["BENCH_STATS"], kind, ",".join(map(str, a)), ",".join(map(str, b))]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
fa = [x["alongside"] for x in rows["fleet"]]
oa = [x["alongside"] for x in rows["own"]]
print("fleet plan alongside / own plan alongside, ratio of medians:", stats("median-ratio", fa, oa))
print("  paired (same round):", stats("paired-ratio", fa, oa))
fn = [x["alongside"] / x["cold"] for x in rows["fleet"]]
on = [x["alongside"] / x["cold"] for x in rows["own"]]
print("alongside/cold of each bench, fleet / own, ratio of medians:", stats("median-ratio", fn, on))
fh = [x["ahead"] for x in rows["fleet"]]
oh = [x["ahead"] for x in rows["own"]]
print("fleet plan ahead / own plan ahead, ratio of medians:", stats("median-ratio", fh, oh))
oc = [x["cold"] for x in rows["own"] + rows["fleet"]]
print("own plan alongside / cold (all cold runs), ratio of medians:", stats("median-ratio", oa, oc))
PY
echo "# the plans"
"$COLDSTART" prefetch show "$work/fleet.plan" --files 0 | head -12
"$COLDSTART" prefetch show "$work/own.plan" --files 0 | head -12
