#!/usr/bin/env bash
# A Debian container boot (systemd-nspawn) with its root filesystem's files on an emulated disk
# (`bench --storage`, hdd by default): cold, warm, and cold with the boot's prefetch plan replayed
# alongside and ahead, interleaved in one run, from `systemd-nspawn` to the container's
# multi-user.target (UNTIL=idle:1500 for a quiet machine instead).
#
#   bash bench/storage-boot.sh [ROUNDS]          # PROFILE=sd bash bench/storage-boot.sh 3
#   PLAN_ARGS='--order disk' BENCH_ARGS='--ioprio rt:0 --depth 16' bash bench/storage-boot.sh 5   # other plans, replays
#   PROFILE=none bash bench/storage-boot.sh 5    # on the machine's own disk, no emulated device
#   BASELINES=1 bash bench/storage-boot.sh 3     # also vmtouch and a readahead-style replay alongside
#   PROFILE=rig bash bench/storage-boot.sh 3     # the throttle rig: 100 requests/s, 60 MB/s ($RIG_PROFILE)
#
# The rootfs is made once (mmdebstrap, about 90 s) and kept in /var/cache/coldstart-tests, as the
# tests keep it. The boot is recorded once, cold, on the real disk (its files are named by their
# paths on the host, under the rootfs), planned, then benchmarked on the emulated device with the
# plan pointed at the copies. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-3}
install_packages mmdebstrap systemd-container e2fsprogs vmtouch
use_coldstart
profile=${PROFILE:-hdd}
[ "$profile" = rig ] && profile=$RIG_PROFILE
rootfs=${ROOTFS:-/var/cache/coldstart-tests/bookworm-boot}
ensure_boot_rootfs "$rootfs"
work=$(mktemp -d /var/tmp/coldstart-storage-boot.XXXXXX)
cleanup() {
    stop_boots "$rootfs"
    rm -rf "$work"
}
trap cleanup EXIT
boot=(bash "$PWD/bench/nspawn-boot.sh" "$rootfs")
until=${UNTIL:-unit:multi-user.target}
"$COLDSTART" record --cold --until "$until" --timeout 120 -o "$work/boot.coldstart" -- "${boot[@]}" >/dev/null 2>&1
# shellcheck disable=SC2086 # PLAN_ARGS and BENCH_ARGS are lists of options
"$COLDSTART" prefetch plan ${PLAN_ARGS:-} "$work/boot.coldstart" -o "$work/boot.plan"
device=(--storage "$profile" --trace "$work/boot.coldstart")
[ "$profile" = none ] && device=()
commands=(-c "${boot[*]}")
if [ "${BASELINES:-0}" = 1 ]; then
    "$COLDSTART" prefetch plan --whole-files --order first-need "$work/boot.coldstart" -o "$work/whole.plan" >/dev/null
    "$COLDSTART" prefetch show "$work/whole.plan" --paths > "$work/whole.list"
    write_baselines "$work" "$work/whole.list"
    commands=(-n boot -c "${boot[*]}" -n vmtouch -c "sh $work/vmtouch.sh ${boot[*]}"
        -n readahead -c "sh $work/readahead.sh ${boot[*]}")
fi
# shellcheck disable=SC2086
"$COLDSTART" bench --both --runs "$rounds" --no-progress "${device[@]}" ${BENCH_ARGS:-} \
    --prefetch "$work/boot.plan" --until "$until" --timeout 180 "${commands[@]}"
