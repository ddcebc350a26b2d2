#!/usr/bin/env bash
# Prefetch on the machine's own (fast) disk, for the two programs of shared/KERNEL-NOTES.md:
#   /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas'
#   soffice --headless --convert-to pdf doc.txt
# For each: record a cold start, make plans, then two interleaved `coldstart bench` sessions:
#   1. targets: cold without prefetch, cold with the default plan alongside, cold with it
#      ahead (replayed first, not timed), warm (`bench --both --prefetch PLAN`);
#   2. orders and baselines, all cold and alongside, each wrapped in `coldstart run` so the
#      wrapper is the same for all: no prefetch; first-need order with the default 4 replay
#      threads alongside and with 16; disk and blend order; whole
#      files in open order read by vmtouch -t (vmtouch style); whole files in disk order
#      with WILLNEED from one thread (ureadahead style).
# Needs root (drop_caches). Installs its Debian packages; builds a release coldstart unless
# COLDSTART=path is given. Results (JSON, text, plans) go to $OUT (default /tmp/coldstart-prefetch).
# Usage: bash bench/prefetch-fast-disk.sh [RUNS] [python|soffice ...]
#   (TARGETS_ONLY=1 runs session 1 only)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
runs=${1:-10}
shift || true
programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(python soffice)
out=${OUT:-/tmp/coldstart-prefetch}
mkdir -p "$out"

install_packages python3-scipy python3-matplotlib python3-pandas libreoffice-writer-nogui vmtouch
use_coldstart
C=$COLDSTART

work=$(mktemp -d /tmp/coldstart-prefetch-work.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
seq 1 2000 | sed 's/^/A line of text for the conversion benchmark, number /' > "$work/doc.txt"

command_of() {
    case "$1" in
        python) printf '%s\n' /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas' ;;
        soffice) printf '%s\n' soffice "-env:UserInstallation=file://$work/profile" --headless --convert-to pdf \
            --outdir "$work" "$work/doc.txt" ;;
    esac
}

for prog in "${programs[@]}"; do
    mapfile -t cmd < <(command_of "$prog")
    line=$(printf '%q ' "${cmd[@]}")
    "${cmd[@]}" >/dev/null 2>&1 || true   # a first start creates LibreOffice's profile
    echo "load average at the start of $prog: $(cat /proc/loadavg)"
    echo "== $prog: recording a cold start"
    "$C" record --cold --as-root -o "$out/$prog.coldstart.tmp" -- "${cmd[@]}" >/dev/null 2>"$out/$prog.record.txt"
    mv "$out/$prog.coldstart.tmp" "$out/$prog.coldstart"
    "$C" prefetch plan "$out/$prog.coldstart" -o "$out/$prog.plan" --force 2>&1 | tee "$out/$prog.plan.log"
    "$C" prefetch plan "$out/$prog.coldstart" -o "$out/$prog-disk.plan" --order disk --force 2>/dev/null
    "$C" prefetch plan "$out/$prog.coldstart" -o "$out/$prog-blend.plan" --order blend --force 2>/dev/null
    "$C" prefetch plan "$out/$prog.coldstart" -o "$out/$prog-whole-open.plan" --whole-files --force 2>/dev/null
    "$C" prefetch plan "$out/$prog.coldstart" -o "$out/$prog-whole-disk.plan" --whole-files --order disk --force 2>/dev/null
    "$C" prefetch show "$out/$prog.plan" > "$out/$prog.plan.txt"
    "$C" prefetch show "$out/$prog-whole-open.plan" --paths > "$out/$prog-open-order.list"
    head -12 "$out/$prog.plan.txt"
    # vmtouch alongside the program, stopped when the program ends (never left running into the next run).
    printf 'vmtouch -tq -b %q &\nv=$!\ns=0\n"$@" || s=$?\nkill $v 2>/dev/null\nwait $v 2>/dev/null\nexit $s\n' \
        "$out/$prog-open-order.list" > "$work/$prog-vmtouch.sh"

    echo "== $prog: cold, prefetch alongside, prefetch ahead, warm; $runs runs each, interleaved"
    "$C" bench --both --evict system --runs "$runs" --no-progress --as-root \
        --prefetch "$out/$prog.plan" --export-json "$out/$prog-targets.json" -- "${cmd[@]}" \
        | tee "$out/$prog-targets.txt"

    if [ -n "${TARGETS_ONLY:-}" ]; then
        echo "load average at the end of $prog: $(cat /proc/loadavg)"
        continue
    fi
    echo "== $prog: orders and baselines, all alongside through coldstart run; $runs runs each, interleaved"
    "$C" bench --evict system --runs "$runs" --no-progress --as-root --export-json "$out/$prog-orders.json" \
        -n "no prefetch" -c "$C run -q -- $line" \
        -n "first-need" -c "$C run -q --prefetch $out/$prog.plan -- $line" \
        -n "first-need, 16 threads" -c "$C run -q --prefetch $out/$prog.plan --depth 16 -- $line" \
        -n "disk" -c "$C run -q --prefetch $out/$prog-disk.plan -- $line" \
        -n "blend" -c "$C run -q --prefetch $out/$prog-blend.plan -- $line" \
        -n "vmtouch -t, whole files, open order" \
        -c "sh $work/$prog-vmtouch.sh $line" \
        -n "WILLNEED 1 thread, whole files, disk order" \
        -c "$C run -q --prefetch $out/$prog-whole-disk.plan --depth 1 --method willneed -- $line" \
        | tee "$out/$prog-orders.txt"
    echo "load average at the end of $prog: $(cat /proc/loadavg)"
done
