#!/usr/bin/env bash
# An image's first boot on a lazily fetched volume, in QEMU, with the block plan replayed from
# the initramfs (issue 30): a Debian bookworm image (its own kernel, initramfs-tools) put on the
# emulated `snapshot` volume (`storage mount snapshot --image`, every chunk still to be fetched)
# and booted by QEMU from it to multi-user.target, recorded by coldstart-boot.service.
#
#   1. learn: a first boot, cold; its trace makes the block plan (`prefetch plan --blocks
#      TRACE --image IMAGE`), which `boot enable --block-plan` installs in the image's tree,
#      making the initramfs again in a chroot (initramfs-tools hook and premount script)
#   2. ROUNDS (1) rounds of two first boots of the same pristine image, each on a fresh volume:
#      `cold` (the initramfs as the image has it) and `plan` (the initramfs with the plan),
#      the order alternating
#
#   sudo bash bench/qemu-snapshot-boot.sh [ROUNDS]
#   SNAPSHOT=custom:base=snapshot,fetch_latency=50ms OUT=/tmp/qs MEM=2048 sudo -E bash bench/qemu-snapshot-boot.sh
#   GENERATOR=dracut sudo -E bash bench/qemu-snapshot-boot.sh   # an image whose initramfs dracut makes
#
# For each boot: the console's coldstart lines and the root's mount (kernel timestamps: the
# replay starts before the mount), systemd's "Startup finished", and from the boot's trace the
# reads of the root device: how many fell in the plan's chunks and how many of those waited for
# a fetch (latency at least half the profile's fetch latency). The image is the QEMU guest's
# disk (virtio, cache=none): the initramfs and kernel are given to QEMU, not read from the
# volume, as a hypervisor's direct kernel boot does. QEMU emulates the CPU here (TCG, no
# /dev/kvm): boots take minutes and their times say little; the fetch waits are the result.
# The rootfs is made once (bench/lib.sh, ensure_qemu_rootfs; with dracut, a second one). Each boot takes the bench lock
# exclusively. Results: $OUT (default /var/tmp/coldstart-qemu-snapshot)/BOOT/.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-1}
snapshot=${SNAPSHOT:-snapshot}
install_packages qemu-system-x86 mmdebstrap e2fsprogs
use_coldstart
out=${OUT:-/var/tmp/coldstart-qemu-snapshot}
generator=${GENERATOR:-initramfs-tools}
case $generator in
    initramfs-tools) rootfs=${ROOTFS:-/var/cache/coldstart-tests/bookworm-qemu} ;;
    dracut) rootfs=${ROOTFS:-/var/cache/coldstart-tests/bookworm-qemu-dracut} ;;
    *) echo "qemu-snapshot-boot.sh: GENERATOR is initramfs-tools or dracut, not $generator" >&2; exit 2 ;;
