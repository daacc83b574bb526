#!/usr/bin/env bash
# benches/steno.sh: wiretape against Stenographer, head to head, on the same
# traffic recorded at the same time (issue 42; the Stenographer drop-in,
# issue 36, adds its columns here).
#
#   benches/steno.sh [-g GB] [-c CLIENTS] [-p PPS] [-o DIR] [-k] [-r RUNS]
#
# 1. Makes a trace (benches/steno_gen.py: GB gigabytes, default 2.2, of
#    connections between CLIENTS clients, default 6000, and 200 servers;
#    with a rare host, a busy host, ...) and what each query must return.
# 2. On the rig's veth (netns pbgen -> pbcap): Debian's Stenographer
#    (`stenographer` server and `stenotype`, installed if missing; set up
#    as the rig's steno.sh does) and `wiretape record --engine packet`
#    (both read AF_PACKET taps of pb-cap, so both see every frame) record
#    while tcpreplay sends the trace at PPS frames/s (default 40000).
# 3. Waits for Stenographer to index its last file, stops wiretape.
# 4. Asks every system every query, each on a cold page cache (`sync; echo 3
#    > /proc/sys/vm/drop_caches` before each), RUNS rounds (-r, default 1;
#    a round asks every query of every system once):
#      rare host, busy host, a port, a net, 'udp or icmp', a conjunction
#      (host and port), a time-bounded selective query (host, 20 % of the
#      recording's time).
#    KEYS="rare conj" asks only those; SYSTEMS="stenographer wiretape_steno"
#    only those systems.
#    Systems (columns): stenographer = Debian's `stenoread` against the
#    Stenographer server (HTTPS, then tcpdump -w); wiretape = `wiretape
#    extract` on wiretape's store; wiretape_steno = the same `stenoread`
#    against `wiretape api -w <Stenographer's directory>` (its /query, over
#    stenotype's own files, by the index `wiretape index --index-dir` made
#    of them beforehand: its size and build time go into the table's
#    notes). A system is a function `ask_<name> KEY` plus its name in
#    SYSTEMS.
# 5. Per query and system: frames returned (capinfos), wall time, CPU
#    (the client's processes, and the server's for a server), bytes read
#    from disk (the client's cgroup io.stat rbytes plus the server's
#    /proc/PID/io read_bytes), and the disk's sectors read meanwhile (the
#    whole machine: other work on it counts too). Before a stenoread's
#    measured query, an unparseable one (`host`, refused by both servers
#    with 400 before they touch their stores) loads what the client reads
#    of its own (curl's TLS, config, certificates, locale): the bytes then
#    counted are the server's and its store's. Output: DIR/steno.md (table;
#    with RUNS > 1, median [min..max] per cell), DIR/steno.csv (rows),
#    DIR/*.json (wiretape's --json).
#
# SERVER_TIME=1 also asks each server the same query itself, without the
# client: after each query's stenoread rounds, per server system (those
# asked by stenoread), one cold-cache `curl --cert --key --cacert -d QUERY
# https://HOST:PORT/query -o /dev/null` with the certificate and config
# stenoread uses (after the same refused `host` query to load curl's own
# files), and curl's times: TLS done (time_appconnect), first byte
# (time_starttransfer) and last byte (time_total), the bytes of the answer,
# the server's CPU and its /proc/PID/io read_bytes. Rows go to
# DIR/server.csv, a second table into DIR/steno.md. Rounds alternate the
# order of the systems (round 1 as SYSTEMS, round 2 reversed, ...), for the
# stenoread queries and these.
#
# BLOCKTRACE=1 records where every byte a query reads comes from: the block
# reads of the whole machine (tracefs block:block_bio_queue: sector + size,
# the submitting thread) and ext4's inode and extent-tree loads
# (ext4:ext4_load_inode, ext4:ext4_ext_load_extent) during each measured
# query, into DIR/trace-SYSTEM-KEY-RUN.txt. Then
#   benches/steno_blocks.py DIR/trace-wiretape_steno-rare-1.txt \
#     DIR/stores DIR/steno-idx DIR "$(command -v stenographer)" ...
# maps each read to a file or directory under those roots (FIEMAP extents,
# `filefrag -e`), or to an inode table (the thread's last ext4_load_inode
# names the inode: its group is (ino - 1) / inodes per group; ext4 reads
# inode_readahead_blks blocks of the table, 128 KiB by default) or an
# extent-tree block, and prints bytes per file, directory and group. (No
# debugfs needed: it works where the block device cannot be opened.)
#
# Root, the rig (RIG=DIR, default ../shared/rig), ~3x GB of free disk, and
# the bench lock: run it as `flock /path/to/rig.lock benches/steno.sh`.
# WIRETAPE=/path/to/wiretape runs that binary instead of building this
# checkout's (before/after comparisons against another build).
# -k keeps the stores (DIR/stores) for more queries, and reuses them when
# they are there (no new recording: Stenographer's server is started on its
# store again, and the queries asked).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GB=2.2; CLIENTS=6000; PPS=40000; OUT=$ROOT/target/steno; KEEP=0; RUNS=1
while getopts "g:c:p:o:kr:h" o; do
  case $o in
    g) GB=$OPTARG ;; c) CLIENTS=$OPTARG ;; p) PPS=$OPTARG ;; o) OUT=$OPTARG ;; k) KEEP=1 ;;
    r) RUNS=$OPTARG ;;
    *) sed -n '2,61p' "$0"; exit 2 ;;
  esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "steno.sh: -r takes a number of rounds (1 or more), not '$RUNS'" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "steno.sh: run as root (namespaces, AF_PACKET, drop_caches)" >&2; exit 1; }
