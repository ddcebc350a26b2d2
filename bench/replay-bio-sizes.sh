#!/usr/bin/env bash
# The I/O a prefetch replay submits: bios and requests by size, and on the slow-disk rig the
# replay's time against its device's limit, for builds or replay options interleaved.
#
# Two parts, each a cold recording, a disk-ordered plan (`prefetch plan --order disk`; ORDER), then
# ROUNDS rounds of every variant, each after system eviction (sync, drop_caches 3, 1 s pause):
#   fast  the VM's own disk: /usr/bin/python3 -c 'import json,email,asyncio,unittest'
#         (the demo's start); its metadata on /dev/vda cannot be replayed (EPERM).
#   rig   bench/slow-disk-rig.sh (a loop-mounted ext4 image throttled to 100 read requests/s
#         and 60 MB/s with v1 blkio; the replay runs inside the throttled cgroup):
#         python3 importing scipy.stats, matplotlib.pyplot and pandas from the image.
# Each replay (`coldstart prefetch run PLAN --json`) is traced in a private tracefs instance
# (block_bio_queue and block_rq_issue filtered on the plan's disk; removed afterwards, also on
# Ctrl-C). Counted: the replay's read bios by size and by kind — data (inside a planned range of
# a file), planned metadata (inside a planned block-device range: inode tables, directories),
# metadata (RM, outside them), outside the ranges (the rest: readahead past a range, ext4's
# inode-table readahead of unplanned blocks) — and the read requests that start where one of
# them starts. On the VM's disk the replay's bios are those its threads queue (other engineers'
# builds read that disk too); on the rig every read bio of the loop device (blk-throttle queues
# the bios it holds back from a kworker). A replay during which another process dropped the
# caches (/proc/vmstat drop_pagecache: it evicts what the replay read so far) is marked and left
# out of the medians. On the rig the device limit is max(bytes ÷ bandwidth, ranges ÷ IOPS) of
# the throttle over the plan's ranges on the rig's device, and the replay time is given against
# it. Then the read primitives on one 64 MiB file of the same disk (read_ranges below).
#
# Usage (as root): bash bench/replay-bio-sizes.sh [ROUNDS] [fast|rig|both]
#   VARIANTS='name=BINARY[:OPTIONS]; …' the replays to compare (default: "new=$COLDSTART");
#   e.g. VARIANTS="old=/tmp/old/coldstart; new=$COLDSTART; new-seq=$COLDSTART:--fill sequential"
#   ORDER=first-need|blend plans in that order instead of disk order.
#   METHODS='exact willneed …' the read primitives compared on one file after the replays (the
#   default: all of them; METHODS= none): see read_ranges below.
#   COLDSTART records and plans (default: a release build of this tree). Results in $OUT
#   (default /tmp/coldstart-replay-bios): the traces' summaries and one JSON per replay.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-3}
part=${2:-both}
out=${OUT:-/tmp/coldstart-replay-bios}
instance=/sys/kernel/tracing/instances/coldstart-replay-bios

[ "$(id -u)" = 0 ] || { echo "replay-bio-sizes: needs root (tracefs, drop_caches, the rig)" >&2; exit 2; }

tracing_off() {
    if [ -d "$instance" ]; then
        for e in block_bio_queue block_rq_issue; do echo 0 > "$instance/events/block/$e/enable" 2>/dev/null || true; done
        rmdir "$instance" 2>/dev/null || true
    fi
}

if [ -z "${RIG_MNT:-}" ] && [ -z "${REPLAY_BIOS_INNER:-}" ]; then
    install_packages python3-scipy python3-matplotlib python3-pandas e2fsprogs fio
    use_coldstart
    export VARIANTS=${VARIANTS:-new=$COLDSTART}
    mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
    tracing_off
    trap tracing_off EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$out"
    echo "machine: $(uname -r), $(nproc) CPUs; load average at the start: $(cat /proc/loadavg); $(date -u +%FT%TZ)"
    echo "variants: $VARIANTS"
    status=0
    if [ "$part" = fast ] || [ "$part" = both ]; then
        REPLAY_BIOS_INNER=fast bash "$0" "$rounds" fast || status=$?
    fi
    if [ "$part" = rig ] || [ "$part" = both ]; then
        bash bench/slow-disk-rig.sh run -- env REPLAY_BIOS_INNER=rig bash "$0" "$rounds" rig || status=$?
    fi
    tracing_off
    echo "load average at the end: $(cat /proc/loadavg)"
    exit $status
