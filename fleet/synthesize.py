#!/usr/bin/env python3
"""Makes a synthetic coldstart dataset of N traces from the traces of a real one.

Each new trace copies one real trace's rows (round robin), under a new trace id, with its
times scaled by a random factor (log-normal around 1, a build factor on top), a build, a
machine class and a host drawn from small sets: the shapes of the real recordings (how
many processes, files, pages, which files) are kept, the figures vary. Used by
bench/fleet-scale.sh and the fleet tests; needs pyarrow.

    python3 fleet/synthesize.py --source DATASET --out DIR --traces 1000 [--seed 1] [--first 0]

Trace i (from --first on) is the same whatever the batches it is made in, so a dataset
grows from 10 to 10,000 traces by adding 10, then 90, …
"""

import argparse
import hashlib
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


def load(source):
    """Table name -> {trace id -> (pyarrow table, the file's coldstart.* metadata)}."""
    tables = {}
    for name in sorted(os.listdir(source)):
        folder = os.path.join(source, name)
        if not os.path.isdir(folder) or name.startswith("."):
            continue
        for f in sorted(os.listdir(folder)):
            if f.endswith(".parquet") and not f.startswith("."):
                path = os.path.join(folder, f)
                footer = pq.ParquetFile(path).metadata.metadata or {}
                ours = {k: v for k, v in footer.items() if k.startswith(b"coldstart.")}
                tables.setdefault(name, {})[f[: -len(".parquet")]] = (pq.read_table(path), ours)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--traces", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="the index of the first trace to make")
    args = parser.parse_args()
    tables = load(args.source)
    sources = sorted(tables.get("traces", {}))
    if not sources:
        print("synthesize: " + args.source + " holds no traces", file=sys.stderr)
        sys.exit(2)
    for name in tables:
        os.makedirs(os.path.join(args.out, name), mode=0o700, exist_ok=True)
    for i in range(args.first, args.first + args.traces):
        rng = random.Random("%d/%d" % (args.seed, i))
        source = sources[i % len(sources)]
        new_id = hashlib.sha256(("%s/%d/%d" % (source, args.seed, i)).encode()).hexdigest()[:32]
        build, build_factor = BUILDS[(i // len(sources)) % len(BUILDS)]
        factor = rng.lognormvariate(0.0, 0.15) * build_factor
        overrides = {
            "build": build,
            "machine_class": MACHINE_CLASSES[rng.randrange(len(MACHINE_CLASSES))],
            "host": "host-%04d" % rng.randrange(10000),
        }
        for name, by_id in tables.items():
            if source not in by_id:
                continue
            table, metadata = by_id[source]
            out = scaled(table, factor, new_id, overrides)
            metadata = dict(metadata)
            metadata[b"coldstart.trace_id"] = new_id.encode()
            out = out.replace_schema_metadata(metadata)
            path = os.path.join(args.out, name, new_id + ".parquet")
            temp = os.path.join(args.out, name, "." + new_id + ".parquet.tmp")
            pq.write_table(out, temp, compression="snappy")
            os.replace(temp, path)
        if (i + 1 - args.first) % 1000 == 0:
            print("synthesize: %d/%d traces" % (i + 1 - args.first, args.traces), file=sys.stderr)


if __name__ == "__main__":
    main()
