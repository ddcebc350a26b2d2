# The GIMP-over-NFS start (the GNOME/GIMP studies' stat storm over the plug-in folders): a
# program scans a tree of plug-ins, brushes and patterns the way GIMP does at its start
# (walk each folder, stat and access-check every entry, open and read the head of each
# file), the tree served by `coldstart storage slowfs` (DELAY per request, no attribute or
# name caching: NFS mounted with noac). Recorded with `record`'s defaults: no --syscalls,
# so the doctor must explain the waits from the off-CPU kernel stacks and the mount table.
# PLUGINS (default 300) sets the tree's size; the expectations' gain bounds are for 300
# plug-ins at 2 ms (see fuse-plugins.expect).
case_needs=none

case_record() {
    local trace=$1 plugins=${PLUGINS:-300} delay=${DELAY:-2ms} work src i d
    install_packages python3
    work=$(mktemp -d /var/tmp/cs-case-fuse.XXXXXX)
    # shellcheck disable=SC2064 # the folder is known now
    trap "rm -rf '$work'" RETURN
    src=$work/src
    mkdir -p "$src/lib/gimp/2.0/plug-ins" "$src/share/gimp/2.0/brushes" "$src/share/gimp/2.0/patterns" "$work/mnt"
    for i in $(seq 1 "$plugins"); do
        d=$src/lib/gimp/2.0/plug-ins/plugin-$i
        mkdir "$d"
        head -c 16384 /dev/urandom > "$d/plugin-$i"
        chmod +x "$d/plugin-$i"
        printf '(plug-in-def "plugin-%s")\n' "$i" > "$d/plugin-$i.rc"
    done
    for i in $(seq 1 $((plugins * 2 / 3))); do head -c 4096 /dev/urandom > "$src/share/gimp/2.0/brushes/brush-$i.gbr"; done
    for i in $(seq 1 $((plugins / 3))); do head -c 8192 /dev/urandom > "$src/share/gimp/2.0/patterns/pattern-$i.pat"; done
    cat > "$work/scan.py" <<'PY'
import os, sys
root = sys.argv[1]
for sub in ["lib/gimp/2.0/plug-ins", "share/gimp/2.0/brushes", "share/gimp/2.0/patterns"]:
    for top, dirs, files in os.walk(os.path.join(root, sub)):
        for name in sorted(files):
            path = os.path.join(top, name)
            os.stat(path)
            os.access(path, os.X_OK)
            with open(path, "rb") as f:
                f.read(4096)
PY
    flock -s /var/lock/coldstart-bench.lock \
        "$COLDSTART" storage slowfs "$src" --at "$work/mnt" --delay "$delay" -- \
        "$COLDSTART" record --cold -o "$trace" --spool-dir "$work/spool" -- /usr/bin/python3 "$work/scan.py" "$work/mnt"
}
