#!/usr/bin/env bash
# A boot recorded on a real kernel: a Debian bookworm image (its own kernel and initramfs)
# booted in QEMU, once with coldstart-boot.service (`coldstart boot enable`) and once with
# the init= wrapper (`init=/usr/local/sbin/coldstart-init`), each to multi-user.target; the
# guest powers itself off once the trace is written, and the trace is read out of the disk
# image and shown with `coldstart info` and `coldstart report`.
#
#   sudo bash bench/qemu-boot.sh                 # both modes
#   sudo bash bench/qemu-boot.sh init            # one: unit or init
#   sudo bash bench/qemu-boot.sh service         # BOOTS (4) boots of one disk with the prefetch
#     service (`boot enable --prefetch --learn-boots 1 --verify-boots 1`) run by the init= wrapper:
#     learn, then the verification's boots with and without the plan; `boot status` at the end
#   COLDSTART=/path/to/coldstart OUT=/tmp/qb MEM=8192 sudo -E bash bench/qemu-boot.sh   # guest MiB (2048)
#
# Not run by CI: QEMU emulates the CPU here (TCG, there is no usable /dev/kvm), so each boot
# takes minutes. The figures are correct but slow, useless for timing a prefetch.
#
# The rootfs is made once (mmdebstrap with linux-image-amd64 and initramfs-tools, a few
# minutes) and kept in /var/cache/coldstart-tests/bookworm-qemu, apart from the containers'
# bookworm-boot. Each boot gets a fresh ext4 image built from a copy of it with `mkfs.ext4 -d`
# (no loop device, no mount), and the trace is read back with debugfs. The image's test-only
# unit coldstart-test-poweroff.service waits for a trace in /var/log/coldstart (or in /run,
# where the recorder writes when / is read-only) and powers the guest off. The boot takes the
# bench lock (/var/lock/coldstart-bench.lock) exclusively. Results: $OUT (default
# /var/tmp/coldstart-qemu-boot) /MODE/{console.log,boot.coldstart,info.txt,report.txt}.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
if [ $# -eq 0 ]; then set -- unit init; fi
modes=("$@")
for m in "${modes[@]}"; do
    case $m in unit | init | service) ;; *) echo "qemu-boot.sh: unknown mode $m (unit, init or service)" >&2; exit 2 ;; esac
done
install_packages qemu-system-x86 mmdebstrap e2fsprogs
use_coldstart
out=${OUT:-/var/tmp/coldstart-qemu-boot}
rootfs=${ROOTFS:-/var/cache/coldstart-tests/bookworm-qemu}
ensure_qemu_rootfs "$rootfs"
work=$(mktemp -d /var/tmp/coldstart-qemu-boot.XXXXXX)
qemu_pid=
cleanup() {
    if [ -n "$qemu_pid" ]; then kill -KILL "$qemu_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# stage MODE: the guest's tree for one boot, in $work/stage.
stage() {
    local mode=$1 s=$work/stage
    rm -rf "$s"
    cp -a "$rootfs" "$s"
    echo coldstart-qemu >"$s/etc/hostname"
    # / is mounted read-only by the initramfs and made writable by systemd-remount-fs.
    echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$s/etc/fstab"
    install -m 0755 "$COLDSTART" "$s/usr/local/bin/coldstart"
    mkdir -p "$s/usr/local/sbin"
    install_test_poweroff "$s"
    case $mode in
        unit) "$COLDSTART" boot enable --root "$s" --until unit:multi-user.target --timeout 300 >/dev/null ;;
        init) ln -s ../bin/coldstart "$s/usr/local/sbin/coldstart-init" ;;
        service)
            "$COLDSTART" boot enable --prefetch --root "$s" --until unit:multi-user.target --timeout 300 \
                --learn-boots 1 --verify-boots 1 >/dev/null
            ln -s ../bin/coldstart "$s/usr/local/sbin/coldstart-init"
            ;;
    esac
}

# run_guest CONSOLE APPEND: boots $work/disk.img until the guest powers off (900 s at most).
run_guest() {
    exec 9>/var/lock/coldstart-bench.lock
    if [ -z "${NO_LOCK:-}" ]; then flock -x 9; fi
    local started status=0
    started=$(date +%s)
    qemu-system-x86_64 -machine q35 -accel tcg -cpu max -smp 2 -m "${MEM:-2048}" \
        -kernel "$work/vmlinuz" -initrd "$work/initrd.img" -append "$2" \
        -drive "file=$work/disk.img,format=raw,if=virtio" -nic none \
        -display none -monitor none -serial "file:$1" -no-reboot &
    qemu_pid=$!
    for _ in $(seq 900); do
        kill -0 "$qemu_pid" 2>/dev/null || break
        sleep 1
    done
    if kill -0 "$qemu_pid" 2>/dev/null; then
        echo "== the guest did not power off within 900 s" >&2
        kill -KILL "$qemu_pid"
        status=1
    fi
    wait "$qemu_pid" || true
    qemu_pid=
    flock -u 9
    echo "== the guest ran $(($(date +%s) - started)) s"
    return $status
}

