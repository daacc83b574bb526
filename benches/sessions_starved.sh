#!/usr/bin/env bash
# benches/sessions_starved.sh: the recorder with its session thread starved
# (issue 38): one rig trial each of `wiretape` and `wiretape-starved` (and the
# generator alone, `none`) through benches/compare.sh, at the same offered load.
#
#   benches/sessions_starved.sh [-r RUNS] [-n N64] [-N N1514] [-s SIZES] [-b PPS] [-c CPU] [-H HOGS] [-o DIR] [-R]
#
# Both are `record -i {IF} -w {DIR} -q --format pcapng --packet-in-place
# --summary-json ...` started through this script's --wrap (the same wrapper
# for both, so both pay the same). wiretape-starved: once the recorder runs,
# a hog (`while :; do :; done` at nice 0) is started on CPU (-c, default 0:
# the rig's generator CPU, so that the capture threads keep the rig's capture
# CPU 1 to themselves, as in the unstarved trial) and the wt-sessions thread
# (found by /proc/PID/task/*/comm) is moved onto it with `taskset -p`, then
# given SCHED_IDLE (`chrt -i -p 0`; it runs at nice 10 by itself, which
# against a nice-0 hog still leaves it a tenth of the CPU: more than it needs
# at these rates). Every other thread of the recorder stays where the rig put
# it (CPU 1). The hog is no child of the recorder (its CPU is not the
# tool's) and is killed when the recorder exits, and by a trap here.
# Per trial the summary (JSON) and the session tables are kept in
# DIR/keep/<tool>-<start ns>/ (hard links: free); at the end a report
# DIR/starved.md: the compare table, then per trial frames sent / seen on
# the interface / written (capinfos) / the summary's written and drops by
# cause, sessions_skipped, tables, incomplete tables, and the tables'
# `wiretape.sessions.complete` metadata (DuckDB's parquet_kv_metadata).
# -H HOGS: that many hogs on CPU (default 1; the SCHED_IDLE thread's share
# shrinks with each).
# -R: only the report, from an earlier run's DIR.
# Defaults: 1 run, 1,000,000 x 64 B and 600,000 x 1514 B at 100,000 frames/s,
# CPU 0, DIR target/sessions-starved. The rig as for compare.sh (RIG=DIR).
set -euo pipefail

