# The Debian bookworm container booting to multi-user.target under systemd-nspawn, recorded
# cold from the host (as crates/coldstart/tests/boot.rs does): systemd's generators, the
# units of an early boot, and systemd's own forks between fork and exec. The rootfs is made
# once with mmdebstrap (about 90 s) and kept in /var/cache/coldstart-tests, as the tests keep it.
# shellcheck shell=bash disable=SC2034 # case_needs is read by bench/doctor-cases.sh
case_needs=container

case_record() {
    local trace=$1 rootfs=/var/cache/coldstart-tests/bookworm-boot status=0
    install_packages systemd-container mmdebstrap
    ensure_boot_rootfs "$rootfs"
    bash bench/nspawn-boot.sh --clean "$rootfs"
    flock -s /var/lock/coldstart-bench.lock "$COLDSTART" record --cold --until unit:multi-user.target \
        --timeout 60 -o "$trace" -- systemd-nspawn -b -D "$rootfs" --register=no --keep-unit \
        --console=passive || status=$?
    bash bench/nspawn-boot.sh --clean "$rootfs"
    return "$status"
}
