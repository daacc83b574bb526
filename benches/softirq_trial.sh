#!/usr/bin/env bash
# benches/softirq_trial.sh NAME SIZE COUNT PPS CMD...
#
# One rig trial that says where the kernel's interrupt-side work goes: CMD
# (placeholders {IF} = pb-cap, {DIR} = an empty output directory; `none` for
# the generator alone) runs pinned to CPU 1 in netns pbcap, trafgen sends
# COUNT frames of SIZE at PPS from pbgen on CPU 0, and the deltas of
# /proc/softirqs (per vector and CPU), /proc/interrupts (timer, IPIs),
# /proc/stat (per CPU: user, system, softirq ticks) and each of CMD's
# threads (CPU ticks, voluntary/involuntary context switches) over the
# traffic plus 2 s are printed. Needs the rig's namespaces
# (../shared/rig/veth.sh up). Run it under the bench lock; never beside
# another benchmark. Output kept in target/softirq/NAME-SIZE/.
#
# Example (what found the RCU grace periods a failed accept() causes):
#   benches/softirq_trial.sh wt 64 3000000 300000 \
#     target/release/wiretape record -i {IF} -w {DIR} -q --format pcapng --packet-in-place
set -u
[ $# -ge 5 ] || { sed -n '2,18p' "$0"; exit 2; }
name=$1 size=$2 count=$3 pps=$4; shift 4
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RIG=${RIG:-$ROOT/../shared/rig}; D=$ROOT/target/softirq/$name-$size; rm -rf "$D"; mkdir -p "$D/cap"
cmd="$*"; cmd=${cmd//\{IF\}/pb-cap}; cmd=${cmd//\{DIR\}/$D/cap}
snap() { { echo "== softirqs"; cat /proc/softirqs; echo "== interrupts"; grep -E '^ *(LOC|RES|CAL|TLB|IWI|[0-9]+):' /proc/interrupts; echo "== stat"; grep -E '^(cpu|ctxt)' /proc/stat; } > "$1"; }
threads() { ls /proc/$1/task 2>/dev/null | while read -r t; do echo "$t $(cut -d' ' -f2,14,15 /proc/$1/task/$t/stat) $(awk '/ctxt_switches/{printf "%s ", $2}' /proc/$1/task/$t/status)"; done; }
pid=0
if [ "$cmd" != none ]; then
  ip netns exec pbcap taskset -c 1 nice -n -10 bash -c "exec $cmd" > "$D/tool.log" 2>&1 &
  pid=$!; sleep 3
fi
snap "$D/s0"; t0=$(date +%s.%N); [ $pid -gt 0 ] && threads $pid > "$D/t0"
ip netns exec pbgen taskset -c 0 nice -n -10 trafgen --dev pb-gen --conf "$RIG/gen/udp$size.trafgen" \
  --cpp -P 1 --no-sock-mem -Q -n "$count" -b "${pps}pps" > "$D/gen.log" 2>&1
sleep 2
snap "$D/s1"; t1=$(date +%s.%N); [ $pid -gt 0 ] && threads $pid > "$D/t1"
if [ $pid -gt 0 ]; then
  kill -INT $pid; for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
  kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
fi
python3 "$ROOT/benches/softirq_delta.py" "$D" "$t0" "$t1"
