# Debian's Python importing SciPy, Matplotlib and pandas (python3-scipy, python3-matplotlib,
# python3-pandas), recorded cold until it exits: /usr/bin/python3, not the PATH's (a pyenv
# shim here), in a private HOME where one unrecorded start made Matplotlib's font cache, so
# the recorded start is an ordinary one.
# Recorded once the CPUs are quiet (up to QUIET_WAIT seconds, 300 by default).
# shellcheck shell=bash disable=SC2034 # case_needs is read by bench/doctor-cases.sh
case_needs=heavy

case_record() {
    local trace=$1 work status=0
    install_packages python3 python3-scipy python3-matplotlib python3-pandas
    work=$(mktemp -d /var/tmp/cs-case-python.XXXXXX)
    local cmd=(/usr/bin/python3 -c 'import scipy.stats, matplotlib.pyplot, pandas')
    env -i PATH=/usr/bin:/bin HOME="$work" LANG=C.UTF-8 "${cmd[@]}" > /dev/null 2>&1 || true
    wait_quiet "${QUIET_WAIT:-300}"
    env -i PATH=/usr/bin:/bin HOME="$work" LANG=C.UTF-8 \
        flock -s /var/lock/coldstart-bench.lock "$COLDSTART" record --cold --as-root -o "$trace" -- "${cmd[@]}" \
        || status=$?
    rm -rf "$work"
    return "$status"
}
