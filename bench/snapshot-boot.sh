#!/usr/bin/env bash
# The first boot of an image on a volume restored from its snapshot (issue 30): the Debian
# container's root filesystem as an ext4 image, put on an emulated lazily fetched volume
# (`storage mount snapshot --image`, every chunk still to be fetched), booted with
# systemd-nspawn to multi-user.target. Five ways, interleaved (the order rotates each round):
#   cold      the first boot as it is
#   plan      the boot's block plan replayed from the boot's start (`prefetch run PLAN --device`)
#   exact     the same with a plan of the ranges the boot read (`--chunk 4KiB`), not whole
#             chunks: the device still fetches whole chunks, the replay moves fewer bytes
#   fetch     the exact plan replayed `--fetch-only`: one 4 KiB block of each fetch unit it
#             touches, enough for the volume to fetch the unit; the boot reads the rest itself
#   fleet     with LEARN=N (N > 1) first boots recorded: the block plan of all of them, made
#             through a fleet dataset (`export --format parquet`, then `prefetch plan --blocks
#             --dataset`: the chunks half of them read), replayed as `plan` is
#   fio       the whole volume read the providers' way, started at the same moment
#             (fio --rw=read --bs=1M --iodepth=32 --direct=1)
#   hydrated  the same image on the volume once fetched (custom:base=snapshot,fetch_chunk=0),
#             the page cache cold: what a warm volume gives
# Each boot runs on a fresh device from the pristine image, under the exclusive bench lock.
#
#   bash bench/snapshot-boot.sh [ROUNDS]                 # 5 rounds by default
#   SNAPSHOT=custom:base=snapshot,fetch_latency=20ms bash bench/snapshot-boot.sh 3
#   WAYS="cold plan" bash bench/snapshot-boot.sh 3   # some of the ways only (cold always)
#   WAYS="cold plan fetch" bash bench/snapshot-boot.sh 3
#   LEARN=10 WAYS="cold plan fleet" bash bench/snapshot-boot.sh 5   # the fleet's plan against the boot's own
#
# The plan comes from one recorded first boot on the same volume (`record`, then
# `prefetch plan --blocks TRACE --image IMAGE`). Prints each way's boot times, its median
# against cold (ratio of medians with its 95 % interval, and paired by round), the plan's
# bytes against what the boot read, and the chunks each way fetched. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${1:-5}
snapshot=${SNAPSHOT:-snapshot}
hydrated=${HYDRATED:-custom:base=snapshot,fetch_chunk=0}
lock=/var/lock/coldstart-bench.lock
install_packages mmdebstrap systemd-container e2fsprogs fio
use_coldstart
use_bench_stats
rootfs=${ROOTFS:-/var/cache/coldstart-tests/bookworm-boot}
ensure_boot_rootfs "$rootfs"
work=$(mktemp -d /var/tmp/coldstart-snapshot-boot.XXXXXX)
mnt=$work/root
mkdir "$mnt"
cleanup() {
    stop_boots "$mnt"
    rm -rf "$work"
}
trap cleanup EXIT
image=$work/root.ext4
size_mib=$(( $(du -sm "$rootfs" | cut -f1) * 2 + 256 ))
mkfs.ext4 -q -F -b 4096 -L coldstart-boot -E lazy_itable_init=0,lazy_journal_init=0 \
    -d "$rootfs" "$image" "${size_mib}M"
boot="bash $PWD/bench/nspawn-boot.sh $mnt"
mount_then_boot="mount \$COLDSTART_STORAGE_DEVICE $mnt && exec $boot"
until=unit:multi-user.target
echo "image: $image, ${size_mib} MiB, from $rootfs"

# The device is not mounted by `storage mount` (no --at): each boot's command mounts it, as
# the boot's root is mounted after an early hook has started the replay.
dev_of='printf "%d:%d\n" 0x$(stat -c %t $COLDSTART_STORAGE_DEVICE) 0x$(stat -c %T $COLDSTART_STORAGE_DEVICE)'
learn=${LEARN:-1}
for i in $(seq 1 "$learn"); do
    flock -s "$lock" "$COLDSTART" storage mount "$snapshot" --image "$image" -- sh -c "$dev_of > $work/dev && \
        $COLDSTART record --until $until --timeout 120 -o $work/boot-$i.coldstart -- \
        sh -c 'mount \$COLDSTART_STORAGE_DEVICE $mnt && exec $boot'" \
        >/dev/null 2>"$work/learn.err" || { cat "$work/learn.err"; exit 1; }
done
cp "$work/boot-1.coldstart" "$work/boot.coldstart"
if [ "$learn" -gt 1 ]; then
    "$COLDSTART" export --format parquet -o "$work/first-boots" "$work"/boot-[0-9]*.coldstart 2>/dev/null
    "$COLDSTART" prefetch plan --blocks --dataset "$work/first-boots" --image "$image" -o "$work/fleet.bplan" \
        2>&1 | grep wrote
