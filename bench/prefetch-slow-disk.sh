#!/usr/bin/env bash
# Prefetch on a simulated slow disk (bench/slow-disk-rig.sh: the program's files on a
# loop-mounted ext4 image throttled to 100 read requests/s and 60 MB/s with v1 blkio).
#
# The program: python3 importing scipy.stats, matplotlib.pyplot and pandas from the copy
# of dist-packages on the image (PYTHONPATH); with `soffice` as argument, LibreOffice
# converting a 2000-line text to PDF, started from its copy on the image. The whole benchmark runs inside the rig's throttled
# cgroup: the program, coldstart's replay threads (they run in `coldstart run`, the
# program's parent) and the baselines' prefetchers share the same 100 requests/s, as
# they would share a real disk.
#
# Steps: record a cold start on the rig, make the plans, then ROUNDS interleaved rounds of
#   none        the cold start alone (through `coldstart run`, like all the others)
#   alongside   the default plan replayed alongside (`coldstart run --prefetch`)
#   deep16      the default plan alongside with 16 replay threads instead of the default 4
#               alongside (the comparison behind the default `--depth`)
#   disk, blend the same pages in disk order and in the blend order, alongside (the
#               comparison behind the default `--order`)
#   ahead       the default plan replayed first, then the start (time of the start only;
#               the replay time is reported apart)
#   vmtouch     whole files in open order, `vmtouch -t` started alongside (vmtouch style)
#   ureadahead  whole files in disk order, WILLNEED from one thread, alongside (ureadahead style)
#   warm        no eviction
# each cold run after `sync; drop_caches` and a 1 s pause. Results: one JSON per run
# (coldstart run --report-json) and a summary (medians, ratios with bootstrap 95% CIs)
# in $OUT (default /tmp/coldstart-prefetch-rig).
# Usage (as root): bash bench/prefetch-slow-disk.sh [ROUNDS] [python|soffice]
#   (COLDSTART=path uses that binary instead of building one; extra plan options for the
#    default plan in PLAN_OPTS, replay options in REPLAY_OPTS, e.g. REPLAY_OPTS='--depth 4';
#    CONFIGS='none alongside warm' runs only those)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
rounds=${1:-5}
prog=${2:-python}
if [ -z "${RIG_MNT:-}" ]; then
    install_packages python3-scipy python3-matplotlib python3-pandas libreoffice-writer-nogui vmtouch
    use_coldstart
    use_bench_stats
    exec bash bench/slow-disk-rig.sh run -- bash "$0" "$rounds" "$prog"
fi

# Inside the rig from here on.
C=$COLDSTART
out=${OUT:-/tmp/coldstart-prefetch-rig}
mkdir -p "$out"
work=$(mktemp -d /tmp/coldstart-rig-work.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
case "$prog" in
    python) cmd=(env "PYTHONPATH=$RIG_PYTHONPATH" /usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas') ;;
    soffice)
        seq 1 2000 | sed 's/^/A line of text for the conversion benchmark, number /' > "$work/doc.txt"
        cmd=("$RIG_MNT/libreoffice/program/soffice" "-env:UserInstallation=file://$work/profile" --headless
            --convert-to pdf --outdir "$work" "$work/doc.txt")
        "${cmd[@]}" >/dev/null 2>&1 || true   # creates the profile
        ;;
    *) echo "unknown program $prog" >&2; exit 2 ;;
esac


echo "load average at the start: $(cat /proc/loadavg)"
echo "== recording a cold start of $prog on the rig ($RIG_LOOP, $RIG_DEV)"
"$C" record --cold --as-root -o "$out/$prog-rig.coldstart.tmp" -- "${cmd[@]}" >/dev/null 2>"$out/$prog-rig.record.txt"
mv "$out/$prog-rig.coldstart.tmp" "$out/$prog-rig.coldstart"
tail -8 "$out/$prog-rig.record.txt"
# shellcheck disable=SC2086
"$C" prefetch plan "$out/$prog-rig.coldstart" -o "$out/$prog-rig.plan" --force ${PLAN_OPTS:-}
# shellcheck disable=SC2086
"$C" prefetch plan "$out/$prog-rig.coldstart" -o "$out/$prog-rig-disk.plan" --order disk --force ${PLAN_OPTS:-} 2>/dev/null
# shellcheck disable=SC2086
"$C" prefetch plan "$out/$prog-rig.coldstart" -o "$out/$prog-rig-blend.plan" --order blend --force ${PLAN_OPTS:-} 2>/dev/null
"$C" prefetch plan "$out/$prog-rig.coldstart" -o "$out/$prog-rig-whole-open.plan" --whole-files --force 2>/dev/null
"$C" prefetch plan "$out/$prog-rig.coldstart" -o "$out/$prog-rig-whole-disk.plan" --whole-files --order disk --force 2>/dev/null
"$C" prefetch show "$out/$prog-rig.plan" > "$out/$prog-rig.plan.txt"
head -12 "$out/$prog-rig.plan.txt"
"$C" prefetch show "$out/$prog-rig-whole-open.plan" --paths > "$out/$prog-rig-open-order.list"
# vmtouch alongside the program, stopped when the program ends (never left running into the next run).
printf 'vmtouch -tq -b %q &\nv=$!\ns=0\n"$@" || s=$?\nkill $v 2>/dev/null\nwait $v 2>/dev/null\nexit $s\n' \
    "$out/$prog-rig-open-order.list" > "$work/vmtouch.sh"

