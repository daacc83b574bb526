#!/usr/bin/env bash
# benches/kernel_profile.sh: where the whole machine's CPU goes per frame, by
# component, while a recorder takes a fixed load on the shared rig.
#
#   benches/kernel_profile.sh [-s SIZE] [-n COUNT] [-b PPS] [-F HZ] [-o DIR] TOOL...
#
# For each TOOL (as benches/compare.sh names them: none, wiretape,
# wiretape-packet, stenotype, tcpdump, ...) one rig trial (rig/peers.sh:
# trafgen on CPU 0 sends COUNT frames of SIZE bytes at PPS into the veth pair,
# the tool records on CPU 1) runs under `perf record -a -g -F HZ`. Every
# sample (one CPU tick) is charged to the first component found on its stack
# from the leaf up (benches/kernel_profile.py): the XDP program, the AF_XDP
# copy and rings, veth's skb->XDP copy, page pool, XDP redirect, the rest of
# veth's XDP receive, AF_PACKET's copy into its ring, sleep/wake/poll, disk
# I/O, the stack's receive path and NAPI, the generator's send path, other
# kernel work, and user space (the tool's, the generator's); idle is dropped,
# and so are the rig's own counting after the trial (pcapcount, capinfos)
# and the memory warming before it (benches/prewarm.py, as compare.sh does;
# what a tool's ring set-up still costs shows as ring_setup).
# Output: DIR/profile.md (microseconds of CPU per frame by component and
# tool, and each tool minus `none`), DIR/*.json, the perf data.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RIG=${RIG:-$ROOT/../shared/rig}
SIZE=1514; COUNT=2000000; RATE=300000; HZ=999; OUT=$ROOT/target/kernel-profile
while getopts "s:n:b:F:o:h" o; do
  case $o in
    s) SIZE=$OPTARG ;; n) COUNT=$OPTARG ;; b) RATE=$OPTARG ;; F) HZ=$OPTARG ;; o) OUT=$OPTARG ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
  esac
done
shift $((OPTIND-1))
[ $# -gt 0 ] || set -- none wiretape-afxdp wiretape-packet stenotype
command -v perf >/dev/null || { echo "kernel_profile.sh: needs perf (apt-get install linux-perf)" >&2; exit 1; }
W=$ROOT/target/release/wiretape
[ -x "$W" ] || { echo "kernel_profile.sh: build first: cargo build --release" >&2; exit 1; }
mkdir -p "$OUT"
# The same tool specs as compare.sh.
spec() {
  case "$1" in
    wiretape) echo "cmd:wiretape=$W record -i {IF} -w {DIR} -q --format pcapng --packet-in-place" ;;
    wiretape-pcap) echo "cmd:wiretape-pcap=$W record -i {IF} -w {DIR} -q" ;;
    wiretape-packet) echo "cmd:wiretape-packet=$W record -i {IF} -w {DIR} -q --engine packet" ;;
    wiretape-afxdp) echo "cmd:wiretape-afxdp=$W record -i {IF} -w {DIR} -q --engine afxdp" ;;
    *) echo "$1" ;;
  esac
}
"$RIG/veth.sh" up >/dev/null
for t in "$@"; do
  echo "kernel_profile: $t ($SIZE B, $COUNT frames at $RATE pps)"
  csv=$OUT/trials-$t.csv; rm -f "$csv"
  python3 "$ROOT/benches/prewarm.py" 2>/dev/null || true
  perf record -a -g -F "$HZ" -o "$OUT/$t.data" -- \
    env CMD_READY=sleep CMD_WARM=3 "$RIG/peers.sh" -r 1 -s "$SIZE" -n "$COUNT" -N "$COUNT" -b "$RATE" -o "$csv" "$(spec "$t")" \
    >"$OUT/$t.log" 2>&1
  sent=$(awk -F, 'NR==2{print $6}' "$csv")
  perf script -i "$OUT/$t.data" -F comm,pid,cpu,ip,sym,dso 2>/dev/null |
    python3 "$ROOT/benches/kernel_profile.py" "$HZ" "${sent:-$COUNT}" "$t" >"$OUT/$t.json"
done
python3 - "$OUT" "$@" <<'EOF'
import json, sys
out, tools = sys.argv[1], sys.argv[2:]
d = {t: json.load(open(f"{out}/{t}.json")) for t in tools}
comps = sorted({c for t in tools for c in d[t]["us_per_frame"]}, key=lambda c: -max(d[t]["us_per_frame"].get(c, 0) for t in tools))
lines = ["| component (µs of CPU per frame) | " + " | ".join(tools) + " |", "|---|" + "---|" * len(tools)]
for c in comps:
    lines.append(f"| {c} | " + " | ".join(f"{d[t]['us_per_frame'].get(c, 0):.3f}" for t in tools) + " |")
tot = {t: sum(d[t]["us_per_frame"].values()) for t in tools}
lines.append("| **all (not idle)** | " + " | ".join(f"**{tot[t]:.3f}**" for t in tools) + " |")
if "none" in d:
    lines.append("| above `none` | " + " | ".join(f"{tot[t] - tot['none']:.3f}" for t in tools) + " |")
open(f"{out}/profile.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
