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

# use_coldstart: sets and exports COLDSTART, the coldstart the benchmark runs: as given, or a
# release build of this tree (built here; the caller is at the repository's root).
use_coldstart() {
    if [ -z "${COLDSTART:-}" ]; then
        cargo build --release -q -p coldstart
        COLDSTART=$PWD/target/release/coldstart
    fi
    export COLDSTART
}

# use_bench_stats: sets and exports BENCH_STATS, the comparisons of crates/bench/src/stats.rs
# (coldstart-bench-stats: difference or ratio of medians, paired ratio) for the scripts that
# compare samples they measured themselves: as given, or a release build of this tree.
use_bench_stats() {
    if [ -z "${BENCH_STATS:-}" ]; then
        cargo build --release -q -p coldstart-bench --bin coldstart-bench-stats
        BENCH_STATS=$PWD/target/release/coldstart-bench-stats
    fi
    export BENCH_STATS
}

# evict: the benchmarks' system eviction: write dirty pages back, drop the page cache,
# dentries and inodes, and give the aftermath a second to settle.
evict() { sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1; }
