#!/usr/bin/env bash
# Extraction speed on a large store, against tcpdump and tshark over the
# same files, and the disk's sequential read speed (fio), same run:
#
#   benches/extract.sh [-g GB] [-r REPEATS] [-d DIR] [-t TSHARK_FILES] [-k] [-S]
#
# -S: only write (and index) the store into DIR, keep it, and exit (other
# benches use it: benches/api.sh). DIR defaults to target/extract-store.
# The store (written once into DIR, kept with -k): GB of 1514 B frames in
# 1 GiB files of wiretape's naming, two queues interleaved, one hour of
# packet time, 20,000 hosts with skewed (1/rank) weights, service and
# ephemeral ports; indexed by `wiretape index` (time and flow sets; its
# rate is reported). Queries, every run from a cold page cache:
#   selective: one host (rank 100), a 10 s window in the middle
#   broad:     one port (443), the whole hour
# Tools: wiretape extract (-w /dev/null), tcpdump -r FILE -w /dev/null EXPR
# over every file (it has no time window: a user scans and cuts later),
# tshark -r FILE -Y DFILTER over TSHARK_FILES files (default 2: tshark is
# ~10x slower; its figures are also scaled to the whole store, said so).
# Output: a Markdown table: wall s, CPU s, CPU s per GB read, GB/s, median
# [min..max] of REPEATS; ratios; fio io_uring O_DIRECT QD16 read GB/s.
set -euo pipefail
cd "$(dirname "$0")/.."
GB=20; R=3; DIR=$PWD/target/extract-store; TSF=2; KEEP=0; ONLY_STORE=0
while getopts "g:r:d:t:kS" o; do case $o in
  g) GB=$OPTARG;; r) R=$OPTARG;; d) DIR=$OPTARG;; t) TSF=$OPTARG;; k) KEEP=1;; S) ONLY_STORE=1; KEEP=1;;
  *) sed -n 2,20p "$0"; exit 2;; esac; done