RIG=$(cd "${RIG:-$ROOT/../shared/rig}" 2>/dev/null && pwd) || { echo "steno.sh: the rig ../shared/rig is missing (RIG=DIR)" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
command -v stenographer >/dev/null && command -v stenoread >/dev/null ||
  apt-get install -y -qq stenographer stenographer-client jq >/dev/null 2>&1 || apt-get install -y -qq stenographer jq >/dev/null
command -v stenoread >/dev/null || { echo "steno.sh: cannot install Debian's stenographer (stenoread)" >&2; exit 1; }
command -v tcpreplay >/dev/null && command -v capinfos >/dev/null || apt-get install -y -qq tcpreplay tshark >/dev/null
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
# WIRETAPE=BIN runs that binary (another build's, to compare) and builds none.
if [ -n "${WIRETAPE:-}" ]; then W=$WIRETAPE; else
  cargo build --release -q -p wiretape-cli
  W=${CARGO_TARGET_DIR:-$ROOT/target}/release/wiretape
fi
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)   # Stenographer's config wants absolute paths
STORES=$OUT/stores; TRACE=$OUT/trace.pcap
ip netns list | grep -q '^pbcap\b' || "$RIG/veth.sh" up >/dev/null

# 1. The trace (kept for the next run when its parameters are the same).
want="$GB $CLIENTS"
if [ ! -s "$TRACE" ] || [ "$(cat "$TRACE.params" 2>/dev/null)" != "$want" ]; then
  python3 "$ROOT/benches/steno_gen.py" "$TRACE" --bytes "$(python3 -c "print(int($GB*1e9))")" --clients "$CLIENTS"
  echo "$want" > "$TRACE.params"
fi
truth() { python3 -c "import json;print(json.load(open('$TRACE.json'))$1)"; }

# 2. Both record at once (or, with -k, the stores of the last run).
SDIR=$STORES/steno
REUSE=0
if [ "$KEEP" = 1 ] && [ -n "$(ls "$SDIR/thread0/packets" 2>/dev/null)" ] && ls "$STORES/wt"/*.pcap >/dev/null 2>&1; then
  REUSE=1
else
  rm -rf "$STORES"; mkdir -p "$STORES/wt"
fi
cleanup() {
  [ -n "${WTPID:-}" ] && kill -INT "$WTPID" 2>/dev/null || true
  [ -n "${APID:-}" ] && kill "$APID" 2>/dev/null || true
  ip netns exec pbcap "$RIG/steno.sh" down "$SDIR" >/dev/null 2>&1 || true
  for cg in /sys/fs/cgroup/wtsteno-$$-* /sys/fs/cgroup/*/wtsteno-$$-*; do [ -d "$cg" ] && rmdir "$cg" 2>/dev/null; done
  [ -d "${TRACEFS:-}" ] && { echo 0 > "$TRACEFS/tracing_on"; rmdir "$TRACEFS"; } 2>/dev/null
  [ "$KEEP" = 1 ] || rm -rf "$STORES"
}
trap cleanup EXIT
export FILEAGE=${FILEAGE:-10}
ip netns exec pbcap "$RIG/steno.sh" up pb-cap "$SDIR" 18123 >/dev/null
SCONF=$SDIR/config
SPID=$(cat "$SDIR/server.pid")
sent=$(truth "['frames']")
if [ "$REUSE" = 0 ]; then
  ip netns exec pbcap "$W" record -i pb-cap --engine packet -w "$STORES/wt" -q --rotate-size 1G \
    --summary-json "$OUT/record.json" & WTPID=$!
  sleep 4
  t0=$(date +%s%N)
  ip netns exec pbgen tcpreplay -q -i pb-gen --pps="$PPS" "$TRACE" > "$OUT/tcpreplay.txt" 2>&1
  t1=$(date +%s%N)
  echo "$t0 $t1" > "$OUT/send.times"
  echo "steno.sh: sent $sent frames in $(( (t1 - t0) / 1000000 )) ms"
  # 3. Stenographer indexes a file once stenotype rotates it (FILEAGE s) and
  # its server's next scan (up to ~30 s here).
  sleep $(( FILEAGE + 40 ))
  kill -INT "$WTPID"; wait "$WTPID" || true; WTPID=""
  sleep 2
