#!/usr/bin/env bash
# Soak with analysts: `wiretape record` for a long time at a steady rate,
# rotating every 3 s with retention (--keep-files 40), while `wiretape api`
# serves the store on loopback with mutual TLS (certificates from
# `wiretape certs`) and a client (benches/soak_client.py: Python's ssl, and
# curl for the console) asks /v1/files, /v1/count, /v1/extract, /v1/timeline
# and the console's page every few seconds, drops a download of the whole
# store mid-way every 4th round, and runs `wiretape index --parquet` every
# 30 s. Every answer is checked against a local `wiretape extract` of the same
# window. The recorder's and the API's resident memory, open descriptors and
# threads are sampled once a second into a CSV (t_s: seconds since the
# traffic started). At the end
# (benches/soak_report.py, a Markdown report on stdout and in OUT_DIR/soak.md):
#   - nothing lost: frames sent = written by the recorder = frames in the
#     files left + frames of the files retention deleted (each seen complete
#     in /v1/files before it went); the deleted files' count and bytes = the
#     recorder's summary; no drops, its identity holds;
#   - every query answered correctly;
#   - flat: after a warm-up (the first fifth of the run, at most 120 s), its
#     first WINDOW s against the run's last WINDOW s (WINDOW = a third of the
#     rest, at most 600 s), medians, within the thresholds below (the key
#     indexes the API keeps open are counted apart, api_kept_kdx, at most
#     256);
#   - no error line in the recorder's or the API's log.
# Exit 1 if any of these fails.
#
#   benches/soak.sh [SECONDS] [PPS] [SIZE] [OUT_DIR]
#     SECONDS  how long traffic runs (600)
#     PPS      frames per second (20000)
#     SIZE     frame size in bytes (512)
#     OUT_DIR  where the CSV, logs and report go (target/soak)
#   SOAK_EVERY=S        seconds between the client's rounds (3)
#   SOAK_INDEX_EVERY=S  seconds between `index --parquet` runs (30)
#   SOAK_RING="ARGS"     record's ring flags ("--packet-blocks 512 --packet-block-kib 128"; "" for its defaults)
#   Growth allowed, last window's median minus the first's:
#   SOAK_MAX_RSS_MIB=M  resident memory of either process (16)
#   SOAK_MAX_FDS=N      open descriptors of either process (4)
#   SOAK_MAX_THREADS=N  threads of either process (4)
#
# Root. Builds nothing: run `cargo build --release` first (WIRETAPE=BIN to
# use another binary). Everything it starts runs in its own network namespace
# (wt-soak-<pid>, a veth pair and its own loopback); on exit, also when
# interrupted or terminated, it stops them and removes the namespace and its
# temporary directories; a watchdog in its own session does the same within a
# second if the script is killed outright (SIGKILL). Only one benchmark at a
# time on a shared machine. scripts/test.sh runs `benches/soak.sh 300` (5 min).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-600}; PPS=${2:-20000}; SIZE=${3:-512}; OUT=${4:-target/soak}
EVERY=${SOAK_EVERY:-3}; INDEX_EVERY=${SOAK_INDEX_EVERY:-30}
W=${WIRETAPE:-${CARGO_TARGET_DIR:-target}/release/wiretape}
W=$(realpath -e "$W" 2>/dev/null) || W=''
if [ -z "$W" ] || [ ! -x "$W" ]; then echo "soak: build first: cargo build --release" >&2; exit 1; fi
[ "$(id -u)" = 0 ] || { echo "soak: run as root (namespaces, XDP)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/{soak.csv,summary.json,gen.json,gen.log,record.log,api.log,client.log,queries.jsonl,files.json,left.txt,index.parquet,soak.md,soak.svg}
NS=wt-soak-$$
CAP=$(mktemp -d /var/tmp/wt-soak-cap.XXXXXX)
TLS=$(mktemp -d /tmp/wt-soak-tls.XXXXXX)
# teardown: whatever runs in the namespace, the namespace, the directories.
teardown() {
  local p
  for p in $(ip netns pids "$NS" 2>/dev/null); do kill -INT "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$CAP" "$TLS"
}
# The watchdog: when this script is gone, however it went, tear down.
ME=$$
setsid bash -c "$(declare -f teardown); NS=$NS CAP=$CAP TLS=$TLS
  while kill -0 $ME 2>/dev/null; do sleep 1; done; teardown" </dev/null >/dev/null 2>&1 &
CSV=$OUT/soak.csv
SUM=$OUT/summary.json
REC_PID=""; API_PID=""; GEN_PID=""; CLI_PID=""
cleanup() {
  trap - EXIT INT TERM
  for p in $CLI_PID $GEN_PID $API_PID; do kill "$p" 2>/dev/null || true; done
  if [ -n "$REC_PID" ]; then kill -INT "$REC_PID" 2>/dev/null || true; fi
  for p in $CLI_PID $GEN_PID $API_PID $REC_PID; do wait "$p" 2>/dev/null || true; done
  teardown
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ip netns add "$NS"
ip -n "$NS" link set lo up
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$NS" link add wt-gen numtxqueues 2 numrxqueues 2 type veth peer name wt-cap numtxqueues 2 numrxqueues 2
ip -n "$NS" link set wt-gen up
ip -n "$NS" link set wt-cap up

# Rotation every 3 s of packet time, at most 40 files kept (some 120 s of
# traffic here): over 30 minutes about 600 files are made and 560 deleted.
# The packet engine's ring (auto's pick on veth): 512 blocks of 128 KiB,
# the default's 64 MiB per queue, but 8 times the blocks: a block is handed
# over 8 ms after its first frame however full, so at this rate the
# default's 64 blocks hold only ~0.5 s of traffic, and on a shared 2-vCPU
# machine the copy thread was seen without CPU for longer (two 30-minute
# runs under load 10-13 lost 25,138 and 115,653 frames that way).
# SOAK_RING overrides it ("" for record's defaults).
# shellcheck disable=SC2086
ip netns exec "$NS" "$W" record -i wt-cap -w "$CAP" --rotate-time 3s --keep-files 40 \
  ${SOAK_RING---packet-blocks 512 --packet-block-kib 128} \
  --summary-json "$SUM" 2>"$OUT/record.log" &
REC_PID=$!
for _ in $(seq 100); do grep -q "wiretape: recording" "$OUT/record.log" 2>/dev/null && break; sleep 0.1; done
grep -q "wiretape: recording" "$OUT/record.log" || { cat "$OUT/record.log" >&2; exit 1; }
# `ip netns exec` execs what it runs: $! is the recorder's (the API's) pid.

"$W" certs init "$TLS" --server-name 127.0.0.1 >/dev/null
"$W" certs client "$TLS" soak >/dev/null
ip netns exec "$NS" "$W" api -w "$CAP" --listen 127.0.0.1:0 --tls-cert "$TLS/server.pem" --tls-key "$TLS/server.key" \
  --client-ca "$TLS/ca.pem" --allow-client soak 2>"$OUT/api.log" &
API_PID=$!
for _ in $(seq 100); do grep -q serving "$OUT/api.log" 2>/dev/null && break; sleep 0.1; done
URL=$(grep -o 'https://[^ ]*' "$OUT/api.log" | head -1)
[ -n "$URL" ] || { cat "$OUT/api.log" >&2; exit 1; }

echo "t_s,rec_rss_kib,rec_fds,rec_threads,api_rss_kib,api_fds,api_threads,api_kept_kdx,files_in_dir" > "$CSV"
# The API keeps each key index (.kdx) it has read open while the store holds
# it (at most 256, closed within seconds of its file's deletion): those are
# counted apart (api_kept_kdx, bounded by the report), not as descriptors
# that may only stay flat. A deleted one still open counts as a descriptor.
kept_kdx() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 -lname '*.kdx' 2>/dev/null | wc -l; }
of() { # RSS, descriptors (less kept key indexes), threads of pid $1
  local rss thr fds
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0)
  thr=$(awk '/^Threads:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0)
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  [ "$1" = "$API_PID" ] && fds=$((fds - $(kept_kdx "$1")))
  echo "$rss,$fds,$thr"
}
sample() {
  echo "$1,$(of "$REC_PID"),$(of "$API_PID"),$(kept_kdx "$API_PID"),$(find "$CAP" -mindepth 1 -maxdepth 1 | wc -l)" >> "$CSV"
}

COUNT=$((SECS * PPS))
ip netns exec "$NS" "$W" gen -i wt-gen --size "$SIZE" --count "$COUNT" --rate "$PPS" --flows 16 --json \
  >"$OUT/gen.json" 2>"$OUT/gen.log" &
GEN_PID=$!
ip netns exec "$NS" python3 benches/soak_client.py "$URL" "$TLS" "$W" "$CAP" "$OUT" "$SECS" "$EVERY" "$INDEX_EVERY" \
  2>"$OUT/client.log" &
CLI_PID=$!
T0=$SECONDS; said=0
while kill -0 "$GEN_PID" 2>/dev/null; do
  t=$((SECONDS - T0)); sample $t; sleep 1
  if [ $((t / 60)) -gt $said ]; then
    said=$((t / 60))
    echo "soak: ${t}s of ${SECS}s, $(grep -c '"ok": false' "$OUT/queries.jsonl" || true) wrong answers so far" >&2
  fi
done
wait "$GEN_PID"; GEN_PID=""
wait "$CLI_PID" || true; CLI_PID=""
sleep 3
sample $((SECONDS - T0))
kill -INT "$REC_PID"; wait "$REC_PID" || true; REC_PID=""
kill "$API_PID"; wait "$API_PID" 2>/dev/null || true; API_PID=""
# What is left in the store after the recorder stopped, per file (frames
# from the files' own records).
for f in "$CAP"/*.pcap; do
  printf '%s %s ' "$(basename "$f")" "$(stat -c %s "$f")"
  "$W" extract "$f" -q --count-only --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["frames"])'
done > "$OUT/left.txt"

python3 benches/soak_report.py "$OUT" "$SECS" "$PPS" "$SIZE" | tee "$OUT/soak.md"
