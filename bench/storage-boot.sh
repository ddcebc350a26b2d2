#!/usr/bin/env bash
# A Debian container boot (systemd-nspawn) with its root filesystem's files on an emulated disk
# (`bench --storage`, hdd by default): cold, warm, and cold with the boot's prefetch plan replayed
# alongside and ahead, interleaved in one run, from `systemd-nspawn` to a quiet machine (idle:1500).
#
#   bash bench/storage-boot.sh [ROUNDS]          # PROFILE=sd bash bench/storage-boot.sh 3
#
# The rootfs is made once (mmdebstrap, about 90 s) and kept in /var/cache/coldstart-tests, as the
# tests keep it. The boot is recorded once, cold, on the real disk (its files are named by their
# paths on the host, under the rootfs), planned, then benchmarked on the emulated device with the
# plan pointed at the copies. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-3}
install_packages mmdebstrap systemd-container e2fsprogs
use_coldstart
rootfs=${ROOTFS:-/var/cache/coldstart-tests/bookworm-boot}
if [ ! -x "$rootfs/usr/lib/systemd/systemd" ]; then
    mkdir -p "$(dirname "$rootfs")"
    tmp=$(mktemp -d "$(dirname "$rootfs")/.rootfs.XXXXXX")
    mmdebstrap --variant=minbase --include=systemd-sysv,udev,dbus bookworm "$tmp"
    rm -rf "$rootfs"
    mv "$tmp" "$rootfs"
fi
work=$(mktemp -d /var/tmp/coldstart-storage-boot.XXXXXX)
cleanup() {
    pkill -KILL -f "systemd-nspawn -b -D $rootfs" 2>/dev/null || true
    sleep 1
    bash bench/nspawn-boot.sh --clean "$rootfs"
    rm -rf "$work"
}
trap cleanup EXIT
boot=(bash "$PWD/bench/nspawn-boot.sh" "$rootfs")
"$COLDSTART" record --cold --until idle:1500 --timeout 120 -o "$work/boot.coldstart" -- "${boot[@]}" >/dev/null 2>&1
"$COLDSTART" prefetch plan "$work/boot.coldstart" -o "$work/boot.plan"
"$COLDSTART" bench --both --runs "$rounds" --no-progress --storage "${PROFILE:-hdd}" \
    --trace "$work/boot.coldstart" --prefetch "$work/boot.plan" --until idle:1500 --timeout 180 -- "${boot[@]}"
