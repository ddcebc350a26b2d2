#!/usr/bin/env bash
# Fleet questions at scale on a compacted dataset: a synthetic dataset made from the real
# fixtures (tests/fixtures: python and soffice; ids, times, builds, machine classes and
# hosts varied, shapes kept: fleet/synthesize.py) grows in batches of at most BATCH traces,
# each batch folded into the dataset by `coldstart fleet compact` (its exported files
# deleted as they are folded, as a fleet's dataset grows day by day). At each size of
# SIZES it times, each step alone under LOCK:
#   (compact)   the compaction of each batch: traces folded, seconds, bytes before → after
#   (size)      the dataset's bytes per trace, compacted (and a batch's, uncompacted: written
#               by synthesize.py --snappy, quicker to make and 2.3x larger than an export's)
#   (coldstart) `coldstart fleet ready`: the survey of every footer, then DuckDB
#   (plan)      `prefetch plan --dataset` on the whole dataset
#   DuckDB      the five shipped questions in one process, RUNS times (each question's
#               seconds with the session and views made; `(process)` the whole run), and
#   (per-trace) the median `(process)` run's seconds per 1,000 traces, to compare sizes
#   Spark       the same on a standalone cluster of a master and two workers started on
#               this machine (fleet/spark_cluster.py), at the sizes of SPARK_SIZES
# with rows per second (the rows of the tables a question reads / its seconds). At the
# first size, the questions are also timed on the dataset before its compaction (when it
# holds no part yet).
# BENCHMARKS.md, "Fleet datasets". A compaction appends each batch as new parts (it does
# not rewrite the dataset), so `(compact)` follows the batch more than the dataset; the
# exported files of a batch are deleted as it folds them, so the disk holds the dataset
# and one batch. Before each batch it checks that MIN_FREE_GB (default 12) stay free
# with the batch and its parts added, and stops (status 3, figures so far printed) if not.
#
#   bash bench/fleet-scale.sh                              # SIZES="1000 10000 100000"
#   SIZES="1000 10000 100000" BATCH=5000 SPARK_SIZES= bash bench/fleet-scale.sh   # DuckDB only
#   SIZES="1000 10000" SPARK_SIZES=10000 bash bench/fleet-scale.sh
#   KEEP=/var/tmp/fleet-ds bash bench/fleet-scale.sh       # keep the dataset (and reuse it)
#
# Disk: about 0.2 MiB per trace compacted, and a batch of 10,000 exported traces about
# 3 GB until it is folded; check
# `df -h /var/tmp` (WORK sets the folder). Needs a Python with duckdb, pyarrow and pyspark
# (PYTHON, default the tests' venv that .ci/run makes) and Java 17. On a shared machine,
# set LOCK to a command prefix that takes the benchmark lock around each timed step only:
#   LOCK="flock -x /var/lock/coldstart-bench.lock" bash bench/fleet-scale.sh
# and GENERATE_LOCK to one that takes it shared around making the synthetic traces (not timed):
#   GENERATE_LOCK="flock -s /var/lock/coldstart-bench.lock"
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

PYTHON=${PYTHON:-/var/cache/coldstart-tests/fleet-venv/bin/python}
SIZES=${SIZES:-1000 10000 100000}
SPARK_SIZES=${SPARK_SIZES:-10000}
BATCH=${BATCH:-10000}
RUNS=${RUNS:-3}
LOCK=${LOCK:-}
GENERATE_LOCK=${GENERATE_LOCK:-}
WORK=${WORK:-/var/tmp}
MIN_FREE_GB=${MIN_FREE_GB:-12}
install_packages bc openjdk-17-jre-headless
"$PYTHON" -c 'import duckdb, pyarrow, pyspark' || {
    echo "fleet-scale: $PYTHON lacks duckdb, pyarrow or pyspark (.ci/run makes that venv; or set PYTHON)" >&2
    exit 2
}
work=$(mktemp -d "$WORK/fleet-scale.XXXXXX")
trap 'rm -rf "$work"' EXIT
use_coldstart
ds=${KEEP:-$work/synthetic}

# The real traces, exported once.
for name in python soffice; do
    gzip -dc "tests/fixtures/$name.coldstart.gz" > "$work/$name.coldstart"
