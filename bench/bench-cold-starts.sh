#!/usr/bin/env bash
# Cold (--evict system and --evict files) and warm starts of the two programs of
# shared/KERNEL-NOTES.md, interleaved in one `coldstart bench` run each:
#   /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
#   soffice --headless --convert-to pdf doc.txt
# Needs root (drop_caches). Installs its Debian packages, builds coldstart, writes
# JSON and Markdown next to the summary in $OUT (default /tmp/coldstart-bench), and the
# load average before and after each program (shared machine: note it next to the figures).
# bench/bench-evict-diff.sh shows what `system` makes the start read that `files` does not.
# Usage: bash bench/bench-cold-starts.sh [RUNS]   (COLDSTART=path uses that binary instead of building)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
runs=${1:-10}
out=${OUT:-/tmp/coldstart-bench}
mkdir -p "$out"

install_packages python3-scipy python3-matplotlib python3-pandas libreoffice-writer-nogui strace
use_coldstart
coldstart=$COLDSTART

loadavg() { echo "load average ($1): $(cat /proc/loadavg)" | tee -a "$out/loadavg.txt"; }
: > "$out/loadavg.txt"

echo "== python3 scientific import, $runs runs per configuration"
loadavg "python, start"
"$coldstart" bench --both --evict system,files --runs "$runs" --no-progress \
    --export-json "$out/python.json" --export-markdown "$out/python.md" \
    -- /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas' | tee "$out/python.txt"
loadavg "python, end"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
seq 1 2000 | sed 's/^/A line of text for the conversion benchmark, number /' > "$work/doc.txt"
echo "== LibreOffice conversion, $runs runs per configuration"
loadavg "soffice, start"
"$coldstart" bench --both --evict system,files --runs "$runs" --no-progress \
    --export-json "$out/soffice.json" --export-markdown "$out/soffice.md" \
    -- soffice "-env:UserInstallation=file://$work/profile" --headless --convert-to pdf --outdir "$work" "$work/doc.txt" \
    | tee "$out/soffice.txt"
loadavg "soffice, end"
