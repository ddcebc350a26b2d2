#!/usr/bin/env bash
# The slow-disk rig of shared/KERNEL-NOTES.md: a program's files on a loop-mounted
# ext4 image whose reads are throttled like a laptop hard disk.
#
#   - a 3 GB ext4 image in $RIG_DIR (default /var/tmp/coldstart-rig), attached with
#     `losetup --direct-io=on` (so the image's own pages never sit in the page cache);
#   - a copy of /usr/lib/python3/dist-packages on it (byte-compiled, so every run
#     reads the same .pyc files), a copy of the standard library under pyhome/ (for
#     PYTHONHOME, which then finds dist-packages on the image too), and a copy of
#     /usr/lib/libreoffice when installed;
#   - a v1 blkio cgroup, coldstart-rig, limiting reads of the loop device to
#     $RIG_IOPS (100) requests and $RIG_BPS (60 MB) per second. The throttle counts every
#     bio, so each request costs 10 ms whatever its size.
#
# Usage (as root):
#   bash bench/slow-disk-rig.sh run -- CMD ARGS...
#       sets the rig up, runs CMD inside the throttled cgroup (everything CMD starts is
#       in it: the program and any prefetcher alike), and tears the rig down afterwards,
#       whatever happens (failure, Ctrl-C, SIGTERM). CMD sees RIG_MNT (the mount point),
#       RIG_LOOP (/dev/loopN), RIG_DEV (major:minor), RIG_CGROUP, RIG_PYTHONPATH,
#       RIG_PYTHONHOME (python then reads nothing of its own from the VM's disk but
#       the interpreter and its shared libraries).
#   bash bench/slow-disk-rig.sh down      # tear down (also what a killed run left behind)
#   bash bench/slow-disk-rig.sh purge     # down, and delete the image
# `run` first cleans up whatever a killed earlier run left (processes in the cgroup it
# started, the mount, loop devices on the image, the cgroup). The image is kept between
# runs (rebuilt when the packages copied change); `purge` deletes it.
set -euo pipefail

RIG_DIR=${RIG_DIR:-/var/tmp/coldstart-rig}
RIG_IOPS=${RIG_IOPS:-100}
RIG_BPS=${RIG_BPS:-60000000}
image=$RIG_DIR/rig.img
mnt=$RIG_DIR/mnt
cgroup=/sys/fs/cgroup/blkio/coldstart-rig
blkio_root=/sys/fs/cgroup/blkio
# The blkio cgroup we started in, to return to before removing the rig's.
home_cgroup=$blkio_root$(awk -F: '$2 == "blkio" { print $3 }' /proc/self/cgroup)
[ -d "$home_cgroup" ] && [ "$home_cgroup" != "$cgroup" ] || home_cgroup=$blkio_root

log() { echo "slow-disk-rig: $*" >&2; }

down() {
    # Processes left in the rig's cgroup were started by the rig (a killed run): end them.
    if [ -d "$cgroup" ]; then
        local pids
        echo $$ > "$home_cgroup/cgroup.procs" 2>/dev/null || true
        pids=$(cat "$cgroup/cgroup.procs" 2>/dev/null || true)
        if [ -n "$pids" ]; then
            log "ending processes a previous run left in the cgroup: $pids"
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null || true
            sleep 1
            # shellcheck disable=SC2086
            kill -KILL $pids 2>/dev/null || true
        fi
    fi
    if mountpoint -q "$mnt" 2>/dev/null; then
        umount "$mnt" 2>/dev/null || { sleep 1; umount "$mnt" 2>/dev/null; } || umount -l "$mnt" || true
    fi
    if [ -f "$image" ]; then
        for loop in $(losetup -j "$image" -O NAME -n 2>/dev/null); do
            losetup -d "$loop" 2>/dev/null || true
        done
    fi
    if [ -d "$cgroup" ]; then
        for _ in 1 2 3 4 5; do rmdir "$cgroup" 2>/dev/null && break; sleep 0.5; done
    fi
    [ ! -d "$cgroup" ] || log "WARNING: could not remove $cgroup"
    if losetup -j "$image" -n 2>/dev/null | grep -q .; then log "WARNING: a loop device is still attached to $image"; fi
}

