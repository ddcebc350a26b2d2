#!/usr/bin/env bash
# The doctor's disk model against the emulated disk it shares its profiles with: does
# `doctor --disk hdd` predict what `bench --storage hdd` measures?
#
#   bash bench/doctor-storage.sh [ROUNDS] [PROGRAM…]     # PROGRAM: python (default), soffice, mate
#
# For each program, under /var/lock/coldstart-bench.lock:
#   1. one cold start recorded on the real disk: the files it reads (the file set);
#   2. those files put on an emulated device of profile FAST (default nvme) at their own
#      paths (`coldstart storage run`, the very staging `bench --storage` does, so the
#      layout is the one the hdd runs get) and a cold start recorded there;
#   3. the doctor predicts that recording with the emulated device alone on DISK (default
#      hdd): `doctor --disk hdd --only-dev <the emulated device>` (directories stay on the
#      real disk under `storage run` and `bench --storage` alike: their requests keep their
#      measured model);
#   4. ROUNDS cold starts on an emulated DISK device (`bench --cold --storage hdd`), timed;
#   5. prints the prediction, the measured median and their ratio (target: within 25 %).
# mate is a MATE login under its own Xvfb, from launch to mate-panel's visible window
# (recorded with `--also Xvfb`; a fresh HOME and runtime directory for every start).
# Output in $OUT (default /tmp/coldstart-doctor-storage). COLDSTART=path uses that binary.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
if [ "${1:-}" != --locked ]; then
    install_packages python3 e2fsprogs libreoffice-writer-nogui \
        mate-session-manager mate-panel marco caja mate-settings-daemon dbus-x11 xvfb x11-utils
    use_coldstart
    exec flock /var/lock/coldstart-bench.lock bash "$0" --locked "$@"
fi
shift
rounds=${1:-5}
shift || true
programs=("$@")
[ "${#programs[@]}" -gt 0 ] || programs=(python)
fast=${FAST:-nvme}
disk=${DISK:-hdd}
out=${OUT:-/tmp/coldstart-doctor-storage}
rm -rf "$out"
mkdir -p "$out"
echo "== $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg); $COLDSTART; fast $fast, disk $disk"

xvfb=
cleanup() {
    pkill -KILL -f 'dbus-run-session mate-session' 2>/dev/null || true
    [ -z "$xvfb" ] || kill "$xvfb" 2>/dev/null || true
}
trap cleanup EXIT

command_of() { # PROGRAM: sets cmd (the command), until and also (their options)
    until=()
    also=()
    case "$1" in
        python) cmd=(/usr/bin/python3 -c 'import json, email, asyncio, unittest, http.server, xml.dom.minidom, decimal, sqlite3') ;;
        soffice)
            printf 'line %s\n' $(seq 1 2000) > "$out/doc.txt"
            cmd=(soffice -env:UserInstallation=file://$out/lo-profile --headless --convert-to pdf --outdir "$out" "$out/doc.txt")
            ;;
        mate)
            if [ -z "$xvfb" ]; then
                Xvfb :75 -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
                xvfb=$!
                sleep 1
            fi
            cmd=(bash -c 'home=$(mktemp -d /var/tmp/coldstart-mate-home.XXXXXX); run=$(mktemp -d /var/tmp/coldstart-mate-run.XXXXXX); chmod 700 "$run"; HOME=$home XDG_RUNTIME_DIR=$run DISPLAY=:75 exec setsid dbus-run-session mate-session')
            export DISPLAY=:75 # for the window readiness of record and bench
            until=(--until window:mate-panel --timeout 120)
            also=(--also Xvfb)
            ;;
        *) echo "unknown program $1 (python, soffice, mate)" >&2; exit 2 ;;
    esac
}

emulated_dev() { # TRACE: the loop device the staged files were read from
    python3 - "$1" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("select dev, count(*) from file where kind = 'regular' and dev like '7:%' group by dev order by 2 desc").fetchall()
print(rows[0][0] if rows else "")
EOF
}

for program in "${programs[@]}"; do
    command_of "$program"
    if [ "$program" = soffice ]; then "${cmd[@]}" >/dev/null 2>&1 || true; fi # the profile, made once
    evict
    "$COLDSTART" record --cold --as-root "${until[@]}" "${also[@]}" -o "$out/$program-real.coldstart" -- "${cmd[@]}" >/dev/null 2>"$out/$program-real.txt"
    evict
    "$COLDSTART" storage run "$fast" --trace "$out/$program-real.coldstart" -- \
        "$COLDSTART" record --cold --as-root "${until[@]}" "${also[@]}" -o "$out/$program-$fast.coldstart" -- "${cmd[@]}" \
        >/dev/null 2>"$out/$program-$fast.txt"
    dev=$(emulated_dev "$out/$program-$fast.coldstart")
    [ -n "$dev" ] || { echo "$program: no file of the recording on the emulated device" >&2; exit 1; }
    "$COLDSTART" doctor "$out/$program-$fast.coldstart" --disk "$disk" --only-dev "$dev" --format json \
        > "$out/$program-doctor.json"
    "$COLDSTART" doctor "$out/$program-$fast.coldstart" --disk "$disk" --only-dev "$dev" > "$out/$program-doctor.txt"
    evict
    "$COLDSTART" bench --cold --runs "$rounds" --no-progress --storage "$disk" "${until[@]}" \
        --trace "$out/$program-real.coldstart" --export-json "$out/$program-bench.json" -- "${cmd[@]}" \
        > "$out/$program-bench.txt" 2>&1
    pkill -KILL -f 'dbus-run-session mate-session' 2>/dev/null || true
    python3 - "$program" "$out/$program-doctor.json" "$out/$program-bench.json" "$disk" <<'EOF'
import json, sys
program, doctor, bench, disk = sys.argv[1:]
analysis = json.load(open(doctor))
what_if = [w for w in analysis["doctor"]["what_if"] if w["disk"]["class"] != "measured"][0]
measured = json.load(open(bench))["results"][0]
median = measured["median"]
predicted = what_if["predicted_ns"] / 1e9
recorded = what_if["time_to_ready_ns"] / 1e9
print(f"{program}: recorded on the fast emulated device {recorded:.3f} s; predicted on {disk} "
      f"{predicted:.3f} s; measured on {disk} median {median:.3f} s of {len(measured['times'])} "
      f"[{min(measured['times']):.3f} … {max(measured['times']):.3f}]; predicted / measured "
      f"{predicted / median:.3f}")
print(f"  {what_if['text'].splitlines()[0] if what_if['text'] else ''}")
EOF
done
echo "== $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"
