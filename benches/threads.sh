#!/usr/bin/env bash
# benches/threads.sh BIN [record args...]: the recorder's CPU split into start-up
# (all threads, before traffic) and per thread during traffic, on the shared rig:
# N frames (2M) of SIZE (1514) at RATE pps (300000; RATE= : full speed).
set -euo pipefail
BIN=$1; shift
N=${N:-2000000}; RATE=${RATE-300000}; SIZE=${SIZE:-1514}
RIG=$(cd "$(dirname "$0")/../../shared/rig" && pwd); OUT=${OUT:-$(dirname "$0")/../target/threads}; rm -rf $OUT; mkdir -p $OUT/cap
ip netns list | grep -q '^pbcap' || $RIG/veth.sh up >/dev/null
ip netns exec pbcap taskset -c 1 /usr/bin/time -f '%U %S %e' -o $OUT/time $BIN record -i pb-cap -w $OUT/cap -q "$@" >$OUT/rec.log 2>&1 &
sleep 2
P=$(pgrep -f "record -i pb-cap -w $OUT/cap" | tail -1)
snap() { for t in /proc/$P/task/*; do awk '{printf "%s %d\n", $2, $14+$15}' $t/stat; done | sort; }
snap > $OUT/t0
ip netns exec pbgen taskset -c 0 trafgen --dev pb-gen --conf $RIG/gen/udp$SIZE.trafgen --cpp -P 1 --no-sock-mem -Q -n $N ${RATE:+-b ${RATE}pps} >$OUT/gen.log 2>&1
sleep 1.5
snap > $OUT/t1
kill -INT $P; wait || true
echo "startup (all threads at t0):"; awk '{s+=$2} END{print s/100 " s"}' $OUT/t0
echo "during traffic, per thread (s):"; join -a2 $OUT/t0 $OUT/t1 | awk 'NF==3{d=$3-$2} NF==2{d=$2} d>0{print "  " $1, d/100}'
echo "whole process (user sys wall):"; cat $OUT/time
