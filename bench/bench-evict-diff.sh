#!/usr/bin/env bash
# What `--evict system` makes a cold start read that `--evict files` does not: records
# ROUNDS pairs of cold starts with `coldstart record`, one after `sync; drop_caches=3`
# (record --cold), one after a warm run and posix_fadvise(DONTNEED) twice on every
# regular file of the first cold trace (dd iflag=nocache count=0, the way
# `--evict files` does it), and prints per trace: time, page fills per file kind
# (regular / directory / device metadata), fills of regular files outside the set,
# and the block reads the command's tree issued (all, and 4 KiB ones) with their summed
# service time.
# Needs root. Run it under the benchmark lock:
#   flock /var/lock/coldstart-bench.lock bash bench/bench-evict-diff.sh [python|soffice] [ROUNDS]
# (COLDSTART=path uses that binary instead of building; traces are kept in $OUT,
# default /tmp/coldstart-evict-diff).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
program=${1:-python}
rounds=${2:-3}
out=${OUT:-/tmp/coldstart-evict-diff}
mkdir -p "$out"
install_packages sqlite3 python3-scipy python3-matplotlib python3-pandas libreoffice-writer-nogui
use_coldstart
coldstart=$COLDSTART

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case "$program" in
python) cmd=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas') ;;
soffice)
    seq 1 2000 | sed 's/^/A line of text for the conversion benchmark, number /' > "$work/doc.txt"
    cmd=(soffice "-env:UserInstallation=file://$work/profile" --headless --convert-to pdf --outdir "$work" "$work/doc.txt")
    ;;
*) echo "usage: $0 [python|soffice] [ROUNDS]" >&2; exit 2 ;;
esac

record() { "$coldstart" record --as-root "$@" -- "${cmd[@]}" > /dev/null 2>&1; }
evict_files() {
    for _ in 1 2; do
        while IFS= read -r f; do dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || true; done < "$work/set"
    done
}
summary() {
    sqlite3 -separator ' ' "$1" "ATTACH '$work/set.db' AS s;
      SELECT
        (SELECT printf('%.3f', (max(end_ns) - min(start_ns)) / 1e9) FROM process WHERE in_scope),
        (SELECT printf('%d/%d', count(*), coalesce(sum(pages), 0)) FROM page_fill JOIN file f ON f.id = file_id WHERE f.kind = 'regular'),
        (SELECT printf('%d/%d', count(*), coalesce(sum(pages), 0)) FROM page_fill JOIN file f ON f.id = file_id WHERE f.kind = 'directory'),
        (SELECT printf('%d/%d', count(*), coalesce(sum(pages), 0)) FROM page_fill JOIN file f ON f.id = file_id WHERE f.kind = 'device_metadata'),
        (SELECT printf('%d/%d', count(*), coalesce(sum(pages), 0)) FROM page_fill JOIN file f ON f.id = file_id
           WHERE f.kind = 'regular' AND (f.path IS NULL OR f.path NOT IN (SELECT path FROM s.paths))),
        (SELECT printf('%d/%.1f/%.1f', count(*), coalesce(sum(bytes), 0) / 1e6, coalesce(sum(complete_ns - issue_ns), 0) / 1e6)
           FROM block_io WHERE op = 'read' AND pid IN (SELECT pid FROM process WHERE in_scope)),
        (SELECT printf('%d/%.1f', count(*), coalesce(sum(complete_ns - issue_ns), 0) / 1e6)
           FROM block_io WHERE op = 'read' AND bytes = 4096 AND pid IN (SELECT pid FROM process WHERE in_scope));"
}

echo "== ${cmd[*]}: learning the set (cold recorded run)"
record --cold -o "$work/learn.coldstart"
sqlite3 "$work/learn.coldstart" "SELECT path FROM file WHERE kind = 'regular' AND path IS NOT NULL" > "$work/set"
sqlite3 "$work/set.db" "CREATE TABLE paths(path TEXT PRIMARY KEY); ATTACH '$work/learn.coldstart' AS t;
    INSERT OR IGNORE INTO paths SELECT path FROM t.file WHERE kind = 'regular' AND path IS NOT NULL;"
echo "set: $(wc -l < "$work/set") files"
echo "columns: evict, span s, fills regular n/pages, directory n/pages, device-metadata n/pages," \
    "regular outside the set n/pages, block reads by the tree n/MB/ms, of them 4 KiB n/ms"
for i in $(seq 1 "$rounds"); do
    record --cold -o "$out/$program-system-$i.coldstart"
    "${cmd[@]}" > /dev/null 2>&1
    evict_files
    record -o "$out/$program-files-$i.coldstart"
    for mode in system files; do
        echo "$mode $(summary "$out/$program-$mode-$i.coldstart")"
    done
done
