#!/usr/bin/env bash
# The boot prefetch service's own targets, by the service alone (docs/boot.md, "Prefetch that
# runs itself"): the Debian container's boot (systemd-nspawn) with its files on an emulated disk,
# BOOTS consecutive boots with nothing but `coldstart boot enable --prefetch` acting inside the
# container (learn, verify, keep or switch off), then a file the boot reads rewritten and dpkg's
# status touched, as a package upgrade does, and AFTER more boots (the service must learn again).
#
#   COLDSTART=target/release/coldstart bash bench/boot-service.sh          # hdd: 12 boots, then 6
#   PROFILE=nvme bash bench/boot-service.sh                                # the fast device
#   BOOTS=12 AFTER=6 SERVICE_ARGS='--verify-boots 4' bash bench/boot-service.sh
#   WRAPPER=1 bash bench/boot-service.sh     # PID 1 is the init= wrapper (`coldstart boot init`),
#                                            # which runs the service before systemd
#   KEEP_STATE=/var/tmp/boot-state bash bench/boot-service.sh   # keep the service's state and traces
#
# Each boot starts with the page cache empty (sync and drop_caches, as after a reboot: the
# emulated device keeps no cache of its own), holds `flock -x /var/lock/coldstart-bench.lock`
# from the eviction to the container's halt (SIGTERM, then SIGKILL after 5 s: systemd's shutdown
# in the container waits on the storage's bind mounts), and is timed by the service itself: its history's
# time from systemd's start of userspace to multi-user.target. The boots without a plan replayed
# (learning, and the verification's boots without) are the cold ones; bench/service-history.py
# prints each boot's time, the boots with the plan against the cold ones before the upgrade
# (ratio of medians, 95% bootstrap interval; each kind of cold boot apart, then both), and the
# slowest boot against the cold median.
#
# Staging as bench/storage-boot.sh does: a copy of the cached rootfs (the tests' one is left as it
# is) gets the service; one boot of it recorded from the host, cold, on the real disk, names the
# files the boot reads; `coldstart storage run PROFILE --trace` copies them onto the emulated
# device, bind-mounted over their paths, and the boots run there. Needs root; installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
install_packages mmdebstrap systemd-container e2fsprogs python3
use_coldstart
use_bench_stats
profile=${PROFILE:-hdd}
boots=${BOOTS:-12}
after=${AFTER:-6}
lock=/var/lock/coldstart-bench.lock
cached=${ROOTFS:-/var/cache/coldstart-tests/bookworm-boot}
ensure_boot_rootfs "$cached"
work=$(mktemp -d /var/tmp/coldstart-boot-service.XXXXXX)
rootfs=$work/rootfs
cleanup() {
    stop_boots "$rootfs"
    rm -rf "$work"
}
trap cleanup EXIT
cp -a "$cached" "$rootfs"
# shellcheck disable=SC2086 # SERVICE_ARGS is a list of options
"$COLDSTART" boot enable --prefetch --root "$rootfs" ${SERVICE_ARGS:-} >/dev/null
state=$rootfs/var/lib/coldstart/boot
wrapper=()
[ "${WRAPPER:-0}" = 1 ] && wrapper=(--init-wrapper)
boot=(bash "$PWD/bench/nspawn-boot.sh" "${wrapper[@]}" "$rootfs" --capability=all
    "--system-call-filter=fanotify_init fanotify_mark perf_event_open bpf"
    "--bind-ro=$COLDSTART:/usr/local/bin/coldstart")
flock -x "$lock" "$COLDSTART" record --cold --until unit:multi-user.target --timeout 120 \
    -o "$work/stage.coldstart" -- "${boot[@]}" >/dev/null 2>&1 || true
stop_boots "$rootfs"
rm -rf "$state"
# The library the boot reads most of, rewritten in place (a rename over a bind-mounted copy is
# refused) with its own bytes: a new modification time, as an upgrade's new file has.
upgraded=/usr/lib/x86_64-linux-gnu/libsystemd-shared-252.so
[ -f "$rootfs$upgraded" ] || upgraded=$(cd "$rootfs" && ls usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-*.so | head -1 | sed 's|^|/|')

cat > "$work/boots.sh" <<INNER
set -u
history=$state/history.jsonl
one_boot() { # waits for the service's row N, then halts the container
    local want=\$1 waited=0 pid
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1
    $(printf '%q ' "${boot[@]}") </dev/null >$work/console-\$want.log 2>&1 &
    pid=\$!
    while [ "\$(cat "\$history" 2>/dev/null | wc -l)" -lt "\$want" ] && [ \$waited -lt 1800 ]; do
        sleep 0.1; waited=\$((waited + 1))
    done
    # systemd's shutdown in the container hangs on the storage's bind mounts: a short grace.
    kill -TERM \$pid 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 \$pid 2>/dev/null && sleep 0.5; done
    kill -KILL \$pid 2>/dev/null
    wait \$pid 2>/dev/null
    echo "boot \$want: \$(tail -n 1 "\$history" 2>/dev/null | cut -c 1-160)"
    if [ "\$(cat "\$history" 2>/dev/null | wc -l)" -lt "\$want" ]; then
        echo "boot \$want wrote no row; its console's coldstart lines:"
        grep -a coldstart $work/console-\$want.log | tail -n 20
    fi
}
for n in \$(seq 1 $boots); do flock -x $lock bash -c "\$(declare -f one_boot); history=\$history; one_boot \$n"; done
cat "$rootfs$upgraded" > $work/upgraded.so && cat $work/upgraded.so > "$rootfs$upgraded"
touch "$rootfs/var/lib/dpkg/status"
echo "upgraded: $upgraded rewritten, /var/lib/dpkg/status touched"
for n in \$(seq \$(( $boots + 1 )) \$(( $boots + $after ))); do flock -x $lock bash -c "\$(declare -f one_boot); history=\$history; one_boot \$n"; done
cp "\$history" $work/history.jsonl
if [ -n "${KEEP_STATE:-}" ]; then cp -a $state "${KEEP_STATE:-}"; fi
INNER
"$COLDSTART" storage run "$profile" --trace "$work/stage.coldstart" -- bash "$work/boots.sh"
"$COLDSTART" boot status --root "$rootfs"
python3 bench/service-history.py "$work/history.jsonl" --before "$boots" --noun boot
