#!/usr/bin/env bash
# benches/volumes.sh: the aggregate write rate of a store on 1, 2 and 4
# volumes, each its own disk held to the same write rate.
#
#   benches/volumes.sh [-n FRAMES] [-w BPS] [-c COUNTS] [-o DIR]
#
# Each volume is an ext4 image on its own loop device; the recorder runs in
# a cgroup whose block throttle holds each loop device to BPS bytes/s of
# writes (default 20000000; cgroup v1 blkio.throttle.write_bps_device or v2
# io.max wbps), joined before the recorder starts (a shell joins, then execs
# it), so io_uring's worker threads are held too. The input is a trace of
# FRAMES 1514 B frames (default 100000, ~150 MB) made once, replayed by
# `record -r` as fast as the disks take it (the file engine waits for the
# writer: nothing is dropped), with `--rotate-size 8M` (the files spread
# over the volumes), O_DIRECT through io_uring (the default), the default
# RAM buffer capped at 64 MiB. The rate is the bytes of the files written
# over the run's wall time (start to exit: the RAM buffer drained), one
# run per count (COUNTS, default "1 2 4"). Ideal: linear in the count.
# Output: DIR/volumes.md (default target/volumes), a table; the images,
# loop devices, mounts and cgroup are removed on exit, also on failure.
# Needs root, mkfs.ext4, python3; build first:
# cargo build --release -p wiretape-cli.
set -euo pipefail
N=100000 BPS=20000000 COUNTS="1 2 4" OUT=
while getopts "n:w:c:o:" o; do
  case $o in
    n) N=$OPTARG ;; w) BPS=$OPTARG ;; c) COUNTS=$OPTARG ;; o) OUT=$OPTARG ;;
    *) sed -n 2,22p "$0" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/target/release/wiretape
OUT=${OUT:-$ROOT/target/volumes}
[ "$(id -u)" = 0 ] || { echo "volumes.sh: run as root (loop devices, cgroups)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "volumes.sh: build first: cargo build --release -p wiretape-cli" >&2; exit 1; }
mkdir -p "$OUT"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/wt-volumes.XXXXXX")
CG=
cleanup() {
  for m in "$TMP"/m*; do
    [ -d "$m" ] && { umount "$m" 2>/dev/null || true; }
  done
  if [ -n "$CG" ] && [ -d "$CG" ]; then
    for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    sleep 0.2; rmdir "$CG" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# The trace: N frames of 1514 B, 1 µs apart.
python3 - "$TMP/trace.pcap" "$N" <<'EOF'
import struct, sys
path, n = sys.argv[1], int(sys.argv[2])
frame = bytes(range(256)) * 6
frame = bytes.fromhex("020000000002020000000001080045000000") + frame
frame = frame[:1514]
with open(path, "wb") as f:
    f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    for i in range(n):
        f.write(struct.pack("<IIII", 1_700_000_000 + i // 1_000_000, i % 1_000_000, 1514, 1514))
        f.write(frame)
EOF
TRACE_BYTES=$(stat -c %s "$TMP/trace.pcap")
# Four images, each big enough for the whole trace (the 1-volume run).
MIB=$(( TRACE_BYTES / 1048576 * 3 / 2 + 64 ))
DEVS=()
for i in 0 1 2 3; do
  truncate -s "${MIB}M" "$TMP/img$i"
  mkfs.ext4 -q -F "$TMP/img$i"
  mkdir "$TMP/m$i"
  mount -o loop "$TMP/img$i" "$TMP/m$i"
  src=$(findmnt -no SOURCE "$TMP/m$i")
  DEVS+=("$(cat "/sys/block/$(basename "$src")/dev")")
done
# The throttle: cgroup v1 blkio, else v2 io.
if [ -f /sys/fs/cgroup/blkio/blkio.throttle.write_bps_device ]; then
  CG=/sys/fs/cgroup/blkio/wt-volumes-$$; mkdir "$CG"
  for d in "${DEVS[@]}"; do echo "$d $BPS" > "$CG/blkio.throttle.write_bps_device"; done
elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  echo +io > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
  CG=/sys/fs/cgroup/wt-volumes-$$; mkdir "$CG"
  for d in "${DEVS[@]}"; do echo "$d wbps=$BPS" > "$CG/io.max"; done
else
  echo "volumes.sh: no block throttle here (neither cgroup v1 blkio nor the v2 io controller)" >&2; exit 1
fi

{
  echo "# Aggregate write rate over throttled volumes"
  echo
  echo "\`benches/volumes.sh -n $N -w $BPS -c \"$COUNTS\"\`: $N frames of 1514 B ($(( TRACE_BYTES / 1000000 )) MB)"
  echo "replayed by \`record -r\` into ext4 volumes on loop devices, each held to $BPS B/s;"
  echo "$(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)."
  echo
  echo "| volumes | written MB | wall s | MB/s | per volume MB/s | x one volume's limit | files per volume |"
  echo "|---:|---:|---:|---:|---:|---:|---|"
} > "$OUT/volumes.md"
for k in $COUNTS; do
  args=()
  for i in $(seq 0 $(( k - 1 ))); do
    find "$TMP/m$i" -mindepth 1 -delete
    args+=(-w "$TMP/m$i")
  done
  sync
  t0=$(date +%s.%N)
  sh -c 'echo $$ > "$0/cgroup.procs" && shift && exec "$@"' "$CG" x "$BIN" record -r "$TMP/trace.pcap" \
    "${args[@]}" --rotate-size 8M --buffer-mib 64 -q --summary-json "$TMP/s$k.json" 2> "$TMP/err$k" \
    || { cat "$TMP/err$k" >&2; exit 1; }
  t1=$(date +%s.%N)
  bytes=0 files=
  for i in $(seq 0 $(( k - 1 ))); do
    b=$(find "$TMP/m$i" -name '*.pcap' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
    f=$(find "$TMP/m$i" -name '*.pcap' | wc -l)
    bytes=$(( bytes + b )); files="$files${files:+/}$f"
  done
  python3 - "$k" "$bytes" "$t0" "$t1" "$BPS" "$files" >> "$OUT/volumes.md" <<'EOF'
import sys
k, b, t0, t1, bps, files = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
s = t1 - t0
print(f"| {k} | {b/1e6:.1f} | {s:.2f} | {b/s/1e6:.1f} | {b/s/1e6/k:.1f} | {b/s/bps:.2f} | {files} |")
EOF
done
cat "$OUT/volumes.md"
