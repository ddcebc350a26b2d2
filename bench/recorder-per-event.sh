#!/usr/bin/env bash
# The recorder's cost per event, in the program's own CPU time: small warm programs that
# each make one kind of event many times (opens, reads, page faults, context switches) run
# under `coldstart record` with the floor's parts (`--no-cpu-samples --slow-syscalls off`)
# with and without one part (`--without PART`), and with CPU samples and off-CPU stacks
# on, interleaved round by round; the program's task-clock (`perf stat`, inside the
# recording) per operation; `switch` (a pipe ping-pong) and `sleep` (20 µs nanosleeps) are
# the sleep-heavy ones. Multiplied by a start's event counts (`perf stat -e` of its
# tracepoints), it says what each part costs that start, with far less noise than timing
# the cold start itself.
#
#   bash bench/recorder-per-event.sh [ROUNDS]      # default 7
#   ONLY=switch CONFIGS="untraced defaults baseline" BASELINE=/path/to/other/coldstart \
#       bash bench/recorder-per-event.sh 8         # one program; a change against another build
# Each run holds the exclusive benchmark lock (/var/lock/coldstart-bench.lock; LOCK_CMD
# replaces the command prefix that takes it). Rows append to RESULTS as they are measured.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
install_packages linux-perf python3
use_coldstart
use_bench_stats
work=$(mktemp -d /var/tmp/cs-per-event.XXXXXX)
trap 'rm -rf "$work"' EXIT
head -c $((64 << 20)) /dev/urandom > "$work/data"
cat "$work/data" > /dev/null
N=20000
declare -A PROGRAMS=(
    [open]="import os
for i in range($N): os.close(os.open('$work/data', os.O_RDONLY))"
    [stat]="import os
for i in range($N): os.stat('$work/data')"
    [read]="import os
fd = os.open('$work/data', os.O_RDONLY)
for i in range($N): os.pread(fd, 4096, (i * 4096) % (64 << 20))"
    [fault]="import mmap, os
fd = os.open('$work/data', os.O_RDONLY)
for i in range($N // 1000):
    m = mmap.mmap(fd, 64 << 20, prot=mmap.PROT_READ)
    for o in range(0, 64 << 20, 65536): m[o]
    m.close()"
    [switch]="import os
r1, w1 = os.pipe(); r2, w2 = os.pipe()
if os.fork() == 0:
    for i in range($N): os.read(r1, 1); os.write(w2, b'x')
    os._exit(0)
for i in range($N): os.write(w1, b'x'); os.read(r2, 1)
os.wait()"
    [sleep]="import time
for i in range($N): time.sleep(0.00002)"
)
FLOOR="--no-cpu-samples --slow-syscalls off"
declare -A ARGS=(
    [floor]="$FLOOR"
    [no-fanotify]="$FLOOR --without fanotify"
    [no-access]="$FLOOR --without page-access"
    [no-sched]="$FLOOR --without scheduler"
    [bare]="$FLOOR --without fanotify,page-access,scheduler,sampler"
    [stacks]="--slow-syscalls off"
    [defaults]=""
)
read -r -a CONFIGS <<< "${CONFIGS:-untraced bare floor no-fanotify no-access no-sched stacks defaults}"
read -r -a RUN_PROGRAMS <<< "${ONLY:-open stat read fault switch sleep}"
BASELINE=${BASELINE:-}
results=${RESULTS:-/var/tmp/recorder-per-event.tsv}   # appended as each run ends: a stopped run keeps its rows
run_one() {
    local prog=$1 config=$2 round=$3
    local cmd=(perf stat -e task-clock -x, -o "$work/task" -- /usr/bin/python3 -c "${PROGRAMS[$prog]}")
    if [ "$config" = untraced ]; then "${cmd[@]}" > /dev/null 2>&1; else
        # shellcheck disable=SC2086 # ARGS holds lists of options
        local binary=$COLDSTART
        if [ "$config" = baseline ]; then binary=$BASELINE; fi
        "$binary" record ${ARGS[$config]:-} -o "$work/t.coldstart" --spool-dir "$work/spool" -- "${cmd[@]}" \
            > /dev/null 2> "$work/record.log" || { cat "$work/record.log" >&2; exit 1; }
        rm -f "$work/t.coldstart"
    fi
    printf '%s\t%s\t%s\t%s\n' "$prog" "$config" "$round" "$(awk -F, '/task-clock/ {print $1}' "$work/task")" >> "$results"
}
for round in $(seq "$ROUNDS"); do
    for prog in "${RUN_PROGRAMS[@]}"; do
        n=${#CONFIGS[@]}
        for k in $(seq 0 $((n - 1))); do
            if [ $((round % 2)) -eq 0 ]; then i=$(((round + k) % n)); else i=$(((round + n - k) % n)); fi
            ${LOCK_CMD:-flock -x /var/lock/coldstart-bench.lock} bash -c "$(declare -f run_one); $(declare -p PROGRAMS ARGS work results COLDSTART BASELINE); run_one $prog ${CONFIGS[$i]} $round"
        done
    done
    echo "round $round of $ROUNDS done" >&2
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
col() { awk -v p="$1" -v c="$2" '$1 == p && $2 == c {print $4}' "$results" | paste -sd, -; }
echo "| program ($N operations) | config | task-clock median (ms) | µs per operation over untraced | ratio to untraced [95% CI] |"
echo "|---|---|---:|---:|---|"
for prog in "${RUN_PROGRAMS[@]}"; do
    base=$(awk -v p="$prog" '$1 == p && $2 == "untraced" {print $4}' "$results" | median)
    for c in "${CONFIGS[@]}"; do
        m=$(awk -v p="$prog" -v c="$c" '$1 == p && $2 == c {print $4}' "$results" | median)
        per=$(echo "($m - $base) * 1000 / $N" | bc -l)
        if [ "$c" = untraced ]; then r=1; else
            r=$("$BENCH_STATS" paired-ratio "$(col "$prog" "$c")" "$(col "$prog" untraced)" | awk '{printf "%.3f [%.3f, %.3f]", $1, $2, $3}')
        fi
        printf '| %s | %s | %.1f | %.2f | %s |\n' "$prog" "$c" "$m" "$per" "$r"
    done
done
