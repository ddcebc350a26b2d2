#!/usr/bin/env bash
# The recorder's cost, part by part: a cold start run untraced and under `coldstart record`
# with one part after another switched on, interleaved round by round, in wall time and in
# the program's own CPU time (`perf stat -e task-clock` around the program, inside the
# recording; task-clock is a software event, so it counts without a PMU).
#
#   untraced  the start alone (under the same bash and perf stat)
#   floor     record --no-cpu-samples --slow-syscalls off: the paused launch, the tracefs
#             events, fanotify, the proc connector and samplers
#   bare      the floor without the parts `record --without` leaves out (fanotify,
#             page-access, scheduler, sampler): page fills, process events, block requests
#   floor-fanotify, floor-access, floor-sched, floor-sampler
#             the floor without that one part (the floor's figure minus this one's is the
#             part's cost)
#   cpu       floor + CPU stack samples (--no-offcpu-stacks --slow-syscalls off)
#   offcpu    floor + CPU samples + off-CPU kernel stacks (--slow-syscalls off)
#   slow      floor + the slow file-system calls filtered in the kernel (--no-cpu-samples)
#   every     floor + every system call that matters (--no-cpu-samples --syscalls)
#   defaults  record's defaults: CPU samples, off-CPU stacks, slow calls
#   baseline  record's defaults with the coldstart binary BASELINE (another build), to
#             measure a change (add it to CONFIGS)
#
# ROUNDS rounds (default 5) per chunk, CHUNKS chunks (default 6): each chunk holds the
# exclusive benchmark lock (/var/lock/coldstart-bench.lock) and lets builds run between
# chunks; the configurations rotate from round to round, so chunks pool. Results append to
# RESULTS (default /var/tmp/recorder-cost.tsv: config, round, wall ms, task-clock ms), so a
# run can be continued; SUMMARY_ONLY=1 only prints the table of RESULTS. CONFIGS (a
# space-separated list) runs some of the configurations only (untraced is the reference).
# CMD_KIND=python (default): /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas';
# CMD_KIND=soffice: soffice --headless --convert-to pdf of a small text file.
# Run as root from the repository root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
CHUNKS=${CHUNKS:-6}
RESULTS=${RESULTS:-/var/tmp/recorder-cost.tsv}
LOCK=/var/lock/coldstart-bench.lock
BASELINE=${BASELINE:-}
# The command prefix each chunk runs under (a wrapper of its own may replace the lock).
LOCK_CMD=${LOCK_CMD:-flock -x $LOCK}
read -r -a CONFIGS <<< "${CONFIGS:-untraced bare floor-fanotify floor-access floor-sched floor-sampler floor cpu offcpu slow every defaults}"
FLOOR="--no-cpu-samples --slow-syscalls off"
declare -A ARGS=(
    [bare]="$FLOOR --without fanotify,page-access,scheduler,sampler"
    [floor-fanotify]="$FLOOR --without fanotify"
    [floor-access]="$FLOOR --without page-access"
    [floor-sched]="$FLOOR --without scheduler"
    [floor-sampler]="$FLOOR --without sampler"
    [floor]="$FLOOR"
    [cpu]="--no-offcpu-stacks --slow-syscalls off"
    [offcpu]="--slow-syscalls off"
    [slow]="--no-cpu-samples"
    [every]="--no-cpu-samples --syscalls"
    [defaults]=""
)
use_bench_stats

