#!/usr/bin/env python3
"""Attribute every block read of a traced query to what it is.

    benches/steno_blocks.py TRACE ROOT...

TRACE is the text of a tracefs instance that recorded `block:block_bio_queue`
and `ext4:ext4_load_inode` (and `ext4:ext4_ext_load_extent`) during one
query on a cold page cache (benches/steno.sh with TRACE=1 writes
DIR/trace-SYSTEM-KEY-RUN.txt). ROOTs are the directories and files whose
blocks may be read (the stores, the sidecar directory, the output
directory, the programs): every file and directory under them is mapped by
FIEMAP (`filefrag -e`) to its extents, and by inode number to its path.

Each read bio is then one of:
  - an inode-table read: the thread's last `ext4_load_inode` names the
    inode, hence its group ((ino - 1) // inodes per group) and, when it is
    under a ROOT, its path. ext4 reads the table's read-ahead
    (/sys/fs/ext4/DEV/inode_readahead_blks blocks, flagged A) before it
    traces `ext4_load_inode` and reads the inode's own block: a thread's
    read-ahead outside every ROOT's extents goes to its next inode load;
  - an extent-tree block: the thread's last `ext4_ext_load_extent` names it;
  - a data or directory block of a file under a ROOT (by FIEMAP);
  - other (outside every ROOT: libraries, /etc, ...).
Prints one table: bytes per (kind, what, inode group) and the total.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

BIO = re.compile(r"^\s*(\S+)-(\d+)\s+.*block_bio_queue: (\d+),(\d+) (\S+) (\d+) \+ (\d+) \[(.*)\]")
LOAD = re.compile(r"^\s*(\S+)-(\d+)\s+.*ext4_load_inode: dev (\d+),(\d+) ino (\d+)")
EXT = re.compile(r"^\s*(\S+)-(\d+)\s+.*ext4_ext_load_extent: dev (\d+),(\d+) ino (\d+) lblk \d+ pblk (\d+)")


def inodes_per_group(path):
    """ext4's inodes per group: total inodes / groups of 32768 blocks."""
    st = os.statvfs(path)
    dev = os.stat(path).st_dev
    maj, mnr = os.major(dev), os.minor(dev)
    size = None
    for d in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{d}/dev") as f:
                if f.read().strip() == f"{maj}:{mnr}":
                    with open(f"/sys/block/{d}/size") as g:
                        size = int(g.read()) * 512
        except OSError:
            pass
    if not size:
        return None
    groups = -(-size // (st.f_frsize * 32768))
    return st.f_files // groups


def walk(roots):
    paths = set()
    for r in roots:
        r = os.path.abspath(r)
        # the directories on the way to a root are read too
        p = r
        while True:
            paths.add(p)
            if p == "/":
                break
            p = os.path.dirname(p)
        if os.path.isdir(r) and not os.path.islink(r):
            for d, dirs, files in os.walk(r):
                for n in dirs + files:
                    paths.add(os.path.join(d, n))
    return sorted(paths)


def main():
    trace, roots = sys.argv[1], sys.argv[2:]
    ipg = inodes_per_group(roots[0] if roots else "/")
    bs = os.statvfs(roots[0] if roots else "/").f_frsize
    ino_path, extents = {}, []
    for p in walk(roots):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        ino_path.setdefault(st.st_ino, p)
        if st.st_size == 0 and not os.path.isdir(p):
            continue
        out = subprocess.run(["filefrag", "-e", "-b%d" % bs, p], capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"\s*\d+:\s*(\d+)\.\.\s*(\d+):\s*(\d+)\.\.\s*(\d+):", line)
            if m:
                lo, hi = int(m.group(3)), int(m.group(4))
                extents.append((lo, hi, p, int(m.group(1))))
    extents.sort()
    last = {}  # tid -> ("inode", ino) | ("extent", ino)
    ahead = defaultdict(list)  # tid -> (size, comm) of read-ahead not yet placed
    rows = defaultdict(lambda: [0, 0])
    total = 0

    def inode_row(ino):
        return ("inode-table", ino_path.get(ino, f"inode {ino}"),
                str((ino - 1) // ipg) if ipg else "-")

    for line in open(trace):
        m = LOAD.match(line)
        if m:
            tid, ino = m.group(2), int(m.group(5))
            last[tid] = ("inode", ino)
            for size, _ in ahead.pop(tid, []):
                rows[inode_row(ino)][0] += size
                rows[inode_row(ino)][1] += 1
            continue
        m = EXT.match(line)
        if m:
            last[m.group(2)] = ("extent", int(m.group(5)))
            continue
        m = BIO.match(line)
        if not m or "R" not in m.group(5):
            continue
        comm, tid, sector, n = m.group(8), m.group(2), int(m.group(6)), int(m.group(7))
        size = n * 512
        total += size
        blk = sector * 512 // bs
        kind, what, group = "other", "-", "-"
        hit = None
        for lo, hi, p, _ in extents:  # few thousand extents: a scan is fine
            if lo <= blk <= hi:
                hit = p
                break
            if lo > blk:
                break
        if hit:
            kind, what = ("dir" if os.path.isdir(hit) else "data"), hit
            st = os.lstat(hit)
            group = str((st.st_ino - 1) // ipg) if ipg else "-"
        elif "A" in m.group(5) and "M" not in m.group(5) and tid not in last:
            ahead[tid].append((size, comm))  # placed at the thread's next inode load
            continue
        elif tid in last:
            k, ino = last.pop(tid)
            kind = "inode-table" if k == "inode" else "extent-tree"
            what = ino_path.get(ino, f"inode {ino}")
            group = str((ino - 1) // ipg) if ipg else "-"
        if kind == "other":
            what = f"(read by {comm})"
        rows[(kind, what, group)][0] += size
        rows[(kind, what, group)][1] += 1
    for tid, sizes in ahead.items():  # read-ahead no inode load followed
        for size, comm in sizes:
            rows[("other", f"(read by {comm})", "-")][0] += size
            rows[("other", f"(read by {comm})", "-")][1] += 1
    print(f"| kind | what | inode group | reads | bytes |")
    print(f"|---|---|---|---|---|")
    for (kind, what, group), (b, c) in sorted(rows.items(), key=lambda x: -x[1][0]):
        print(f"| {kind} | {what} | {group} | {c} | {b:,} |")
    groups = {g for (k, _, g) in rows if k == "inode-table"}
    print(f"\ntotal {total:,} bytes; inode groups whose table was read: {len(groups)}"
          f" ({', '.join(sorted(groups, key=lambda g: int(g) if g.isdigit() else -1))});"
          f" {ipg} inodes per group")


if __name__ == "__main__":
    main()
