#!/bin/sh
# coldstart: sourced by dracut before the root filesystem is mounted: fetch the boot's block
# plan from the root device in the background (the boot does not wait for it).
coldstart_root=${root#block:}
if [ -x /bin/coldstart ] && [ -r /etc/coldstart/boot-blocks.bplan ] && [ -b "$coldstart_root" ]; then
    /bin/coldstart boot early --device "$coldstart_root" </dev/null >/dev/null 2>&1 &
fi
unset coldstart_root
