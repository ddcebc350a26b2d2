#!/usr/bin/env bash
# `--evict files` against `--evict system` where `files` may evict filesystem metadata:
# the two programs of bench/bench-cold-starts.sh started from their copies on the
# loop-mounted ext4 image of bench/slow-disk-rig.sh, here NOT throttled (RIG_IOPS and
# RIG_BPS set far above what the VM's disk does), so the image reads at the speed of
# the VM's disk under it, and root may open its loop device (the VM's own disk it may
# not open). One `coldstart bench --both --evict system,files --runs RUNS` per program,
# interleaved cold/system, cold/files, warm; the file set learned by a first recorded run.
#   python:  PYTHONHOME=<image>/pyhome /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
#            (standard library and dist-packages both on the image)
#   soffice: <image>/libreoffice/program/soffice --headless --convert-to pdf doc.txt
# Results (summary, JSON, Markdown, load averages) in $OUT (default /tmp/coldstart-bench-rig).
# Usage (as root): bash bench/bench-evict-rig.sh [RUNS] [python|soffice|both]
#   (COLDSTART=path uses that binary instead of building one)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
runs=${1:-10}
which=${2:-both}
if [ -z "${RIG_MNT:-}" ]; then
    install_packages python3-scipy python3-matplotlib python3-pandas libreoffice-writer-nogui
    use_coldstart
    export RIG_IOPS=${RIG_IOPS:-1000000} RIG_BPS=${RIG_BPS:-100000000000}
    exec bash bench/slow-disk-rig.sh run -- bash "$0" "$runs" "$which"
fi

# Inside the rig from here on.
out=${OUT:-/tmp/coldstart-bench-rig}
mkdir -p "$out"
work=$(mktemp -d /tmp/coldstart-rig-work.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
loadavg() { echo "load average ($1): $(cat /proc/loadavg)" | tee -a "$out/loadavg.txt"; }
: > "$out/loadavg.txt"
echo "rig: $RIG_LOOP ($RIG_DEV) on $RIG_MNT, throttle $RIG_IOPS requests/s, $RIG_BPS bytes/s" | tee "$out/rig.txt"

if [ "$which" = python ] || [ "$which" = both ]; then
    echo "== python3 scientific import from the image, $runs runs per configuration"
    loadavg "python, start"
    "$COLDSTART" bench --both --evict system,files --runs "$runs" --no-progress \
        --export-json "$out/python.json" --export-markdown "$out/python.md" \
        -- env "PYTHONHOME=$RIG_PYTHONHOME" /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas' \
        | tee "$out/python.txt"
    loadavg "python, end"
fi

if [ "$which" = soffice ] || [ "$which" = both ]; then
    seq 1 2000 | sed 's/^/A line of text for the conversion benchmark, number /' > "$work/doc.txt"
    soffice=("$RIG_MNT/libreoffice/program/soffice" "-env:UserInstallation=file://$work/profile" --headless
        --convert-to pdf --outdir "$work" "$work/doc.txt")
    "${soffice[@]}" >/dev/null 2>&1 || true   # creates the profile
    echo "== LibreOffice conversion from the image, $runs runs per configuration"
    loadavg "soffice, start"
    "$COLDSTART" bench --both --evict system,files --runs "$runs" --no-progress \
        --export-json "$out/soffice.json" --export-markdown "$out/soffice.md" \
        -- "${soffice[@]}" | tee "$out/soffice.txt"
    loadavg "soffice, end"
fi
