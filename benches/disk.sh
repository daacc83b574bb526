#!/usr/bin/env bash
# The storage engine fed from memory, beside dd and fio in the same run:
#   benches/disk.sh [DIR] [GIB] [RUNS]
# DIR defaults to target/diskbench (on the disk under test). Prints MB/s and
# CPU seconds per GB for: fio io_uring O_DIRECT bs=1M iodepth=16 (ceiling),
# dd oflag=direct bs=1M (QD1), wiretape O_DIRECT (16 blocks in flight),
# wiretape buffered write(2); min/median/max over RUNS, interleaved.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-target/diskbench}; GIB=${2:-3}; RUNS=${3:-3}
mkdir -p "$DIR"
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
cargo build --release -q -p wiretape-storage --example diskbench
B=target/release/examples/diskbench
out=$(mktemp)
for r in $(seq 1 "$RUNS"); do
  fio --name=w --filename="$DIR/fio.dat" --rw=write --bs=1M --size="${GIB}G" --ioengine=io_uring \
      --direct=1 --iodepth=16 --end_fsync=1 --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("fio-io_uring-qd16", j["write"]["bw_bytes"]/1e6, (j["usr_cpu"]+j["sys_cpu"])/100*j["job_runtime"]/1000/(j["write"]["io_bytes"]/1e9))' >> "$out"
  rm -f "$DIR/fio.dat"
  s=$(date +%s.%N); dd if=/dev/zero of="$DIR/dd.dat" bs=1M count=$((GIB*1024)) oflag=direct status=none; sync
  e=$(date +%s.%N); echo "dd-direct-qd1 $(python3 -c "print($GIB*1073741824/($e-$s)/1e6)") -" >> "$out"; rm -f "$DIR/dd.dat"
  for eng in direct buffered; do
    $B "$DIR" "$GIB" 1514 "$eng" 16 2>/dev/null | awk -v e="wiretape-$eng" '{for(i=1;i<=NF;i++){if($i=="MB/s")mb=$(i-1); if($i=="s/GB)"){g=$(i-1); gsub(/\(/,"",g)}} print e, mb, g}' >> "$out"
  done
done
python3 - "$out" <<'PY'
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    k, mb, cpu = l.split()
    rows.setdefault(k, []).append((float(mb), None if cpu == '-' else float(cpu)))
ceil = st.median(v[0] for v in rows.get("fio-io_uring-qd16", [(1, 0)]))
print(f"| writer | MB/s median [min..max] | % of fio median | CPU s/GB median |")
print("|---|---|---|---|")
for k, v in rows.items():
    mbs = [x[0] for x in v]; cpus = [x[1] for x in v if x[1] is not None]
    print(f"| {k} | {st.median(mbs):.0f} [{min(mbs):.0f}..{max(mbs):.0f}] | {100*st.median(mbs)/ceil:.0f}% | {st.median(cpus):.2f} |" if cpus else
          f"| {k} | {st.median(mbs):.0f} [{min(mbs):.0f}..{max(mbs):.0f}] | {100*st.median(mbs)/ceil:.0f}% | - |")
PY
rm -f "$out"
