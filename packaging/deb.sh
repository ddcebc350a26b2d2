#!/usr/bin/env bash
# Builds the Debian package of coldstart with cargo-deb: the binary in /usr/bin, the man pages,
# the bash, zsh and fish completions, and the prefetch unit templates of contrib/systemd (their
# ExecStart= pointed at /usr/bin/coldstart), all made from this tree. coldstart-boot.service is
# not shipped: `coldstart boot enable` writes it to /etc with its options.
#
#   bash packaging/deb.sh                 # release build, then target/debian/coldstart_VERSION-1_ARCH.deb
#   COLDSTART=path bash packaging/deb.sh  # package that binary instead of building one
#   sudo dpkg -i target/debian/coldstart_*.deb
#
# Needs cargo-deb (`cargo install cargo-deb --locked`; a CARGO_DEB path is used if set) and
# dpkg. The assets are staged in packaging/stage/ (not committed), which
# [package.metadata.deb] in crates/coldstart/Cargo.toml lists.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo_deb=${CARGO_DEB:-$(command -v cargo-deb || true)}
if [ -z "$cargo_deb" ]; then
    echo "deb.sh: cargo-deb is not installed: cargo install cargo-deb --locked" >&2
    exit 2
fi
if [ -z "${COLDSTART:-}" ]; then
    cargo build --release -p coldstart
    COLDSTART=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/release/coldstart
fi
[ -x "$COLDSTART" ] || { echo "deb.sh: no coldstart binary at $COLDSTART" >&2; exit 2; }

stage=packaging/stage
rm -rf "$stage"
mkdir -p "$stage/man" "$stage/completions" "$stage/system" "$stage/user"
cp "$COLDSTART" "$stage/coldstart"
"$COLDSTART" generate man -o "$stage/man" 2>/dev/null
gzip -9n "$stage"/man/*.1
"$COLDSTART" generate completions bash > "$stage/completions/coldstart.bash"
"$COLDSTART" generate completions zsh > "$stage/completions/_coldstart"
"$COLDSTART" generate completions fish > "$stage/completions/coldstart.fish"
for unit in contrib/systemd/coldstart-prefetch@.service; do
    sed 's|/usr/local/bin/coldstart|/usr/bin/coldstart|g' "$unit" > "$stage/system/$(basename "$unit")"
done
for unit in contrib/systemd/user/*.service; do
    sed 's|/usr/local/bin/coldstart|/usr/bin/coldstart|g' "$unit" > "$stage/user/$(basename "$unit")"
done
# The binary was built here (or given): cargo-deb only packs the staged files.
"$cargo_deb" deb -p coldstart --no-build --no-strip "$@"