fi

# analyze count PLAN DEV TRACE REPORT DROPS [every-task] | line BIOS_JSON | summary OUT PART [--iops N --bps N] -- NAMES...
analyze() {
    python3 - "$@" <<'PY'
import json, re, statistics, sys
BIO = re.compile(r"block_bio_queue: (\d+),(\d+) (\S+) (\d+) \+ (\d+) \[(.*)\]")
RQ = re.compile(r"block_rq_issue: (\d+),(\d+) (\S+) (\d+) \((.*?)\) (\d+) \+ (\d+)")
KIB = lambda sectors: sectors * 512 // 1024

def plan_spans(plan, dev):
    """Disk byte spans of the plan's ranges on DEV: (start, end, is_metadata); count and bytes."""
    spans, ranges, size = [], 0, 0
    for f in plan["files"]:
        for r in f["ranges"]:
            on_dev = r.get("disk") == dev or (r.get("disk") is None and f["dev"] == dev)
            if not on_dev:
                continue
            ranges += 1
            size += r["length"]
            if r.get("physical") is not None:
                spans.append((r["physical"], r["physical"] + r["length"], f["kind"] == "block_device"))
    spans.sort()
    return spans, ranges, size

def kind_of(spans, start, flags):
    import bisect
    i = bisect.bisect_right(spans, (start, float("inf"), True)) - 1
    if i >= 0 and spans[i][0] <= start < spans[i][1]:
        return "planned metadata" if spans[i][2] else "data"
    if not spans:
        return "read"
    return "metadata (RM)" if "M" in flags else "outside the ranges"

def median(xs):
    return statistics.median(xs) if xs else 0

mode = sys.argv[1]
if mode == "count":
    plan = json.load(open(sys.argv[2])) if sys.argv[2] != "-" else {"files": []}
    dev, trace, report, drops = sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
    every_task = sys.argv[7:] == ["every-task"]
    spans, ranges, size = plan_spans(plan, dev)
    bios, starts, rqs = [], set(), []
    for line in open(trace, errors="replace"):
        m = BIO.search(line)
        if m and "R" in m[3] and (every_task or m[6].startswith(("prefetch", "python3", "fio"))):
            start, sectors = int(m[4]), int(m[5])
            bios.append((KIB(sectors), kind_of(spans, start * 512, m[3])))
            starts.add(start)
            continue
        m = RQ.search(line)
        if m and "R" in m[3] and int(m[6]) in starts:
            rqs.append(int(m[4]) // 1024)
    kinds = {}
    for kib, kind in bios:
        k = kinds.setdefault(kind, {"bios": 0, "kib": 0, "bios_4k": 0})
        k["bios"] += 1; k["kib"] += kib; k["bios_4k"] += kib == 4
    try:
        rep = json.load(open(report))
    except (OSError, ValueError):
        rep = {}
    json.dump({"bios": len(bios), "bios_4k": sum(k == 4 for k, _ in bios), "bio_kib": [k for k, _ in bios],
               "median_bio_kib": median([k for k, _ in bios]), "mib": sum(k for k, _ in bios) / 1024,
               "requests": len(rqs), "requests_4k": sum(r == 4 for r in rqs), "median_request_kib": median(rqs),
               "kinds": kinds, "plan_ranges_on_disk": ranges, "plan_bytes_on_disk": size,
               "elapsed_s": rep.get("elapsed_s"), "fetched": rep.get("fetched"), "cached_kib": rep.get("cached_kib"),
               "lost": "LOST" in open(trace, errors="replace").read(), "foreign_drops": drops}, sys.stdout)
elif mode == "line":
    b = json.load(open(sys.argv[2]))
    kinds = ", ".join(f"{k} {v['bios']} ({v['bios_4k']} of 4 KiB)" for k, v in sorted(b["kinds"].items()))
    disturbed = " (DISTURBED: a drop_caches during the replay)" if b["foreign_drops"] else ""
    print(f"{b['elapsed_s'] or 0:.2f} s{disturbed}; {b['bios']} bios ({b['bios_4k']} of 4 KiB, median {b['median_bio_kib']} KiB, "
          f"{b['mib']:.1f} MiB): {kinds}; {b['requests']} requests ({b['requests_4k']} of 4 KiB)")
elif mode == "summary":
    out, part = sys.argv[2], sys.argv[3]
    args = sys.argv[4:]
    names = args[args.index("--") + 1:]
    opt = dict(zip(args[:args.index("--")][::2], args[:args.index("--")][1::2]))
    import glob
    print(f"{part}: medians over the rounds")
    header = f"{'variant':<14} {'rounds':>6} {'replay s':>9} {'bios':>6} {'4 KiB':>6} {'median KiB':>10} {'requests':>9} {'4 KiB':>6}"
    header += "  bios by kind (median)"
    if opt:
        header += "  | limit s   replay / limit"
    print(header)
    for name in names:
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{part}-{name}-[0-9]*.bios.json"))]
        # Rounds disturbed by another process's drop_caches are left out (unless all were).
        clean = [r for r in runs if not r["foreign_drops"]]
        disturbed = len(runs) - len(clean)
        runs = clean or runs
        if not runs:
            continue
        m = lambda key: median([r[key] for r in runs if r[key] is not None])
        kinds = sorted({k for r in runs for k in r["kinds"]})
        by_kind = ", ".join(f"{k} {median([r['kinds'].get(k, {}).get('bios', 0) for r in runs]):g}" for k in kinds)
        line = (f"{name:<14} {len(runs):>6} {m('elapsed_s'):>9.2f} {m('bios'):>6g} {m('bios_4k'):>6g} "
                f"{m('median_bio_kib'):>10g} {m('requests'):>9g} {m('requests_4k'):>6g}  {by_kind}")
        if runs[0].get("cached_kib") is not None:
            line += f"; {m('cached_kib') / 1024:.1f} MiB cached after"
        if opt:
            r0 = runs[0]
            ranges, size = r0["plan_ranges_on_disk"], r0["plan_bytes_on_disk"]
            if "--ranges" in opt:
                ranges, size = int(opt["--ranges"]), int(opt["--bytes"])
            limit = max(size / float(opt["--bps"]), ranges / float(opt["--iops"]))
            ratios = [r["elapsed_s"] / limit for r in runs if r["elapsed_s"]]
            line += f"  | {limit:.2f} s ({ranges} ranges, {size / 2**20:.1f} MiB)  {median(ratios):.2f}×"
        if disturbed:
            line += f"  ({disturbed} disturbed round{'s' if disturbed > 1 else ''} left out)" if clean else "  (every round disturbed)"
        print(line)
PY
}

# read_ranges METHOD FILE REPORT: reads FILE's ranges (2 MiB every 4 MiB) the METHOD way, one
# range after the other, and writes {"elapsed_s", "cached_kib"} to REPORT.
read_ranges() {
    if [ "$1" = io_uring ]; then
        local t0 t1
        t0=$EPOCHREALTIME
        fio --name=replay --filename="$2" --ioengine=io_uring --rw=read:2m --bs=2m --size=64m --iodepth=1 \
            --direct=0 --invalidate=0 --output=/dev/null
        t1=$EPOCHREALTIME
        printf '{"elapsed_s": %s, "cached_kib": %s}\n' "$(awk "BEGIN { print $t1 - $t0 }")" \
            "$(($(fincore --bytes --noheadings --output RES "$2") / 1024))" > "$3"
        return
    fi
    python3 - "$@" <<'PY'
import ctypes, json, mmap, os, subprocess, sys, time
method, path, report = sys.argv[1:4]
RANGE, STRIDE, BUF = 2 << 20, 4 << 20, 256 << 10
libc = ctypes.CDLL(None, use_errno=True)
flags = os.O_RDONLY | (os.O_DIRECT if method == "direct-2m" else 0)
fd = os.open(path, flags)
size = os.fstat(fd).st_size
buf = mmap.mmap(-1, RANGE)  # page-aligned, as O_DIRECT wants
start = time.monotonic()
if method == "exact":
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
if method == "sequential-2m":
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
for off in range(0, size, STRIDE):
    if method == "exact":  # the replay's Fill::Exact: WILLNEED, then 256 KiB preads, FADV_RANDOM
        os.posix_fadvise(fd, off, RANGE, os.POSIX_FADV_WILLNEED)
        for at in range(off, off + RANGE, BUF):
            os.preadv(fd, [memoryview(buf)[:BUF]], at)
    elif method == "willneed":
        os.posix_fadvise(fd, off, RANGE, os.POSIX_FADV_WILLNEED)
    elif method == "readahead":
        libc.readahead(fd, ctypes.c_longlong(off), ctypes.c_size_t(RANGE))
    elif method == "pread-256k":  # the replay's Fill::Sequential
        for at in range(off, off + RANGE, BUF):
            os.preadv(fd, [memoryview(buf)[:BUF]], at)
    elif method in ("pread-2m", "sequential-2m", "direct-2m"):
        os.preadv(fd, [buf], off)
    elif method == "populate":
        m = mmap.mmap(fd, RANGE, prot=mmap.PROT_READ, offset=off)
        m.madvise(22)  # MADV_POPULATE_READ
        m.close()
    else:
        sys.exit(f"unknown method {method}")
elapsed = time.monotonic() - start
res = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path], capture_output=True, text=True)
json.dump({"elapsed_s": elapsed, "cached_kib": int(res.stdout.split()[0]) // 1024}, open(report, "w"))
PY
}

# One part, from here on (inside the rig for `rig`).
trap tracing_off EXIT
trap 'exit 130' INT TERM
C=$COLDSTART
work=$(mktemp -d /tmp/coldstart-replay-bios.XXXXXX)
trap 'tracing_off; rm -rf "$work"' EXIT
if [ "$part" = rig ]; then
    cmd=(env "PYTHONPATH=$RIG_PYTHONPATH" /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')
    dev=$RIG_DEV
    limit() { awk -v d="$RIG_DEV" '$1 == d { print $2 }' "$RIG_CGROUP/blkio.throttle.read_$1_device"; }
    limit_args="--iops $(limit iops) --bps $(limit bps)"
    # blk-throttle submits the bios it held back from a kworker: count every read of the rig's
    # device (nothing else reads it).
    every_task=every-task
else
    cmd=(/usr/bin/python3 -c 'import json,email,asyncio,unittest')
    dev=$(lsblk -no MAJ:MIN "$(findmnt -no SOURCE -T /usr/lib)" | head -1 | tr -d ' ')
    limit_args=
    every_task=   # the replay threads' bios only: other engineers' builds read this disk too
fi
kernel_dev=$(( ${dev%%:*} << 20 | ${dev##*:} ))

echo "== $part: recording a cold start of ${cmd[*]} (disk $dev)"
"$C" record --cold --as-root -o "$out/$part.coldstart.tmp" -- "${cmd[@]}" >/dev/null 2>"$out/$part.record.txt"
mv "$out/$part.coldstart.tmp" "$out/$part.coldstart"
"$C" prefetch plan "$out/$part.coldstart" -o "$out/$part.plan" --order "${ORDER:-disk}" --force 2>&1 | head -1

drops() { awk '$1 == "drop_pagecache" { print $2 }' /proc/vmstat; }

trace_start() {
    drops_before=$(drops)
    mkdir "$instance"
    echo 32768 > "$instance/buffer_size_kb"
    for e in block_bio_queue block_rq_issue; do
        echo "dev == $kernel_dev" > "$instance/events/block/$e/filter"
        echo 1 > "$instance/events/block/$e/enable"
    done
}

trace_stop() { # PART-NAME-ROUND: keeps the trace, compressed, in $out
    sleep 0.5   # the last completions
    for e in block_bio_queue block_rq_issue; do echo 0 > "$instance/events/block/$e/enable"; done
    cat "$instance/trace" > "$work/$1.trace"
    rmdir "$instance"
    gzip -c "$work/$1.trace" > "$out/$1.trace.gz"
    if grep -q 'LOST' "$work/$1.trace"; then echo "   (events lost in $1)"; fi
    # Another engineer's drop_caches in the middle evicts what the replay read so far.
    foreign_drops=$(($(drops) - drops_before))
}

trace_replay() { # NAME ROUND BINARY [OPTIONS...]
    local name=$1 r=$2 bin=$3
    shift 3
    trace_start
    "$bin" prefetch run "$out/$part.plan" -q --json "$out/$part-$name-$r.json" "$@" || true
    trace_stop "$part-$name-$r"
    analyze count "$out/$part.plan" "$dev" "$work/$part-$name-$r.trace" \
        "$out/$part-$name-$r.json" "$foreign_drops" $every_task > "$out/$part-$name-$r.bios.json"
}

IFS=';' read -r -a variants <<< "$VARIANTS"
names=()
for v in "${variants[@]}"; do v=$(echo "$v" | sed 's/^ *//'); names+=("${v%%=*}"); done
for r in $(seq 1 "$rounds"); do
    # Rotate the variants' order by round, so none always runs first after the recording.
    n=${#variants[@]}
    for k in $(seq 0 $((n - 1))); do
        v=$(echo "${variants[$(((k + r) % n))]}" | sed 's/^ *//; s/ *$//')
        name=${v%%=*}
        spec=${v#*=}
        bin=${spec%%:*}
        opts=
        [ "$spec" = "$bin" ] || opts=${spec#*:}
        evict
        # shellcheck disable=SC2086
        trace_replay "$name" "$r" "$bin" $opts
        printf '%s round %s: %s\n' "$name" "$r" "$(analyze line "$out/$part-$name-$r.bios.json")"
    done
done
[ "$part" != rig ] || grep "$RIG_DEV" "$RIG_CGROUP/blkio.throttle.io_serviced" | head -1
# shellcheck disable=SC2086
analyze summary "$out" "$part" $limit_args -- "${names[@]}" | tee "$out/$part-summary.txt"

# The read primitives on one file of the same disk: 64 MiB, its ranges 2 MiB every 4 MiB (16
# ranges, 32 MiB), the file's pages dropped (DONTNEED twice) before each read.
read -r -a methods <<< "${METHODS-exact willneed readahead pread-256k pread-2m sequential-2m populate direct-2m io_uring}"
if [ "${#methods[@]}" -gt 0 ]; then
    file_dir=${RIG_MNT:-/var/tmp}
    test_file=$(mktemp "$file_dir/coldstart-replay-bios.XXXXXX")
    trap 'tracing_off; rm -rf "$work" "$test_file"' EXIT
    head -c 64M /dev/urandom > "$test_file"
    sync
    # Round 0, not counted: each method once, so python's and fio's own files are cached.
    for method in "${methods[@]}"; do read_ranges "$method" "$test_file" "$work/method.json"; done
    for r in $(seq 1 "$rounds"); do
        n=${#methods[@]}
        for k in $(seq 0 $((n - 1))); do
            method=${methods[$(((k + r) % n))]}
            python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for _ in range(2): os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$test_file"
            trace_start
            read_ranges "$method" "$test_file" "$work/method.json"
            trace_stop "$part-method-$method-$r"
            analyze count - "$dev" "$work/$part-method-$method-$r.trace" "$work/method.json" "$foreign_drops" $every_task \
                > "$out/$part-method-$method-$r.bios.json"
        done
    done
    # shellcheck disable=SC2086
    analyze summary "$out" "$part-method" ${limit_args:+$limit_args --ranges 16 --bytes $((32 << 20))} \
        -- "${methods[@]}" | tee "$out/$part-methods-summary.txt"
fi