done
"$COLDSTART" export --format parquet -o "$work/real" "$work/python.coldstart" "$work/soffice.coldstart" 2>/dev/null

# wall FILE CMD…: runs CMD and writes its wall-clock seconds to FILE (timed inside LOCK).
wall=$work/wall.sh
cat > "$wall" <<'SH'
#!/usr/bin/env bash
out=$1; shift
start=$(date +%s.%N)
"$@"; status=$?
echo "$(date +%s.%N) - $start" | bc > "$out"
exit $status
SH
chmod +x "$wall"

queries=(ready common_files common_pages regression findings)
declare -A reads=(
    [ready]="traces" [common_files]="traces path_read" [common_pages]="traces path_read_run"
    [regression]="traces critical_path_by_process critical_path_by_file" [findings]="traces finding"
)
args=(--param min_share=0.5 --param build_a=b1 --param build_b=b2 --csv --timings)
for q in "${queries[@]}"; do args+=(--query "fleet/queries/$q.sql"); done

# rows_of DS: "table rows" lines, from the footers (pyarrow reads metadata only).
rows_of() {
    "$PYTHON" - "$1" <<'PY'
import os, sys
import pyarrow.parquet as pq
ds = sys.argv[1]
for t in sorted(os.listdir(ds)):
    folder = os.path.join(ds, t)
    if t.startswith(".") or not os.path.isdir(folder):
        continue
    n = 0
    for b in os.listdir(folder):
        for f in os.listdir(os.path.join(folder, b)):
            if f.endswith(".parquet") and not f.startswith("."):
                n += pq.ParquetFile(os.path.join(folder, b, f)).metadata.num_rows
    print(t, n)
PY
}

# questions N LABEL ENGINE RUNNER…: the five questions, RUNS times, a line per question and run.
questions() {
    local n=$1 label=$2 engine=$3 run q t seconds total path
    shift 3
    for run in $(seq "$RUNS"); do
        $LOCK "$wall" "$work/wall.txt" "$@" "${args[@]}" > /dev/null 2> "$work/timings.txt" \
            || { cat "$work/timings.txt"; exit 1; }
        printf '%-8s %-13s %-7s %-6s %12s %10s\n' "$n" "(process)" "$engine" "$label" - "$(cat "$work/wall.txt")"
        process_seconds+=("$(cat "$work/wall.txt")")
        while IFS=$'\t' read -r tag path seconds _; do
            [ "$tag" = timing ] || continue
            q=$(basename "$path" .sql)
            total=0
            for t in ${reads[$q]}; do total=$((total + ${rows[$t]})); done
            printf '%-8s %-13s %-7s %-6s %12s %10s %14.0f\n' "$n" "$q" "$engine" "$label" "$total" "$seconds" \
                "$(echo "$total / $seconds" | bc -l)"
        done < "$work/timings.txt"
    done
}

duckdb_runner=("$PYTHON" fleet/run_query.py --engine duckdb --dataset "$ds")
spark_runner=("$PYTHON" fleet/spark_cluster.py --workers 2 --cores 1 --memory 3g -- "$PYTHON" fleet/run_query.py
    --engine spark --master '{master}' --conf spark.driver.host=127.0.0.1 --conf spark.driver.memory=2g
    --conf spark.executor.memory=2g --dataset "$ds")

printf '%-8s %-13s %-7s %-6s %12s %10s %14s\n' traces step engine layout rows_read seconds rows_per_s
made=0
if [ -d "$ds/traces" ]; then made=$(rows_of "$ds" | awk '$1 == "traces" { print $2 }'); fi
# room_for TRACES: true when the disk keeps MIN_FREE_GB free with TRACES more exported
# (0.9 MiB each as synthesize.py --snappy writes them) and compacted (0.25 MiB).
room_for() {
    local free_kb need_kb
    free_kb=$(df -Pk "$(dirname "$ds")" | awk 'NR == 2 { print $4 }')
    need_kb=$(($1 * 1150 + MIN_FREE_GB * 1024 * 1024))
    [ "$free_kb" -ge "$need_kb" ]
}

