#!/usr/bin/env bash
# Recorder stress: fio doing random 4 KiB buffered reads of a cold 4 GiB file at
# queue depth 32 (io_uring) for 10 s, recorded with `coldstart record --cold`.
# Prints the event volume and every loss the trace stores (overruns, dropped
# events), which must be zero or reported exactly. Run as root from the repository root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
install_packages fio sqlite3
use_coldstart
BIN=$COLDSTART
work=$(mktemp -d /var/tmp/cs-stress.XXXXXX)
trap 'rm -rf "$work"' EXIT
fio --name=layout --filename="$work/big" --size=4G --rw=write --bs=1M --end_fsync=1 >/dev/null
"$BIN" record --cold -o "$work/stress.coldstart" --spool-dir "$work/spool" -- \
    fio --name=stress --filename="$work/big" --size=4G --rw=randread --bs=4k --iodepth=32 \
        --ioengine=io_uring --fadvise_hint=1 --runtime=10 --time_based --group_reporting \
        --output-format=terse --terse-version=3 >"$work/fio.txt"
t="$work/stress.coldstart"
echo "fio read IOPS: $(cut -d';' -f8 "$work/fio.txt")"
sqlite3 "$t" "select 'page fills', count(*), sum(pages) from page_fill;
              select 'page fills of origin ' || coalesce(origin, 'null'), count(*), sum(pages) from page_fill group by origin;
              select 'page accesses (rows)', count(*), sum(pages) from page_access;
              select 'block requests', count(*), sum(bytes) from block_io;
              select 'sched intervals', count(*), '' from sched;"
echo "losses (source | what | count):"
sqlite3 "$t" "select * from loss where count > 0" | sed 's/^/  /'
sqlite3 "$t" "select '  total ' || coalesce(sum(count), 0) from loss where source = 'tracefs'"
sqlite3 "$t" "select text from note" | sed 's/^/note: /'
