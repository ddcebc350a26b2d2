#!/usr/bin/env bash
# Where an ahead start spends more kernel time than a warm one:
#   /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
# Records one cold start and plans it, then ROUNDS rounds of: system eviction, `coldstart
# prefetch run PLAN` (ahead), `perf record -e cycles:k -g` of the start; then `perf record`
# of a warm start. Prints kernel samples per symbol (leaf functions, summed over the rounds)
# for both, largest difference first. On a VM without a PMU perf falls back to cpu-clock.
# Needs root. Installs its Debian packages; builds a release coldstart unless COLDSTART=path
# is given. Results in $OUT (default /tmp/coldstart-ahead-profile).
# Usage: bash bench/prefetch-ahead-profile.sh [ROUNDS]   (run it under
#   flock /var/lock/coldstart-bench.lock)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-6}
out=${OUT:-/tmp/coldstart-ahead-profile}
mkdir -p "$out"
install_packages python3-scipy python3-matplotlib python3-pandas linux-perf
use_coldstart
C=$COLDSTART
cmd=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')

echo "load average at the start: $(cat /proc/loadavg)"
rm -f "$out/cold.coldstart" "$out"/*.data
"$C" record --cold --as-root -o "$out/cold.coldstart" -- "${cmd[@]}" >/dev/null 2>"$out/record.txt"
"$C" prefetch plan "$out/cold.coldstart" -o "$out/py.plan" --force 2>&1 | head -1
for i in $(seq 1 "$rounds"); do
    evict
    "$C" prefetch run "$out/py.plan" >/dev/null 2>&1
    perf record -q -e cycles:k -g -o "$out/ahead-$i.data" -- "${cmd[@]}" >/dev/null 2>&1
    perf record -q -e cycles:k -g -o "$out/warm-$i.data" -- "${cmd[@]}" >/dev/null 2>&1
done
echo "load average at the end: $(cat /proc/loadavg)"

samples() {
    local f
    for f in "$out/$1"-*.data; do
        perf report -i "$f" --stdio --no-children --sort sym -F sample,sym -g none 2>/dev/null
    done | awk '$2 == "[k]" { n[$3] += $1 } END { for (s in n) print s, n[s] }'
}
samples ahead | sort > "$out/ahead.txt"
samples warm | sort > "$out/warm.txt"
echo "kernel samples over $rounds rounds: ahead $(awk '{ t += $2 } END { print t }' "$out/ahead.txt"), warm $(awk '{ t += $2 } END { print t }' "$out/warm.txt")"
echo "symbol ahead warm difference (largest first)"
join -a1 -a2 -e0 -o 0,1.2,2.2 "$out/ahead.txt" "$out/warm.txt" | awk '{ print $1, $2, $3, $2 - $3 }' \
    | sort -k4,4nr | head -25
