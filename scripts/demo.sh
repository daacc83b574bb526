#!/usr/bin/env bash
# Sets everything up and runs the embedded demonstration (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec ./target/release/wiretape demo "$@"
