#!/bin/bash
# coldstart: put coldstart and the boot's block plan into the initramfs, and fetch the plan's
# chunks before the root filesystem is mounted (coldstart-blocks.sh, a pre-mount hook).
# `coldstart boot enable --block-plan PLAN` installs this module and writes
# /etc/coldstart/boot-blocks.conf; without that file the module is not included. See docs/boot.md.

check() {
    [ -r "${dracutsysrootdir-}/etc/coldstart/boot-blocks.conf" ] || return 255
    return 0
}

depends() {
    return 0
}

install() {
    # shellcheck disable=SC1091
    . "${dracutsysrootdir-}/etc/coldstart/boot-blocks.conf"
    if [ ! -x "$COLDSTART_BINARY" ] || [ ! -r "$COLDSTART_BLOCK_PLAN" ]; then
        derror "coldstart: $COLDSTART_BINARY or $COLDSTART_BLOCK_PLAN is missing: no early block replay"
        return 0
    fi
    inst_binary "$COLDSTART_BINARY" /bin/coldstart
    inst_simple "$COLDSTART_BLOCK_PLAN" /etc/coldstart/boot-blocks.bplan
    inst_hook pre-mount 10 "$moddir/coldstart-blocks.sh"
}
