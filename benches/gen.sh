#!/usr/bin/env bash
# `wiretape gen` against trafgen on the shared rig's veth pair (pbgen -> pbcap),
# same run, interleaved: frames/s at 64 and 1514 bytes, with nothing capturing
# and with `wiretape record` capturing on the other end (CPU 1). Both
# generators run alone on CPU 0 (taskset -c 0, nice -10); trafgen with `-P 1`
# (one process: on veth, several abort on backpressure) and its TX ring
# (qdisc bypass), as the rig runs it.
#   benches/gen.sh [RUNS] [N64] [N1514]
# Env: BEFORE=/path/to/an/older/wiretape adds its `gen` as a third generator
# in the same run (wiretape-gen-before), for before/after tables.
# Columns: kpps = frames / wall time of the generator process (start-up
# included, as for trafgen); kpps/cpu = frames per CPU second of the
# generator (user+sys, which on one CPU includes the veth hop and the
# receive softirq it runs): the rate on a quiet dedicated CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}; N64=${2:-5000000}; N1514=${3:-2000000}
RIG=$(cd ../shared/rig && pwd)
cargo build --release -q -p wiretape-cli
W=${CARGO_TARGET_DIR:-$PWD/target}/release/wiretape
GENS="trafgen wiretape-gen"; [ -n "${BEFORE:-}" ] && GENS="$GENS wiretape-gen-before"
ip netns list | grep -q '^pbcap\b' || "$RIG/veth.sh" up >/dev/null
out=$(mktemp)
for r in $(seq 1 "$RUNS"); do
  for size in 64 1514; do
    n=$N64; [ $size = 64 ] || n=$N1514
    for cap in none wiretape; do
      for g in $GENS; do
        pid=""; sleep 0.5 # the last AF_XDP socket's teardown is asynchronous (EBUSY on the queue)
        if [ $cap = wiretape ]; then
          rm -rf /tmp/wt-genbench; mkdir -p /tmp/wt-genbench
          ip netns exec pbcap taskset -c 1 "$W" record -i pb-cap -w /tmp/wt-genbench -q >/dev/null 2>&1 & pid=$!
          sleep 3
        fi
        case $g in
          trafgen) cmd=(trafgen --dev pb-gen --conf "$RIG/gen/udp$size.trafgen" --cpp -P 1 --no-sock-mem -Q -n "$n") ;;
          wiretape-gen) cmd=("$W" gen -i pb-gen --size $size --count "$n" -q) ;;
          wiretape-gen-before) cmd=("$BEFORE" gen -i pb-gen --size $size --count "$n" -q) ;;
        esac
        ip netns exec pbgen taskset -c 0 nice -n -10 /usr/bin/time -o "$out.t" -f "%e %U %S" "${cmd[@]}" >/dev/null 2>&1 \
          || echo "gen.sh: $g exited with an error (size $size, run $r)" >&2
        [ -n "$pid" ] && { kill -INT $pid; wait $pid || true; rm -rf /tmp/wt-genbench; }
        read -r e u sy < <(tail -1 "$out.t")
        echo "$size $cap $g $(python3 -c "print($n/$e/1e3, $n/max($u+$sy,0.01)/1e3)")" >> "$out"
      done
    done
  done
done
python3 - "$out" <<'PY'
import sys, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    s, c, g, k, kc = l.split(); d[(s, c, g)].append((float(k), float(kc)))
print("| size | capture side | generator | kpps median [min..max] | ratio to trafgen | kpps/cpu median [min..max] | ratio to trafgen |")
print("|---|---|---|---|---|---|---|")
for (s, c, g), v in sorted(d.items(), key=lambda x: (int(x[0][0]), x[0][1], x[0][2])):
    cells = []
    for i in (0, 1):
        x = [t[i] for t in v]
        base = st.median([t[i] for t in d[(s, c, "trafgen")]])
        cells.append(f"{st.median(x):.0f} [{min(x):.0f}..{max(x):.0f}] | {st.median(x)/base:.2f}")
    print(f"| {s} B | {c} | {g} | {cells[0]} | {cells[1]} |")
PY
rm -f "$out" "$out.t"
cat /proc/loadavg
