# Shared by the benchmark scripts (`source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`) and
# tests/fixtures/record.sh.

# install_packages PKG...: installs the Debian packages that are missing (apt-get update once).
install_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
}

# use_coldstart: sets and exports COLDSTART, the coldstart the benchmark runs: as given, or a
# release build of this tree (built here; the caller is at the repository's root).
use_coldstart() {
    if [ -z "${COLDSTART:-}" ]; then
        cargo build --release -q -p coldstart
        COLDSTART=$PWD/target/release/coldstart
    fi
    export COLDSTART
}

# use_bench_stats: sets and exports BENCH_STATS, the comparisons of crates/bench/src/stats.rs
# (coldstart-bench-stats: difference or ratio of medians, paired ratio) for the scripts that
# compare samples they measured themselves: as given, or a release build of this tree.
use_bench_stats() {
    if [ -z "${BENCH_STATS:-}" ]; then
        cargo build --release -q -p coldstart-bench --bin coldstart-bench-stats
        BENCH_STATS=$PWD/target/release/coldstart-bench-stats
    fi
    export BENCH_STATS
}

# idle_percent: the share of the CPUs idle over the next two seconds, in percent.
idle_percent() {
    local a b total=0 i
    read -r -a a < <(grep '^cpu ' /proc/stat)
    sleep 2
    read -r -a b < <(grep '^cpu ' /proc/stat)
    for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
    echo $(( 100 * (b[4] - a[4]) / (total > 0 ? total : 1) ))
}

# wait_quiet [SECONDS]: waits (up to SECONDS, default QUIET_WAIT or 900) for the CPUs to be
# 90 % idle, and says how idle they were: other work running during a recording shows up in
# it (waits for a CPU, other processes' disk reads).
wait_quiet() {
    local deadline=$((SECONDS + ${1:-${QUIET_WAIT:-900}})) idle
    while idle=$(idle_percent) && [ "$idle" -lt 90 ] && [ $SECONDS -lt $deadline ]; do :; done
    echo "CPUs ${idle}% idle before the recording"
}

# evict: the benchmarks' system eviction: write dirty pages back, drop the page cache,
# dentries and inodes, and give the aftermath a second to settle.
evict() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; }

# write_baselines DIR LIST: the classic prefetchers a distribution uses today, as wrappers
# that start one alongside a command and stop it when the command ends (never left running
# into the next run): DIR/vmtouch.sh (`vmtouch -t` of the files of LIST, one path a line,
# in that order) and DIR/readahead.sh (whole files in that order, each read ahead with
# WILLNEED from one thread, as readahead/ureadahead replay a list). Usage:
# `sh DIR/vmtouch.sh CMD ARGS...`.
write_baselines() {
    local dir=$1 list=$2
    printf 'vmtouch -tq -b %q &\nv=$!\ns=0\n"$@" || s=$?\nkill $v 2>/dev/null\nwait $v 2>/dev/null\nexit $s\n' \
        "$list" > "$dir/vmtouch.sh"
    cat > "$dir/readahead.py" <<'PY'
import os, sys
for path in open(sys.argv[1], encoding="utf-8", errors="surrogateescape").read().splitlines():
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        continue
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    os.close(fd)
PY
    printf 'python3 %q %q &\nv=$!\ns=0\n"$@" || s=$?\nkill $v 2>/dev/null\nwait $v 2>/dev/null\nexit $s\n' \
        "$dir/readahead.py" "$list" > "$dir/readahead.sh"
}

# The slow-disk rig's throttle (bench/slow-disk-rig.sh: 100 read requests per second and
# 60 MB/s, each request charged whatever its size, bios of up to 1 MiB) as an emulated
# device profile, for `bench --storage "$RIG_PROFILE"` and the storage-*.sh scripts' PROFILE.
RIG_PROFILE='custom:base=cloud,iops=100,bandwidth=60MB/s,iops_unit=0,queue_depth=32,request=0,max_request=1MiB'