# What the image holds, so it is rebuilt when the copied packages change.
stamp() {
    echo "image recipe 3"
    dpkg-query -W -f='${Package} ${Version}\n' python3-scipy python3-matplotlib python3-pandas python3-numpy \
        libreoffice-core libreoffice-core-nogui 'libpython3.*-stdlib' 2>/dev/null || true
}

build_image() {
    mkdir -p "$RIG_DIR" "$mnt"
    if [ -f "$image" ] && [ -f "$RIG_DIR/stamp" ] && [ "$(stamp)" = "$(cat "$RIG_DIR/stamp")" ]; then
        return
    fi
    log "building $image (3 GB ext4 with the copies; a few minutes)"
    rm -f "$image" "$RIG_DIR/stamp"
    truncate -s 3G "$image"
    mkfs.ext4 -q -F -L coldstart-rig "$image"
    mount -o loop "$image" "$mnt"
    cp -a /usr/lib/python3/dist-packages "$mnt/dist-packages"
    # Byte-compile the copy: its .pyc files are what every run reads.
    python3 -m compileall -q -j 2 "$mnt/dist-packages" >/dev/null 2>&1 || true
    local stdlib
    stdlib=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
    mkdir -p "$mnt/pyhome/lib/python3"
    cp -a "$stdlib" "$mnt/pyhome/lib/"
    ln -s ../../../dist-packages "$mnt/pyhome/lib/python3/dist-packages"
    /usr/bin/python3 -m compileall -q -j 2 "$mnt/pyhome/lib" >/dev/null 2>&1 || true
    if [ -d /usr/lib/libreoffice ]; then
        cp -a /usr/lib/libreoffice "$mnt/libreoffice"
        # Make the copy self-contained: Debian's fundamentalrc names /usr/lib/libreoffice
        # as the brand directory (upstream's is relative to the program), and a few
        # relative symlinks point outside the copy; without this the copy mixes its own
        # libraries with the original's data and fails (uno DeploymentException).
        sed -i 's|^BRAND_BASE_DIR=.*|BRAND_BASE_DIR=${ORIGIN}/..|' "$mnt/libreoffice/program/fundamentalrc"
        find "$mnt/libreoffice" -xtype l | while read -r link; do
            cp --remove-destination "$(readlink -f "/usr/lib/libreoffice/${link#"$mnt/libreoffice/"}")" "$link"
        done
    fi
    sync
    umount "$mnt"
    stamp > "$RIG_DIR/stamp"
}

up() {
    down
    build_image
    loop=$(losetup -f --show --direct-io=on "$image")
    mount -o noatime "$loop" "$mnt"
    dev=$(lsblk -dn -o MAJ:MIN "$loop" | tr -d ' ')
    mkdir "$cgroup"
    echo "$dev $RIG_IOPS" > "$cgroup/blkio.throttle.read_iops_device"
    echo "$dev $RIG_BPS" > "$cgroup/blkio.throttle.read_bps_device"
    log "up: $loop ($dev) on $mnt, reads limited to $RIG_IOPS requests/s and $RIG_BPS bytes/s in $cgroup"
}

[ "$(id -u)" = 0 ] || { log "needs root (losetup, mount, cgroups)"; exit 2; }
action=${1:-}
shift || true
case "$action" in
    down) down ;;
    purge) down; rm -rf "$RIG_DIR" ;;
    run)
        [ "${1:-}" = "--" ] && shift
        [ $# -gt 0 ] || { log "usage: $0 run -- CMD ARGS..."; exit 2; }
        trap 'down' EXIT
        trap 'exit 130' INT TERM
        up
        echo $$ > "$cgroup/cgroup.procs"
        status=0
        RIG_MNT=$mnt RIG_LOOP=$loop RIG_DEV=$dev RIG_CGROUP=$cgroup RIG_PYTHONPATH=$mnt/dist-packages RIG_PYTHONHOME=$mnt/pyhome "$@" || status=$?
        exit $status
        ;;
    *)
        sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
