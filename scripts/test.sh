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
echo "== wiretape demo"
./target/release/wiretape demo
left=$(ip netns list | grep -c '^wt-' || true)
if [ "$left" != 0 ]; then echo "test: $left wt-* network namespaces left behind" >&2; exit 1; fi
