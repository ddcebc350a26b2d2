#!/usr/bin/env bash
# A python start on an emulated disk (`bench --storage`, hdd by default): cold, warm, and
# cold with its prefetch plan replayed alongside and ahead, interleaved in one run.
#
#   bash bench/storage-hdd.sh [ROUNDS]          # PROFILE=sd bash bench/storage-hdd.sh 5
#
# Records the start once (cold, on the real disk), plans it, then benchmarks it on the
# emulated device with the plan pointed at the copies. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-5}
install_packages python3 e2fsprogs
use_coldstart
work=$(mktemp -d /var/tmp/coldstart-storage-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
command=(python3 -c 'import json, email, asyncio, unittest, http.server, xml.dom.minidom, decimal, sqlite3')
"$COLDSTART" record --cold -o "$work/py.coldstart" -- "${command[@]}" 2>/dev/null
"$COLDSTART" prefetch plan "$work/py.coldstart" -o "$work/py.plan"
"$COLDSTART" bench --both --runs "$rounds" --no-progress --storage "${PROFILE:-hdd}" \
    --trace "$work/py.coldstart" --prefetch "$work/py.plan" -- "${command[@]}"