# service_boots DEST APPEND: BOOTS boots of one disk under the prefetch service; each waits for
# its row of the service's history; then `boot status` of the history and `info` of each trace.
service_boots() {
    local dest=$1 n state=/var/lib/coldstart/boot
    for n in $(seq "${BOOTS:-4}"); do
        echo "== service: boot $n (TCG; minutes)"
        run_guest "$dest/console-$n.log" "$2 coldstart_test.rows=$n" || true
        debugfs -R "dump $state/history.jsonl $dest/history.jsonl" "$work/disk.img" 2>/dev/null || true
        echo "   history: $(wc -l <"$dest/history.jsonl" 2>/dev/null || echo 0) rows; $(tail -n 1 "$dest/history.jsonl" 2>/dev/null | cut -c 1-200)"
        grep -a -E 'coldstart(-init)?:' "$dest/console-$n.log" | head -8 || true
    done
    mkdir -p "$dest/root$state/traces"
    cp "$dest/history.jsonl" "$dest/root$state/"
    "$COLDSTART" boot status --root "$dest/root" | tee "$dest/status.txt"
    for name in $(debugfs -R "ls -p $state/traces" "$work/disk.img" 2>/dev/null | awk -F/ '$6 ~ /\.coldstart$/ {print $6}'); do
        debugfs -R "dump $state/traces/$name $dest/root$state/traces/$name" "$work/disk.img" 2>/dev/null
        echo "== $name"
        "$COLDSTART" info "$dest/root$state/traces/$name" | grep -i -E 'lost|records|duration|spool' || true
    done
}

for mode in "${modes[@]}"; do
    dest=$out/$mode
    rm -rf "$dest"
    mkdir -p "$dest"
    stage "$mode"
    kernel=$(ls "$work"/stage/boot/vmlinuz-* | sort -V | tail -1)
    initrd=$(ls "$work"/stage/boot/initrd.img-* | sort -V | tail -1)
    cp "$kernel" "$work/vmlinuz"
    cp "$initrd" "$work/initrd.img"
    rm -f "$work/disk.img"
    mkfs.ext4 -q -F -L root -d "$work/stage" "$work/disk.img" 3G
    rm -rf "$work/stage"
    # The journal goes to the console too: the recorder's lines (and any error) are in console.log.
    append="root=/dev/vda ro console=ttyS0 panic=-1 systemd.journald.forward_to_console=1"
    if [ "$mode" = init ]; then
        append+=" init=/usr/local/sbin/coldstart-init coldstart.until=unit:multi-user.target coldstart.timeout=300"
    fi
    if [ "$mode" = service ]; then
        append+=" init=/usr/local/sbin/coldstart-init"
        service_boots "$dest" "$append"
        continue
    fi
    echo "== $mode: booting (TCG; minutes) with: $append"
    status=0
    run_guest "$dest/console.log" "$append" || status=1
    debugfs -R 'dump /var/log/coldstart-journal.txt '"$dest/journal.txt" "$work/disk.img" 2>/dev/null || true
    trace=
    for dir in /var/log/coldstart /var/log/coldstart-run; do
        name=$(debugfs -R "ls -p $dir" "$work/disk.img" 2>/dev/null | awk -F/ '$6 ~ /^boot-.*\.coldstart$/ {print $6}' | tail -1)
        if [ -n "$name" ]; then
            debugfs -R "dump $dir/$name $dest/boot.coldstart" "$work/disk.img" 2>/dev/null
            trace=$dest/boot.coldstart
            echo "== $mode: the trace was $dir/$name in the guest"
            break
        fi
    done
    if [ -z "$trace" ]; then
        echo "== $mode: no trace in the image; the console's coldstart lines:" >&2
        grep -a coldstart "$dest/console.log" >&2 || true
        exit 1
    fi
    "$COLDSTART" info "$trace" | tee "$dest/info.txt"
    "$COLDSTART" report "$trace" >"$dest/report.txt"
    sed -n '1,40p' "$dest/report.txt"
    grep -a 'coldstart' "$dest/console.log" | head -20 || true
    [ "$status" = 0 ] || exit "$status"
done
echo "results in $out"
