#!/usr/bin/env python3
"""A busy trace for the key index: every frame from a random one of 20,000
clients (10.1.0.0/16, 10.2.0.0/16) to one of 200 servers (10.200.0.0/24), TCP
to 80/443/8080/22, 90-1,400 bytes, so a 1 MiB block holds more than a thousand
distinct hosts (its flow set lists them as "any"); 172.31.9.9 is a rare host
(10 frames, port 40000 to 10.200.0.7:443), 10.1.2.3 a client of 1 in 2,000
frames.

    busy_gen.py OUT.pcap BYTES     (e.g. 7e8)
"""
import random, struct, sys
out, total = sys.argv[1], float(sys.argv[2])
rnd = random.Random(7)
mac = bytes([2,0,0,0,0,1,2,0,0,0,0,2])
pad = bytes(1500)
def frame(src, dst, sp, dp, size):
    hdr = struct.pack(">BBHHHBBH", 0x45, 0, size-14, 0, 0x4000, 64, 6, 0) + bytes(src) + bytes(dst)
    l4 = struct.pack(">HHIIBBHHH", sp, dp, 1, 1, 0x50, 0x18, 1024, 0, 0)
    b = hdr + l4
    return mac + b"\x08\x00" + b + pad[:size-14-len(b)]
n_est = int(total / 760)
rare_at = set(int(n_est*(k+0.5)/10) for k in range(10))
f = open(out, "wb")
f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
written, i, t = 24, 0, 1_700_000_000_000_000
buf = []
while written < total:
    sv = (10, 200, 0, rnd.randrange(1, 201))
    if i in rare_at:
        src, dst, sp, dp = (172,31,9,9), (10,200,0,7), 40000, 443
    else:
        c = rnd.randrange(20000)
        cl = (10, 1 + (c & 1), (c >> 1) // 250, (c >> 1) % 250 + 1)
        if rnd.random() < 0.0005:
            cl = (10, 1, 2, 3)
        src, dst = cl, sv
        sp, dp = rnd.randrange(1024, 65000), rnd.choices([80, 443, 8080, 22], weights=[40,40,10,10])[0]
    if rnd.random() < 0.5:
        src, dst, sp, dp = dst, src, dp, sp
    fr = frame(src, dst, sp, dp, rnd.randrange(90, 1400))
    rec = struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(fr), len(fr)) + fr
    buf.append(rec); written += len(rec); i += 1; t += 10
    if len(buf) > 10000:
        f.write(b"".join(buf)); buf = []
f.write(b"".join(buf))
print(i, "frames", written, "bytes")
