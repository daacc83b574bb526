#!/usr/bin/env bash
# Sets everything up and runs every check: format, lints, unit and
# integration tests (real veth pairs, XDP and AF_XDP: needs root), the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --release --workspace --all-targets --locked -- -D warnings
echo "== cargo test"
cargo test --release --workspace --locked
echo "== netmap engine (cargo feature netmap: synthetic rings, no module needed)"
cargo clippy --release -p wiretape-capture -p wiretape-pipeline -p wiretape-cli -p wiretape --all-targets --locked --features netmap -- -D warnings
cargo test --release -p wiretape-capture -p wiretape-pipeline --locked --features netmap
echo "== the Debian package (tests/package.sh: built, lintian, installed in a booted bookworm container)"
./tests/package.sh
echo "== wiretape demo"
"${CARGO_TARGET_DIR:-target}/release/wiretape" demo
left=$(ip netns list | grep -c '^wt-' || true)
if [ "$left" != 0 ]; then echo "test: $left wt-* network namespaces left behind" >&2; exit 1; fi
