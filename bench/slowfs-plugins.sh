#!/usr/bin/env bash
# The GIMP-over-NFS case: a program scans a tree of plug-ins, brushes and patterns the
# way GIMP does at its start (walk each directory, stat and access-check every entry,
# open and read the head of each file), the tree served by `coldstart storage slowfs`
# (DELAY per request, default 2ms, no attribute or name caching: NFS mounted with noac).
# Records the scan, with a mark after each phase, and prints the report, the system-call
# totals and the doctor's findings; the trace stays in OUT (default ./slowfs-plugins).
# Run as root from the repository's root. PLUGINS (default 300) sets the tree's size.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
PLUGINS=${PLUGINS:-300}
DELAY=${DELAY:-2ms}
OUT=${OUT:-$PWD/slowfs-plugins}
use_coldstart
mkdir -p "$OUT"
work=$(mktemp -d /var/tmp/cs-slowfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src/lib/gimp/2.0/plug-ins" "$src/share/gimp/2.0/brushes" "$src/share/gimp/2.0/patterns" "$work/mnt"
for i in $(seq 1 "$PLUGINS"); do
    d=$src/lib/gimp/2.0/plug-ins/plugin-$i
    mkdir "$d"
    head -c 16384 /dev/urandom > "$d/plugin-$i"
    chmod +x "$d/plugin-$i"
    printf '(plug-in-def "plugin-%s")\n' "$i" > "$d/plugin-$i.rc"
done
for i in $(seq 1 $((PLUGINS * 2 / 3))); do head -c 4096 /dev/urandom > "$src/share/gimp/2.0/brushes/brush-$i.gbr"; done
for i in $(seq 1 $((PLUGINS / 3))); do head -c 8192 /dev/urandom > "$src/share/gimp/2.0/patterns/pattern-$i.pat"; done
cat > "$work/scan.py" <<'PY'
import os, sys, time
root = sys.argv[1]
marks = os.environ.get("COLDSTART_MARKS")
def mark(name):
    if marks:
        with open(marks, "a") as f:
            f.write(f"{time.clock_gettime(time.CLOCK_BOOTTIME):.6f} {name}\n")
for phase, sub in [("plug-ins", "lib/gimp/2.0/plug-ins"), ("brushes", "share/gimp/2.0/brushes"),
                   ("patterns", "share/gimp/2.0/patterns")]:
    for top, dirs, files in os.walk(os.path.join(root, sub)):
        for name in sorted(files):
            path = os.path.join(top, name)
            os.stat(path)
            os.access(path, os.X_OK)
            with open(path, "rb") as f:
                f.read(4096)
    mark(phase)
PY
# Page cache and dentries cold for the tree's source too (the daemon reads it).
evict
"$COLDSTART" storage slowfs "$src" --at "$work/mnt" --delay "$DELAY" -- \
    "$COLDSTART" record --syscalls -o "$OUT/scan.coldstart" --spool-dir "$work/spool" -- python3 "$work/scan.py" "$work/mnt"
"$COLDSTART" report "$OUT/scan.coldstart" > "$OUT/report.txt"
"$COLDSTART" syscalls --summary "$OUT/scan.coldstart" > "$OUT/syscalls.txt"
"$COLDSTART" doctor "$OUT/scan.coldstart" > "$OUT/doctor.txt"
sed -n '/Where the time to ready went/,/^$/p;/Critical path/,/By process/p;/^Phases/,/^$/p' "$OUT/report.txt"
cat "$OUT/syscalls.txt"
cat "$OUT/doctor.txt"
