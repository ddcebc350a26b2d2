# The MATE login (GNOME 2's descendant) under Xvfb, recorded cold from the session's start to
# its panel's window, with x11-xserver-utils and cpp installed so that mate-settings-daemon's
# xrdb plugin runs xrdb, and xrdb the C preprocessor, as on a real desktop: the GNOME 2 login
# study's xrdb → cpp → cc1 chain, and mate-session's GL probe. A fresh HOME, so the login is
# the same each time (the panel's first-login layout is read from the defaults). Recorded once
# the CPUs are quiet (up to QUIET_WAIT seconds, 300 by default): on a busy machine the chain's
# share of the login drowns in the waits for a CPU.
# shellcheck shell=bash disable=SC2034 # case_needs is read by bench/doctor-cases.sh
case_needs=desktop

case_record() {
    local trace=$1 work xvfb display=87 status=0 pid
    install_packages mate-session-manager mate-panel marco caja mate-settings-daemon dbus-x11 xvfb x11-utils \
        x11-xserver-utils cpp
    while [ -e "/tmp/.X11-unix/X$display" ] || [ -e "/tmp/.X$display-lock" ]; do display=$((display + 1)); done
    work=$(mktemp -d /var/tmp/cs-case-mate.XXXXXX)
    mkdir -p "$work/home" "$work/run" && chmod 700 "$work/run"
    Xvfb ":$display" -screen 0 1280x800x24 -nolisten tcp > "$work/xvfb.log" 2>&1 &
    xvfb=$!
    sleep 1
    wait_quiet "${QUIET_WAIT:-300}"
    HOME=$work/home XDG_RUNTIME_DIR=$work/run DISPLAY=:$display \
        flock -s /var/lock/coldstart-bench.lock "$COLDSTART" record --cold --also Xvfb \
        --until window:mate-panel --timeout 120 -o "$trace" -- setsid dbus-run-session mate-session || status=$?
    # Whatever of the session outlived the recording (coldstart ends the tree it started).
    for pid in $(grep -l -s -z "^HOME=$work/home\$" /proc/[0-9]*/environ | cut -d/ -f3); do
        kill -KILL "$pid" 2>/dev/null || true
    done
    kill "$xvfb" 2>/dev/null || true
    wait "$xvfb" 2>/dev/null || true
    rm -rf "$work"
    return "$status"
}
