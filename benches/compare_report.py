#!/usr/bin/python3
"""compare_report.py TRIALS.csv COUNTS.csv OUTDIR MEM: the table and chart of benches/compare.sh.

loss % uses the frames counted by capinfos (COUNTS), sent = trafgen's count.
cpu s/Mp = the capture process's CPU seconds per million frames sent.
kernel s/Mp = the irq+softirq seconds of all CPUs during the trial (the rig's
kirq_s) above the median of the `none` trials of the same size (the generator
alone), per million frames sent: the kernel work the tool causes.
whole s/Mp = process + kernel: what the machine pays per frame for the tool.
gen/none = the generator's rate while the tool captured / with no tool (same run).
Ratios: wiretape's median divided by the peer's median (same trials).
"""
import csv, sys, statistics as st
from collections import defaultdict

trials_csv, counts_csv, out, mem = sys.argv[1:5]
rows = [r for r in csv.DictReader(open(trials_csv))]
counts = [r for r in csv.DictReader(open(counts_csv))]

def f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None

# The i-th trial of (size, tool) pairs with the i-th count of (size, tool).
seen = defaultdict(int)
cnt = defaultdict(list)
for c in counts:
    cnt[(c["size"], c["tool"])].append(c)
data = defaultdict(lambda: defaultdict(list))
order = []
for r in rows:
    key = (r["size"], r["tool"])
    if key not in data:
        order.append(key)
    i = seen[key]; seen[key] += 1
    sent = f(r["sent"])
    d = data[key]
    d["sent"].append(sent)
    d["gen_kpps"].append(f(r["gen_kpps"]))
    d["cpu_s"].append(f(r["cpu_s"]))
    d["mbps"].append(f(r["write_MBps"]))
    d["kirq"].append(f(r.get("kirq_s")))
    d["rss_mb"].append(f(r["maxrss_kb"]) / 1024 if f(r["maxrss_kb"]) else None)
    if r["tool"] != "none" and i < len(cnt[key]):
        w = f(cnt[key][i]["written_capinfos"])
        d["written"].append(w)
        d["counter"] = cnt[key][i]["counter"]
        d["loss"].append(100.0 * (sent - w) / sent if sent and w is not None else None)
        cs = f(r["cpu_s"])
        d["cpu_per_mp"].append(cs / (sent / 1e6) if cs is not None and sent else None)
        d["sent_counted"].append(sent)
    if r["note"] == "failed-to-start" or r["exit"] not in ("ok", ""):
        d["notes"].append(r["note"] or r["exit"])

def med(v):
    v = [x for x in v if x is not None]
    return st.median(v) if v else None

def kernel_and_whole():
    """Per trial: kernel s/Mp above the `none` trials' median kirq, and whole = process + kernel."""
    for (sz, t), d in data.items():
        if t == "none":
            continue
        base = med(data[(sz, "none")]["kirq"]) if (sz, "none") in data else None
        for k, sent, cpm in zip(d["kirq"], d["sent_counted"], d["cpu_per_mp"]):
            kp = (k - base) / (sent / 1e6) if k is not None and base is not None and sent else None
            d["kern_per_mp"].append(kp)
            d["whole_per_mp"].append(cpm + kp if kp is not None and cpm is not None else None)


def fmt(v, nd=1):
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    s = ("%%.%df" % nd) % st.median(v)
    if len(v) > 1 and min(v) != max(v):
        s += (" [%%.%df..%%.%df]" % (nd, nd)) % (min(v), max(v))
    return s

kernel_and_whole()
sizes = sorted({k[0] for k in order}, key=int)
lines = ["# wiretape beside its peers (benches/compare.sh)", "",
         f"Shared rig, fixed frame counts, generator {', '.join(sorted({r['gen'] for r in rows}))}, "
         f"every tool in a memory cgroup of {mem}; frames written counted by "
         "capinfos (stenotype: the rig's pcapcount). median [min..max] over runs.", "",
         "CPU s per million frames: process = the tool's own; kernel = irq+softirq of all CPUs "
         "above the generator alone (`none`); whole = process + kernel, what the machine pays.", "",
         "| size | tool | runs | sent | written | loss % | process s/Mframe | kernel s/Mframe | whole s/Mframe | write MB/s | max RSS MB | gen kpps | gen/none |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for s in sizes:
    none = med(data[(s, "none")]["gen_kpps"]) if (s, "none") in data else None
    for (sz, t) in order:
        if sz != s:
            continue
        d = data[(sz, t)]
        gn = [g / none if g and none else None for g in d["gen_kpps"]]
        lines.append(f"| {s} B | {t} | {len(d['sent'])} | {fmt(d['sent'], 0)} | {fmt(d['written'], 0)} | "
                     f"{fmt(d['loss'], 2)} | {fmt(d['cpu_per_mp'], 2)} | {fmt(d['kern_per_mp'], 2)} | {fmt(d['whole_per_mp'], 2)} | {fmt(d['mbps'], 0)} | {fmt(d['rss_mb'], 0)} | "
                     f"{fmt(d['gen_kpps'], 0)} | {fmt(gn, 2)} |" + (f" {','.join(d['notes'])}" if d["notes"] else ""))
lines += ["", "wiretape's ratios to each peer (medians of the same trials; CPU < 1 = wiretape uses less per frame):", "",
          "| size | peer | peer loss % | wiretape loss % | process CPU per frame: wiretape / peer | whole machine: wiretape / peer |", "|---|---|---|---|---|---|"]
for s in sizes:
    wt = data.get((s, "wiretape"))
    if not wt:
        continue
    for (sz, t) in order:
        if sz != s or t in ("none", "wiretape"):
            continue
        p = data[(sz, t)]
        a, b = med(wt["cpu_per_mp"]), med(p["cpu_per_mp"])
        ratio = "%.2f" % (a / b) if a and b else "-"
        wa, wb = med(wt["whole_per_mp"]), med(p["whole_per_mp"])
        wratio = "%.2f" % (wa / wb) if wa and wb else "-"
        lines.append(f"| {s} B | {t} | {fmt(p['loss'], 2)} | {fmt(wt['loss'], 2)} | {ratio} | {wratio} |")
open(f"{out}/compare.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tools = [t for t in dict.fromkeys(k[1] for k in order) if t != "none"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, metric, title in [(axes[0], "loss", "loss % (lower is better)"),
                              (axes[1], "whole_per_mp", "whole-machine CPU s per million frames (lower is better)")]:
        width = 0.8 / max(len(sizes), 1)
        for i, s in enumerate(sizes):
            ys, lo, hi = [], [], []
            for t in tools:
                v = [x for x in data.get((s, t), {}).get(metric, []) if x is not None]
                m = st.median(v) if v else 0
                ys.append(m); lo.append(m - (min(v) if v else 0)); hi.append((max(v) if v else 0) - m)
            xs = [j + i * width for j in range(len(tools))]
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=f"{s} B")
        ax.set_xticks([j + width * (len(sizes) - 1) / 2 for j in range(len(tools))])
        ax.set_xticklabels(tools, rotation=20)
        ax.set_title(title)
        ax.legend()
    fig.suptitle(f"Capture to disk on the veth rig, memory.max {mem} (median, min..max)")
    fig.tight_layout()
    fig.savefig(f"{out}/compare.png", dpi=110)
    print(f"\nchart: {out}/compare.png")
except ImportError:
    print("(no matplotlib: no chart)")
