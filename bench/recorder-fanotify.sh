#!/usr/bin/env bash
# What fanotify costs per open: a Python program opens 2000 distinct files once each,
# then one of them 20000 times, and times both loops itself. Each round runs it
# untraced (U), recorded by COLDSTART_A (A) and recorded by COLDSTART (B), in the
# order U A B, then B A U, and so on (files cached: no eviction). Reports the
# opener's time per open and the fanotify thread's CPU per open it saw (its note in
# the trace; system-wide, so other processes' opens count too).
# Run as root from the repository root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "$0")/.."
N=${N:-6}
install_packages python3 sqlite3 bc
use_coldstart
B=$COLDSTART
A=${COLDSTART_A:?set COLDSTART_A to the coldstart binary to compare with}
work=$(mktemp -d /var/tmp/cs-fanotify.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/files"
for i in $(seq 1 2000); do echo "$i" > "$work/files/f$i"; done
cat > "$work/opens.py" <<'EOF'
import os, sys, time
d, out = sys.argv[1], sys.argv[2]
names = [os.path.join(d, f"f{i}") for i in range(1, 2001)]
t0 = time.perf_counter()
for n in names:
    os.close(os.open(n, os.O_RDONLY))
t1 = time.perf_counter()
for _ in range(20000):
    os.close(os.open(names[0], os.O_RDONLY))
t2 = time.perf_counter()
with open(out, "w") as f:
    f.write(f"{(t1 - t0) / 2000 * 1e6:.2f} {(t2 - t1) / 20000 * 1e6:.2f}\n")
EOF
OPENS=(python3 "$work/opens.py" "$work/files")
python3 "$work/opens.py" "$work/files" /dev/null   # warm-up
run() { # LABEL ROUND
    local label=$1 i=$2 out="$work/$1$2"
    case $label in
        U) "${OPENS[@]}" "$out.us" ;;
        A) "$A" record -o "$out.coldstart" --spool-dir "$work/spool" -- "${OPENS[@]}" "$out.us" 2>/dev/null ;;
        B) "$B" record -o "$out.coldstart" --spool-dir "$work/spool" -- "${OPENS[@]}" "$out.us" 2>/dev/null ;;
    esac
    local cpu="" seen=""
    if [ "$label" != U ]; then
        cpu=$(sqlite3 "$out.coldstart" "select text from note where text like 'capture threads%'" | sed -n 's/.*fanotify \([0-9.]*\).*/\1/p')
        seen=$(sqlite3 "$out.coldstart" "select text from note where text like '%opens seen'" | sed -n 's/.* \([0-9]*\) opens seen/\1/p')
    fi
    read -r distinct repeat < "$out.us"
    echo "$label $distinct $repeat ${cpu:-0} ${seen:-0}" >> "$work/results"
    printf 'round %d %s: distinct %6.2f us/open, repeated %6.2f us/open' "$i" "$label" "$distinct" "$repeat"
    [ "$label" = U ] && { echo; return; }
    printf ', fanotify thread %6.1f ms CPU for %6d opens seen = %5.2f us/open\n' "$cpu" "$seen" \
        "$(echo "$cpu * 1000 / $seen" | bc -l)"
}
for i in $(seq 1 "$N"); do
    if [ $((i % 2)) -eq 1 ]; then order="U A B"; else order="B A U"; fi
    for label in $order; do run "$label" "$i"; done
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
for label in U A B; do
    d=$(awk -v l="$label" '$1 == l {print $2}' "$work/results" | median)
    r=$(awk -v l="$label" '$1 == l {print $3}' "$work/results" | median)
    c=$(awk -v l="$label" '$1 == l && $5 > 0 {print $4 * 1000 / $5}' "$work/results" | median)
    echo "median $label: distinct $d us/open, repeated $r us/open, fanotify CPU ${c:-n/a} us per open seen"
done
