#!/usr/bin/env python3
"""Traces for benches/compress.sh (ns pcap, Ethernet/IPv4/TCP):

  compress_gen.py KIND OUT.pcap FRAMES SPAN_S

KIND: clear  (HTTP-like cleartext payloads cut from a generated corpus of
             headers, HTML and JSON: what a web or API tap carries),
      random (the same headers, random payloads: TLS or compressed media),
      pareto (TCP connections, both directions, whose sizes follow a Pareto
             law with alpha 1.2 from 2 kB (the heavy tail the Time Machine
             paper measured), SYN first, FIN last, random payloads).
Frames are evenly spaced over SPAN_S seconds; sizes 60..1514 bytes.
"""
import os
import random
import struct
import sys


def eth_ip_tcp(src, dst, sp, dp, flags, payload):
    tcp = struct.pack(">HHIIBBHHH", sp, dp, 1, 1, 0x50, flags, 0xFFFF, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 1, 0x4000, 64, 6, 0,
                     bytes(src), bytes(dst))
    eth = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"
    return eth + ip + tcp + payload


def corpus(rng, n):
    words = ("the of and to in is for on that with content type text html json "
             "user agent mozilla accept encoding gzip cookie session id value "
             "GET POST HTTP/1.1 200 OK host example org api v1 items name price "
             "description status true false null div class span href src").split()
    out = []
    size = 0
    while size < n:
        k = rng.random()
        if k < 0.3:
            line = (f"GET /api/v1/items/{rng.randrange(100000)}?page={rng.randrange(50)} HTTP/1.1\r\n"
                    f"Host: www.example.org\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n"
                    f"Accept: text/html,application/json\r\nCookie: session={rng.randrange(1 << 40):x}\r\n\r\n")
        elif k < 0.6:
            line = ('{"id": %d, "name": "%s", "price": %d.%02d, "status": "%s"}\n'
                    % (rng.randrange(10 ** 6), " ".join(rng.choice(words) for _ in range(3)),
                       rng.randrange(1000), rng.randrange(100), rng.choice(["ok", "sold", "new"])))
        else:
            line = "<div class=\"%s\"><span>%s</span></div>\n" % (
                rng.choice(words), " ".join(rng.choice(words) for _ in range(8)))
        out.append(line)
        size += len(line)
    return "".join(out).encode()


def main():
    kind, out, frames, span = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    rng = random.Random(1)
    step = int(span * 1e9 / frames)
    t = 1_763_900_000_000_000_000
    text = corpus(rng, 8 << 20) if kind == "clear" else b""
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1))

        def put(frame):
            nonlocal t
            f.write(struct.pack("<IIII", t // 10 ** 9, t % 10 ** 9, len(frame), len(frame)))
            f.write(frame)
            t += step

        if kind in ("clear", "random"):
            for i in range(frames):
                n = rng.choice([60, 60, 200, 576, 1514, 1514, 1514]) - 54
                n = max(n, 6)
                if kind == "clear":
                    at = rng.randrange(len(text) - n)
                    pay = text[at:at + n]
                else:
                    pay = os.urandom(n)
                c = i % 1000
                put(eth_ip_tcp([10, 0, c >> 8, c & 255], [10, 1, 0, 1], 40000 + c, 443, 0x18, pay))
            return
        # pareto: connections interleaved until FRAMES frames
        live = []
        made = 0
        cid = 0
        while made < frames:
            while len(live) < 200:
                u = rng.random()
                size = int(2000 / (1 - u) ** (1 / 1.2))
                live.append([cid, min(size, 2_000_000_000), 0])
                cid += 1
            k = rng.randrange(len(live))
            c = live[k]
            a = [10, 2, (c[0] >> 8) & 255, c[0] & 255]
            b = [10, 3, 0, 1]
            sp, dp = 1024 + c[0] % 60000, 80
            if rng.random() < 0.5:
                a, b, sp, dp = b, a, dp, sp
            n = rng.choice([0, 0, 1460, 1460, 1460, 500])
            first = c[2] == 0
            last = c[1] <= n + 54
            flags = 0x02 if first else (0x11 if last else 0x10)
            if first:
                n = 0
            put(eth_ip_tcp(a, b, sp, dp, flags, os.urandom(n) if n else b""))
            c[1] -= n + 54
            c[2] += 1
            made += 1
            if last:
                live.pop(k)


if __name__ == "__main__":
    main()
