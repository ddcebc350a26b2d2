# Shared by the benchmark scripts (`source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"`) and
# tests/fixtures/record.sh.

# install_packages PKG...: installs the Debian packages that are missing (apt-get update once).
install_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
}
