#!/usr/bin/env bash
# A python start on a volume restored from a snapshot (`bench --storage snapshot`, each cold
# run on a freshly restored volume) against the same start on the hydrated `cloud` volume, in
# interleaved rounds (the profiles' order alternates), each round under the exclusive bench lock.
# Each bench also runs the start's plan alongside and ahead of it.
#
#   bash bench/storage-snapshot.sh [ROUNDS]          # SNAPSHOT=custom:base=snapshot,fetch_latency=20ms
#
# Prints each configuration's median and the snapshot/cloud ratio of medians with its 95 %
# interval (coldstart-bench-stats). Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-5}
snapshot=${SNAPSHOT:-snapshot}
lock=/var/lock/coldstart-bench.lock
install_packages python3 e2fsprogs
use_coldstart
use_bench_stats
work=$(mktemp -d /var/tmp/coldstart-snapshot-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
command=(python3 -c 'import json, email, asyncio, unittest, http.server, xml.dom.minidom, decimal, sqlite3')
flock -s "$lock" "$COLDSTART" record --cold -o "$work/py.coldstart" -- "${command[@]}" 2>/dev/null
"$COLDSTART" prefetch plan "$work/py.coldstart" -o "$work/py.plan"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) -eq 1 ]; then order=(cloud "$snapshot"); else order=("$snapshot" cloud); fi
    for profile in "${order[@]}"; do
        name=$([ "$profile" = cloud ] && echo cloud || echo snapshot)
        flock -x "$lock" "$COLDSTART" bench --cold --runs 1 --no-progress --storage "$profile" \
            --trace "$work/py.coldstart" --prefetch "$work/py.plan" \
            --export-json "$work/$name-$round.json" -- "${command[@]}" | grep '^storage:' || true
    done
done
# times NAME LABEL [replay|total]: the runs of LABEL (cold, alongside, ahead) over the rounds,
# comma-separated: the start's times, or the replay's before it (ahead), or both added.
times() {
    python3 - "$work" "$1" "$2" "${3:-start}" <<'PY'
import glob, json, sys
work, name, label, part = sys.argv[1:]
out = []
for path in sorted(glob.glob(f"{work}/{name}-*.json"), key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0])):
    for r in json.load(open(path))["results"]:
        if r["label"].split(" ")[0] == label:
            replays = [t or 0.0 for t in r.get("prefetch_times", [])] or [0.0] * len(r["times"])
            picked = {"start": r["times"], "replay": replays, "total": [a + b for a, b in zip(r["times"], replays)]}
            out.extend(picked[part])
print(",".join(f"{t:.4f}" for t in out))
PY
}
for label in cold alongside ahead; do
    for name in cloud snapshot; do
        echo "$name $label: $(times "$name" "$label") s"
    done
    read -r ratio low high < <("$BENCH_STATS" median-ratio "$(times snapshot "$label")" "$(times cloud "$label")")
    printf 'snapshot/cloud %s: median ratio %.2f (95%% interval %.2f–%.2f)' "$label" "$ratio" "$low" "$high"
    if [ "$rounds" -ge 2 ]; then
        read -r ratio low high < <("$BENCH_STATS" paired-ratio "$(times snapshot "$label")" "$(times cloud "$label")")
        printf ', paired by round %.2f (%.2f–%.2f)' "$ratio" "$low" "$high"
    fi
    echo
done
for name in cloud snapshot; do
    echo "$name ahead, the replay before the start: $(times "$name" ahead replay) s"
    read -r ratio low high < <("$BENCH_STATS" median-ratio "$(times "$name" ahead total)" "$(times "$name" cold)")
    printf '%s replay then start / cold: median ratio %.2f (95%% interval %.2f–%.2f)\n' "$name" "$ratio" "$low" "$high"
done
