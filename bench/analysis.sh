#!/usr/bin/env bash
# Analysis throughput and memory on synthetic traces (crates/analyze/src/synthetic.rs:
# 50 processes x 4 threads that run, read files in pieces, wait for the disk, sleep
# and wake each other; 40 % page fills, 34 % scheduler intervals, 17 % wakeups,
# 9 % block requests). Runs from the repository root:
#   1. criterion: `analyze()` of in-memory traces of 1 M and 5 M events;
#   2. examples/analysis_bench under /usr/bin/time -v, RUNS times each, interleaved:
#      `hold` (build the 5 M-event trace only), `memory` (build it and analyse it),
#      `file` (read the 5 M-event trace file, then analyse it); prints the medians
#      of the analysis time, of the file read time and of the peak RSS.
#   3. with BASELINE=path/to/another/analysis_bench (built from an older commit, or with
#      other optimization settings): A = BASELINE, B = this build, `file` mode, RUNS pairs
#      in ABBA order; prints the median read and analysis times and the paired ratios B/A
#      with their 95 % intervals.
# Usage: bench/analysis.sh [RUNS]   (default 5; set SKIP_CRITERION=1 to skip step 1)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
runs=${1:-5}
events=5000000
install_packages time

if [ -z "${SKIP_CRITERION:-}" ]; then
    cargo bench -q -p coldstart-analyze --bench analysis 2>&1 | grep -E "^analyze|time:|thrpt:"
fi

cargo build -q --release -p coldstart-analyze --example analysis_bench
bin=target/release/examples/analysis_bench
work=$(mktemp -d /var/tmp/cs-analysis-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin" generate "$events" "$work/synthetic.coldstart"
ls -l "$work/synthetic.coldstart" | awk '{printf "trace file: %.1f MiB\n", $5 / 1048576}'

measure() { # mode arg -> appends "analysis_s read_s rss_kb" to $work/$mode
    local mode=$1 arg=$2 out
    out=$(/usr/bin/time -v "$bin" "$mode" "$arg" 2>&1)
    local analysed read rss
    analysed=$(sed -n 's/^analysed .* in \([0-9.]*\) s.*/\1/p' <<<"$out")
    read=$(sed -n 's/^read .* in \([0-9.]*\) s.*/\1/p' <<<"$out")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' <<<"$out")
    echo "${analysed:--} ${read:--} $rss" >>"$work/$mode"
}
for _ in $(seq "$runs"); do
    measure hold "$events"
    measure memory "$events"
    measure file "$work/synthetic.coldstart"
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
n=$("$bin" hold "$events" | sed -n 's/^built \([0-9]*\) events.*/\1/p')
"$bin" hold "$events"
for mode in hold memory file; do
    rss=$(cut -d' ' -f3 "$work/$mode" | median)
    line="$mode: peak RSS median $(awk -v k="$rss" -v n="$n" 'BEGIN {printf "%.0f MiB = %.0f bytes per event", k / 1024, k * 1024 / n}')"
    if [ "$mode" != hold ]; then
        a=$(cut -d' ' -f1 "$work/$mode" | median)
        line="$line; analysis median $a s ($(awk -v s="$a" -v n="$n" 'BEGIN {printf "%.2f", n / s / 1e6}') M events/s)"
    fi
    if [ "$mode" = file ]; then
        line="$line; reading the file median $(cut -d' ' -f2 "$work/$mode" | median) s"
    fi
    echo "$line (runs: $(tr '\n' ';' <"$work/$mode"))"
done

if [ -n "${BASELINE:-}" ]; then
    use_bench_stats
    : >"$work/ab"
    one() { # bin -> "read_s analysis_s" of the trace file
        local out
        out=$("$1" file "$work/synthetic.coldstart")
        echo "$(sed -n 's/^read .* in \([0-9.]*\) s.*/\1/p' <<<"$out") $(sed -n 's/^analysed .* in \([0-9.]*\) s.*/\1/p' <<<"$out")"
    }
    for i in $(seq "$runs"); do
        if [ $((i % 2)) -eq 1 ]; then a=$(one "$BASELINE"); b=$(one "$bin"); else b=$(one "$bin"); a=$(one "$BASELINE"); fi
        echo "$a $b" >>"$work/ab"
    done
    column() { cut -d' ' -f"$1" "$work/ab" | paste -sd,; }
    for part in read:1:3 analysis:2:4; do
        IFS=: read -r name ca cb <<<"$part"
        read -r ratio low high < <("$BENCH_STATS" paired-ratio "$(column "$cb")" "$(column "$ca")")
        echo "A/B $name ($runs pairs, ABBA, the trace file): A median $(cut -d' ' -f"$ca" "$work/ab" | median) s," \
            "B median $(cut -d' ' -f"$cb" "$work/ab" | median) s, paired ratio B/A" \
            "$(awk -v r="$ratio" -v l="$low" -v h="$high" 'BEGIN {printf "%.3f [%.3f … %.3f]", r, l, h}')"
    done
    echo "pairs (A read, A analysis, B read, B analysis): $(tr '\n' ';' <"$work/ab")"
fi