else
  # The send's times (a run before send.times was kept: the recording's
  # first and last frame), and Stenographer's server ready to answer.
  if [ -s "$OUT/send.times" ]; then read -r t0 t1 < "$OUT/send.times"; else
    read -r t0 t1 < <("$W" info --json "$STORES/wt" | python3 -c "
import json, sys
r = [json.loads(l) for l in sys.stdin]
print(min(x['first_ns'] for x in r), max(x['last_ns'] for x in r))")
  fi
  want_rare=$(truth "['counts']['rare']")
  for _ in $(seq 1 60); do
    n=$(ip netns exec pbcap env STENOGRAPHER_CONFIG="$SCONF" stenoread "host $(truth "['rare_host']")" 2>/dev/null | wc -l || true)
    [ "$n" -ge "$want_rare" ] && break
    sleep 2
  done
  echo "steno.sh: reusing the stores of $OUT/stores (Stenographer answers: $n of $want_rare rare-host frames)"
fi

# wiretape's index of Stenographer's files, in a directory of its own, and
# wiretape's API over them (Stenographer's /query, stenoread's config).
SIDX=$OUT/steno-idx
a=$(date +%s%N)
"$W" index -q --index-dir "$SIDX" "$SDIR"
b=$(date +%s%N)
echo "$(du -sb "$SIDX" | cut -f1) $(( (b - a) / 1000000 ))" > "$OUT/steno-index.txt"
WCERTS=$OUT/wtcerts; rm -rf "$WCERTS" "$OUT/wtclient"
"$W" certs init "$WCERTS" --server-name 127.0.0.1 >/dev/null
"$W" certs client "$WCERTS" analyst --stenographer "$OUT/wtclient" --port 18124 >/dev/null
WSCONF=$OUT/wtclient/config
ip netns exec pbcap "$W" api -q -w "$SDIR" --index-dir "$SIDX" --listen 127.0.0.1:18124 \
  --tls-cert "$WCERTS/server.pem" --tls-key "$WCERTS/server.key" --client-ca "$WCERTS/ca.pem" \
  --allow-client analyst 2> "$OUT/api.log" & APID=$!
sleep 2

# 4. The queries. KEY -> Stenographer's query, wiretape's filter, its window.
mid0=$(( t0 + (t1 - t0) * 4 / 10 )); mid1=$(( t0 + (t1 - t0) * 6 / 10 ))
rfc() { date -u -d "@$(( $1 / 1000000000 ))" +%Y-%m-%dT%H:%M:%SZ; }
T0=$(rfc $mid0); T1=$(rfc $(( mid1 + 1000000000 )))
RARE=$(truth "['rare_host']"); BUSY=$(truth "['busy_host']"); CONJ=$(truth "['conj_host']")
read -r -a KEYS <<< "${KEYS:-rare busy port net udp_icmp conj time}"   # KEYS="rare conj": some
declare -A SQ WQ WWIN LABEL
LABEL[rare]="rare host: host $RARE";            SQ[rare]="host $RARE";                  WQ[rare]="host $RARE"
LABEL[busy]="busy host: host $BUSY";            SQ[busy]="host $BUSY";                  WQ[busy]="host $BUSY"
LABEL[port]="port 8080";                        SQ[port]="port 8080";                   WQ[port]="port 8080"
LABEL[net]="net 10.1.0.0/16";                   SQ[net]="net 10.1.0.0/16";              WQ[net]="net 10.1.0.0/16"
LABEL[udp_icmp]="udp or icmp";                  SQ[udp_icmp]="udp or icmp";             WQ[udp_icmp]="udp or icmp"
LABEL[conj]="host $CONJ and port 443";          SQ[conj]="host $CONJ and port 443";     WQ[conj]="host $CONJ and port 443"
LABEL[time]="host $CONJ, $T0 to $T1";           SQ[time]="host $CONJ and after $T0 and before $T1"; WQ[time]="host $CONJ"
WWIN[time]="--from $T0 --to $T1"

SECTOR_DEV=$(basename "$(df --output=source "$STORES" | tail -1)")
SECTOR_DEV=${SECTOR_DEV%%[0-9]*}; [ -e "/sys/block/$SECTOR_DEV/stat" ] || SECTOR_DEV=$(ls /sys/block | grep -v loop | head -1)
sectors() { awk '{print $3}' "/sys/block/$SECTOR_DEV/stat"; }
# Per query, a cgroup counts the client's CPU and disk reads: cgroup v2
# (cpu.stat, io.stat), or v1's cpuacct and blkio hierarchies.
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  CGV=2; echo "+io" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
else
  CGV=1
fi
cg_dirs() { if [ "$CGV" = 2 ]; then echo "/sys/fs/cgroup/$1"; else echo "/sys/fs/cgroup/cpuacct/$1 /sys/fs/cgroup/blkio/$1"; fi; }
N=0
# The clients' programs and their libraries.
PROGRAMS=()
for p in "$W" bash env ip which dirname cat jq curl tcpdump stenoread stenocurl stenographer stenotype; do
  b=$(command -v "$p") || continue
  PROGRAMS+=("$b")
  while read -r lib; do [ -f "$lib" ] && PROGRAMS+=("$lib"); done < <(ldd "$b" 2>/dev/null | awk '/=> \// {print $3}')
done
# BLOCKTRACE=1: every block read of each measured query (the whole machine's
# block:block_bio_queue, with ext4's inode and extent-tree loads that cause
# them) into DIR/trace-SYSTEM-KEY-RUN.txt, in a tracefs instance of our own;
# benches/steno_blocks.py attributes them (see the help above).
TRACEFS=/sys/kernel/tracing/instances/wtsteno-$$
trace_on() {
  [ "${BLOCKTRACE:-0}" = 1 ] || return 0
  [ -d "$TRACEFS" ] || mkdir "$TRACEFS"
  echo 0 > "$TRACEFS/tracing_on"; echo > "$TRACEFS/trace"; echo 16384 > "$TRACEFS/buffer_size_kb"
  local e; for e in block/block_bio_queue ext4/ext4_load_inode ext4/ext4_ext_load_extent; do
    echo 1 > "$TRACEFS/events/$e/enable"; done
  echo 1 > "$TRACEFS/tracing_on"
}
trace_off() {
  [ "${BLOCKTRACE:-0}" = 1 ] || return 0
  echo 0 > "$TRACEFS/tracing_on"
  cat "$TRACEFS/trace" > "$OUT/trace-${T_NAME:-q}.txt"
}
# measure CMD...: runs CMD in a fresh cgroup on a cold page cache; sets
# M_WALL (s), M_CPU (s), M_READ (bytes), M_SECT (bytes of the disk's reads).
measure() {
  N=$((N + 1)); local name=wtsteno-$$-$N d
  for d in $(cg_dirs "$name"); do mkdir "$d"; done
  sync; echo 3 > /proc/sys/vm/drop_caches; sleep 1
  # The programs (not the data): both sides' clients read from the page
  # cache as a sensor's tools would be, so that only the stores' bytes count.
  cat "${PROGRAMS[@]}" > /dev/null 2>&1 || true
  # The client's own files (WARM: a command that loads them), then the
  # servers' counters (MARK) from there on.
  if [ -n "${WARM:-}" ]; then eval "$WARM" > /dev/null 2>&1 || true; fi
  "${MARK:-true}"
  local s0 a b; s0=$(sectors); trace_on; a=$(date +%s%N)
  (for d in $(cg_dirs "$name"); do echo $BASHPID > "$d/cgroup.procs"; done; exec "$@") || true
  b=$(date +%s%N); trace_off
  M_SECT=$(( ($(sectors) - s0) * 512 ))
  M_WALL=$(python3 -c "print(f'{($b - $a) / 1e9:.3f}')")
  if [ "$CGV" = 2 ]; then
    local cg=/sys/fs/cgroup/$name
    M_CPU=$(awk '/usage_usec/ {printf "%.3f", $2 / 1e6}' "$cg/cpu.stat")
    M_READ=$(awk '{for (i = 2; i <= NF; i++) if ($i ~ /^rbytes=/) {split($i, v, "="); s += v[2]}} END {printf "%.0f\n", s + 0}' "$cg/io.stat")
  else
    M_CPU=$(awk '{printf "%.3f", $1 / 1e9}' "/sys/fs/cgroup/cpuacct/$name/cpuacct.usage")
    M_READ=$(awk '$2 == "Read" {s += $3} END {printf "%.0f\n", s + 0}' "/sys/fs/cgroup/blkio/$name/blkio.throttle.io_service_bytes")
  fi
  for d in $(cg_dirs "$name"); do rmdir "$d" 2>/dev/null || true; done
}
proc_io() { awk '/^read_bytes/ {print $2}' "/proc/$1/io"; }
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$1/stat"; }
frames() { [ -s "$1" ] && capinfos -c -M "$1" 2>/dev/null | awk '/Number of packets/ {print $NF}' || echo 0; }

# ask_stenoread CONFIG SERVER_PID KEY: Debian's stenoread against a server
# that speaks Stenographer's /query (Stenographer's own, or later wiretape's).
ask_stenoread() {
  local conf=$1 pid=$2 key=$3 o=$OUT/out-$4-$3.pcap
  rm -f "$o"
  local r0 c0
  mark() { r0=$(proc_io "$pid"); c0=$(proc_cpu "$pid"); }
  T_NAME=$4-$key-$run WARM="ip netns exec pbcap env STENOGRAPHER_CONFIG='$conf' stenoread host -w /dev/null" MARK=mark \
    measure ip netns exec pbcap env STENOGRAPHER_CONFIG="$conf" stenoread "${SQ[$key]}" -w "$o"
  R_FRAMES=$(frames "$o"); R_WALL=$M_WALL; R_CPU=$M_CPU; R_SECT=$M_SECT
  R_SCPU=$(python3 -c "print(f'{$(proc_cpu "$pid") - $c0:.3f}')")
  R_READ=$(( M_READ + $(proc_io "$pid") - r0 ))
}
ask_stenographer() { ask_stenoread "$SCONF" "$SPID" "$1" stenographer; }
# ask_wiretape KEY: wiretape extract over wiretape's store.
ask_wiretape() {
  local key=$1 o=$OUT/out-wiretape-$1.pcap
  rm -f "$o"
  # shellcheck disable=SC2086
  T_NAME=wiretape-$key-$run measure "$W" extract "$STORES/wt" -w "$o" --json -q ${WWIN[$key]:-} ${WQ[$key]} > "$OUT/wiretape-$key.json"
  R_FRAMES=$(frames "$o"); R_WALL=$M_WALL; R_CPU=$M_CPU; R_SCPU=0; R_READ=$M_READ; R_SECT=$M_SECT
}
# ask_wiretape_steno KEY: the same stenoread against wiretape's API over
# Stenographer's files.
ask_wiretape_steno() { ask_stenoread "$WSCONF" "$APID" "$1" wiretape_steno; }
SYSTEMS=${SYSTEMS:-"stenographer wiretape wiretape_steno"}

# SERVER_TIME=1: ask_curl CONFIG SERVER_PID KEY NAME asks the server itself
# (curl with stenoread's certificate, no tcpdump, the answer to /dev/null).
ask_curl() {
  local conf=$1 pid=$2 key=$3 host port cp
  host=$(jq -r .Host "$conf"); port=$(jq -r .Port "$conf"); cp=$(jq -r .CertPath "$conf")
  local c=(ip netns exec pbcap curl -s --cert "$cp/client_cert.pem" --key "$cp/client_key.pem"
    --cacert "$cp/ca_cert.pem" --max-time 890 -o /dev/null "https://$host:$port/query")
  local r0 c0
  mark() { r0=$(proc_io "$pid"); c0=$(proc_cpu "$pid"); }
  T_NAME=curl-$4-$key-$run WARM="$(printf '%q ' "${c[@]}") -d host" MARK=mark \
    measure "${c[@]}" -d "${SQ[$key]}" \
    -w '%{http_code} %{size_download} %{time_appconnect} %{time_starttransfer} %{time_total}\n' > "$OUT/curl.txt"
  read -r C_CODE C_BYTES C_TLS C_TTFB C_TOTAL < "$OUT/curl.txt"
  C_WALL=$M_WALL
  C_SCPU=$(python3 -c "print(f'{$(proc_cpu "$pid") - $c0:.3f}')")
  C_SREAD=$(( $(proc_io "$pid") - r0 ))
  C_READ=$(( M_READ + C_SREAD ))
}
curl_stenographer() { ask_curl "$SCONF" "$SPID" "$1" stenographer; }
curl_wiretape_steno() { ask_curl "$WSCONF" "$APID" "$1" wiretape_steno; }

echo "run,query,system,frames,wall_s,cpu_s,server_cpu_s,read_bytes,disk_read_bytes" > "$OUT/steno.csv"
[ "${SERVER_TIME:-0}" = 1 ] &&
  echo "run,query,system,http_code,bytes,tls_s,ttfb_s,total_s,wall_s,server_cpu_s,server_read_bytes,read_bytes" > "$OUT/server.csv"
for run in $(seq 1 "$RUNS"); do
  # Odd rounds ask the systems in SYSTEMS' order, even rounds the other way.
  order=$SYSTEMS; [ $((run % 2)) = 0 ] && order=$(echo "$SYSTEMS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for key in "${KEYS[@]}"; do
    for sys in $order; do
      "ask_$sys" "$key"
      echo "$run,$key,$sys,$R_FRAMES,$R_WALL,$R_CPU,$R_SCPU,$R_READ,$R_SECT" >> "$OUT/steno.csv"
      printf 'run %s %-44s %-14s %9s frames %8ss cpu %6ss+%6ss read %12s B (disk %12s B)\n' \
        "$run" "${LABEL[$key]}" "$sys" "$R_FRAMES" "$R_WALL" "$R_CPU" "$R_SCPU" "$R_READ" "$R_SECT"
    done
    [ "${SERVER_TIME:-0}" = 1 ] || continue
    for sys in $order; do
      declare -F "curl_$sys" > /dev/null || continue
      "curl_$sys" "$key"
      echo "$run,$key,$sys,$C_CODE,$C_BYTES,$C_TLS,$C_TTFB,$C_TOTAL,$C_WALL,$C_SCPU,$C_SREAD,$C_READ" >> "$OUT/server.csv"
      printf 'run %s %-44s %-14s server: %s %11s B, TLS %8ss, first byte %8ss, total %8ss (wall %6ss) cpu %6ss read %11s B (+client %11s B)\n' \
        "$run" "${LABEL[$key]}" "$sys" "$C_CODE" "$C_BYTES" "$C_TLS" "$C_TTFB" "$C_TOTAL" "$C_WALL" "$C_SCPU" "$C_SREAD" "$C_READ"
    done
  done
done

# 5. The table.
python3 - "$OUT" "$TRACE.json" "$OUT/record.json" "$STORES" "$OUT/steno-index.txt" <<'PY' > "$OUT/steno.md"
import csv, json, os, sys
out, tj, rj, stores, sidx = sys.argv[1:6]
t = json.load(open(tj)); c = t["counts"]
rows = list(csv.DictReader(open(f"{out}/steno.csv")))
systems = []
for r in rows:
    if r["system"] not in systems:
        systems.append(r["system"])
def size(d):
    return sum(os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(d) for f in fs)
want = {"rare": c["rare"], "busy": c["busy"], "port": c["port8080"], "net": c["net"],
        "udp_icmp": c["udp_or_icmp"], "conj": c["conj"], "time": None}
label = {"rare": "rare host", "busy": "busy host", "port": "port 8080", "net": "net 10.1.0.0/16",
         "udp_icmp": "udp or icmp", "conj": "host and port 443", "time": "host, 20 % of the time"}
def h(b):
    b = float(b)
    for u in ["B", "KB", "MB", "GB"]:
        if b < 1000 or u == "GB":
            return f"{b:.0f} {u}" if u == "B" else f"{b:.1f} {u}"
        b /= 1000
rec = json.load(open(rj)) if os.path.exists(rj) else {}
def spread(vs, f):
    """One value as is; several as median [min..max]."""
    if len(vs) == 1:
        return f(vs[0])
    s = sorted(vs)
    return f"{f(s[len(s) // 2])} [{f(s[0])}..{f(s[-1])}]"
runs = len({r["run"] for r in rows})
print(f"Trace: {t['frames']:,} frames, {t['bytes'] / 1e9:.2f} GB, {t['hosts']:,} hosts "
      f"(benches/steno_gen.py); sent by tcpreplay at a fixed rate, recorded by both at once.\n")
if os.path.isdir(stores):
    print(f"Stores: stenographer {h(size(stores + '/steno'))}, wiretape {h(size(stores + '/wt'))}.\n")
if os.path.exists(sidx):
    b, ms = open(sidx).read().split()
    print(f"wiretape_steno: `wiretape api` over Stenographer's files, by wiretape's index of them "
          f"(`wiretape index --index-dir`: {h(b)}, built in {int(ms) / 1000:.1f} s before the "
          f"queries; Stenographer's leveldb index is not read).\n")
hdr = "| query (frames sent) | " + " | ".join(f"{s}: frames, wall, CPU, read" for s in systems) + " |"
print(hdr)
print("|" + "---|" * (1 + len(systems)))
for k in ["rare", "busy", "port", "net", "udp_icmp", "conj", "time"]:
    cells = []
    for s in systems:
        rs = [x for x in rows if x["query"] == k and x["system"] == s]
        if not rs:
            cells.append("-"); continue
        frames = sorted({int(r["frames"]) for r in rs})
        walls = [float(r["wall_s"]) for r in rs]
        cpus = [float(r["cpu_s"]) + float(r["server_cpu_s"]) for r in rs]
        reads = [float(r["read_bytes"]) for r in rs]
        cells.append(f"{'/'.join(f'{n:,}' for n in frames)}, {spread(walls, lambda v: f'{v:.2f} s')}, "
                     f"{spread(cpus, lambda v: f'{v:.2f} s')}, {spread(reads, h)}")
    if all(c == "-" for c in cells):
        continue
    w = f" ({want[k]:,})" if want[k] is not None else ""
    print(f"| {label[k]}{w} | " + " | ".join(cells) + " |")
print(f"\n{runs} round(s); with more than one, each cell is median [min..max]. CPU: the client's "
      "processes plus, for a server, the server's. Read: the client's cgroup (io.stat rbytes) plus "
      "the server's /proc/PID/io read_bytes, each query on a cold page cache (the client's own "
      "files loaded first by a refused query). The disk's own count (whole machine) is in steno.csv.")
if os.path.exists(f"{out}/server.csv"):
    srows = list(csv.DictReader(open(f"{out}/server.csv")))
    ssys = []
    for r in srows:
        if r["system"] not in ssys:
            ssys.append(r["system"])
    print("\nThe server alone (SERVER_TIME=1): `curl -d QUERY https://HOST:PORT/query -o /dev/null` "
          "with stenoread's certificate, cold page cache.\n")
    print("| query | " + " | ".join(f"{s}: TLS, first byte, total, total after TLS, answer, server read"
                                     for s in ssys) + " |")
    print("|" + "---|" * (1 + len(ssys)))
    for k in ["rare", "busy", "port", "net", "udp_icmp", "conj", "time"]:
        cells = []
        for s in ssys:
            rs = [x for x in srows if x["query"] == k and x["system"] == s]
            if not rs:
                cells.append("-"); continue
            col = lambda n: [float(r[n]) for r in rs]
            sec = lambda v: f"{v:.3f} s"
            cells.append(f"{spread(col('tls_s'), sec)}, {spread(col('ttfb_s'), sec)}, "
                         f"{spread(col('total_s'), sec)}, "
                         f"{spread([float(r['total_s']) - float(r['tls_s']) for r in rs], sec)}, "
                         f"{spread(col('bytes'), h)}, "
                         f"{spread(col('server_read_bytes'), h)}")
        if any(c != "-" for c in cells):
            print(f"| {label[k]} | " + " | ".join(cells) + " |")
    print("\nTLS: curl's time_appconnect (handshake done); first byte: time_starttransfer; total: "
          "time_total; total after TLS: time_total - time_appconnect (the query's own part: each "
          "server's handshake depends on its certificate's key). Server read: the server's /proc/PID/io read_bytes over the query; "
          "the client's cgroup reads are in server.csv (read_bytes, both together).")
PY
cat "$OUT/steno.md"
