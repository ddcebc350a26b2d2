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
# times NAME LABEL: the runs of LABEL (cold, alongside, ahead) over the rounds, comma-separated.
times() {
    python3 - "$work" "$1" "$2" <<'PY'
import glob, json, sys
work, name, label = sys.argv[1:]
out = []
for path in sorted(glob.glob(f"{work}/{name}-*.json")):
    for r in json.load(open(path))["results"]:
        if r["label"].split(" ")[0] == label:
            out.extend(r["times"])
print(",".join(f"{t:.4f}" for t in out))
PY
}
for label in cold alongside ahead; do
    for name in cloud snapshot; do
        echo "$name $label: $(times "$name" "$label") s"
    done
    read -r ratio low high < <("$BENCH_STATS" median-ratio "$(times snapshot "$label")" "$(times cloud "$label")")
    printf 'snapshot/cloud %s: median ratio %.2f (95%% interval %.2f–%.2f)\n' "$label" "$ratio" "$low" "$high"
done
read -r ratio low high < <("$BENCH_STATS" median-ratio "$(times snapshot ahead)" "$(times snapshot cold)")
printf 'snapshot ahead/cold: median ratio %.2f (95%% interval %.2f–%.2f)\n' "$ratio" "$low" "$high"
