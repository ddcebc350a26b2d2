#!/usr/bin/env bash
# Boots the Debian container ROOTFS with systemd-nspawn, the way the benchmarks start it:
#   bash bench/nspawn-boot.sh ROOTFS [NSPAWN-OPTION…]   # bash bench/nspawn-boot.sh --clean ROOTFS: only the first step
#   bash bench/nspawn-boot.sh --init-wrapper ROOTFS [NSPAWN-OPTION…]   # PID 1 is `coldstart boot init`
#     (the init= wrapper, bound at /usr/local/bin/coldstart by an option), which execs systemd
# First removes what an earlier boot left on this host: `systemd-nspawn --keep-unit` on a host
# whose PID 1 is not systemd leaves its `payload` and `supervisor` cgroups (in the name=systemd
# and unified hierarchies) and its propagation directory, and the next boot may trip on them.
set -euo pipefail
clean_only=false
wrapper=false
if [ "${1:-}" = --clean ]; then clean_only=true; shift; fi
if [ "${1:-}" = --init-wrapper ]; then wrapper=true; shift; fi
rootfs=$1
shift
remove_tree() { # a cgroup directory, depth first
    [ -d "$1" ] || return 0
    local sub
    for sub in "$1"/*/; do [ -d "$sub" ] && remove_tree "${sub%/}"; done
    rmdir "$1" 2>/dev/null || true
}
for hierarchy in systemd unified; do
    for dir in payload supervisor; do remove_tree "/sys/fs/cgroup/$hierarchy/$dir"; done
done
rmdir "/run/systemd/nspawn/propagate/$(basename "$rootfs")" 2>/dev/null || true
$clean_only && exit 0
if $wrapper; then
    exec systemd-nspawn -D "$rootfs" --register=no --keep-unit --console=pipe --kill-signal=SIGRTMIN+3 \
        "$@" /usr/local/bin/coldstart boot init
fi
exec systemd-nspawn -b -D "$rootfs" --register=no --keep-unit --console=passive "$@"