esac
ensure_qemu_rootfs "$rootfs" "$generator"
work=$(mktemp -d /var/tmp/coldstart-qemu-snapshot.XXXXXX)
cleanup() {
    pkill -KILL -f "qemu-system-x86_64 .*$work/vmlinuz" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$out"
mkdir -p "$out"

stage=$work/stage
cp -a "$rootfs" "$stage"
echo coldstart-qemu >"$stage/etc/hostname"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$stage/etc/fstab"
install_test_poweroff "$stage"
"$COLDSTART" boot enable --root "$stage" --install-binary --until unit:multi-user.target --timeout 300 >/dev/null
cp "$(ls "$stage"/boot/vmlinuz-* | sort -V | tail -1)" "$work/vmlinuz"
cp "$(ls "$stage"/boot/initrd.img-* | sort -V | tail -1)" "$work/initrd-cold.img"
size_mib=$(($(du -sm "$stage" | cut -f1) * 2 + 256))
mkfs.ext4 -q -F -b 4096 -L root -E lazy_itable_init=0,lazy_journal_init=0 -d "$stage" "$work/disk.img" "${size_mib}M"
echo "image: ${size_mib} MiB from $rootfs; volume: $snapshot"

# The guest's run on the emulated volume: QEMU until the guest powers off, then the trace and
# the replay's report read out of the volume with debugfs.
cat >"$work/guest.sh" <<'EOF'
set -u
dest=$1 initrd=$2 work=$3
dev=$COLDSTART_STORAGE_DEVICE
started=$(date +%s)
timeout -s KILL 1500 qemu-system-x86_64 -machine q35 -accel tcg -cpu max -smp 2 -m "${MEM:-2048}" \
    -kernel "$work/vmlinuz" -initrd "$initrd" \
    -append "root=/dev/vda ro console=ttyS0 panic=-1 systemd.journald.forward_to_console=1" \
    -drive "file=$dev,format=raw,if=virtio,cache=none" -nic none \
    -display none -monitor none -serial "file:$dest/console.log" -no-reboot
echo "   the guest ran $(($(date +%s) - started)) s"
name=$(debugfs -R "ls -p /var/log/coldstart" "$dev" 2>/dev/null | awk -F/ '$6 ~ /^boot-.*\.coldstart$/ {print $6}' | tail -1)
[ -n "$name" ] && debugfs -R "dump /var/log/coldstart/$name $dest/boot.coldstart" "$dev" 2>/dev/null
debugfs -R "dump /var/log/coldstart-run/boot-blocks.json $dest/boot-blocks.json" "$dev" 2>/dev/null
true
EOF

# boot NAME INITRD: a first boot of the pristine image on a fresh volume.
boot() {
    local dest=$out/$1
    mkdir -p "$dest"
    echo "== $1 (TCG; minutes)"
    exec 9>/var/lock/coldstart-bench.lock
    flock -x 9
    "$COLDSTART" storage mount "$snapshot" --image "$work/disk.img" -- bash "$work/guest.sh" "$dest" "$2" "$work" \
        2>&1 | tee "$dest/storage.txt" | grep -E 'guest ran|fetch' || true
    flock -u 9
    if [ ! -s "$dest/boot.coldstart" ]; then
        echo "== $1: no trace in the image; the console's coldstart lines:" >&2
        grep -a coldstart "$dest/console.log" >&2 || true
        exit 1
    fi
    "$COLDSTART" export --format csv --table requests -o "$dest/requests.csv" "$dest/boot.coldstart"
    grep -a -E 'coldstart: (fetching|replayed|the boot)|EXT4-fs \(vda\): mounted|Startup finished' "$dest/console.log" |
        sed 's/^/   /' | head -8 || true
}

boot learn "$work/initrd-cold.img"
"$COLDSTART" prefetch plan --blocks "$out/learn/boot.coldstart" --image "$work/disk.img" -o "$out/boot.bplan"
"$COLDSTART" prefetch show "$out/boot.bplan" | head -12
"$COLDSTART" boot enable --root "$stage" --install-binary --until unit:multi-user.target --timeout 300 \
    --block-plan "$out/boot.bplan" 2>&1 | tee "$out/enable.txt"
cp "$(ls "$stage"/boot/initrd.img-* | sort -V | tail -1)" "$work/initrd-plan.img"
for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then ways="plan cold"; else ways="cold plan"; fi
    for way in $ways; do boot "$way-$round" "$work/initrd-$way.img"; done
done

fetch_ms=$("$COLDSTART" storage show "$snapshot" | awk '$1 == "fetch_latency_ns" {print $2}')
python3 - "$out" "$fetch_ms" <<'EOF'
import csv, glob, json, os, sys
out, fetch_ms = sys.argv[1], float(sys.argv[2])
plan = json.load(open(os.path.join(out, "boot.bplan")))
chunk = plan["chunk_bytes"]
planned = set()
for r in plan["ranges"]:
    planned.update(range(r["offset"] // chunk, (r["offset"] + r["length"]) // chunk))
print(f"plan: {len(planned)} chunks of {chunk // 1024} KiB; a fetch waits {fetch_ms:.0f} ms")
print(f"{'boot':<10} {'root reads':>10} {'in plan':>8} {'of them waited':>15} {'others waited':>14} {'read wait s':>12}  startup")
for dest in sorted(glob.glob(os.path.join(out, "*", "requests.csv"))):
    name = os.path.basename(os.path.dirname(dest))
    rows = [r for r in csv.DictReader(open(dest, newline="")) if r["op"] == "read" and r["latency_ns"]]
    by_dev = {}
    for r in rows:
        by_dev[r["dev"]] = by_dev.get(r["dev"], 0) + int(r["bytes"])
    root = max(by_dev, key=by_dev.get)
    reads = [r for r in rows if r["dev"] == root and r["sector"]]
    def chunks(r):
        first = int(r["sector"]) * 512 // chunk
        last = (int(r["sector"]) * 512 + int(r["bytes"]) - 1) // chunk
        return range(first, last + 1)
    waited = lambda r: int(r["latency_ns"]) >= fetch_ms * 1e6 / 2
    inside = [r for r in reads if all(c in planned for c in chunks(r))]
    others = [r for r in reads if r not in inside]
    wait_s = sum(int(r["latency_ns"]) for r in reads) / 1e9
    console = open(os.path.join(os.path.dirname(dest), "console.log"), errors="replace").read()
    startup = next((l.split("Startup finished in ", 1)[1].strip() for l in console.splitlines() if "Startup finished in " in l), "?")
    print(f"{name:<10} {len(reads):>10} {len(inside):>8} {sum(map(waited, inside)):>15} {sum(map(waited, others)):>14} {wait_s:>12.2f}  {startup}")
EOF
echo "results in $out"
