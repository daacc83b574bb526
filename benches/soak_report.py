#!/usr/bin/env python3
"""The verdict of benches/soak.sh from what it left in OUT: a Markdown report
on stdout, a plot in OUT/soak.svg; exit 1 if anything was lost, a query was
answered wrongly, a log has an error line, or memory, descriptors or threads
grew past the thresholds (SOAK_MAX_RSS_MIB, SOAK_MAX_FDS, SOAK_MAX_THREADS).

  soak_report.py OUT SECONDS PPS SIZE
"""

import csv
import json
import os
import re
import statistics as st
import sys

out, secs, pps, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
MAX_RSS = float(os.environ.get("SOAK_MAX_RSS_MIB", 16)) * 1024
MAX_FDS = float(os.environ.get("SOAK_MAX_FDS", 4))
MAX_THR = float(os.environ.get("SOAK_MAX_THREADS", 4))
# The most key indexes a reader keeps open (wiretape-files' kept.rs, OPEN_FILES).
KEPT_KDX = 256
failures = []


def fail(why):
    failures.append(why)


rows = list(csv.DictReader(open(f"{out}/soak.csv")))
s = json.load(open(f"{out}/summary.json"))
g = json.loads(open(f"{out}/gen.json").read().strip().splitlines()[-1])
seen_files = json.load(open(f"{out}/files.json"))
left = {}
for line in open(f"{out}/left.txt"):
    name, nbytes, frames = line.split()
    left[name] = (int(nbytes), int(frames))
queries = [json.loads(line) for line in open(f"{out}/queries.jsonl")]

print(f"# Soak with analysts: `benches/soak.sh {secs} {pps} {size}`")
print()
print(f"{secs} s of {pps} frames/s x {size} B on a veth pair, `record --rotate-time 3s --keep-files 40`; "
      "`wiretape api` on 127.0.0.1 with mutual TLS; a client every few seconds "
      "(benches/soak_client.py); `index --parquet` every 30 s.")
print()

# Nothing lost.
sent = g["sent"]
ret = s["retention"]
gone = sorted(set(seen_files) - set(left))
gone_frames = sum(seen_files[n]["frames"] for n in gone)
gone_bytes = sum(seen_files[n]["bytes"] + seen_files[n]["idx_bytes"] for n in gone)
left_frames = sum(v[1] for v in left.values())
mismatch = [n for n in left if n in seen_files and seen_files[n]["frames"] != left[n][1]]
print("## Frames")
print()
print("| | frames | files | bytes (with the .idx, .kdx and .sessions.parquet sidecars where deleted) |")
print("|---|---|---|---|")
print(f"| sent (`gen --json`) | {sent:,} | | |")
print(f"| seen / written by the recorder (summary) | {s['packets_seen']:,} / {s['packets_written']:,} | | |")
print(f"| in the files left (`extract FILE --count-only`) | {left_frames:,} | {len(left)} | {sum(v[0] for v in left.values()):,} |")
print(f"| in the files retention deleted (each seen complete in `/v1/files`) | {gone_frames:,} | {len(gone)} | {gone_bytes:,} |")
print(f"| deleted by retention (summary) | | {ret['deleted_files']} | {ret['deleted_bytes']:,} |")
print()
print(f"drops {s['drops']['total']}, identity {s['identity_holds']}; "
      f"left + deleted = {left_frames + gone_frames:,}")
if not (s["packets_seen"] == sent and s["packets_written"] == sent):
    fail(f"sent {sent}, seen {s['packets_seen']}, written {s['packets_written']}")
if s["drops"]["total"] != 0 or not s["identity_holds"]:
    fail(f"drops {s['drops']['total']}, identity {s['identity_holds']}")
if left_frames + gone_frames != sent:
    fail(f"files left {left_frames} + deleted {gone_frames} != sent {sent}")
if len(gone) != ret["deleted_files"] or gone_bytes != ret["deleted_bytes"]:
    fail(f"deleted files seen {len(gone)} ({gone_bytes} B) != summary {ret['deleted_files']} ({ret['deleted_bytes']} B)")
if mismatch:
    fail(f"{len(mismatch)} files' frames differ between /v1/files and the file: {mismatch[:3]}")
if ret["deleted_files"] == 0:
    fail("retention deleted nothing: the run is too short to test it")

# Queries.
print()
print("## Queries (each checked against a local `wiretape extract` of the same window)")
print()
print("| check | asked | wrong | median ms | max ms |")
print("|---|---|---|---|---|")
kinds = ["files", "count", "extract", "timeline", "console", "abandoned", "index", "busy", "error"]
for k in kinds:
    q = [x for x in queries if x["kind"] == k]
    if not q and k in ("busy", "error"):
        continue
    bad = [x for x in q if not x["ok"]]
    ms = [x["ms"] for x in q if "ms" in x]
    med = f"{st.median(ms):.0f}" if ms else ""
    mx = f"{max(ms):.0f}" if ms else ""
    print(f"| {k} | {len(q)} | {len(bad)} | {med} | {mx} |")
    if bad:
        fail(f"{len(bad)} wrong {k} answers, the first: {json.dumps(bad[0])}")
    if not q:
        fail(f"no {k} check ran")
ex = [x for x in queries if x["kind"] == "extract" and x["ok"]]
if ex:
    print()
    print(f"extractions compared byte for byte: {len(ex)}, {sum(x['frames'] for x in ex):,} frames, "
          f"{sum(x['bytes'] for x in ex) / 1e6:.0f} MB; windows with a filter: "
          f"{sum(1 for x in ex if x['filter'])}; empty windows: {sum(1 for x in ex if x['frames'] == 0)}")

