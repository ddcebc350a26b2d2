#!/usr/bin/env bash
# A MATE login under Xvfb on an emulated disk (`bench --storage`, hdd by default), from launch
# to a visible panel: cold, warm, and cold with the login's plan replayed alongside and ahead,
# interleaved in one run; with BASELINES=1, also cold with the classic prefetchers alongside:
# vmtouch of the files the login read and a readahead/ureadahead-style replay of those whole
# files, both in the recorded order (bench/lib.sh's write_baselines).
#
#   bash bench/storage-mate.sh [ROUNDS]          # PROFILE=sd bash bench/storage-mate.sh 3
#   PLAN_ARGS='--order disk' BENCH_ARGS='--ioprio rt:0 --depth 16' bash bench/storage-mate.sh 2
#   BASELINES=1 bash bench/storage-mate.sh 3
#   PROFILE=rig bash bench/storage-mate.sh 2     # the throttle rig: 100 requests/s, 60 MB/s ($RIG_PROFILE)
#   PROFILE=none bash bench/storage-mate.sh 3    # on the machine's own disk, no emulated device
#
# Records the login once (cold, on the real disk, until the panel's window), plans it, then
# benchmarks it on the emulated device with the plan pointed at the copies. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-2}
install_packages mate-session-manager mate-panel marco caja mate-settings-daemon dbus-x11 xvfb x11-utils e2fsprogs vmtouch
use_coldstart
profile=${PROFILE:-hdd}
[ "$profile" = rig ] && profile=$RIG_PROFILE
work=$(mktemp -d /var/tmp/coldstart-storage-mate.XXXXXX)
Xvfb :74 -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
cleanup() {
    pkill -KILL -f 'dbus-run-session mate-session' 2>/dev/null || true
    kill "$xvfb" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
sleep 1
session() {
    local home runtime
    home=$(mktemp -d "$work/home.XXXXXX")
    runtime=$(mktemp -d "$work/run.XXXXXX")
    chmod 700 "$runtime"
    HOME=$home XDG_RUNTIME_DIR=$runtime DISPLAY=:74 "$@"
}
login=(setsid dbus-run-session mate-session)
session "$COLDSTART" record --cold --also Xvfb --until window:mate-panel --timeout 120 \
    -o "$work/mate.coldstart" -- "${login[@]}" >/dev/null 2>&1
# shellcheck disable=SC2086 # PLAN_ARGS and BENCH_ARGS are lists of options
"$COLDSTART" prefetch plan ${PLAN_ARGS:-} "$work/mate.coldstart" -o "$work/mate.plan"
commands=(-c "${login[*]}")
if [ "${BASELINES:-0}" = 1 ]; then
    "$COLDSTART" prefetch plan --whole-files --order first-need "$work/mate.coldstart" -o "$work/whole.plan" >/dev/null
    "$COLDSTART" prefetch show "$work/whole.plan" --paths > "$work/whole.list"
    write_baselines "$work" "$work/whole.list"
    commands=(-n login -c "${login[*]}" -n vmtouch -c "sh $work/vmtouch.sh ${login[*]}"
        -n readahead -c "sh $work/readahead.sh ${login[*]}")
fi
device=(--storage "$profile" --trace "$work/mate.coldstart")
[ "$profile" = none ] && device=()
# shellcheck disable=SC2086
session "$COLDSTART" bench --both --runs "$rounds" --no-progress "${device[@]}" ${BENCH_ARGS:-} \
    --prefetch "$work/mate.plan" --until window:mate-panel --timeout 120 \
    "${commands[@]}" 2>&1 | grep -v -E '^(ALSA|\(|\[|$)|WARNING|CRITICAL|SpiRegistry'
