# LibreOffice converting a small text document to PDF headless (libreoffice-writer-nogui),
# recorded cold until it exits: an ordinary start, its profile made by one unrecorded start
# in a private HOME, as the fixture of tests/fixtures is made.
# Recorded once the CPUs are quiet (up to QUIET_WAIT seconds, 300 by default).
# shellcheck shell=bash disable=SC2034 # case_needs is read by bench/doctor-cases.sh
case_needs=heavy

case_record() {
    local trace=$1 work status=0
    install_packages libreoffice-writer-nogui
    work=$(mktemp -d /var/tmp/cs-case-soffice.XXXXXX)
    mkdir -p "$work/home" "$work/out"
    seq 1 2000 | sed 's/^/A line of text for the conversion case, number /' > "$work/doc.txt"
    local cmd=(soffice --headless --convert-to pdf --outdir "$work/out" "$work/doc.txt")
    env -i PATH=/usr/bin:/bin HOME="$work/home" LANG=C.UTF-8 "${cmd[@]}" > /dev/null 2>&1 || true
    rm -f "$work/out"/*
    wait_quiet "${QUIET_WAIT:-300}"
    env -i PATH=/usr/bin:/bin HOME="$work/home" LANG=C.UTF-8 \
        flock -s /var/lock/coldstart-bench.lock "$COLDSTART" record --cold --as-root -o "$trace" -- "${cmd[@]}" \
        || status=$?
    [ -s "$work/out/doc.pdf" ] || { echo "no PDF was written" >&2; status=1; }
    rm -rf "$work"
    return "$status"
}