summary() {
    local base_wall base_task snapshot
    # A copy, so rounds a running benchmark adds meanwhile do not unpair the columns.
    snapshot=$(mktemp); cp "$RESULTS" "$snapshot"
    local RESULTS=$snapshot
    median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
    column_of() { awk -v c="$1" -v k="$2" '$1 == c {print $k}' "$RESULTS"; }
    # Rounds every configuration completed, so the paired ratios pair the same rounds.
    paired() { awk -v c="$1" -v k="$2" '{seen[$2]++; v[$1" "$2]=$k} END {for (r in seen) if (seen[r] == '"${#CONFIGS[@]}"') print r, v[c" "r]}' "$RESULTS" | sort -n | awk '{print $2}' | paste -sd, -; }
    echo "| part | rounds | wall median (ms) | wall paired ratio to untraced [95% CI] | task-clock median (ms) | task-clock paired ratio [95% CI] |"
    echo "|---|---:|---:|---|---:|---|"
    base_wall=$(paired untraced 3); base_task=$(paired untraced 4)
    for c in "${CONFIGS[@]}"; do
        local n w t rw rt
        n=$(column_of "$c" 3 | wc -l)
        w=$(column_of "$c" 3 | median); t=$(column_of "$c" 4 | median)
        if [ "$c" = untraced ]; then rw="1"; rt="1"; else
            rw=$("$BENCH_STATS" paired-ratio "$(paired "$c" 3)" "$base_wall" | awk '{printf "%.3f [%.3f, %.3f]", $1, $2, $3}')
            rt=$("$BENCH_STATS" paired-ratio "$(paired "$c" 4)" "$base_task" | awk '{printf "%.3f [%.3f, %.3f]", $1, $2, $3}')
        fi
        printf '| %s | %s | %.1f | %s | %.1f | %s |\n' "$c" "$n" "$w" "$rw" "$t" "$rt"
    done
    parts_of_floor
    rm -f "$snapshot"
}
# The floor's parts: the floor against the floor without each part, same rounds.
parts_of_floor() {
    [[ " ${CONFIGS[*]} " == *" floor "* ]] || return 0
    local c rw rt printed=
    for c in "${CONFIGS[@]}"; do
        [[ $c == floor-* ]] || continue
        if [ -z "$printed" ]; then
            echo
            echo "| part of the floor | wall: floor / floor without it [95% CI] | task-clock: floor / floor without it [95% CI] |"
            echo "|---|---|---|"
            printed=1
        fi
        rw=$("$BENCH_STATS" paired-ratio "$(paired floor 3)" "$(paired "$c" 3)" | awk '{printf "%.3f [%.3f, %.3f]", $1, $2, $3}')
        rt=$("$BENCH_STATS" paired-ratio "$(paired floor 4)" "$(paired "$c" 4)" | awk '{printf "%.3f [%.3f, %.3f]", $1, $2, $3}')
        printf '| %s | %s | %s |\n' "${c#floor-}" "$rw" "$rt"
    done
}
if [ -n "${SUMMARY_ONLY:-}" ]; then summary; exit 0; fi

use_coldstart
work=$(mktemp -d /var/tmp/cs-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
case ${CMD_KIND:-python} in
    python)
        install_packages python3-scipy python3-matplotlib python3-pandas linux-perf
        CMD=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')
        export MPLBACKEND=Agg ;;
    soffice)
        install_packages libreoffice-writer-nogui linux-perf
        printf 'A page of text.\n%.0s' $(seq 200) > "$work/doc.txt"
        export HOME=$work/home; mkdir -p "$HOME"
        CMD=(soffice --headless --convert-to pdf --outdir "$work/out" "$work/doc.txt") ;;
    *) echo "recorder-cost.sh: CMD_KIND is python or soffice" >&2; exit 2 ;;
esac
"${CMD[@]}" > /dev/null 2>&1   # warm-up: .pyc files and profiles are written once, not in a timed run
TIMED='t0=$EPOCHREALTIME; perf stat -e task-clock -x, -o "$OUT.task" -- "$@" > /dev/null 2>&1; t1=$EPOCHREALTIME
echo "($t1 - $t0) * 1000" | bc -l > "$OUT"'
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep "${SETTLE:-1}"; }
run_one() {
    local config=$1 round=$2 out="$work/$1.$2"
    drop
    if [ "$config" = untraced ]; then
        OUT=$out bash -c "$TIMED" timed "${CMD[@]}"
    else
        # shellcheck disable=SC2086 # ARGS holds lists of options
        local binary=$COLDSTART
        if [ "$config" = baseline ]; then binary=$BASELINE; fi
        OUT=$out "$binary" record ${ARGS[$config]:-} -o "$work/$config.coldstart" --spool-dir "$work/spool" -- \
            bash -c "$TIMED" timed "${CMD[@]}" > /dev/null 2> "$work/record.log"
        rm -f "$work/$config.coldstart"
    fi
    printf '%s\t%s\t%.1f\t%s\n' "$config" "$round" "$(cat "$out")" "$(awk -F, '/task-clock/ {print $1}' "$out.task")" >> "$RESULTS"
}
last=0
if [ -s "$RESULTS" ]; then last=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$RESULTS"); fi
first=$((last + 1))
for chunk in $(seq 1 "$CHUNKS"); do
    start=$((first + (chunk - 1) * ROUNDS))
    $LOCK_CMD bash -c "$(declare -f run_one drop); $(declare -p ARGS CMD CONFIGS TIMED work COLDSTART RESULTS BASELINE);
        export MPLBACKEND=Agg HOME=\"$HOME\"
        for round in \$(seq $start $((start + ROUNDS - 1))); do
            n=\${#CONFIGS[@]}
            for k in \$(seq 0 \$((n - 1))); do
                if [ \$((round % 2)) -eq 0 ]; then i=\$(((round + k) % n)); else i=\$(((round + n - k) % n)); fi
                run_one \"\${CONFIGS[\$i]}\" \"\$round\"
            done
        done"
    echo "chunk $chunk of $CHUNKS done (rounds $start-$((start + ROUNDS - 1)))" >&2
done
summary
