#!/usr/bin/env bash
# `wiretape gen` against trafgen on the shared rig's veth pair (pbgen -> pbcap),
# same run, interleaved: frames/s at 64 and 1514 bytes, with nothing capturing
# and with `wiretape record` capturing on the other end (CPU 1).
#   benches/gen.sh [RUNS] [N64] [N1514]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}; N64=${2:-5000000}; N1514=${3:-2000000}
RIG=$(cd ../shared/rig && pwd)
W=$PWD/target/release/wiretape
[ -x "$W" ] || cargo build --release -q
ip netns list | grep -q '^pbcap\b' || "$RIG/veth.sh" up >/dev/null
out=$(mktemp)
for r in $(seq 1 "$RUNS"); do
  for size in 64 1514; do
    n=$N64; [ $size = 64 ] || n=$N1514
    for cap in none wiretape; do
      for g in trafgen wiretape-gen; do
        pid=""
        if [ $cap = wiretape ]; then
          rm -rf /tmp/wt-genbench; mkdir -p /tmp/wt-genbench
          ip netns exec pbcap taskset -c 1 "$W" record -i pb-cap -w /tmp/wt-genbench -q >/dev/null 2>&1 & pid=$!
          sleep 3
        fi
        s=$(date +%s.%N)
        if [ $g = trafgen ]; then
          ip netns exec pbgen taskset -c 0 nice -n -10 trafgen --dev pb-gen --conf "$RIG/gen/udp$size.trafgen" \
             --cpp -P 1 --no-sock-mem -Q -n "$n" >/dev/null 2>&1
        else
          ip netns exec pbgen taskset -c 0 nice -n -10 "$W" gen -i pb-gen --size $size --count "$n" -q 2>/dev/null
        fi
        e=$(date +%s.%N)
        [ -n "$pid" ] && { kill -INT $pid; wait $pid || true; rm -rf /tmp/wt-genbench; }
        echo "$size $cap $g $(python3 -c "print($n/($e-$s)/1e3)")" >> "$out"
      done
    done
  done
done
python3 - "$out" <<'PY'
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    s, c, g, k = l.split(); d[(s, c, g)].append(float(k))
print("| size | capture side | generator | kpps median [min..max] | ratio to trafgen (same run, medians) |")
print("|---|---|---|---|---|")
for (s, c, g), v in sorted(d.items(), key=lambda x: (int(x[0][0]), x[0][1], x[0][2])):
    base = st.median(d[(s, c, "trafgen")])
    print(f"| {s} B | {c} | {g} | {st.median(v):.0f} [{min(v):.0f}..{max(v):.0f}] | {st.median(v)/base:.2f} |")
PY
rm -f "$out"
