#!/usr/bin/env bash
# The flow index's cost when recording: CPU per frame and index size with
# the flow index on and off, same traces, runs interleaved.
#
#   benches/flowidx.sh [-r REPEATS] [-n FRAMES64] [-m FRAMES1514] [-d DIR]
#
# Traces (written once into DIR): 64 B and 1514 B Ethernet/IPv4 UDP+TCP frames
# over 2,000 flows (200 hosts, skewed: a few flows carry most frames). Each run
# records a trace with the file engine (`wiretape record -r`, the same writer,
# blocks, index and io_uring O_DIRECT files as on an interface) into DIR, and
# takes the process's user+system CPU from /usr/bin/time. Output: CPU ns per
# frame, median [min..max] of REPEATS, on/off ratio, index bytes / data bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
R=5; N64=4000000; N1514=1000000; DIR=/tmp/wt-flowidx
while getopts "r:n:m:d:" o; do case $o in
  r) R=$OPTARG;; n) N64=$OPTARG;; m) N1514=$OPTARG;; d) DIR=$OPTARG;;
  *) sed -n 2,13p "$0"; exit 2;; esac; done
BIN=./target/release/wiretape
[ -x $BIN ] || cargo build --release -p wiretape-cli
mkdir -p "$DIR"
gen() { # size count out
  [ -s "$3" ] && return 0
  python3 - "$1" "$2" "$3" <<'PY'
import random, struct, sys
size, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rnd = random.Random(7)
tmpl = []
for f in range(2000):
    src = bytes([10, 1, (f % 200) // 256, f % 200]); dst = bytes([10, 2, 0, rnd.randrange(1, 50)])
    proto = 17 if f % 3 else 6
    l4 = struct.pack('>HH', 1024 + rnd.randrange(60000), rnd.choice([53, 80, 443, 8080, 123]))
    ip = bytes([0x45, 0]) + struct.pack('>H', size - 14) + bytes([0, 0, 0x40, 0, 64, proto, 0, 0]) + src + dst
    fr = bytes(12) + b'\x08\x00' + ip + l4
    tmpl.append(fr + bytes(size - len(fr)))
w = [1.0 / (i + 1) for i in range(len(tmpl))]
picks = rnd.choices(range(len(tmpl)), weights=w, k=n)
with open(out + '.tmp', 'wb') as o:
    o.write(struct.pack('<IHHiIII', 0xa1b23c4d, 2, 4, 0, 0, 65535, 1))
    t = 1_750_000_000_000_000_000
    buf = []
    for i, k in enumerate(picks):
        ts = t + i * 100
        buf.append(struct.pack('<IIII', ts // 10**9, ts % 10**9, size, size) + tmpl[k])
        if len(buf) >= 65536:
            o.write(b''.join(buf)); buf = []
    o.write(b''.join(buf))
import os; os.rename(out + '.tmp', out)
PY
}
gen 64 "$N64" "$DIR/t64.pcap"
gen 1514 "$N1514" "$DIR/t1514.pcap"
run() { # trace flag -> "cpu_ns_per_frame idx_bytes data_bytes"
  local out="$DIR/out"; rm -rf "$out"
  local frames
  frames=$( { /usr/bin/time -f "%U %S" $BIN record -r "$1" -w "$out" -q $2 --summary-json "$DIR/sum.json" 2>"$DIR/time" >/dev/null; } ; python3 -c "import json;print(json.load(open('$DIR/sum.json'))['packets_written'])" 2>/dev/null || echo 0)
  local t; t=$(tail -1 "$DIR/time")
  local idx data
  idx=$(cat "$out"/*.idx | wc -c); data=$(cat "$out"/*.pcap | wc -c)
  python3 -c "u,s='$t'.split(); print(f'{(float(u)+float(s))*1e9/max($frames,1):.1f} $idx $data')"
}
med() { python3 -c "import sys,statistics as s; v=sorted(map(float,sys.argv[1:])); print(f'{s.median(v):.1f} [{v[0]:.1f}..{v[-1]:.1f}]')" "$@"; }
echo "# flow index cost: $(date -u +%FT%TZ), $R runs each, interleaved; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-6s %-26s %-26s %-8s %-12s %-12s\n" size "on ns/frame" "off ns/frame" on/off "idx/data on" "idx/data off"
for sz in 64 1514; do
  on=(); off=(); ion=0; ioff=0; data=1
  for ((i = 0; i < R; i++)); do
    read -r c ix d < <(run "$DIR/t$sz.pcap" ""); on+=("$c"); ion=$ix; data=$d
    read -r c ix d < <(run "$DIR/t$sz.pcap" "--no-flow-index"); off+=("$c"); ioff=$ix
  done
  mon=$(med "${on[@]}"); moff=$(med "${off[@]}")
  ratio=$(python3 -c "import statistics as s; print(f'{s.median([$(IFS=,; echo "${on[*]}")])/s.median([$(IFS=,; echo "${off[*]}")]):.3f}')")
  printf "%-6s %-26s %-26s %-8s %-12s %-12s\n" "$sz" "$mon" "$moff" "$ratio" \
    "$(python3 -c "print(f'{100*$ion/$data:.3f}%')")" "$(python3 -c "print(f'{100*$ioff/$data:.3f}%')")"
done
rm -rf "$DIR/out"
