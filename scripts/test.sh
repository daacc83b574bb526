#!/usr/bin/env bash
# Sets everything up and runs every check: format, lints, unit and
# integration tests (real veth pairs, XDP and AF_XDP: needs root), the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's line says the seconds since the start (setup.sh's lines too):
# a CI log shows where the time went.
stage() { echo "== [${SECONDS} s] $*"; }
stage "setup (scripts/setup.sh --tests: packages, test tools, toolchains, the release build)"
./scripts/setup.sh --tests
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
stage "cargo fmt --check"
cargo fmt --all -- --check
stage "cargo clippy"
cargo clippy --release --workspace --all-targets --locked -- -D warnings
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
case $msrv in *.*.*) ;; *) msrv=$msrv.0 ;; esac
stage "MSRV: cargo +$msrv check (the workspace's rust-version)"
cargo "+$msrv" check --workspace --locked
# The docs with the same pinned toolchain: it reuses the check's metadata,
# and the public-API snapshot reads rustdoc's HTML, whose rendering would
# move with an unpinned toolchain.
stage "cargo doc (no warnings: broken intra-doc links, private items named in public docs)"
# (rustdoc leaves the pages of removed items behind: a fresh directory.)
rm -rf "${CARGO_TARGET_DIR:-target}/doc"
RUSTDOCFLAGS="-D warnings" cargo "+$msrv" doc --no-deps --workspace --locked
stage "public API (public-api/*.txt; a change to it is a visible diff)"
python3 scripts/public-api.py
T=${CARGO_TARGET_DIR:-target}
# cargo-deb (pinned) for the package test: `cargo install` compiles it alone
# on one core most of the time (minutes on two cores, from nothing), so it
# runs beside the tests (setup.sh built their binaries: they wait on veth
# pairs, namespaces and child processes much of the time), at low priority,
# in its own target directory (not the suite's: no wait on its lock), and is
# joined before the package test.
stage "cargo-deb (pinned) for the package test: installing beside the tests"
# (setsid: its own process group, so that a failure below stops all of it.)
setsid env -u CARGO_TARGET_DIR nice -n 10 ./scripts/package.sh --tools > "$T/cargo-deb-install.log" 2>&1 &
cargo_deb=$!
trap 'kill -- "-$cargo_deb" 2>/dev/null || true' EXIT
stage "cargo test"
rm -f "${TMPDIR:-/tmp}/wiretape-testbed.log"
# The test bed names its namespaces wt-<tag>-<pid>-<n>. Those whose process
# is gone were left by a run that was killed before it could remove them
# (a machine that restarted mid-suite): removed here, named, and not held
# against this run. Those of a live process (a suite running beside this
# one) are left alone and not counted at the end either.
ns_before=""
for n in $(ip netns list 2>/dev/null | awk '/^wt-/{print $1}'); do
  pid=$(echo "$n" | awk -F- '{print $(NF-1)}')
  if [ -n "$pid" ] && [ "$pid" -eq "$pid" ] 2>/dev/null && [ ! -d "/proc/$pid" ]; then
    ip netns del "$n" && echo "test: removed network namespace $n, left by an earlier run (its process $pid is gone)"
  else
    ns_before="$ns_before $n "
  fi
done
cargo test --release --workspace --locked --no-fail-fast
stage "netmap engine (cargo feature netmap: synthetic rings, no module needed)"
cargo clippy --release -p wiretape-capture -p wiretape-pipeline -p wiretape-cli -p wiretape --all-targets --locked --features netmap -- -D warnings
cargo test --release -p wiretape-capture -p wiretape-pipeline --locked --features netmap
stage "cargo-deb (pinned) for the package test: joined"
wait "$cargo_deb" || { cat "$T/cargo-deb-install.log" >&2; echo "test: installing cargo-deb failed" >&2; exit 1; }
trap - EXIT
cat "$T/cargo-deb-install.log"
stage "soak with analysts, 5 minutes (benches/soak.sh: nothing lost, every query right, flat, no error line), beside the package test and the demo"
mkdir -p "$T/soak"
benches/soak.sh 300 20000 512 "$T/soak" > "$T/soak/soak.log" 2>&1 &
soak=$!
trap 'kill "$soak" 2>/dev/null || true' EXIT
stage "the Debian package (tests/package.sh: built, lintian, installed in a booted bookworm container)"
./tests/package.sh
stage "wiretape demo"
"$T/release/wiretape" demo
stage "the soak's verdict"
if ! wait "$soak"; then cat "$T/soak/soak.log" >&2; echo "test: the soak failed" >&2; exit 1; fi
trap - EXIT
tail -n 30 "$T/soak/soak.log"
left=""
for n in $(ip netns list | awk '/^wt-/{print $1}'); do
  case "$ns_before" in *" $n "*) ;; *) left="$left$n " ;; esac
done
if [ -n "$left" ]; then
  echo "test: wt-* network namespaces left behind: $left" >&2
  for n in $left; do grep -F -- "$n" "${TMPDIR:-/tmp}/wiretape-testbed.log" >&2 || true; done
  exit 1
fi
stage "all checks passed"
