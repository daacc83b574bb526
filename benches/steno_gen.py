#!/usr/bin/env python3
"""The traffic of benches/steno.sh: a pcap of connections between many hosts.

    steno_gen.py OUT.pcap --bytes 2.2e9 --clients 6000 [--seed 1]

Writes OUT.pcap (classic pcap, microsecond stamps 10 us apart: replayed at a
fixed rate, stamps do not matter) and OUT.pcap.json: what each query of the
benchmark must return, counted here as the frames are made.

Traffic: clients 10.1.0.0/16 and 10.2.0.0/16 (half each) talk to 200 servers
10.200.0.1-200. About 600 connections are open at once and the next frame
comes from a random one, so consecutive frames belong to different
connections but a connection's frames stay close together (many frames per
connection per 1 MiB block, as on a real link). TCP to port 80 (40 %), 443
(40 %), 8080 (10 %), 22 (10 %), 4-40 frames of 60-1,400 bytes each way; UDP
DNS to 10.200.0.53:53 (a query and its answer); ICMP echo pairs. Server
10.200.0.1 is the busy host (a tenth of the connections); 10.1.2.3 is a
client with extra connections to every port (the conjunction and the
time-bounded query); 172.31.9.9 is the rare host: 10 frames of one
connection to 10.200.0.7:443, spread evenly over the trace.
"""
import argparse
import json
import random
import struct
import sys


def ip(a):
    return bytes(a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--bytes", type=float, default=2.2e9)
    ap.add_argument("--clients", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    clients = []
    for i in range(a.clients):
        net = 1 if i % 2 == 0 else 2
        k = i // 2
        clients.append((10, net, k // 250, k % 250 + 1))
    servers = [(10, 200, 0, i) for i in range(1, 201)]
    busy = (10, 200, 0, 1)
    conj = (10, 1, 2, 3)
    rare = (172, 31, 9, 9)
    dns = (10, 200, 0, 53)
    mac = bytes([0x02, 0x70, 0x62, 0, 0, 0x99, 0x02, 0x70, 0x62, 0, 0, 0x01])
    pad = bytes(1400)

    def frame(src, dst, proto, sp, dp, size):
        size = max(size, 60)
        l4 = struct.pack(">HH", sp, dp)
        if proto == 6:
            l4 += struct.pack(">IIBBHHH", 1, 1, 0x50, 0x18, 1024, 0, 0)
        elif proto == 17:
            l4 += struct.pack(">HH", size - 34, 0)
        else:
            l4 = struct.pack(">BBHHH", 8 if sp else 0, 0, 0, dp, sp)
        total = size - 14
        hdr = struct.pack(">BBHHHBBH", 0x45, 0, total, 0, 0x4000, 64, proto, 0) + ip(src) + ip(dst)
        body = hdr + l4
        return mac + b"\x08\x00" + body + pad[: size - 14 - len(body)]

    # Sessions: [frames left, client, server, proto, cport, sport]
    def new_session():
        r = rnd.random()
        c = conj if rnd.random() < 0.0005 else clients[rnd.randrange(len(clients))]
        cp = rnd.randrange(1024, 65000)
        if r < 0.05:
            return [2, c, dns, 17, cp, 53]
        if r < 0.06:
            return [2, c, servers[rnd.randrange(200)], 1, rnd.randrange(1, 60000), 0]
        s = busy if rnd.random() < 0.1 else servers[rnd.randrange(200)]
        p = rnd.choices([80, 443, 8080, 22], weights=[40, 40, 10, 10])[0]
        return [rnd.randrange(4, 41), c, s, 6, cp, p]

    active = [new_session() for _ in range(600)]
    avg = 700
    n_est = int(a.bytes / (avg + 16))
    rare_at = set(int(n_est * (k + 0.5) / 10) for k in range(10))
    truth = {
        "rare_host": "172.31.9.9",
        "busy_host": "10.200.0.1",
        "conj_host": "10.1.2.3",
        "counts": {k: 0 for k in ["rare", "busy", "port8080", "net", "udp_or_icmp", "conj", "conj_host"]},
    }
    c = truth["counts"]
    out = open(a.out + ".tmp", "wb")
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    buf = []
    written = 24
    i = 0
    t = 1_700_000_000_000_000
    while written < a.bytes:
        if i in rare_at:
            up = len([x for x in rare_at if x <= i]) % 2 == 1
            src, dst = (rare, servers[6]) if up else (servers[6], rare)
            sp, dp = (40000, 443) if up else (443, 40000)
            f = frame(src, dst, 6, sp, dp, rnd.randrange(60, 1400))
            c["rare"] += 1
            ends = (src, dst)
            ports = (sp, dp)
            proto = 6
        else:
            k = rnd.randrange(len(active))
            s = active[k]
            left, cl, sv, proto, cp, spt = s
            up = rnd.random() < 0.5 if proto == 6 else left == 2
            if proto == 1:
                src, dst = (cl, sv) if left == 2 else (sv, cl)
                f = frame(src, dst, 1, cp, 7, 98)
                ports = ()
            else:
                src, dst = (cl, sv) if up else (sv, cl)
                sp, dp = (cp, spt) if up else (spt, cp)
                size = rnd.randrange(60, 1400) if proto == 6 else rnd.randrange(70, 300)
                f = frame(src, dst, proto, sp, dp, size)
                ports = (sp, dp)
            ends = (src, dst)
            s[0] -= 1
            if s[0] == 0:
                active[k] = new_session()
        if busy in ends:
            c["busy"] += 1
        if 8080 in ports:
            c["port8080"] += 1
        if any(e[0] == 10 and e[1] == 1 for e in ends):
            c["net"] += 1
        if proto in (1, 17):
            c["udp_or_icmp"] += 1
        if conj in ends:
            c["conj_host"] += 1
            if 443 in ports:
                c["conj"] += 1
        rec = struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(f), len(f)) + f
        buf.append(rec)
        written += len(rec)
        t += 10
        i += 1
        if len(buf) >= 20000:
            out.write(b"".join(buf))
            buf = []
    out.write(b"".join(buf))
    out.close()
    truth["frames"] = i
    truth["bytes"] = written
    truth["hosts"] = len(clients) + len(servers) + 1
    import os

    os.replace(a.out + ".tmp", a.out)
    with open(a.out + ".json", "w") as j:
        json.dump(truth, j)
    print(f"steno_gen: {i} frames, {written} bytes, {truth['hosts']} hosts -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