# ensure_boot_rootfs ROOTFS: the Debian bookworm container the boot benchmarks start
# (mmdebstrap, about 90 s, made once and kept, as the tests keep theirs).
ensure_boot_rootfs() {
    local rootfs=$1 tmp
    [ -x "$rootfs/usr/lib/systemd/systemd" ] && return 0
    mkdir -p "$(dirname "$rootfs")"
    tmp=$(mktemp -d "$(dirname "$rootfs")/.rootfs.XXXXXX")
    mmdebstrap --variant=minbase --include=systemd-sysv,udev,dbus bookworm "$tmp"
    rm -rf "$rootfs"
    mv "$tmp" "$rootfs"
}

# stop_boots ROOTFS: stops a container boot of ROOTFS still running and removes what
# systemd-nspawn leaves behind (bench/nspawn-boot.sh --clean).
stop_boots() {
    pkill -KILL -f "systemd-nspawn (-b )?-D $1 " 2>/dev/null || true
    sleep 1
    bash bench/nspawn-boot.sh --clean "$1"
}

# ensure_qemu_rootfs DIR [GENERATOR]: a Debian bookworm tree with its kernel and initramfs
# generator (initramfs-tools, or dracut), made once (mmdebstrap, a few minutes) for the QEMU
# boots of bench/qemu-*.sh.
ensure_qemu_rootfs() {
    local rootfs=$1 generator=${2:-initramfs-tools} tmp
    ls "$rootfs"/boot/vmlinuz-* >/dev/null 2>&1 && return 0
    mkdir -p "$(dirname "$rootfs")"
    tmp=$(mktemp -d "$(dirname "$rootfs")/.bookworm-qemu.XXXXXX")
    mmdebstrap --quiet --variant=minbase --include="systemd-sysv,udev,dbus,$generator,linux-image-amd64" \
        bookworm "$tmp/rootfs"
    rm -rf "$rootfs"
    mv "$tmp/rootfs" "$rootfs"
    rmdir "$tmp"
}

# install_test_poweroff STAGE: a test-only unit in the guest's tree that powers the guest off
# once the boot trace is written (or the prefetch service's history has coldstart_test.rows
# rows), keeping the journal, and a trace and block replay report left in /run, in /var/log.
install_test_poweroff() {
    cat >"$1/usr/local/sbin/coldstart-test-poweroff" <<'EOF'
#!/bin/sh
# Test image only (bench/qemu-*.sh): power off once the boot trace is written, or once no
# recorder runs and none was written (it failed), keeping the journal and a trace left in /run.
rows=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^coldstart_test\.rows=//p')
for i in $(seq 400); do
    if [ -n "$rows" ]; then
        # The prefetch service: its history's row for this boot is its last word.
        [ "$(cat /var/lib/coldstart/boot/history.jsonl 2>/dev/null | wc -l)" -ge "$rows" ] && break
        sleep 1
        continue
    fi
    for f in /var/log/coldstart/*.coldstart /run/coldstart/*.coldstart; do [ -e "$f" ] && break 2; done
    rec=
    for c in /proc/[0-9]*/cmdline; do
        case "$(tr '\0' ' ' <"$c" 2>/dev/null)" in *"record --boot"*) rec=1 ;; esac
    done
    if [ -z "$rec" ] && [ "$i" -gt 5 ]; then
        echo "coldstart-test-poweroff: no recorder runs and no trace was written" >/dev/console
        break
    fi
    sleep 1
done
sleep 2
mkdir -p /var/log/coldstart-run
cp /run/coldstart/*.coldstart /run/coldstart/boot-blocks.json /var/log/coldstart-run/ 2>/dev/null
journalctl -b --no-pager >/var/log/coldstart-journal.txt
sync
systemctl --no-block poweroff
EOF
    chmod 0755 "$1/usr/local/sbin/coldstart-test-poweroff"
    cat >"$1/etc/systemd/system/coldstart-test-poweroff.service" <<'EOF'
# Test image only (bench/qemu-*.sh).
[Unit]
Description=Power off once coldstart has written the boot trace

[Service]
Type=simple
ExecStart=/usr/local/sbin/coldstart-test-poweroff

[Install]
WantedBy=multi-user.target
EOF
    mkdir -p "$1/etc/systemd/system/multi-user.target.wants"
    ln -s /etc/systemd/system/coldstart-test-poweroff.service \
        "$1/etc/systemd/system/multi-user.target.wants/coldstart-test-poweroff.service"
}