run() { # NAME [coldstart run options...]
    local name=$1 r=$2
    shift 2
    "$C" run -q --as-root --report-json "$out/$prog-rig-$name-$r.json" "$@" -- "${cmd[@]}" >/dev/null 2>&1 || true
}

read -r -a configs <<< "${CONFIGS:-none alongside deep16 disk blend ahead vmtouch ureadahead warm}"
rm -f "$out/$prog"-rig-*-[0-9]*.json   # runs of an earlier benchmark would enter the summary
for r in $(seq 1 "$rounds"); do
    for name in "${configs[@]}"; do
        [ "$name" = warm ] || evict
        # shellcheck disable=SC2086
        case "$name" in
            none) run none "$r" ;;
            alongside) run alongside "$r" --prefetch "$out/$prog-rig.plan" ${REPLAY_OPTS:-} ;;
            deep16) run deep16 "$r" --prefetch "$out/$prog-rig.plan" --depth 16 ;;
            disk | blend) run "$name" "$r" --prefetch "$out/$prog-rig-$name.plan" ${REPLAY_OPTS:-} ;;
            ahead) run ahead "$r" --prefetch "$out/$prog-rig.plan" --ahead ${REPLAY_OPTS:-} ;;
            vmtouch) "$C" run -q --as-root --report-json "$out/$prog-rig-vmtouch-$r.json" -- sh "$work/vmtouch.sh" \
                "${cmd[@]}" >/dev/null 2>&1 || true ;;
            ureadahead) run ureadahead "$r" --prefetch "$out/$prog-rig-whole-disk.plan" --depth 1 --method willneed ;;
            warm) run warm "$r" ;;
        esac
        printf '%s round %s: %s\n' "$name" "$r" \
            "$(grep -o '"time_s": [0-9.]*' "$out/$prog-rig-$name-$r.json" 2>/dev/null || echo failed)"
    done
done
grep "$RIG_DEV" "$RIG_CGROUP/blkio.throttle.io_serviced" | head -1
echo "load average at the end: $(cat /proc/loadavg)"

python3 - "$out" "$prog" "${configs[@]}" <<'EOF' | tee "$out/$prog-rig-summary.txt"
import glob, json, os, statistics, subprocess, sys
out, prog, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {c: [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{prog}-rig-{c}-*.json"))] for c in configs}
times = {c: [r["time_s"] for r in rs if r.get("met")] for c, rs in runs.items()}
def compare(kind, a, b):  # ESTIMATE LOW HIGH from crates/bench/src/stats.rs
    args = [os.environ["BENCH_STATS"], kind, ",".join(map(str, a)), ",".join(map(str, b))]
    return [float(v) for v in subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()]
print(f"{'config':<12} {'runs':>4} {'median s':>9} {'min':>7} {'max':>7}  {'vs none [95% CI]':>20}  {'vs warm [95% CI]':>20}")
for c in configs:
    t = times[c]
    if not t:
        print(f"{c:<12} no successful run"); continue
    line = f"{c:<12} {len(t):>4} {statistics.median(t):>9.2f} {min(t):>7.2f} {max(t):>7.2f}"
    for base in ("none", "warm"):
        if times.get(base) and c != base:
            ratio, lo, hi = compare("median-ratio", t, times[base])
            line += f"  {ratio:>5.2f}× [{lo:.2f} … {hi:.2f}]"
        else:
            line += f"  {'–':>20}"
    replays = [r["replay"] for r in runs[c] if r.get("replay")]
    if replays:
        line += f"  replay {statistics.median(r['elapsed_s'] for r in replays):.2f} s"
        line += f", {statistics.median(r['fetched']['bytes'] for r in replays) / 1e6:.1f} MB fetched"
    print(line)
EOF
