#!/usr/bin/env python3
"""benches/softirq_delta.py DIR T0 T1: the deltas benches/softirq_trial.sh prints."""
import os
import sys


def parse(f):
    sec, out = None, {}
    for line in open(f):
        if line.startswith("=="):
            sec = line.split()[1]
            continue
        p = line.split()
        if not p:
            continue
        if sec == "softirqs" and p[0].endswith(":"):
            out["softirq." + p[0][:-1]] = [int(x) for x in p[1:3]]
        elif sec == "interrupts":
            out["irq." + p[0][:-1]] = [int(x) for x in p[1:3] if x.isdigit()]
        elif sec == "stat":
            if p[0].startswith("cpu") and p[0] != "cpu":
                out["stat." + p[0]] = [int(x) for x in p[1:9]]
            elif p[0] == "ctxt":
                out["ctxt"] = [int(p[1])]
    return out


d, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
a, b = parse(d + "/s0"), parse(d + "/s1")
dt = t1 - t0
print(f"window {dt:.2f} s (CPU 0: the generator and the kernel's receive path; CPU 1: the recorder)")
for k in a:
    x = [y - v for v, y in zip(a[k], b.get(k, a[k]))]
    if k.startswith("stat."):
        print(f"{k}: user {x[0] + x[1]} system {x[2]} softirq {x[6]} idle {x[3]} iowait {x[4]} (ticks of 10 ms)")
    elif sum(x) > 0:
        print(f"{k}: per CPU {x}, per s {[round(v / dt) for v in x]}")
if os.path.exists(d + "/t0"):
    before = {l.split()[0]: l.split() for l in open(d + "/t0")}
    for line in open(d + "/t1"):
        p = line.split()
        if p[0] in before and len(p) >= 6:
            q = before[p[0]]
            u, s = int(p[2]) - int(q[2]), int(p[3]) - int(q[3])
            cs = [int(v) - int(w) for v, w in zip(p[4:6], q[4:6])]
            if u + s + sum(cs) > 0:
                print(f"thread {p[1]}: user {u} system {s} ticks, context switches voluntary/involuntary {cs}")
