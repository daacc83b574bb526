#!/usr/bin/env python3
"""The per-connection cutoff's reference, written from issue 25's rule text
(not from wiretape's code), for tests/cutoff.rs:

  python3 tests/cutoff_ref.py TRACE.pcap SIZE

prints the 0-based indexes of the records the rule keeps, one per line.

The rule:
- A connection is (IP version, unordered address pair, IP protocol,
  unordered port pair for TCP, UDP and SCTP, else 0), read after up to two
  VLAN tags (0x8100 or 0x88a8).
- Each frame adds its wire length (orig_len) to its connection's count. A
  frame is kept when its connection's count before it is below SIZE.
- TCP segments with SYN, FIN or RST are always kept (and counted).
- Frames that are not IPv4/IPv6 after at most two tags, and non-first IP
  fragments (IPv4 fragment offset > 0; IPv6 fragment header with offset > 0)
  are always kept and never counted.

What the text leaves open, as wiretape's docs decide it: the IPv6 protocol
is the one after the extension headers 0, 43, 44, 60 (at most 8); ports not
in the captured bytes count as 0; a frame too short for its IP header (20
bytes IPv4, 40 IPv6) or whose version nibble is wrong is not IP (kept, not
counted). The table is unbounded here (tests stay below --cutoff-flows).
"""
import struct
import sys


def records(path):
    with open(path, "rb") as f:
        b = f.read()
    magic = struct.unpack_from("<I", b, 0)[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        e = "<"
    else:
        e = ">"
    at = 24
    while at + 16 <= len(b):
        _, _, caplen, orig = struct.unpack_from(e + "IIII", b, at)
        # The wire length is never below the bytes captured.
        yield b[at + 16 : at + 16 + caplen], max(orig, caplen)
        at += 16 + caplen


def u16(b, at):
    if at + 2 > len(b):
        return None
    return struct.unpack_from(">H", b, at)[0]


def classify(f):
    """None: exempt (kept, not counted); else (key, tcp_flags)."""
    et = u16(f, 12)
    if et is None:
        return None
    at = 14
    for _ in range(2):
        if et not in (0x8100, 0x88A8):
            break
        et = u16(f, at + 2)
        if et is None:
            return None
        at += 4
    ip = f[at:]
    if et == 0x0800:
        if len(ip) < 20 or ip[0] >> 4 != 4:
            return None
        if u16(ip, 6) & 0x1FFF:
            return None
        ihl = max((ip[0] & 15) * 4, 20)
        a, b_, proto = ip[12:16], ip[16:20], ip[9]
        l4 = ip[ihl:] if ihl <= len(ip) else None
        version = 4
    elif et == 0x86DD:
        if len(ip) < 40 or ip[0] >> 4 != 6:
            return None
        a, b_ = ip[8:24], ip[24:40]
        nh, off = ip[6], 40
        l4 = ip[off:]
        for _ in range(8):
            if nh in (0, 43, 60):
                if off + 2 > len(ip):
                    l4 = None
                    break
                nh, off = ip[off], off + (ip[off + 1] + 1) * 8
                l4 = ip[off:] if off <= len(ip) else None
            elif nh == 44:
                if off + 4 > len(ip):
                    l4 = None
                    break
                if u16(ip, off + 2) >> 3:
                    return None
                nh, off = ip[off], off + 8
                l4 = ip[off:] if off <= len(ip) else None
            else:
                break
        proto = nh
        version = 6
    else:
        return None
    p1 = p2 = 0
    flags = False
    if proto in (6, 17, 132) and l4 is not None:
        if len(l4) >= 4:
            p1, p2 = u16(l4, 0), u16(l4, 2)
        if proto == 6 and len(l4) > 13:
            flags = bool(l4[13] & 0x07)
    lo, hi = sorted([bytes(a), bytes(b_)])
    return (version, lo, hi, proto, min(p1, p2), max(p1, p2)), flags


def main():
    path, size = sys.argv[1], int(sys.argv[2])
    counts = {}
    out = []
    for i, (f, orig) in enumerate(records(path)):
        c = classify(f)
        if c is None:
            out.append(i)
            continue
        key, flags = c
        before = counts.get(key, 0)
        counts[key] = before + orig
        if flags or before < size:
            out.append(i)
    sys.stdout.write("".join(f"{i}\n" for i in out))


if __name__ == "__main__":
    main()
