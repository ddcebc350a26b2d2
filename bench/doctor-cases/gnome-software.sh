# GNOME Software's first start (Debian's gnome-software, GTK 4), recorded cold to its window
# under Xvfb with a session D-Bus and a fresh HOME: on a first start it reads the distribution's
# AppStream data (apt's DEP-11 YAML, /var/lib/swcatalog/yaml) and compiles libxmlb's silo
# (~/.cache/gnome-software/appstream/components.xmlb), the CPU work of the study in
# /work/shared/seeds/003_*.txt. Sourced by bench/doctor-cases.sh.
#
# Offline and without a system manager, as on this machine: gnome-software's plugin loader
# needs a system bus, so a private one runs (dbus-daemon on a socket of the case's folder,
# DBUS_SYSTEM_BUS_ADDRESS) with no activatable services — PackageKit, fwupd and the other
# daemons its plugins ask for are absent, those plugins give up, and the appstream plugin,
# which needs neither network nor daemon, still builds the silo. Reviews are off
# (review-server '' in a keyfile GSettings backend), so nothing waits on the network.
# gvfs's FUSE mount is off (GVFS_DISABLE_FUSE); any FUSE mount left under the case's folder
# (xdg-document-portal's) is unmounted at the end.

case_needs=desktop

# Debian's packages, without their recommends; apt's DEP-11 data is fetched by apt-get update
# (the appstream package's apt configuration).
gnome_software_install() {
    local missing=() p
    for p in gnome-software appstream dbus-daemon dbus-x11 xvfb x11-utils; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
    if ! ls /var/lib/swcatalog/yaml/*.yml* /var/lib/app-info/yaml/*.yml* >/dev/null 2>&1; then
        apt-get update -qq
    fi
}

# A display no X server uses.
gnome_software_display() {
    local n
    for n in $(seq 80 120); do
        [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ] || { echo "$n"; return; }
    done
    return 1
}

case_record() {
    local trace=$1 work n status=0 xvfb bus
    gnome_software_install
    work=$(mktemp -d /var/tmp/cs-gnome-software.XXXXXX)
    mkdir -p "$work/home/.config/glib-2.0/settings" "$work/bus/services"
    mkdir -m 0700 "$work/run"
    printf '[org/gnome/software]\nreview-server=%s\ndownload-updates=false\nallow-updates=false\n' "''" \
        > "$work/home/.config/glib-2.0/settings/keyfile"
    cat > "$work/bus/system.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$work/bus/socket</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$work/bus/services</servicedir>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
    n=$(gnome_software_display)
    dbus-daemon --config-file="$work/bus/system.conf" --nofork >/dev/null 2>&1 &
    bus=$!
    Xvfb ":$n" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
    xvfb=$!
    sleep 1
    HOME=$work/home XDG_RUNTIME_DIR=$work/run DISPLAY=":$n" GSETTINGS_BACKEND=keyfile GVFS_DISABLE_FUSE=1 \
        DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus/socket" \
        flock -s /var/lock/coldstart-bench.lock \
        "$COLDSTART" record --cold --also "$xvfb" --also "$bus" --until window:org.gnome.Software --timeout 120 \
        -o "$trace" -- setsid dbus-run-session -- gnome-software || status=$?
    ls -l "$work/home/.cache/gnome-software/appstream/" || true
    kill "$xvfb" "$bus" 2>/dev/null || true
    wait "$xvfb" "$bus" 2>/dev/null || true
    awk -v w="$work" '$2 ~ "^" w {print $2}' /proc/mounts | while read -r m; do umount -l "$m"; done
    rm -rf "$work"
    return "$status"
}
