#!/usr/bin/env bash
# A LibreOffice conversion started from the same fresh profile in every run (--prepare copies
# a seed profile before each run), cold and warm, with two prefetch plans made from one
# recording of that start, `first` (first-need order) and `disk` (disk order), each replayed
# alongside and ahead: one interleaved `coldstart bench`, with ratios paired by round against
# cold, warm and each other.
#   soffice -env:UserInstallation=file://$OUT/work/profile --headless --convert-to pdf doc.txt
# Needs root (drop_caches, the recording). The seed (the profile as LibreOffice leaves it after
# its first start), the recording and the plans are made once in $OUT (default
# /tmp/coldstart-fresh-plans) and reused; SETUP_ONLY=1 stops after them, so that the timed
# part can run alone (on a shared machine, under the benchmark lock).
# Usage: bash bench/bench-fresh-profile-plans.sh [RUNS]   (COLDSTART=path uses that binary instead of building)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
runs=${1:-8}
out=${OUT:-/tmp/coldstart-fresh-plans}
work=$out/work
mkdir -p "$work/out"

install_packages libreoffice-writer-nogui
use_coldstart
coldstart=$COLDSTART

profile=$work/profile
seed=$work/profile.seed
prepare="rm -rf $profile && cp -a $seed $profile"
app=(soffice "-env:UserInstallation=file://$profile" --headless --convert-to pdf --outdir "$work/out" "$work/doc.txt")

if [ ! -f "$out/disk.plan" ]; then
    seq 1 2000 | sed 's/^/A line of text for the conversion benchmark, number /' > "$work/doc.txt"
    rm -rf "$seed" "$profile"
    "${app[@]}" > /dev/null 2>&1          # LibreOffice's first start makes the profile: the seed
    mv "$profile" "$seed"
    sh -c "$prepare"
    "$coldstart" record --cold -o "$out/lo.coldstart" -- "${app[@]}" > "$out/record.txt"
    "$coldstart" prefetch plan "$out/lo.coldstart" --order first-need -o "$out/first.plan"
    "$coldstart" prefetch plan "$out/lo.coldstart" --order disk -o "$out/disk.plan"
fi
[ "${SETUP_ONLY:-}" = 1 ] && exit 0

echo "load average (start): $(cat /proc/loadavg)" | tee "$out/loadavg.txt"
"$coldstart" bench --both --evict system --runs "$runs" --no-progress \
    --prepare "$prepare" --prefetch "first=$out/first.plan" --prefetch "disk=$out/disk.plan" \
    --export-json "$out/bench.json" --export-markdown "$out/bench.md" \
    -- "${app[@]}" | tee "$out/bench.txt"
echo "load average (end): $(cat /proc/loadavg)" | tee -a "$out/loadavg.txt"
