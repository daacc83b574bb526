#!/usr/bin/env bash
# benches/traffic_cpu.sh: the recorder's own CPU during the traffic only.
#
# compare.sh charges a tool everything from start to exit, which includes
# the kernel zeroing its ring at start-up (packet_set_ring: 256 MiB on the
# rig's 4-queue veth, 0.05 to 0.66 s here depending on what the VM's free
# memory was doing, the same for stenotype's 256 blocks). This script reads
# the recorder's utime+stime (/proc/PID/stat, 10 ms ticks) just before and
# just after a fixed trafgen load, so two builds or two modes compare on the
# per-frame work alone. One trial per line; run it several times.
#
# usage: benches/traffic_cpu.sh [-s SIZE] [-n FRAMES] [-b PPS] [-r RUNS] NAME [wiretape record args...]
#   e.g. benches/traffic_cpu.sh -s 512 laid-out --format pcapng --packet-in-place
#        benches/traffic_cpu.sh -s 512 copied --format pcapng
# Needs root and the rig (../shared/rig: veth.sh up is run if pb-cap is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SIZE=1514; N=2000000; PPS=300000; RUNS=1
while getopts "s:n:b:r:h" o; do
  case $o in
    s) SIZE=$OPTARG ;; n) N=$OPTARG ;; b) PPS=$OPTARG ;; r) RUNS=$OPTARG ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND-1))
[ $# -ge 1 ] || { sed -n '2,16p' "$0"; exit 2; }
NAME=$1; shift
[ "$(id -u)" = 0 ] || { echo "traffic_cpu.sh: run as root (namespaces)" >&2; exit 1; }
RIG=$(cd "$ROOT/../shared/rig" 2>/dev/null && pwd) || { echo "traffic_cpu.sh: the rig ../shared/rig is missing" >&2; exit 1; }
[ "$SIZE" -ge 60 ] || { echo "traffic_cpu.sh: -s $SIZE: frames of at least 60 bytes" >&2; exit 2; }
ip netns exec pbcap ip link show pb-cap >/dev/null 2>&1 || "$RIG/veth.sh" up >/dev/null
W=${CARGO_TARGET_DIR:-$ROOT/target}/release/wiretape
[ -x "$W" ] || cargo build --release -q -p wiretape-cli
TMP=$(mktemp -d /tmp/wt-traffic-cpu.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# The rig's frame (UDP to a host that is not pb-cap's, dropped right after
# the taps), padded to SIZE bytes.
cat > "$TMP/gen.trafgen" <<EOF
{
  eth(da=02:70:62:00:00:99, sa=02:70:62:00:00:01),
  ipv4(saddr=198.18.0.1, daddr=198.18.0.2, ttl=64, id=1),
  udp(sp=40000, dp=9),
  fill(0x41, $((SIZE - 42)))
}
EOF
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for r in $(seq "$RUNS"); do
  rm -rf "$TMP/cap"
  ip netns exec pbcap taskset -c 1 "$W" record -i pb-cap -w "$TMP/cap" -q "$@" 2>"$TMP/err" &
  sleep 3
  P=$(pgrep -f "^$W record -i pb-cap" | head -1)
  [ -n "$P" ] || { echo "traffic_cpu.sh: the recorder did not start:" >&2; cat "$TMP/err" >&2; exit 1; }
  a=$(ticks "$P")
  ip netns exec pbgen taskset -c 0 trafgen --dev pb-gen --conf "$TMP/gen.trafgen" --cpp -P 1 \
    -n "$N" -b "${PPS}pps" -q >/dev/null 2>&1
  sleep 0.5
  b=$(ticks "$P")
  kill -INT "$P"; wait "$P" || true
  tck=$(getconf CLK_TCK)
  echo "$NAME size=$SIZE frames=$N start_ticks=$a traffic_ticks=$((b - a)) us_per_frame=$(echo "scale=3; ($b - $a) * 1000000 / $tck / $N" | bc -l)"
done
