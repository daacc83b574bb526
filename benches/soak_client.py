#!/usr/bin/env python3
"""The analysts of benches/soak.sh: while `record` writes a rotating store
with retention, ask `wiretape api` (mutual TLS, stdlib ssl + http.client;
the console by curl) every few seconds and check every answer against a
local `wiretape extract` of the same window:

  /v1/files     kept: each file's frames and bytes once it is complete (and
                its .idx and .kdx sidecars' sizes), so that the frames and bytes
                retention deletes can be summed at the end
  /v1/count     frames and bytes = `extract DIR --count-only --json`
  /v1/extract   the body's bytes from the 25th on = `extract DIR -w -`
                (sha256), its records counted = the local count
  /v1/timeline  totals.frames = the local count
  /             the console's page (curl with the client certificate): 200,
                text/html, and every script and style it names
  abandoned     every 4th round an extraction of the whole store, dropped
                after a few hundred KiB (the server must free its slot)
  index         every INDEX_EVERY s `wiretape index --parquet` of the store:
                exit 0, and DuckDB's frames per complete file = /v1/files

Windows lie in complete files among the newest of the store (retention
deletes the oldest), never reaching into a file being written. One JSON
line per check goes to OUT/queries.jsonl, the complete files seen to
OUT/files.json. Runs for SECONDS, then exits 0 (the report judges).

  soak_client.py URL TLS_DIR WIRETAPE STORE OUT SECONDS [EVERY] [INDEX_EVERY]
"""

import hashlib
import http.client
import json
import os
import random
import re
import signal
import ssl
import struct
import subprocess
import sys
import time
import urllib.parse

url, tls, binary, store, out, secs = sys.argv[1:7]
every = float(sys.argv[7]) if len(sys.argv) > 7 else 3.0
index_every = float(sys.argv[8]) if len(sys.argv) > 8 else 30.0
secs = float(secs)
host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
ctx = ssl.create_default_context(cafile=f"{tls}/ca.pem")
ctx.load_cert_chain(f"{tls}/client-soak.pem", f"{tls}/client-soak.key")
seed = int(time.time())
rnd = random.Random(seed)
log = open(f"{out}/queries.jsonl", "a", buffering=1)
files = {}  # name -> {frames, bytes, first_ns, last_ns} once complete
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def note(kind, ok, **kw):
    kw.update(t=round(time.time(), 3), kind=kind, ok=bool(ok))
    log.write(json.dumps(kw) + "\n")
    if not ok:
        print(f"soak client: {kind} WRONG: {json.dumps(kw)}", file=sys.stderr)


def conn():
    return http.client.HTTPSConnection(host, port, context=ctx, timeout=60)


def get(path, tries=5):
    """GET path; 503 (all query slots busy) is retried after its Retry-After."""
    for i in range(tries):
        c = conn()
        t0 = time.monotonic()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        ms = (time.monotonic() - t0) * 1000
        c.close()
        if r.status == 503 and i + 1 < tries:
            note("busy", True, path=path)
            time.sleep(float(r.getheader("Retry-After", "1")))
            continue
        return r.status, r.getheader("Content-Type", ""), body, ms
    return r.status, "", body, ms


def poll_files():
    st, _, body, ms = get("/v1/files")
    if st != 200:
        note("files", False, status=st, body=body[:200].decode(errors="replace"))
        return None
    fl = json.loads(body)["files"]
    for f in fl:
        if not f["being_written"] and f["frames"] is not None:
            e = files.setdefault(f["name"], {})
            e.update({k: f[k] for k in ("frames", "bytes", "first_ns", "last_ns")})
            # Retention counts the sidecars' bytes too (.idx, the key index
            # .kdx, written by its builder once the file closed, and the
            # session table .sessions.parquet, written by the session
            # thread then): looked at again every round while the file is
            # listed.
            side = 0
            for ext in (".idx", ".kdx", ".sessions.parquet"):
                try:
                    side += os.stat(f"{store}/{f['name']}{ext}").st_size
                except FileNotFoundError:
                    pass
            e["idx_bytes"] = max(side, e.get("idx_bytes", 0))
    note("files", True, n=len(fl), ms=round(ms, 1))
    return fl


def local(args):
    p = subprocess.run([binary, "extract", store, "-q", *args], capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"local extract {args}: exit {p.returncode}: {p.stderr.decode()[-300:]}")
    return p.stdout


def pcap_records(b):
    n, off = 0, 24
    while off + 16 <= len(b):
        (incl,) = struct.unpack_from("<I", b, off + 8)
        off += 16 + incl
        n += 1
    return n, off == len(b)


def ts(ns):
    return f"{ns // 10**9}.{ns % 10**9:09d}"