# per_trace N: the median of the last RUNS `(process)` seconds, per 1,000 traces.
per_trace() {
    local median
    median=$(printf '%s\n' "${process_seconds[@]}" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
    printf '%-8s %-13s %-7s %-6s %12s %10s %14s\n' "$1" "(per-trace)" duckdb parts - \
        "$(echo "$median * 1000 / $1" | bc -l | xargs printf '%.4f')" "s/1000 traces"
}

first=1
for n in $SIZES; do
    while [ "$made" -lt "$n" ]; do
        batch=$((n - made < BATCH ? n - made : BATCH))
        if ! room_for "$batch"; then
            echo "fleet-scale: stopping at $made traces: $batch more would leave under $MIN_FREE_GB GB free on $(dirname "$ds")" >&2
            exit 3
        fi
        start=$(date +%s.%N)
        $GENERATE_LOCK "$PYTHON" fleet/synthesize.py --source "$work/real" --out "$ds" --first "$made" --traces "$batch" --snappy
        echo "# synthesized traces $made..$((made + batch - 1)) in $(echo "$(date +%s.%N) - $start" | bc) s"
        new_bytes=$(find "$ds" -name '[0-9a-f]*.parquet' -printf '%s\n' | paste -sd+ | bc)
        new_bytes=${new_bytes:-0}
        printf '%-8s %-13s %-7s %-6s %12s %10s %14.0f\n' "$((made + batch))" "(size)" - exported "$batch" - \
            "$(echo "$new_bytes / $batch" | bc -l)"
        made=$((made + batch))
        if [ "$first" = 1 ] && [ "$made" = "$n" ] && [ -z "$(find "$ds" -name 'part-*.parquet' -print -quit)" ]; then
            declare -A rows=()
            while read -r table count; do rows[$table]=$count; done < <(rows_of "$ds")
            questions "$made" exported duckdb "${duckdb_runner[@]}"
            unset rows
        fi
        $LOCK "$wall" "$work/wall.txt" "$COLDSTART" fleet compact "$ds" 2> "$work/compact.txt" \
            || { cat "$work/compact.txt"; exit 1; }
        tail -1 "$work/compact.txt" | sed 's/^/# /'
        printf '%-8s %-13s %-7s %-6s %12s %10s %14.0f\n' "$made" "(compact)" coldstart - "$new_bytes" \
            "$(cat "$work/wall.txt")" "$(echo "$batch / $(cat "$work/wall.txt")" | bc -l)"
    done
    first=0
    bytes=$(du -sb "$ds" | cut -f1)
    printf '%-8s %-13s %-7s %-6s %12s %10s %14.0f\n' "$n" "(size)" - compacted "$bytes" - "$(echo "$bytes / $n" | bc -l)"
    declare -A rows=()
    while read -r table count; do rows[$table]=$count; done < <(rows_of "$ds")
    COLDSTART_PYTHON=$PYTHON $LOCK "$wall" "$work/wall.txt" "$COLDSTART" fleet ready "$ds" > /dev/null 2> "$work/survey.txt" \
        || { cat "$work/survey.txt"; exit 1; }
    printf '%-8s %-13s %-7s %-6s %12s %10s\n' "$n" "(coldstart)" "survey+ready" - "${rows[traces]}" "$(cat "$work/wall.txt")"
    $LOCK "$wall" "$work/wall.txt" "$COLDSTART" prefetch plan --force --dataset "$ds" -o "$work/fleet.plan" \
        2> "$work/plan.txt" || { cat "$work/plan.txt"; exit 1; }
    total=$((${rows[traces]} + ${rows[file]} + ${rows[page_used]} + ${rows[page_use]} + ${rows[file_open]}))
    printf '%-8s %-13s %-7s %-6s %12s %10s %14.0f\n' "$n" "(plan)" coldstart - "$total" "$(cat "$work/wall.txt")" \
        "$(echo "$total / $(cat "$work/wall.txt")" | bc -l)"
    process_seconds=()
    questions "$n" parts duckdb "${duckdb_runner[@]}"
    per_trace "$n"
    if [[ " $SPARK_SIZES " == *" $n "* ]]; then
        questions "$n" parts spark "${spark_runner[@]}"
    fi
    unset rows
done
