#!/usr/bin/env bash
# The login prefetch service's own target, by the service alone (docs/sessions.md, "A login's
# prefetch service"): a MATE login under Xvfb with its files on an emulated disk, LOGINS
# consecutive logins with nothing but `coldstart login enable --prefetch` acting (its autostart
# entry starts the service as the session starts: learn, verify, keep or switch off).
#
#   COLDSTART=target/release/coldstart bash bench/login-service.sh        # hdd, 8 logins
#   PROFILE=rig LOGINS=8 bash bench/login-service.sh                      # the throttle rig
#   LOGINS=10 SERVICE_ARGS='--verify-boots 4' bash bench/login-service.sh
#   KEEP_STATE=/var/tmp/login-state bash bench/login-service.sh          # keep the service's state and traces
#   START=display-manager bash bench/login-service.sh   # started before the session, as lightdm's
#                                                       # session-setup-script would (`login hello --before-session`)
#
# Each login starts with the page cache empty (sync and drop_caches), holds
# `flock -x /var/lock/coldstart-bench.lock` until the service's row is written, and is timed by
# the service itself: its history's time from the session manager's start to the panel's
# window. The logins without a plan replayed (learning, and the verification's logins without)
# are the cold ones; the script prints `login status`, each login, and the logins with the plan
# against the cold ones (ratio of medians, 95% bootstrap interval).
#
# Staging as bench/storage-mate.sh does: one login recorded cold on the real disk names the
# files a login reads; `coldstart storage run PROFILE --trace` copies them onto the emulated
# device, bind-mounted over their paths, and the logins run there. The staged login fills the
# home (a first login writes its settings), so the service's logins are not first ones. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
install_packages mate-session-manager mate-panel marco caja mate-settings-daemon dbus-x11 xvfb x11-utils e2fsprogs python3
use_coldstart
use_bench_stats
profile=${PROFILE:-hdd}
[ "$profile" = rig ] && profile=$RIG_PROFILE
logins=${LOGINS:-8}
lock=/var/lock/coldstart-bench.lock
work=$(mktemp -d /var/tmp/coldstart-login-service.XXXXXX)
home=$work/home
state=$work/state
mkdir -p "$home" "$work/run"
chmod 700 "$work/run"
Xvfb :76 -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
# The session's processes, however started (D-Bus activation included), carry this in their environment.
marker=COLDSTART_BENCH_LOGIN=$$
end_session() {
    local p
    for p in $(grep -l -z -x "$marker" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do kill -KILL "$p" 2>/dev/null; done
    sleep 1
}
cleanup() {
    end_session
    kill "$xvfb" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
sleep 1
# GVFS_DISABLE_FUSE: no FUSE mount of gvfs in the runtime directory, left behind when it ends.
session_env=(env -u DBUS_SESSION_BUS_ADDRESS "HOME=$home" "XDG_RUNTIME_DIR=$work/run" DISPLAY=:76
    GVFS_DISABLE_FUSE=1 "$marker")
"${session_env[@]}" "$COLDSTART" record --cold --also Xvfb --until window:mate-panel --timeout 120 \
    -o "$work/stage.coldstart" -- setsid dbus-run-session mate-session >/dev/null 2>&1
end_session
# shellcheck disable=SC2086 # SERVICE_ARGS is a list of options
start=${START:-autostart}
"$COLDSTART" login enable --prefetch --user root --home "$home" --state-dir "$state" --start "$start" \
    --until wm --until window:mate-panel --timeout 120 ${SERVICE_ARGS:-} >/dev/null
login=(setsid dbus-run-session mate-session)
if [ "$start" = display-manager ]; then
    login=(sh -c "$(printf '%q ' "$COLDSTART") login hello --before-session --user root --state-dir $state; exec setsid dbus-run-session mate-session")
fi

cat > "$work/logins.sh" <<INNER
set -u
history=$state/history.jsonl
one_login() { # waits for the service's row N, then ends the session
    local want=\$1 waited=0 p
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1
    $(printf '%q ' "${session_env[@]}" "${login[@]}") </dev/null >$work/session-\$want.log 2>&1 &
    while [ "\$(cat "\$history" 2>/dev/null | wc -l)" -lt "\$want" ] && [ \$waited -lt 1800 ]; do
        sleep 0.1; waited=\$((waited + 1))
    done
    for p in \$(grep -l -z -x "$marker" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do kill -KILL \$p 2>/dev/null; done
    rm -f $home/.ICEauthority-c $home/.ICEauthority-l   # a killed session's lock, which the next one would wait on
    sleep 1
    echo "login \$want: \$(tail -n 1 "\$history" 2>/dev/null | cut -c 1-160)"
    if [ "\$(cat "\$history" 2>/dev/null | wc -l)" -lt "\$want" ]; then
        echo "login \$want wrote no row; the service's log:"; tail -n 20 $state/service.log
    fi
}
for n in \$(seq 1 $logins); do flock -x $lock bash -c "\$(declare -f one_login); history=\$history; one_login \$n"; done
cp "\$history" $work/history.jsonl
if [ -n "${KEEP_STATE:-}" ]; then cp -a $state "${KEEP_STATE:-}"; fi
INNER
"$COLDSTART" storage run "$profile" --trace "$work/stage.coldstart" -- bash "$work/logins.sh"
"$COLDSTART" login status --user root --state-dir "$state"
python3 bench/service-history.py "$work/history.jsonl" --noun login