def window(fl):
    """A random window inside complete files among the newest, ending before
    the first frame of any file being written."""
    done = sorted((f for f in fl if not f["being_written"] and f["first_ns"]), key=lambda f: f["first_ns"])
    open_first = [f["first_ns"] for f in fl if f["being_written"] and f["first_ns"]]
    if len(done) < 4:
        return None
    newest = done[-min(8, len(done) // 2):]
    f = rnd.choice(newest)
    limit = min([f["last_ns"] for f in newest[-1:]] + open_first)
    a = rnd.randint(f["first_ns"], f["last_ns"])
    b = a + rnd.randint(1, 800_000_000)  # up to 0.8 s
    b = min(b, limit)
    if b <= a:
        return None
    return a, b


FILTERS = [None, None, "udp src port 10003", "5tuple"]


rounds = 0


def query_round(fl):
    global rounds
    w = window(fl)
    if not w:
        return
    a, b = w
    flt = FILTERS[rounds % len(FILTERS)]
    rounds += 1
    q = {"from": ts(a), "to": ts(b)}
    largs = ["--from", ts(a), "--to", ts(b)]
    if flt == "5tuple":
        q.update(proto="udp", sport="10005")
        largs += ["udp", "and", "port", "10005"]
    elif flt:
        q["filter"] = flt
        largs += flt.split()
    qs = urllib.parse.urlencode(q)
    want = json.loads(local(largs + ["--count-only", "--json"]))
    # /v1/count
    st, _, body, ms = get(f"/v1/count?{qs}")
    got = json.loads(body) if st == 200 else {}
    note("count", st == 200 and got.get("frames") == want["frames"] and got.get("bytes") == want["bytes"],
         window=[a, b], filter=flt, status=st, frames=got.get("frames"), want=want["frames"], ms=round(ms, 1))
    # /v1/extract: the same bytes as a local extract, from the 25th on
    st, ctype, body, ms = get(f"/v1/extract?{qs}")
    mine = local(largs + ["-w", "-"])
    recs, whole = pcap_records(body)
    same = hashlib.sha256(body[24:]).digest() == hashlib.sha256(mine[24:]).digest()
    note("extract", st == 200 and same and whole and recs == want["frames"] and ctype.startswith("application/vnd.tcpdump.pcap"),
         window=[a, b], filter=flt, status=st, frames=recs, want=want["frames"], bytes=len(body), same=same, ms=round(ms, 1))
    # /v1/timeline (no filter words: its totals are the window's frames)
    if flt is None:
        st, _, body, ms = get(f"/v1/timeline?{qs}")
        tot = json.loads(body).get("totals", {}).get("frames") if st == 200 else None
        note("timeline", st == 200 and tot == want["frames"], window=[a, b], status=st, frames=tot,
             want=want["frames"], ms=round(ms, 1))


def console():
    base = f"https://127.0.0.1:{port}"
    cmd = ["curl", "-sS", "--max-time", "30", "--cacert", f"{tls}/ca.pem", "--cert", f"{tls}/client-soak.pem",
           "--key", f"{tls}/client-soak.key", "-o", "-", "-w", "\n%{http_code} %{content_type}"]
    t0 = time.monotonic()
    p = subprocess.run(cmd + [base + "/"], capture_output=True)
    page, _, tail = p.stdout.rpartition(b"\n")
    code, _, ctype = tail.decode().partition(" ")
    # Its script and style (not the download link: a whole-store extraction)
    assets = [a for a in re.findall(rb'(?:src|href)="(/[^"]*)"', page) if not a.startswith(b"/v1/")]
    ok = p.returncode == 0 and code == "200" and ctype.startswith("text/html") and len(assets) > 0
    for a in assets:
        q = subprocess.run(cmd + [base + a.decode()], capture_output=True)
        ok = ok and q.returncode == 0 and q.stdout.rpartition(b"\n")[2].startswith(b"200 ")
    note("console", ok, status=code, assets=len(assets), bytes=len(page), ms=round((time.monotonic() - t0) * 1000, 1))


def abandon():
    """The whole store as pcap, dropped after 256 KiB..2 MiB."""
    c = conn()
    c.request("GET", "/v1/extract")
    r = c.getresponse()
    if r.status == 503:
        r.read()
        note("busy", True, path="/v1/extract (abandon)")
        return
    keep = rnd.randint(256 << 10, 2 << 20)
    got = 0
    while got < keep:
        b = r.read1(65536)
        if not b:
            break
        got += len(b)
    c.sock.close()  # mid-download: no reading to the end, no clean close
    note("abandoned", r.status == 200 and got >= keep, status=r.status, read=got)


def index():
    pq = f"{out}/index.parquet"
    t0 = time.monotonic()
    p = subprocess.run([binary, "index", "--parquet", pq, store, "-q", "--json"], capture_output=True)
    ms = (time.monotonic() - t0) * 1000
    if p.returncode != 0:
        note("index", False, exit=p.returncode, stderr=p.stderr.decode()[-300:])
        return
    try:
        import duckdb
    except ImportError:
        note("index", True, rows=None, ms=round(ms, 1))
        return
    rows = duckdb.sql(f"SELECT file, sum(frames), count(*) FROM '{pq}' GROUP BY file").fetchall()
    rows = [(os.path.basename(f), n, c) for f, n, c in rows]
    bad = [(f, n) for f, n, _ in rows if f in files and files[f]["frames"] != n]
    checked = sum(1 for f, _, _ in rows if f in files)
    note("index", not bad and checked > 0, files=len(rows), checked=checked, bad=bad[:3],
         rows=sum(r[2] for r in rows), ms=round(ms, 1))


def main():
    print(f"soak client: seed {seed}", file=sys.stderr)
    t_end = time.monotonic() + secs
    next_index = time.monotonic() + min(index_every, 10)
    n = 0
    while not stop and time.monotonic() < t_end:
        t0 = time.monotonic()
        try:
            fl = poll_files()
            if fl is not None:
                query_round(fl)
            console()
            if n % 4 == 3:
                abandon()
            if time.monotonic() >= next_index:
                index()
                next_index = time.monotonic() + index_every
        except Exception as e:  # a failed round is a wrong answer, never a crash
            note("error", False, error=f"{type(e).__name__}: {e}")
        n += 1
        time.sleep(max(0.0, every - (time.monotonic() - t0)))
    poll_files()
    json.dump(files, open(f"{out}/files.json", "w"))


main()
