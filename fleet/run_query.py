#!/usr/bin/env python3
"""Runs one fleet query on a coldstart dataset, on DuckDB or on Spark.

The same SQL text runs on both engines: every table folder of the dataset becomes a
view of its name (process, file, page_use, traces, ...), read with its build folders
(build=41.2/) as the column `build`, a string, so that a query filtering on it reads only
those builds' files; ${name} parameters are replaced by literals (--param min_share=0.5
--param build_a=1.2). `coldstart fleet` runs it on DuckDB after surveying the dataset; on a
cluster:

    spark-submit --master spark://HOST:7077 fleet/run_query.py --engine spark \
        --dataset s3a://bucket/fleet --query fleet/queries/ready.sql --csv

Exit status: 0, 2 on a bad argument or query, 3 when the engine's Python package is
missing (the message says how to install it).
"""

import argparse
import csv
import decimal
import os
import re
import sys
import time

TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
PARAM = re.compile(r"\$\{([a-z_]+)\}")


def literal(value):
    """A parameter as an SQL literal: a number stays a number, anything else is a string."""
    if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", value):
        return value
    return "'" + value.replace("'", "''") + "'"


def substitute(sql, params):
    missing = sorted({m for m in PARAM.findall(sql) if m not in params})
    if missing:
        print("run_query: the query needs " + ", ".join("--param " + m + "=VALUE" for m in missing), file=sys.stderr)
        sys.exit(2)
    return PARAM.sub(lambda m: literal(params[m.group(1)]), sql)


PARTITION = "build="


def local_tables(dataset):
    """The dataset's table folders that hold at least one Parquet file in a build folder."""
    tables = []
    for name in sorted(os.listdir(dataset)):
        folder = os.path.join(dataset, name)
        if not (TABLE_NAME.match(name) and os.path.isdir(folder)):
            continue
        for build in os.listdir(folder):
            inner = os.path.join(folder, build)
            if build.startswith(PARTITION) and os.path.isdir(inner):
                if any(f.endswith(".parquet") and not f.startswith(".") for f in os.listdir(inner)):
                    tables.append(name)
                    break
    return tables


def text(value):
    """One cell as text, the same for both engines (Spark gives decimals where DuckDB gives doubles)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (float, decimal.Decimal)):
        rounded = "%.6f" % float(value)
        rounded = rounded.rstrip("0").rstrip(".")
        return "0" if rounded in ("-0", "") else rounded
    return str(value)


# Seconds each query took, and when the last one (or the views) ended.
TIMES = []
TIMES_START = []


def timed():
    """Notes the seconds since the previous call (the first: since the views were made)."""
    now = time.monotonic()
    TIMES.append(now - TIMES_START[-1])
    TIMES_START.append(now)


def run_duckdb(dataset, queries):
    try:
        import duckdb
    except ImportError:
        print("the DuckDB Python package is not installed for " + sys.executable + ": pip install duckdb", file=sys.stderr)
        sys.exit(3)
    con = duckdb.connect()
    for table in local_tables(dataset):
        pattern = os.path.join(dataset, table, PARTITION + "*", "*.parquet").replace("'", "''")
        con.execute(
            "CREATE VIEW %s AS SELECT * FROM read_parquet('%s', hive_partitioning = true, hive_types = {'build': 'VARCHAR'})"
            % (table, pattern)
        )
    TIMES_START.append(time.monotonic())
    results = []
    for sql in queries:
        try:
            cursor = con.execute(sql)
        except duckdb.Error as e:
            print("run_query: DuckDB refused the query: " + str(e).splitlines()[0], file=sys.stderr)
            sys.exit(2)
        results.append(([d[0] for d in cursor.description], cursor.fetchall()))
        timed()
    return results


def run_spark(dataset, queries, master, confs):
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        print("the PySpark package is not installed for " + sys.executable + ": pip install pyspark", file=sys.stderr)
        sys.exit(3)
    builder = SparkSession.builder.appName("coldstart-fleet")
    if master:
        builder = builder.master(master)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # build=41.2 stays the string '41.2', as the traces table has it, not the number 41.2.
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    )
    for key, value in confs:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if "://" in dataset:
            tables = [t.strip() for t in os.environ.get("COLDSTART_TABLES", "").split(",") if t.strip()]
            if not tables:
                print("run_query: for a remote dataset, name its tables in COLDSTART_TABLES", file=sys.stderr)
                sys.exit(2)
        else:
            tables = local_tables(dataset)
        # Executors resolve paths on their own machines: a local dataset is named absolutely.
        base = dataset if "://" in dataset else "file://" + os.path.abspath(dataset)
        for table in tables:
            spark.read.parquet(base.rstrip("/") + "/" + table).createOrReplaceTempView(table)
        TIMES_START.append(time.monotonic())
        results = []
        for sql in queries:
            try:
                frame = spark.sql(sql)
                results.append((frame.columns, [tuple(r) for r in frame.collect()]))
                timed()
            except Exception as e:  # pyspark's AnalysisException and ParseException have no common base
                print("run_query: Spark refused the query: " + str(e).strip().splitlines()[0], file=sys.stderr)
                sys.exit(2)
    finally:
        spark.stop()
    return results


def write(columns, rows, as_csv):
    cells = [[text(v) for v in row] for row in rows]
    if as_csv:
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(columns)
        out.writerows(cells)
        return
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [all(re.fullmatch(r"-?[0-9.]*", r[i]) for r in cells) for i in range(len(columns))]

    def line(values):
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric)).rstrip()

    print(line(columns))
    for r in cells:
        print(line(r))
    print("(%d row%s)" % (len(cells), "" if len(cells) == 1 else "s"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb")
    parser.add_argument("--dataset", required=True, help="the dataset's folder (or URL, for Spark)")
    parser.add_argument(
        "--query", action="append", default=[], help="an .sql file (repeatable: one session runs them all); standard input when absent"
    )
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--master", help="Spark master, e.g. local[2] or spark://HOST:7077; spark-submit's when absent")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    parser.add_argument("--csv", action="store_true", help="CSV instead of an aligned table")
    parser.add_argument("--timings", action="store_true", help="each query's wall-clock seconds on standard error")
    args = parser.parse_args()
    confs = []
    for c in args.conf:
        key, sep, value = c.partition("=")
        if not sep:
            print("run_query: --conf takes KEY=VALUE, not " + c, file=sys.stderr)
            sys.exit(2)
        confs.append((key, value))
    params = {}
    for p in args.param:
        name, sep, value = p.partition("=")
        if not sep:
            print("run_query: --param takes NAME=VALUE, not " + p, file=sys.stderr)
            sys.exit(2)
        params[name] = value
    queries = []
    for path in args.query:
        with open(path, encoding="utf-8") as f:
            queries.append((path, substitute(f.read(), params)))
    if not queries:
        queries.append(("-", substitute(sys.stdin.read(), params)))
    if args.engine == "duckdb":
        results = run_duckdb(args.dataset, [sql for _, sql in queries])
    else:
        results = run_spark(args.dataset, [sql for _, sql in queries], args.master, confs)
    if args.timings:
        for (path, _), seconds, (_, rows) in zip(queries, TIMES, results):
            print("timing\t%s\t%.3f\t%d" % (path, seconds, len(rows)), file=sys.stderr)
    for (path, _), (columns, rows) in zip(queries, results):
        if len(queries) > 1:
            print("-- " + path)
        write(columns, rows, args.csv)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.exit(0)
