#!/usr/bin/env bash
# Sets everything up and runs every check: format, lints, unit and
# integration tests (real veth pairs, XDP and AF_XDP: needs root), the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --release --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
rm -f "${TMPDIR:-/tmp}/wiretape-testbed.log"
cargo test --release --workspace --locked
echo "== netmap engine (cargo feature netmap: synthetic rings, no module needed)"
cargo clippy --release -p wiretape-capture -p wiretape-pipeline -p wiretape-cli -p wiretape --all-targets --locked --features netmap -- -D warnings
cargo test --release -p wiretape-capture -p wiretape-pipeline --locked --features netmap
echo "== the Debian package (tests/package.sh: built, lintian, installed in a booted bookworm container)"
./tests/package.sh
echo "== wiretape demo"
"${CARGO_TARGET_DIR:-target}/release/wiretape" demo
left=$(ip netns list | awk '/^wt-/{print $1}' | tr '\n' ' ')
if [ -n "$left" ]; then
  echo "test: wt-* network namespaces left behind: $left" >&2
  for n in $left; do grep -F -- "$n" "${TMPDIR:-/tmp}/wiretape-testbed.log" >&2 || true; done
  exit 1
fi
