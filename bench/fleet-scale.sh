#!/usr/bin/env bash
# Fleet queries at scale: a synthetic dataset made from the real fixtures
# (tests/fixtures: python and soffice), 10, 100, 1,000 and 10,000 traces (ids, times,
# builds, machine classes and hosts varied, shapes kept: fleet/synthesize.py), each
# shipped query timed on DuckDB and on Spark in local mode, with rows per second
# (the rows of the tables the query reads / its wall-clock seconds, the engine's session
# and views already made; `(process)` lines give each engine's whole run, start included,
# and `(coldstart)` the survey of every footer plus the ready query; `(plan)` times
# `prefetch plan --dataset` on the whole dataset: survey, every trace's rows read, the plan).
# BENCHMARKS.md.
#
#   bash bench/fleet-scale.sh                  # all sizes
#   SIZES="10 100" bash bench/fleet-scale.sh   # some
#   ENGINES= SIZES="1000 10000" bash bench/fleet-scale.sh   # the survey and the fleet plan only
#
# Needs a Python with duckdb, pyarrow and pyspark (PYTHON, default the tests' venv
# that .ci/run makes) and Java 17. On a shared machine, set LOCK to a command prefix
# that takes the benchmark lock around each timed step only (the synthesis is not timed):
#   LOCK="flock -x /var/lock/coldstart-bench.lock" bash bench/fleet-scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

PYTHON=${PYTHON:-/var/cache/coldstart-tests/fleet-venv/bin/python}
SIZES=${SIZES:-10 100 1000 10000}
SPARK_MASTER=${SPARK_MASTER:-local[2]}
ENGINES=${ENGINES-duckdb spark}
LOCK=${LOCK:-}
install_packages bc openjdk-17-jre-headless
"$PYTHON" -c 'import duckdb, pyarrow, pyspark' || {
    echo "fleet-scale: $PYTHON lacks duckdb, pyarrow or pyspark (.ci/run makes that venv; or set PYTHON)" >&2
    exit 2
}
work=$(mktemp -d /var/tmp/fleet-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT
use_coldstart

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
    [ready]="traces" [common_files]="traces file page_use" [common_pages]="traces file page_use"
    [regression]="traces critical_path critical_path_file" [findings]="traces finding"
)
args=(--param min_share=0.5 --param build_a=b1 --param build_b=b2 --csv --timings)
for q in "${queries[@]}"; do args+=(--query "fleet/queries/$q.sql"); done

printf '%-8s %-13s %-7s %12s %10s %14s\n' traces query engine rows_read seconds rows_per_s
ds=$work/synthetic
made=0
for n in $SIZES; do
    # The dataset grows to n traces (synthesis is not timed, nor under LOCK).
    start=$(date +%s.%N)
    "$PYTHON" fleet/synthesize.py --source "$work/real" --out "$ds" --first "$made" --traces "$((n - made))"
    echo "# synthesized traces $made..$((n - 1)) in $(echo "$(date +%s.%N) - $start" | bc) s; dataset $(du -sh "$ds" | cut -f1)"
    made=$n
    # Rows per table, from the footers (pyarrow reads metadata only).
    declare -A rows=()
    while read -r table count; do rows[$table]=$count; done < <("$PYTHON" - "$ds" <<'PY'
import os, sys
import pyarrow.parquet as pq
ds = sys.argv[1]
for t in sorted(os.listdir(ds)):
    folder = os.path.join(ds, t)
    print(t, sum(pq.ParquetFile(os.path.join(folder, f)).metadata.num_rows for f in os.listdir(folder)))
PY
)
    COLDSTART_PYTHON=$PYTHON $LOCK "$wall" "$work/wall.txt" "$COLDSTART" fleet ready "$ds" > /dev/null 2> "$work/survey.txt" \
        || { cat "$work/survey.txt"; exit 1; }
    printf '%-8s %-13s %-7s %12s %10s\n' "$n" "(coldstart)" "survey+ready" "${rows[traces]}" "$(cat "$work/wall.txt")"
    $LOCK "$wall" "$work/wall.txt" "$COLDSTART" prefetch plan --force --dataset "$ds" -o "$work/fleet.plan" \
        2> "$work/plan.txt" || { cat "$work/plan.txt"; exit 1; }
    total=$((${rows[traces]} + ${rows[file]} + ${rows[page_used]} + ${rows[page_use]} + ${rows[file_open]}))
    printf '%-8s %-13s %-7s %12s %10s %14.0f\n' "$n" "(plan)" "coldstart" "$total" "$(cat "$work/wall.txt")" \
        "$(echo "$total / $(cat "$work/wall.txt")" | bc -l)"
    for engine in $ENGINES; do
        $LOCK "$wall" "$work/wall.txt" "$PYTHON" fleet/run_query.py --engine "$engine" --master "$SPARK_MASTER" \
            --dataset "$ds" "${args[@]}" > /dev/null 2> "$work/timings.txt" || { cat "$work/timings.txt"; exit 1; }
        printf '%-8s %-13s %-7s %12s %10s\n' "$n" "(process)" "$engine" - "$(cat "$work/wall.txt")"
        while IFS=$'\t' read -r tag path seconds _; do
            [ "$tag" = timing ] || continue
            q=$(basename "$path" .sql)
            total=0
            for t in ${reads[$q]}; do total=$((total + ${rows[$t]})); done
            printf '%-8s %-13s %-7s %12s %10s %14.0f\n' "$n" "$q" "$engine" "$total" "$seconds" \
                "$(echo "$total / $seconds" | bc -l)"
        done < "$work/timings.txt"
    done
    unset rows
done
