#!/usr/bin/env python3
"""Selective queries on a store, cold for its files, as `extract --json` reports
them: frames, blocks read, bytes read, index bytes read, seconds and wall time,
median [min..max] of RUNS (5) runs.

    keys_query.py WIRETAPE STORE LABEL

Before every run the store's files are evicted from the page cache with
POSIX_FADV_DONTNEED (this store's pages only: `echo 3 > drop_caches` drops
the whole machine's, which disturbs anything else measuring there).
The store: `busy_gen.py busy.pcap 7e8; wiretape record -r busy.pcap -w STORE
--rotate-size 32M`."""
import json, os, subprocess, sys, time, statistics
bin_, store, label = sys.argv[1], sys.argv[2], sys.argv[3]
Q = [
    ("--steno-query", "host 172.31.9.9"),
    ("--steno-query", "net 172.31.9.0/24"),
    ("--steno-query", "port 40000"),
    ("--steno-query", "host 10.1.2.3 and port 443"),
    ("--steno-query", "net 10.1.7.0/24"),
    (None, "net 172.31.9.0/24"),
    (None, "portrange 40000-40001"),
]
def evict():
    os.sync()
    for f in os.listdir(store):
        fd = os.open(os.path.join(store, f), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
runs = int(os.environ.get("RUNS", "5"))
for flag, q in Q:
    secs, walls, j = [], [], None
    for _ in range(runs):
        evict()
        args = [bin_, "extract", store, "-w", "out.pcap", "--json"] + ([flag, q] if flag else [q])
        t = time.monotonic()
        o = subprocess.run(["nice", "-n", "19", "ionice", "-c", "3"] + args, capture_output=True, text=True)
        walls.append(time.monotonic() - t)
        if o.returncode != 0:
            print(q, "failed", o.stderr.strip()); break
        j = json.loads(o.stdout)
        secs.append(j["seconds"])
    if not j: continue
    m = lambda v: f"{statistics.median(v):.3f} [{min(v):.3f}..{max(v):.3f}]"
    print(f"{label} | {'steno' if flag else 'bpf'} `{q}` | frames {j['frames']} | blocks_read {j['blocks_read']} of {j.get('blocks_selected')} sel, skipped by key index {j.get('blocks_skipped_by_key_index')} | bytes_read {j['bytes_read']} | index_bytes {j.get('index_bytes_read')} | seconds {m(secs)} | wall {m(walls)}", flush=True)