# Logs.
api_log = open(f"{out}/api.log").read().splitlines()
rec_log = open(f"{out}/record.log").read().splitlines()
cut = [l for l in api_log if "-> 200 cut: the client went away" in l]
answered = [l for l in api_log if re.search(r" -> 200(,|$| cut: the client went away)", l)]
other_api = [l for l in api_log if l not in answered and not re.match(r"wiretape: api: serving ", l)]
bad_rec = [l for l in rec_log if re.search(r"(?i)error|warn|fail|panic|lost|corrupt|truncat|\b[1-9][\d,]* (packets )?dropped", l)]
abandoned = sum(1 for x in queries if x["kind"] == "abandoned")
print()
print("## Logs")
print()
print(f"- api: {len(api_log)} lines, {len(answered)} answers with 200 ({len(cut)} of them \"cut: the client went "
      f"away\", for {abandoned} abandoned downloads), {len(other_api)} other lines")
print(f"- record: {len(rec_log)} lines, {len(bad_rec)} naming an error, a warning, a failure or a loss")
for l in other_api[:5] + bad_rec[:5]:
    print(f"  - `{l[:200]}`")
if other_api:
    fail(f"{len(other_api)} API log lines other than a 200 answer")
if bad_rec:
    fail(f"{len(bad_rec)} error lines in the recorder's log")
if len(cut) != abandoned:
    fail(f"{abandoned} downloads abandoned, {len(cut)} seen cut by the API")

# Flat.
# By the clock of the samples (a busy machine takes more than a second
# between some of them).
T = int(rows[-1]["t_s"]) + 1
# The first fifth (at most 120 s) is warm-up, left out: rings, block
# buffers and the key index builder's row buffers grow to their working
# size there (a 5-minute run's recorder went 175 -> 210 MB in its first
# 100 s, then 210 -> 214 MB to its end).
warm = min(120, T // 5)
win = max(1, min(600, (T - warm) // 3))
first = [r for r in rows if warm <= int(r["t_s"]) < warm + win]
last = [r for r in rows if int(r["t_s"]) >= T - win]
print()
print(f"## Flat: {warm}-{warm + win} s against the last {win} s, after {warm} s of warm-up ({len(first)} and {len(last)} samples; medians, max in brackets)")
print()
print("| process | measure | first | last | growth | allowed |")
print("|---|---|---|---|---|---|")
cols = [("recorder", "rec"), ("api", "api")]
for proc, p in cols:
    for m, unit, lim in (("rss_kib", "KiB", MAX_RSS), ("fds", "", MAX_FDS), ("threads", "", MAX_THR)):
        c = f"{p}_{m}"
        a = [int(r[c]) for r in first]
        b = [int(r[c]) for r in last]
        d = st.median(b) - st.median(a)
        print(f"| {proc} | {m} | {st.median(a):.0f} [{max(a)}] | {st.median(b):.0f} [{max(b)}] | {d:+.0f} | {lim:.0f} |")
        if d > lim:
            fail(f"{proc} {m} grew by {d:+.0f} {unit} (allowed {lim:.0f})")
fi = [int(r["files_in_dir"]) for r in rows]
kk = [int(r["api_kept_kdx"]) for r in rows]
print()
print(f"files in the store (captures and indexes): {min(fi)}..{max(fi)}")
print(f"key indexes the API keeps open (not counted in its fds): {min(kk)}..{max(kk)} (allowed {KEPT_KDX})")
if max(kk) > KEPT_KDX:
    fail(f"the API kept {max(kk)} key indexes open (allowed {KEPT_KDX}, files::kept's bound)")

# The plot: one panel per measure, SVG, no dependencies.
panels = [(f"{p}_{m}", f"{proc} {m}") for proc, p in cols for m in ("rss_kib", "fds", "threads")]
panels.append(("api_kept_kdx", "key indexes the api keeps open"))
panels.append(("files_in_dir", "files in the store"))
PW, PH, M = 420, 110, 30
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * PW + 3 * M}" height="{4 * (PH + M) + M}" '
       f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>']
for i, (c, title) in enumerate(panels):
    x0, y0 = M + (i % 2) * (PW + M), M + (i // 2) * (PH + M)
    v = [int(r[c]) for r in rows]
    lo, hi = min(v), max(v)
    span = (hi - lo) or 1
    ts = [int(r["t_s"]) for r in rows]
    pts = " ".join(f"{x0 + PW * t / max(1, T - 1):.1f},{y0 + PH - PH * (x - lo) / span:.1f}" for t, x in zip(ts, v))
    svg.append(f'<rect x="{x0}" y="{y0}" width="{PW}" height="{PH}" fill="none" stroke="#ccc"/>')
    for a, b in ((warm, warm + win), (T - win, T)):
        svg.append(f'<rect x="{x0 + PW * a / T:.1f}" y="{y0}" width="{PW * (b - a) / T:.1f}" height="{PH}" fill="#eef"/>')
    svg.append(f'<polyline fill="none" stroke="#c33" stroke-width="1" points="{pts}"/>')
    svg.append(f'<text x="{x0}" y="{y0 - 6}">{title}: {lo}..{hi} over {T} s</text>')
svg.append("</svg>")
open(f"{out}/soak.svg", "w").write("\n".join(svg))
print()
print("plot: soak.svg (blue: the windows compared)")

print()
if failures:
    print("## FAILED")
    print()
    for f in failures:
        print(f"- {f}")
    sys.exit(1)
print("Nothing lost, every query answered correctly, no error line, flat.")
