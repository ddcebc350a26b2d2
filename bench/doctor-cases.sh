#!/usr/bin/env bash
# The doctor's cases: real starts recorded cold, each checked against written expectations of
# what an expert would conclude (what must be in the top findings, what must not appear).
#
#   bash bench/doctor-cases.sh                 # every case
#   bash bench/doctor-cases.sh --ci            # the cases CI runs: neither a desktop nor heavy packages
#   bash bench/doctor-cases.sh fuse-plugins    # named cases
#   bash bench/doctor-cases.sh --list          # the cases, with what each needs
#
# A case is two files in bench/doctor-cases/: NAME.sh, sourced in a subshell, sets
# `case_needs` (`none`, `container`, `desktop`, or `heavy`: packages too large to install in
# CI, such as LibreOffice or SciPy) and defines `case_record TRACE`, which installs
# what it needs (install_packages of bench/lib.sh), records the start cold into TRACE with
# "$COLDSTART" record, and undoes what it set up; NAME.expect holds the expectations, checked by
# bench/doctor_expect.py (its header documents the format). Prints each expectation met or not
# per case, and a total; exits 1 when one is not met or a case could not be recorded.
# Run as root from anywhere. COLDSTART (default: a release build of this tree); KEEP=DIR keeps
# the traces and the doctor's output (default: a temporary folder, removed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
cd "$here/.."

ci=0
cases=()
for arg in "$@"; do
    case "$arg" in
        --ci) ci=1 ;;
        --list)
            for f in "$here"/doctor-cases/*.sh; do
                printf '%-20s %s\n' "$(basename "$f" .sh)" "$(bash -c 'source "$1"; echo "$case_needs"' _ "$f")"
            done
            exit 0 ;;
        -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "doctor-cases.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
        *) [ -f "$here/doctor-cases/$arg.sh" ] || { echo "doctor-cases.sh: no case $arg (see --list)" >&2; exit 2; }
           cases+=("$arg") ;;
    esac
done
if [ "${#cases[@]}" -eq 0 ]; then
    for f in "$here"/doctor-cases/*.sh; do
        name=$(basename "$f" .sh)
        needs=$(bash -c 'source "$1"; echo "$case_needs"' _ "$f")
        if [ "$ci" = 1 ] && { [ "$needs" = desktop ] || [ "$needs" = heavy ]; }; then continue; fi
        cases+=("$name")
    done
fi

use_coldstart
install_packages python3
if [ -n "${KEEP:-}" ]; then out=$KEEP; mkdir -p "$out"; else out=$(mktemp -d /var/tmp/cs-doctor-cases.XXXXXX); trap 'rm -rf "$out"' EXIT; fi

met=0 total=0 failed=()
for name in "${cases[@]}"; do
    echo "== $name"
    trace=$out/$name.coldstart
    rm -f "$trace"
    if ! ( source "$here/doctor-cases/$name.sh"; case_record "$trace" ) > "$out/$name.record.log" 2>&1 || [ ! -s "$trace" ]; then
        echo "   not recorded (the last lines of $out/$name.record.log):"
        tail -n 15 "$out/$name.record.log" | sed 's/^/     /'
        failed+=("$name")
        continue
    fi
    "$COLDSTART" doctor "$trace" --format json > "$out/$name.doctor.json"
    "$COLDSTART" doctor "$trace" > "$out/$name.doctor.txt"
    result=$(python3 "$here/doctor_expect.py" "$here/doctor-cases/$name.expect" "$out/$name.doctor.json" "$out/$name.doctor.txt") || true
    printf '%s\n' "$result" | sed '$d'
    read -r m t < <(printf '%s\n' "$result" | tail -n 1)
    met=$((met + m)) total=$((total + t))
done
echo
echo "doctor cases: $met of $total expectations met in ${#cases[@]} cases"
if [ "${#failed[@]}" -gt 0 ]; then echo "not recorded: ${failed[*]}"; fi
[ "$met" = "$total" ] && [ "${#failed[@]}" -eq 0 ]
