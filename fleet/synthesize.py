#!/usr/bin/env python3
"""Makes a synthetic coldstart dataset of N traces from the traces of a real one.

Each new trace copies one real trace's rows (round robin), under a new trace id, with its
times scaled by a random factor (log-normal around 1, a build factor on top), a build, a
machine class and a host drawn from small sets: the shapes of the real recordings (how
many processes, files, pages, which files) are kept, the figures vary. Each new trace is
written as an export writes one (a file per table in its build's folder), so a
compaction folds it like any other. Used by bench/fleet-scale.sh and the fleet tests;
needs pyarrow.

    python3 fleet/synthesize.py --source DATASET --out DIR --traces 1000 [--seed 1] [--first 0] [--jobs 2] [--snappy]

Trace i (from --first on) is the same whatever the batches it is made in, so a dataset
grows from 10 to 10,000 traces by adding 10, then 90, …
"""

import argparse
import hashlib
import multiprocessing
import os
import random
import sys

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
except ImportError:
    print("synthesize: the pyarrow package is missing: pip install pyarrow", file=sys.stderr)
    sys.exit(3)

# Columns that are durations or times since the trace's start: they scale together.
TIME_COLUMNS = {
    "t_ns", "start_ns", "end_ns", "issue_ns", "complete_ns", "duration_ns", "time_to_ready_ns",
    "gain_ns", "gain_ahead_ns", "wait_ns", "first_t_ns", "first_need_ns", "command_start_ns", "activating_ns",
    "active_ns", "deactivating_ns",
}
BUILDS = [("b1", 1.0), ("b2", 1.08)]
MACHINE_CLASSES = ["laptop-ssd", "desktop-nvme", "vm-hdd"]


def partition_name(build):
    """The build folder's name, as coldstart writes it (Hive style)."""
    if build is None:
        return "build=__HIVE_DEFAULT_PARTITION__"
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "".join("%%%02X" % b for b in c.encode()) for c in build)
    return "build=" + safe


def load(source):
    """Table name -> {trace id -> (pyarrow table, the file's coldstart.* metadata)}, from
    the exported files (one trace each) of the source dataset's build folders."""
    tables = {}
    for name in sorted(os.listdir(source)):
        folder = os.path.join(source, name)
        if not os.path.isdir(folder) or name.startswith("."):
            continue
        for build in sorted(os.listdir(folder)):
            inner = os.path.join(folder, build)
            if not (build.startswith("build=") and os.path.isdir(inner)):
                continue
            for f in sorted(os.listdir(inner)):
                if f.endswith(".parquet") and not f.startswith(".") and not f.startswith("part-"):
                    path = os.path.join(inner, f)
                    footer = pq.ParquetFile(path).metadata.metadata or {}
                    ours = {k: v for k, v in footer.items() if k.startswith(b"coldstart.")}
                    table = pq.read_table(path, partitioning=None)
                    tables.setdefault(name, {})[f[: -len(".parquet")]] = (table, ours)
    return tables


def scaled(table, factor, new_id, overrides):
    columns = []
    for field in table.schema:
        column = table.column(field.name)
        if field.name == "trace_id":
            column = pa.array([new_id] * table.num_rows, pa.string())
        elif field.name in overrides:
            column = pa.array([overrides[field.name]] * table.num_rows, field.type)
        elif field.name in TIME_COLUMNS and pa.types.is_integer(field.type):
            column = pc.cast(pc.multiply(pc.cast(column, pa.float64()), factor), field.type, safe=False)
        columns.append(column)
    return pa.table(columns, schema=table.schema)


TABLES = {}
SOURCES = []
ARGS = None


def make(i):
    """Writes trace i."""
    rng = random.Random("%d/%d" % (ARGS.seed, i))
    source = SOURCES[i % len(SOURCES)]
    new_id = hashlib.sha256(("%s/%d/%d" % (source, ARGS.seed, i)).encode()).hexdigest()[:32]
    build, build_factor = BUILDS[(i // len(SOURCES)) % len(BUILDS)]
    factor = rng.lognormvariate(0.0, 0.15) * build_factor
    overrides = {
        "build": build,
        "machine_class": MACHINE_CLASSES[rng.randrange(len(MACHINE_CLASSES))],
        "host": "host-%04d" % rng.randrange(10000),
    }
    for name, by_id in TABLES.items():
        if source not in by_id:
            continue
        table, metadata = by_id[source]
        out = scaled(table, factor, new_id, overrides)
        metadata = dict(metadata)
        metadata[b"coldstart.trace_id"] = new_id.encode()
        metadata[b"coldstart.build"] = build.encode()
        out = out.replace_schema_metadata(metadata)
        folder = os.path.join(ARGS.out, name, partition_name(build))
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, new_id + ".parquet")
        temp = os.path.join(folder, "." + new_id + ".parquet.tmp")
        if ARGS.snappy:
            pq.write_table(out, temp, compression="snappy")
        else:
            write_as_export(out, temp)
        os.replace(temp, path)


def write_as_export(table, path):
    """Writes `table` encoded as coldstart's writer does (crates/dataset/src/file.rs): zstd
    level 3, integer columns of mostly distinct values delta-encoded, the others
    dictionary-encoded."""
    delta = [f.name for f in table.schema if pa.types.is_integer(f.type)
             and pc.count_distinct(table[f.name]).as_py() * 4 > table.num_rows - table[f.name].null_count]
    others = [f.name for f in table.schema if f.name not in delta]
    pq.write_table(table, path, compression="zstd", compression_level=3, use_dictionary=others,
                   column_encoding={name: "DELTA_BINARY_PACKED" for name in delta})


def main():
    global ARGS, SOURCES, TABLES
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--traces", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="the index of the first trace to make")
    parser.add_argument("--snappy", action="store_true",
                        help="write Snappy with pyarrow's encodings: 40%% quicker, 2.3x larger (for files a compaction folds at once)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes writing traces")
    ARGS = parser.parse_args()
    TABLES = load(ARGS.source)
    SOURCES = sorted(TABLES.get("traces", {}))
    if not SOURCES:
        print("synthesize: " + ARGS.source + " holds no exported traces", file=sys.stderr)
        sys.exit(2)
    indexes = range(ARGS.first, ARGS.first + ARGS.traces)
    done = 0
    with multiprocessing.get_context("fork").Pool(max(1, ARGS.jobs)) as pool:
        for _ in pool.imap_unordered(make, indexes, chunksize=16):
            done += 1
            if done % 1000 == 0:
                print("synthesize: %d/%d traces" % (done, ARGS.traces), file=sys.stderr)


if __name__ == "__main__":
    main()
