#!/usr/bin/env bash
# Soak: `wiretape record` for a long time at a steady rate, rotating every
# few seconds with --keep-files, sampling its resident memory, open file
# descriptors and threads once a second into a CSV. At the end: nothing
# lost (frames sent = seen = written, no drops, the identity holds), and
# whether memory, descriptors and threads stayed flat (first vs last minute),
# with a small plot of each.
#
#   benches/soak.sh [SECONDS] [PPS] [SIZE] [OUT_DIR]
#     SECONDS  how long traffic runs (600)
#     PPS      frames per second (50000)
#     SIZE     frame size in bytes (512)
#     OUT_DIR  where the CSV and the summary go (target/soak)
#
# Root. Builds nothing: run `cargo build --release` first. It creates its own
# network namespace (wt-soak-<pid>) with a veth pair and removes it on exit;
# the captures go to a temporary directory, removed on exit. Only one
# benchmark at a time on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-600}; PPS=${2:-50000}; SIZE=${3:-512}; OUT=${4:-target/soak}
W=$PWD/target/release/wiretape
[ -x "$W" ] || { echo "soak: build first: cargo build --release" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "soak: run as root (namespaces, XDP)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
NS=wt-soak-$$
CAP=$(mktemp -d /var/tmp/wt-soak-cap.XXXXXX)
CSV=$OUT/soak.csv
SUM=$OUT/summary.json
REC_PID=""
cleanup() {
  [ -n "$REC_PID" ] && kill -INT "$REC_PID" 2>/dev/null && wait "$REC_PID" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$CAP"
}
trap cleanup EXIT

ip netns add "$NS"
ip -n "$NS" link set lo up
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$NS" link add wt-gen numtxqueues 2 numrxqueues 2 type veth peer name wt-cap numtxqueues 2 numrxqueues 2
ip -n "$NS" link set wt-gen up
ip -n "$NS" link set wt-cap up

# Rotation every 3 s of packet time, at most 40 files kept: over 10 minutes
# some 400 files are made and 360 deleted.
ip netns exec "$NS" "$W" record -i wt-cap -w "$CAP" --rotate-time 3s --keep-files 40 \
  --summary-json "$SUM" -q 2>"$OUT/record.log" &
REC_PID=$!
for _ in $(seq 100); do grep -q "wiretape: recording" "$OUT/record.log" 2>/dev/null && break; sleep 0.1; done
grep -q "wiretape: recording" "$OUT/record.log" || { cat "$OUT/record.log" >&2; exit 1; }
# The recorder runs as the child of `ip netns exec`, which execs it: same pid.
PID=$REC_PID

echo "t_s,rss_kib,fds,threads,files_in_dir" > "$CSV"
sample() {
  local t=$1 rss thr fds files
  rss=$(awk '/^VmRSS:/ {print $2}' /proc/$PID/status 2>/dev/null || echo 0)
  thr=$(awk '/^Threads:/ {print $2}' /proc/$PID/status 2>/dev/null || echo 0)
  fds=$(ls /proc/$PID/fd 2>/dev/null | wc -l)
  files=$(ls "$CAP" | wc -l)
  echo "$t,$rss,$fds,$thr,$files" >> "$CSV"
}

COUNT=$((SECS * PPS))
ip netns exec "$NS" "$W" gen -i wt-gen --size "$SIZE" --count "$COUNT" --rate "$PPS" --flows 16 --json \
  >"$OUT/gen.json" 2>"$OUT/gen.log" &
GEN_PID=$!
t=0
while kill -0 "$GEN_PID" 2>/dev/null; do
  sample $t; sleep 1; t=$((t + 1))
done
wait "$GEN_PID"
sleep 3
sample $t
kill -INT "$REC_PID"; wait "$REC_PID" || true; REC_PID=""

python3 - "$CSV" "$SUM" "$OUT/gen.json" <<'PY'
import csv, json, statistics as st, sys
rows = list(csv.DictReader(open(sys.argv[1])))
s = json.load(open(sys.argv[2]))
g = json.loads(open(sys.argv[3]).read().strip().splitlines()[-1])
sent = g["sent"]
print(f"sent {sent} frames; seen {s['packets_seen']}, written {s['packets_written']}, "
      f"drops {s['drops']['total']}, identity {s['identity_holds']}, "
      f"files deleted by retention {s['retention']['deleted_files']}")
ok = s["packets_seen"] == sent and s["packets_written"] == sent and s["drops"]["total"] == 0 and s["identity_holds"]
bars = " ▁▂▃▄▅▆▇█"
def plot(name, unit):
    v = [int(r[name]) for r in rows]
    lo, hi = min(v), max(v)
    step = max(1, len(v) // 60)
    pts = [max(v[i:i + step]) for i in range(0, len(v), step)]
    line = "".join(bars[0 if hi == lo else 1 + int((p - lo) * 7 / (hi - lo))] for p in pts)
    first = v[: min(60, len(v))]
    last = v[-min(60, len(v)):]
    print(f"{name:>8} {lo}..{hi} {unit}, first minute median {st.median(first)}, last minute median {st.median(last)}  {line}")
    return st.median(last) - st.median(first)
d_rss = plot("rss_kib", "KiB")
d_fds = plot("fds", "")
d_thr = plot("threads", "")
plot("files_in_dir", "")
flat = d_fds <= 2 and d_thr <= 2 and d_rss <= 8 * 1024
print("nothing lost" if ok else "FRAMES LOST OR UNACCOUNTED")
print("flat" if flat else f"GROWING: rss {d_rss:+} KiB, fds {d_fds:+}, threads {d_thr:+} (last minute vs first)")
sys.exit(0 if ok and flat else 1)
PY
echo "soak: $CSV, $SUM"
