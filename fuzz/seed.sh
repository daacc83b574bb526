#!/usr/bin/env bash
# Makes the seed corpus of the fuzz targets: OUT/{walk,info,repair,zread,index,keys,sessions}/
# (default OUT: fuzz/corpus). Captures with each oddity libpcap reads or
# refuses (as tests/conformance.rs generates them: link-type fields with flag
# bits, orig_len 0 and below caplen, caplen above the snap length, fractions
# out of range, swapped lengths of old versions, both byte orders and
# resolutions, other link types, pcapng with several interfaces, link types,
# sections and simple packet blocks, torn tails, zero padding), plus
# captures made by editcap and mergecap, and (when target/release/wiretape
# is built) wiretape's own files: .idx and .kdx sidecars, lz4 and zstd captures.
# Small files (a few KiB): libFuzzer mutates them. The session target's
# seeds (sessions/: parsers' messages and whole connections as frames)
# come from wiretape_sessions::fuzz::seeds (cargo, stable).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-fuzz/corpus}
mkdir -p "$out"/{walk,info,repair,zread,index,keys,sessions}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp" <<'PY'
import struct, sys, os
d = sys.argv[1]

def ipv4(i, proto=17):
    pl = bytes([i & 0xff]) * (8 + i % 24)
    l4 = struct.pack('>HHHH', 1000 + i, 53, 8 + len(pl), 0) + pl if proto == 17 else \
         struct.pack('>HHIIBBHHH', 1000 + i, 443, i, 0, 0x50, 2, 1024, 0, 0) + pl
    return struct.pack('>BBHHHBBH4s4s', 0x45, 0, 20 + len(l4), i, 0, 64, proto, 0,
                       bytes([10, 0, 0, 1 + i % 7]), bytes([10, 0, 1, 9])) + l4

def frame(lt, i):
    if lt == 101:
        return ipv4(i, 6 if i % 3 == 0 else 17)
    if lt == 113:
        return struct.pack('>HHH8sH', 0, 1, 6, b'\x02' * 8, 0x0800) + ipv4(i)
    if i % 5 == 4:
        return b'\xff' * 6 + b'\x02' * 6 + b'\x08\x06' + bytes(28)
    return b'\x02\x00\x00\x00\x00\x01' + b'\x04' * 6 + b'\x08\x00' + ipv4(i, 6 if i % 3 == 0 else 17)

def pcap(name, recs, nanos=True, be=False, linkfield=1, snaplen=262144, version=(2, 4)):
    e = '>' if be else '<'
    b = struct.pack(e + 'IHHiIII', 0xa1b23c4d if nanos else 0xa1b2c3d4, version[0], version[1],
                    0, 0, snaplen, linkfield)
    swapped = version < (2, 3)
    for sec, frac, cap, orig, data in recs:
        a, c = (orig, cap) if swapped else (cap, orig)
        b += struct.pack(e + 'IIII', sec, frac, a, c) + data
    open(os.path.join(d, name), 'wb').write(b)
    return b

