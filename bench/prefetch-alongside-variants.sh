#!/usr/bin/env bash
# Replay variants alongside a cold start on the machine's own disk, against the default:
#   /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
# Records one cold start, makes the default plan and one with no gaps read through
# (`--gap-kib 0`: fewer bytes, more ranges), then one interleaved `coldstart bench --evict
# system` of `coldstart run --prefetch PLAN` with: the default (4 threads, WILLNEED then
# reads); the no-gap plan; `--method willneed` (no reads: no copy to user space, nothing
# waited for) with either plan; 2 threads. `bench` prints each variant's paired ratio to
# the default. Also times the replay alone (`prefetch run`, after system eviction, under
# /usr/bin/time) for reads and WILLNEED, to show what it costs in CPU.
# Needs root. Installs its Debian packages; builds a release coldstart unless COLDSTART=path
# is given. Results in $OUT (default /tmp/coldstart-alongside-variants).
# Usage: bash bench/prefetch-alongside-variants.sh [ROUNDS]   (run it under
#   flock /var/lock/coldstart-bench.lock)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-12}
out=${OUT:-/tmp/coldstart-alongside-variants}
mkdir -p "$out"
install_packages python3-scipy python3-matplotlib python3-pandas time
use_coldstart
C=$COLDSTART
cmd=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')
line=$(printf '%q ' "${cmd[@]}")

echo "load average at the start: $(cat /proc/loadavg)"
rm -f "$out/cold.coldstart"
"$C" record --cold --as-root -o "$out/cold.coldstart" -- "${cmd[@]}" >/dev/null 2>"$out/record.txt"
"$C" prefetch plan "$out/cold.coldstart" -o "$out/py.plan" --force 2>&1 | head -1
"$C" prefetch plan "$out/cold.coldstart" -o "$out/py-gap0.plan" --gap-kib 0 --force 2>&1 | head -1

echo "== the replay alone, after system eviction (3 runs each)"
for variant in "--depth 4" "--depth 16" "--depth 4 --method willneed"; do
    for _ in 1 2 3; do
        evict
        # shellcheck disable=SC2086
        /usr/bin/time -f "$variant: %e s wall, %U s user, %S s system" \
            "$C" prefetch run "$out/py.plan" $variant 2>&1 >/dev/null | tail -1
    done
done

echo "== alongside, $rounds rounds, interleaved"
"$C" bench --evict system --runs "$rounds" --no-progress --as-root --export-json "$out/alongside.json" \
    -n default -c "$C run -q --prefetch $out/py.plan -- $line" \
    -n "no gaps read through" -c "$C run -q --prefetch $out/py-gap0.plan -- $line" \
    -n willneed -c "$C run -q --prefetch $out/py.plan --method willneed -- $line" \
    -n "willneed, no gaps" -c "$C run -q --prefetch $out/py-gap0.plan --method willneed -- $line" \
    -n "2 threads" -c "$C run -q --prefetch $out/py.plan --depth 2 -- $line" \
    | tee "$out/alongside.txt"
echo "load average at the end: $(cat /proc/loadavg)"
