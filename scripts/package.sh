#!/usr/bin/env bash
# Builds the Debian package: target/debian/wiretape_<version>_amd64.deb.
#
#   scripts/package.sh                   # build, then package
#   scripts/package.sh --no-build        # package the binary already built
#   scripts/package.sh --tools           # only install the pinned cargo-deb
#   scripts/package.sh --profile release # another Cargo profile (default: PROFILE below)
#
# From a fresh clone: needs what scripts/setup.sh installs (Rust, clang,
# libelf, libpcap...); installs cargo-deb (pinned) with `cargo install
# --locked` when it is missing: about 2 CPU-minutes, 2-5 minutes on two cores.
# Then:
#   1. the binary (`cargo build --profile dist -p wiretape-cli`: the release
#      profile with fat LTO and one codegen unit; the measurements and why a
#      profile of its own: Cargo.toml);
#   2. from that binary, its man pages (one per subcommand) and its bash, zsh
#      and fish completions: `wiretape generate` prints them from the clap
#      definitions that parse its command line, so they cannot disagree;
#   3. the copyright file: every crate compiled in, with its licence
#      (scripts/copyright.py, from `cargo metadata`);
#   4. cargo-deb puts them together with the units, configs, sysusers and
#      tmpfiles entries and maintainer scripts of dist/
#      ([package.metadata.deb] in crates/cli/Cargo.toml); dependencies by
#      dpkg-shlibdeps.
# The path of the .deb is the last line printed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CARGO_DEB_VERSION=3.8.0
PROFILE=dist
build=1
tools_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) build=0 ;;
    --tools) tools_only=1 ;;
    --profile) PROFILE=${2:?--profile NAME}; shift ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
  esac
  shift
done
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
command -v cargo >/dev/null || { echo "package: no Rust toolchain: run scripts/setup.sh first" >&2; exit 1; }

have=$(cargo deb --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$CARGO_DEB_VERSION" ]; then
  echo "package: installing cargo-deb $CARGO_DEB_VERSION (was: ${have:-none}; a few minutes on two cores)"
  cargo install --locked --quiet "cargo-deb@=$CARGO_DEB_VERSION"
fi
[ "$tools_only" = 1 ] && exit 0

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
if [ "$build" = 1 ]; then
  echo "package: building the binary (profile $PROFILE)"
  cargo build --profile "$PROFILE" --locked -p wiretape-cli
fi
BIN=$TARGET/$PROFILE/wiretape
[ -x "$BIN" ] || { echo "package: $BIN missing: run without --no-build" >&2; exit 1; }

A=$ROOT/target/deb-assets
rm -rf "$A"; mkdir -p "$A/man" "$A/completions"
"$BIN" generate man "$A/man"
"$BIN" generate complete-bash > "$A/completions/wiretape.bash"
"$BIN" generate complete-zsh > "$A/completions/_wiretape"
"$BIN" generate complete-fish > "$A/completions/wiretape.fish"
python3 "$ROOT/scripts/copyright.py" "$A/copyright"

# cargo-deb names it wiretape_<version>-<revision>_amd64.deb.
out=$(cargo deb --no-build --locked --profile "$PROFILE" -p wiretape-cli 2>&1) || { echo "$out" >&2; exit 1; }
deb=$(echo "$out" | tail -n 1)
[ -f "$deb" ] || { echo "$out" >&2; echo "package: cargo-deb made no .deb" >&2; exit 1; }
echo "package: $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version), $(stat -c %s "$deb") bytes, depends: $(dpkg-deb -f "$deb" Depends)"
echo "$deb"
