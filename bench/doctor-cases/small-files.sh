# A start that reads a folder of many small files, as a desktop program reads its theme, its
# plug-in descriptions or its settings schemas one file at a time (the studies' advice: merge
# them into one cache file read at once, as gtk-update-icon-cache, fc-cache and
# glib-compile-schemas do). A tree of FILES (default 4000) files of 1-8 KiB in 40 folders under
# share/app/themes, on the machine's own disk, read whole by Debian's Python; recorded cold.
case_needs=none

case_record() {
    local trace=$1 files=${FILES:-4000} work
    install_packages python3
    work=$(mktemp -d /var/tmp/cs-case-small.XXXXXX)
    # shellcheck disable=SC2064 # the folder is known now
    trap "rm -rf '$work'" RETURN
    /usr/bin/python3 - "$work/share/app/themes" "$files" <<'PY'
import os, random, sys
root, files = sys.argv[1], int(sys.argv[2])
rng = random.Random(29)
for i in range(files):
    folder = os.path.join(root, f"theme-{i % 40:02d}", ("icons", "colors", "layouts")[i % 3])
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"item-{i:05d}.conf"), "w") as f:
        f.write("".join(f"key{k} = {rng.random()}\n" for k in range(rng.randint(40, 320))))
PY
    cat > "$work/start.py" <<'PY'
import os, sys
settings = {}
for top, dirs, files in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(files):
        with open(os.path.join(top, name)) as f:
            for line in f:
                key, _, value = line.partition(" = ")
                settings[key] = value
print(len(settings))
PY
    sync
    flock -s /var/lock/coldstart-bench.lock \
        "$COLDSTART" record --cold -o "$trace" --spool-dir "$work/spool" -- /usr/bin/python3 "$work/start.py" "$work/share/app/themes"
}