if [ "${1:-}" = --wrap ]; then
  # --wrap KEEP HOGCPU|- DIR COMMAND...: the rig's tool (see above). The
  # recorder is this process (exec: the rig's SIGINT reaches it, which a
  # shell could not pass on: the rig starts its tool with SIGINT ignored);
  # a watcher beside it does the pinning, and when the recorder has exited
  # stops the hog and links the summary and the tables into KEEP.
  keep=$2-$(date +%s%N) cpu=$3 dir=$4; shift 4
  mkdir -p "$keep"
  me=$$
  (
    set +e
    hogpid=""
    if [ "$cpu" != - ]; then
      tid=""
      for _ in $(seq 400); do
        for t in /proc/"$me"/task/*; do
          [ "$(cat "$t/comm" 2>/dev/null)" = wt-sessions ] && tid=${t##*/}
        done
        [ -n "$tid" ] && break; sleep 0.05
      done
      if [ -z "$tid" ]; then echo "sessions_starved: no wt-sessions thread in $me"
      else
        # The hog: setsid -f forks it away from us (time(1) does not count it).
        for i in $(seq "${NHOGS:-1}"); do
          setsid -f sh -c "echo \$\$ > '$keep/hog.pid.$i'; exec taskset -c $cpu sh -c 'while :; do :; done'" </dev/null >/dev/null 2>&1
          for _ in $(seq 50); do [ -s "$keep/hog.pid.$i" ] && break; sleep 0.02; done
          h=$(cat "$keep/hog.pid.$i"); echo "$h" >> "${HOGS:-/dev/null}"; hogpid="$hogpid $h"
          renice -n 0 -p "$h" >/dev/null
          echo "hog pid $h: nice, class, cpu: $(ps -o ni=,cls=,psr= -p "$h"); affinity $(taskset -p "$h" | sed 's/.*: //')"
        done
        taskset -p -c "$cpu" "$tid" >/dev/null
        chrt -i -p 0 "$tid"
        ps -L -o tid=,comm=,ni=,cls= -p "$me" | while read -r t c n k; do
          echo "thread $t $c: nice $n, class $k, affinity $(taskset -p "$t" | sed 's/.*: //')"
        done
      fi
    fi
    tail --pid="$me" -s 0.02 -f /dev/null
    for h in $hogpid; do kill "$h"; done
    cp -al "$dir"/summary.json "$dir"/*.sessions.parquet "$keep"/
  ) </dev/null > "$keep/starve.txt" 2>&1 &
  exec "$@"
fi

cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=1; N64=1000000; N1514=600000; SIZES=64,1514; RATE=100000; CPU=0; OUT=$ROOT/target/sessions-starved
REPORT_ONLY=0
export NHOGS=1
while getopts "r:n:N:s:b:c:H:o:Rh" o; do
  case $o in
    r) RUNS=$OPTARG ;; n) N64=$OPTARG ;; N) N1514=$OPTARG ;; s) SIZES=$OPTARG ;;
    b) RATE=$OPTARG ;; c) CPU=$OPTARG ;; H) NHOGS=$OPTARG ;; o) OUT=$OPTARG ;; R) REPORT_ONLY=1 ;;
    *) sed -n '2,30p' "$0"; exit 2 ;;
  esac
done
if [ "$REPORT_ONLY" = 0 ]; then
[ "$(id -u)" = 0 ] || { echo "sessions_starved.sh: run as root (namespaces, XDP, cgroups)" >&2; exit 1; }
# shellcheck source=/dev/null
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release -q -p wiretape-cli
W=${CARGO_TARGET_DIR:-$ROOT/target}/release/wiretape
rm -rf "$OUT"; mkdir -p "$OUT/keep"
export HOGS=$OUT/hogs
: > "$HOGS"
# Any hog left behind (the recorder killed hard) goes with us.
kill_hogs() { local p; while read -r p; do kill "$p" 2>/dev/null || true; done < "$HOGS"; }
trap kill_hogs EXIT
# A trial's directory: per tool, size and a number (the rig's files are
# counted and removed by compare.sh; ours stay).
rec="record -i {IF} -w {DIR} -q --format pcapng --packet-in-place --summary-json {DIR}/summary.json"
# After the recorder exits, the wrapper links the summary and the session
# tables into the keep directory (cheap: no copy, inside the timed command).
tool() { # NAME HOGCPU
  echo "cmd:$1=$ROOT/benches/sessions_starved.sh --wrap $OUT/keep/$1 $2 {DIR} $W $rec"
}
"$ROOT/benches/compare.sh" -r "$RUNS" -n "$N64" -N "$N1514" -s "$SIZES" -b "$RATE" -o "$OUT" \
  none "$(tool wiretape -)" "$(tool wiretape-starved "$CPU")"
fi
# The report (Python with DuckDB: pip install duckdb).
python3 - "$OUT" <<'EOF'
import csv, glob, json, os, sys
import duckdb
out = sys.argv[1]
trials = [r for r in csv.DictReader(open(f"{out}/trials.csv"))]
counts = [r for r in csv.DictReader(open(f"{out}/counts.csv"))]
keeps = sorted(glob.glob(f"{out}/keep/*"), key=lambda p: int(p.rsplit("-", 1)[1]))
lines = [open(f"{out}/compare.md").read().rstrip(), "",
         "Per trial (sent: trafgen; seen: the interface's rx_packets; written: capinfos; the rest the summary's and the session tables'):", "",
         "| size | tool | sent | seen | written (capinfos) | summary written | drops by cause | sessions_skipped | tables | incomplete | tables with complete=0 / =1 | tables' frames (rows' packets) + skipped (metadata) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
ki = 0
ci = {}
after = []
for t in trials:
    if t["tool"] == "none":
        continue
    k = keeps[ki]; ki += 1
    c = [x for x in counts if x["size"] == t["size"] and x["tool"] == t["tool"]]
    n = ci.get((t["size"], t["tool"]), 0); ci[(t["size"], t["tool"])] = n + 1
    s = json.load(open(f"{k}/summary.json"))
    drops = {d: v for d, v in s.get("drops", {}).items() if isinstance(v, (int, float))} if isinstance(s.get("drops"), dict) else s.get("drops")
    ses = s.get("sessions") or {}
    tabs = glob.glob(f"{k}/*.sessions.parquet")
    comp = {"0": 0, "1": 0}
    rows_pk = meta_skip = 0
    for p in tabs:
        rows_pk += duckdb.sql(f"select coalesce(sum(client_packets + server_packets), 0) from '{p}'").fetchall()[0][0]
        for key, val in duckdb.sql(f"select decode(key), decode(value) from parquet_kv_metadata('{p}')").fetchall():
            if key == "wiretape.sessions.complete":
                comp[val] = comp.get(val, 0) + 1
            if key == "wiretape.sessions.skipped":
                meta_skip += int(val)
    lines.append(f"| {t['size']} B | {t['tool']} | {t['sent']} | {t['rx_seen']} | {c[n]['written_capinfos'] if n < len(c) else '-'} | "
                 f"{s.get('packets_written', '-')} | {json.dumps(drops, sort_keys=True)} | {s.get('sessions_skipped', '-')} | "
                 f"{ses.get('tables', '-')} | {ses.get('incomplete', '-')} | {comp['0']} / {comp['1']} | {rows_pk} + {meta_skip} |")
    did = open(f"{k}/starve.txt").read().rstrip() if os.path.exists(f"{k}/starve.txt") else ""
    if did:
        after += ["", f"What was done ({t['tool']}, {t['size']} B): the hog, and the recorder's threads once pinned:", "", "```", did, "```"]
lines += after
open(f"{out}/starved.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