fi
for plan in plan exact; do
    chunk=512KiB
    [ "$plan" = exact ] && chunk=4KiB
    "$COLDSTART" prefetch plan --blocks --chunk "$chunk" --device "$(cat "$work/dev")" "$work/boot.coldstart" \
        --image "$image" -o "$work/$plan.bplan" 2>&1 | sed -n 1p
done

# replay PLAN WAY [OPTION…]: the replay of PLAN's block plan, its output in WAY.out
replay() { echo "$COLDSTART prefetch run $work/$1.bplan --device \$COLDSTART_STORAGE_DEVICE ${*:3} >$work/$2.out 2>&1"; }
fio="fio --name=hydrate --filename=\$COLDSTART_STORAGE_DEVICE --rw=read --bs=1M --iodepth=32 --ioengine=libaio --direct=1 --readonly >/dev/null 2>&1"
declare -A command=(
    [cold]="sh -c '$mount_then_boot'"
    [plan]="sh -c '$(replay plan plan) & $mount_then_boot'"
    [exact]="sh -c '$(replay exact exact) & $mount_then_boot'"
    [fetch]="sh -c '$(replay exact fetch --fetch-only) & $mount_then_boot'"
    [fleet]="sh -c '$(replay fleet fleet) & $mount_then_boot'"
    [fio]="sh -c '$fio & $mount_then_boot'"
    [hydrated]="sh -c '$mount_then_boot'"
)
read -r -a ways <<<"${WAYS:-cold plan exact fio hydrated}"
others=()
for way in "${ways[@]}"; do [ "$way" = cold ] || others+=("$way"); done
ways=(cold "${others[@]}")
for round in $(seq 1 "$rounds"); do
    shift_by=$(( (round - 1) % ${#ways[@]} ))
    order=("${ways[@]:shift_by}" "${ways[@]:0:shift_by}")
    for way in "${order[@]}"; do
        profile=$snapshot
        [ "$way" = hydrated ] && profile=$hydrated
        flock -x "$lock" "$COLDSTART" storage mount "$profile" --image "$image" -- \
            "$COLDSTART" bench --warm --warmup 0 --runs 1 --no-progress --until "$until" --timeout 180 \
            --export-json "$work/$way-$round.json" -n "$way" -c "${command[$way]}" \
            >/dev/null 2>"$work/$way-$round.err" || { cat "$work/$way-$round.err"; exit 1; }
        fetched=$(grep -o '[0-9]* chunks\? of [0-9]* KiB fetched' "$work/$way-$round.err" || echo "no fetch")
        printf 'round %d %-8s %6.3f s  (%s)\n' "$round" "$way" \
            "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$work/$way-$round.json")" \
            "$fetched"
    done
done

times() { # the boot times of WAY over the rounds, comma-separated, in round order
    python3 - "$work" "$1" "$rounds" <<'PY'
import json, sys
work, way, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(",".join(f'{json.load(open(f"{work}/{way}-{r}.json"))["results"][0]["median"]:.4f}' for r in range(1, rounds + 1)))
PY
}
for way in "${ways[@]}"; do
    echo "$way: $(times "$way") s"
done
for way in "${ways[@]:1}"; do
    read -r ratio low high < <("$BENCH_STATS" median-ratio "$(times "$way")" "$(times cold)")
    printf '%s/cold: median ratio %.3f (95%% interval %.3f–%.3f)' "$way" "$ratio" "$low" "$high"
    if [ "$rounds" -ge 2 ]; then
        read -r ratio low high < <("$BENCH_STATS" paired-ratio "$(times "$way")" "$(times cold)")
        printf ', paired by round %.3f (%.3f–%.3f)' "$ratio" "$low" "$high"
    fi
    echo
done
if [[ " ${ways[*]} " == *" fleet "* && " ${ways[*]} " == *" plan "* ]]; then
    read -r ratio low high < <("$BENCH_STATS" median-ratio "$(times fleet)" "$(times plan)")
    printf 'fleet/plan: median ratio %.3f (95%% interval %.3f–%.3f)' "$ratio" "$low" "$high"
    read -r ratio low high < <("$BENCH_STATS" paired-ratio "$(times fleet)" "$(times plan)")
    printf ', paired by round %.3f (%.3f–%.3f)\n' "$ratio" "$low" "$high"
fi
for way in plan exact fetch fleet; do
    [[ " ${ways[*]} " == *" $way "* ]] || continue
    if [[ " ${ways[*]} " == *" fio "* ]]; then
        read -r ratio low high < <("$BENCH_STATS" median-ratio "$(times $way)" "$(times fio)")
        printf '%s/fio: median ratio %.3f (95%% interval %.3f–%.3f)\n' "$way" "$ratio" "$low" "$high"
    fi
    plan=$way
    [ "$way" = fetch ] && plan=exact
    echo "$way: $plan.bplan: $("$COLDSTART" prefetch show "$work/$plan.bplan" | grep -m1 'the start read')"
    echo "$way, its last replay: $(tail -1 "$work/$way.out")"
done