def normal(n, nanos, lt=1, start=0):
    v = []
    for i in range(start, start + n):
        f = (i * 7919000) % 1000000000
        data = frame(lt, i)
        v.append((1700000000 + i // 3, f + 7 if nanos else f // 1000, len(data), len(data), data))
    return v

for nanos in (True, False):
    for be in (False, True):
        pcap(f'plain-{nanos}-{be}.pcap', normal(12, nanos), nanos, be)
        v = normal(16, nanos)
        one = 1000000000 if nanos else 1000000
        def setr(k, **kw):
            s, f, c, o, dd = v[k]
            v[k] = (kw.get('sec', s), kw.get('frac', f), kw.get('cap', c), kw.get('orig', o), kw.get('data', dd))
        setr(2, orig=0); setr(5, orig=10); setr(7, frac=one); setr(9, frac=one + 12345)
        setr(11, frac=0xffffffff); setr(13, cap=0, orig=0, data=b'')
        pcap(f'odd-{nanos}-{be}.pcap', v, nanos, be)
pcap('flagbits.pcap', normal(10, True), linkfield=0x30000001)
pcap('snap64.pcap', [(s, f, c, o, dd) for s, f, c, o, dd in normal(10, True)], snaplen=64)
pcap('v22-swapped.pcap', normal(10, False), nanos=False, version=(2, 2))
pcap('v23.pcap', [(s, f, c, c - 4 if i % 2 else c, dd) for i, (s, f, c, o, dd) in enumerate(normal(10, False))],
     nanos=False, version=(2, 3))
pcap('raw.pcap', normal(10, True, 101), linkfield=101)
pcap('sll.pcap', normal(10, False, 113), nanos=False, linkfield=113)
pcap('dbus.pcap', normal(4, True), linkfield=231)
w = pcap('torn-src.pcap', normal(12, True))
open(os.path.join(d, 'torn.pcap'), 'wb').write(w[:-9])
open(os.path.join(d, 'torn-header.pcap'), 'wb').write(w[:30])
open(os.path.join(d, 'zeros.pcap'), 'wb').write(w + bytes(300))
big = normal(8, True)
s, f, c, o, dd = big[4]
big[4] = (s, f, 300000, o, dd)
pcap('too-big.pcap', big)
os.remove(os.path.join(d, 'torn-src.pcap'))

def block(kind, body, be=False):
    e = '>' if be else '<'
    body = body + bytes((4 - len(body) % 4) % 4)
    t = 12 + len(body)
    return struct.pack(e + 'II', kind, t) + body + struct.pack(e + 'I', t)

def shb(be=False):
    e = '>' if be else '<'
    return block(0x0a0d0d0a, struct.pack(e + 'IHHq', 0x1a2b3c4d, 1, 0, -1), be)

def idb(lt, res, be=False, snap=0):
    e = '>' if be else '<'
    return block(1, struct.pack(e + 'HHI', lt, 0, snap) + struct.pack(e + 'HH', 9, 1) + bytes([res, 0, 0, 0])
                 + struct.pack(e + 'HH', 0, 0), be)

def epb(itf, ts, data, orig=None, be=False):
    e = '>' if be else '<'
    return block(6, struct.pack(e + 'IIIII', itf, ts >> 32, ts & 0xffffffff, len(data),
                                len(data) if orig is None else orig) + data, be)

def spb(data, be=False):
    e = '>' if be else '<'
    return block(3, struct.pack(e + 'I', len(data)) + data, be)

T = 1700000000000000000
ng = shb() + idb(1, 9) + idb(1, 6)
for i in range(12):
    ts = T + i * 1234567
    ng += epb(i % 2, ts if i % 2 == 0 else ts // 1000, frame(1, i), [None, 0, 20][i % 3])
open(os.path.join(d, 'two-ifaces.pcapng'), 'wb').write(ng)
open(os.path.join(d, 'torn.pcapng'), 'wb').write(ng[:-6])
open(os.path.join(d, 'zeros.pcapng'), 'wb').write(ng + bytes(256))
mixed = shb() + idb(1, 9) + b''.join(epb(0, T + i, frame(1, i)) for i in range(4)) + idb(101, 9) \
    + b''.join(epb(1, T + 10 + i, frame(101, i)) for i in range(3))
open(os.path.join(d, 'mixed-linktypes.pcapng'), 'wb').write(mixed)
be = shb(True) + idb(1, 9, True) + b''.join(epb(0, T + i, frame(1, i), be=True) for i in range(6))
open(os.path.join(d, 'big-endian.pcapng'), 'wb').write(be)
two = shb() + idb(1, 6) + epb(0, T // 1000, frame(1, 1)) + be + shb() + idb(1, 9, snap=64) + spb(frame(1, 3))
open(os.path.join(d, 'sections-spb.pcapng'), 'wb').write(two)
pkt_first = shb() + epb(0, T, frame(1, 0)) + idb(1, 9) + epb(0, T, frame(1, 1))
open(os.path.join(d, 'packet-before-idb.pcapng'), 'wb').write(pkt_first)
res2 = shb() + idb(1, 0x80 | 20) + idb(1, 0x7f) + epb(0, T, frame(1, 0)) + epb(1, 5, frame(1, 1))
open(os.path.join(d, 'tsresol.pcapng'), 'wb').write(res2)
PY

# Wireshark's tools.
src="$tmp/plain-False-False.pcap"
editcap -F pcapng "$src" "$tmp/tool.pcapng"
editcap -F nsecpcap "$src" "$tmp/tool-ns.pcap"
editcap -T rawip "$src" "$tmp/tool-rawip.pcap"
editcap -s 50 "$src" "$tmp/tool-snap50.pcap"
mergecap -F pcapng -w "$tmp/tool-merged.pcapng" "$src" "$tmp/raw.pcap" 2>/dev/null ||
    mergecap -F pcapng -w "$tmp/tool-merged.pcapng" "$src" "$tmp/tool-ns.pcap"

# wiretape's own files: indexes, compressed captures.
wt=target/release/wiretape
if [ -x "$wt" ]; then
    for c in none lz4 zstd; do
        d="$tmp/rec-$c"
        mkdir -p "$d"
        extra=()
        [ "$c" != none ] && extra=(--compress "$c")
        "$wt" record -r "$tmp/plain-True-False.pcap" -w "$d" -q "${extra[@]}" >/dev/null 2>&1 || true
        for f in "$d"/*; do
            case "$f" in
            *.idx) cp "$f" "$out/index/$c-$(basename "$f")" ;;
            *.kdx) cp "$f" "$out/keys/$c-$(basename "$f")" ;;
            *) cp "$f" "$tmp/wt-$c-$(basename "$f")" ;;
            esac
        done
        rm -rf "$d"
    done
fi
# An index of each version's shape by hand too (header only, one entry).
printf 'WTIX' > "$out/index/magic-only.idx"
printf 'WTKDX\001\000\000' > "$out/keys/magic-only.kdx"

for f in "$tmp"/*; do
    [ -f "$f" ] || continue
    for t in walk info repair zread; do cp "$f" "$out/$t/"; done
done
cargo run -q --release --locked -p wiretape-sessions --example fuzz-seeds -- "$out/sessions"
n=$(ls "$out/walk" | wc -l)
echo "seed: $n captures in $out/{walk,info,repair,zread}, $(ls "$out/index" | wc -l) indexes in $out/index, $(ls "$out/keys" | wc -l) key indexes in $out/keys"