[ "$(id -u)" = 0 ] || { echo "extract.sh: run as root (it drops the page cache between runs)" >&2; exit 1; }
BIN=$PWD/target/release/wiretape
cargo build --release -q -p wiretape-cli
mkdir -p "$DIR"
T0=1763820000 # 2025-11-22T14:00:00Z
if [ ! -f "$DIR/.complete-$GB" ]; then
  rm -f "$DIR"/*.pcap "$DIR"/*.idx
  echo "extract.sh: writing a $GB GB store into $DIR" >&2
  python3 - "$DIR" "$GB" "$T0" <<'PY'
import random, struct, sys, time, os
d, gb, t0 = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
SIZE = 1514
n = int(gb * 1e9 / (SIZE + 16))
span = 3600 * 10**9
rnd = random.Random(11)
hosts = [bytes([10, 0, i // 256, i % 256]) for i in range(20000)]
hw = [1 / (i + 1) for i in range(len(hosts))]
svc = [443, 80, 53, 22, 8080, 3306, 25, 123]
payload = bytes(SIZE - 14 - 20 - 4)
GHDR = struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 65535, 1)
def name(q, ts):
    s, ns = divmod(ts, 10**9)
    return f"{d}/bench-eth0-q{q}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(s))}.{ns:09d}Z.pcap"
files = [None, None]; sizes = [0, 0]
CH = 100000
done = 0
while done < n:
    k = min(CH, n - done)
    a = rnd.choices(range(len(hosts)), weights=hw, k=k)
    b = rnd.choices(range(len(hosts)), weights=hw, k=k)
    for j in range(k):
        i = done + j
        ts = t0 * 10**9 + i * span // n
        q = i & 1
        if files[q] is None or sizes[q] >= 1 << 30:
            if files[q]: files[q].close()
            files[q] = open(name(q, ts), 'wb'); files[q].write(GHDR); sizes[q] = 24
        r = (i * 2654435761) & 0xffff
        sp = svc[r % 8] if r % 3 == 0 else 1024 + r % 60000
        dp = svc[(r >> 3) % 8]
        proto = 17 if dp in (53, 123) else 6
        ip = b'\x45\x00\x05\xdc\x00\x00\x40\x00\x40' + bytes([proto]) + b'\x00\x00' + hosts[a[j]] + hosts[b[j]]
        rec = struct.pack('<IIII', ts // 10**9, ts % 10**9, SIZE, SIZE) + bytes(12) + b'\x08\x00' + ip + struct.pack('>HH', sp, dp) + payload
        files[q].write(rec); sizes[q] += len(rec)
    done += k
    if done % 2000000 < CH:
        print(f"  {done}/{n} frames", file=sys.stderr)
for f in files:
    if f: f.close()
PY
  echo "extract.sh: indexing" >&2
  sync; echo 3 > /proc/sys/vm/drop_caches
  /usr/bin/time -f "%e %U %S" -o "$DIR/index.time" "$BIN" index "$DIR" -q --json > "$DIR/index.json"
  touch "$DIR/.complete-$GB"
fi
[ "$ONLY_STORE" = 1 ] && { echo "$DIR"; exit 0; }
mapfile -t FILES < <(ls "$DIR"/*.pcap | sort)
BYTES=$(du -cb "${FILES[@]}" | tail -1 | cut -f1)
HOST=10.0.0.100
MID=$((T0 + 1800)); FROM="$MID"; TO="$((MID + 10))"
SEL_EXPR="host $HOST"; SEL_DF="ip.addr==$HOST && frame.time_epoch >= $FROM && frame.time_epoch < $TO"
BRD_EXPR="port 443"; BRD_DF="tcp.port==443 || udp.port==443"
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
out=$(mktemp)
timed() { # label bytes_read cmd...
  local label=$1 bytes=$2; shift 2
  cold
  /usr/bin/time -f "%e %U %S" -o "$out.t" "$@" > /dev/null 2>"$out.err" || { cat "$out.err" >&2; return 1; }
  read -r e u s < "$out.t"
  echo "$label $e $(python3 -c "print($u+$s)") $bytes" >> "$out"
}
# (bash -c: /usr/bin/time runs programs, not shell functions)
ALL="${FILES[*]}"; SOME="${FILES[*]:0:$TSF}"
scan_tcpdump=(bash -c 'e=$1; shift; for f; do tcpdump -r "$f" -w /dev/null "$e" 2>/dev/null; done' scan)
scan_tshark=(bash -c 'e=$1; shift; for f; do tshark -r "$f" -Y "$e" -w /dev/null 2>/dev/null; done' scan)
TSBYTES=$(du -cb "${FILES[@]:0:$TSF}" | tail -1 | cut -f1)
echo "extract.sh: $R runs of each, cold cache; store $BYTES bytes in ${#FILES[@]} files" >&2
for ((i = 0; i < R; i++)); do
  fio --name=r --filename="$(IFS=:; echo "${FILES[*]:0:4}")" --rw=read --bs=1M --ioengine=io_uring \
      --direct=1 --iodepth=16 --output-format=json --readonly 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; r=j["read"]; print("fio-read", r["runtime"]/1000, (j["usr_cpu"]+j["sys_cpu"])/100*r["runtime"]/1000, r["io_bytes"])' >> "$out"
  # What wiretape reads: the selected blocks (bytes_read in its JSON).
  cold; "$BIN" extract "$DIR" --from "$FROM" --to "$TO" --json -w /dev/null $SEL_EXPR > "$out.j"
  sb=$(python3 -c "import json;print(json.load(open('$out.j'))['bytes_read'])")
  timed wiretape-selective "$sb" "$BIN" extract "$DIR" --from "$FROM" --to "$TO" -q -w /dev/null $SEL_EXPR
  timed wiretape-selective-noflow "$sb" "$BIN" extract "$DIR" --from "$FROM" --to "$TO" -q --no-flow-index -w /dev/null $SEL_EXPR
  timed tcpdump-selective "$BYTES" "${scan_tcpdump[@]}" "$SEL_EXPR" $ALL
  timed tshark-selective "$TSBYTES" "${scan_tshark[@]}" "$SEL_DF" $SOME
  timed wiretape-broad "$BYTES" "$BIN" extract "$DIR" -q -w /dev/null $BRD_EXPR
  timed tcpdump-broad "$BYTES" "${scan_tcpdump[@]}" "$BRD_EXPR" $ALL
  timed tshark-broad "$TSBYTES" "${scan_tshark[@]}" "$BRD_DF" $SOME
done
cat "$out.j" > /tmp/extract-selective.json
python3 - "$out" "$BYTES" "$TSF" "${#FILES[@]}" "$DIR" <<'PY'
import sys, statistics as st, json, os
rows = {}
for l in open(sys.argv[1]):
    k, e, c, b = l.split(); rows.setdefault(k, []).append((float(e), float(c), int(b)))
total, tsf, nf, d = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def m(v): v = sorted(v); return f"{st.median(v):.2f} [{v[0]:.2f}..{v[-1]:.2f}]"
print(f"store: {total/1e9:.1f} GB in {nf} files, 1514 B frames, 1 h of packet time, 20,000 hosts")
try:
    e, u, s = open(os.path.join(d, 'index.time')).read().split()
    print(f"wiretape index (cold): {float(e):.1f} s wall, {float(u)+float(s):.1f} CPU s, {total/1e9/float(e):.2f} GB/s")
except Exception: pass
print()
print("| run | wall s | CPU s | CPU s/GB read | GB/s read |")
print("|---|---|---|---|---|")
med = {}
for k, v in rows.items():
    w = [x[0] for x in v]; c = [x[1] for x in v]; b = v[0][2]
    med[k] = (st.median(w), st.median(c), b)
    note = f" ({tsf} of {nf} files)" if k.startswith("tshark") else ""
    print(f"| {k}{note} | {m(w)} | {m(c)} | {m([x[1]/(x[2]/1e9) for x in v])} | {m([x[2]/1e9/x[0] for x in v])} |")
print()
def r(a, b, scale=1.0): return med[b][0] * scale / med[a][0]
scale = total / med["tshark-selective"][2]
print(f"selective: wiretape {r('wiretape-selective','tcpdump-selective'):.0f}x faster than tcpdump's scan, "
      f"{r('wiretape-selective','tshark-selective', scale):.0f}x than tshark's (tshark scaled from {tsf} files to the store); "
      f"without the flow index {r('wiretape-selective-noflow','tcpdump-selective'):.0f}x")
print(f"broad (whole hour): wiretape {med['wiretape-broad'][2]/1e9/med['wiretape-broad'][0]:.2f} GB/s = "
      f"{100*(med['wiretape-broad'][2]/med['wiretape-broad'][0])/(med['fio-read'][2]/med['fio-read'][0]):.0f}% of fio's sequential read "
      f"({med['fio-read'][2]/1e9/med['fio-read'][0]:.2f} GB/s); CPU per GB: wiretape {med['wiretape-broad'][1]/(med['wiretape-broad'][2]/1e9):.2f} s, "
      f"tcpdump {med['tcpdump-broad'][1]/(med['tcpdump-broad'][2]/1e9):.2f} s, tshark {med['tshark-broad'][1]/(med['tshark-broad'][2]/1e9):.2f} s")
PY
[ "$KEEP" = 1 ] || { rm -rf "$DIR"; }
