#!/usr/bin/env bash
# The sensor API against local extraction, same store, same run:
#
#   benches/api.sh [-g GB] [-r REPEATS] [-d DIR] [-o OUT.md]
#
# The store is benches/extract.sh's (GB of 1514 B frames, one hour, 20,000
# hosts; written once into DIR, default target/extract-store, and kept).
# `wiretape api` serves it on 127.0.0.1 with mutual TLS (certificates from
# `wiretape certs`), and:
#   whole:  the whole store to /dev/null, `wiretape extract DIR` against
#           `wiretape extract https://127.0.0.1:PORT` and, for what TLS
#           costs, `http://` to a plain loopback server (cold page cache
#           each run): wall s, GB/s, CPU s per GB of client and server;
#   ttfb:   time to the first byte on stdout of a 10 s window in the middle
#           (`extract --from T --to T+10s -w -`, no filter), local and
#           remote, cold cache each run;
#   rss:    the server's RSS idle, then with 1, 100 and 1,000 idle
#           connections (TLS handshakes done, no request) held by one
#           Python process.
# Output: a Markdown table (median [min..max] of REPEATS) on stdout and in
# OUT.md (default target/api-bench.md).
set -euo pipefail
cd "$(dirname "$0")/.."
GB=20; R=3; DIR=$PWD/target/extract-store; OUT=$PWD/target/api-bench.md
while getopts "g:r:d:o:" o; do case $o in
  g) GB=$OPTARG;; r) R=$OPTARG;; d) DIR=$OPTARG;; o) OUT=$OPTARG;;
  *) sed -n 2,21p "$0"; exit 2;; esac; done
[ "$(id -u)" = 0 ] || { echo "api.sh: run as root (it drops the page cache between runs)" >&2; exit 1; }
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release -q -p wiretape-cli
BIN=$PWD/target/release/wiretape
benches/extract.sh -g "$GB" -d "$DIR" -S >/dev/null
T0=1763820000
WORK=$(mktemp -d)
API_PID=""; PLAIN_PID=""
cleanup() { for p in $API_PID $PLAIN_PID; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"; }
trap cleanup EXIT
"$BIN" certs init "$WORK/tls" --server-name 127.0.0.1 >/dev/null
"$BIN" certs client "$WORK/tls" bench >/dev/null
export WIRETAPE_CERT=$WORK/tls/client-bench.pem WIRETAPE_KEY=$WORK/tls/client-bench.key WIRETAPE_CA=$WORK/tls/ca.pem
start_api() {
  "$BIN" api -w "$DIR" --listen 127.0.0.1:0 -q --tls-cert "$WORK/tls/server.pem" \
    --tls-key "$WORK/tls/server.key" --client-ca "$WORK/tls/ca.pem" 2>"$WORK/api.err" &
  API_PID=$!
  for _ in $(seq 50); do grep -q serving "$WORK/api.err" 2>/dev/null && break; sleep 0.1; done
  URL=$(grep -o 'https://[^ ]*' "$WORK/api.err")
  # The same without TLS (loopback may be plain): what TLS costs.
  "$BIN" api -w "$DIR" --listen 127.0.0.1:0 -q 2>"$WORK/plain.err" &
  PLAIN_PID=$!
  for _ in $(seq 50); do grep -q serving "$WORK/plain.err" 2>/dev/null && break; sleep 0.1; done
  PLAIN=$(grep -o 'http://[^ ]*' "$WORK/plain.err")
}
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, ticks
TCK=$(getconf CLK_TCK)
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
BYTES=$(du -cb "$DIR"/*.pcap | tail -1 | cut -f1)
start_api
rows=$WORK/rows
MID=$((T0 + 1800))
# whole_remote ROW SERVER_PID URL: the whole store from URL to /dev/null,
# cold cache; the client's CPU and the server's (its /proc ticks) per row.
whole_remote() {
  cold
  local c0 c1 e u s
  c0=$(cpu_of "$2")
  /usr/bin/time -f "%e %U %S" -o "$WORK/t" "$BIN" extract "$3" -q -w /dev/null
  c1=$(cpu_of "$2")
  read -r e u s < "$WORK/t"
  echo "$1 $e $(python3 -c "print($u+$s)") $(python3 -c "print(($c1-$c0)/$TCK)")" >> "$rows"
}
for ((i = 0; i < R; i++)); do
  cold
  /usr/bin/time -f "%e %U %S" -o "$WORK/t" "$BIN" extract "$DIR" -q -w /dev/null
  read -r e u s < "$WORK/t"
  echo "whole-local $e $(python3 -c "print($u+$s)") 0" >> "$rows"
  whole_remote whole-remote "$API_PID" "$URL"
  whole_remote whole-remote-plain "$PLAIN_PID" "$PLAIN"
  for which in local remote; do
    cold
    src=$DIR; [ "$which" = remote ] && src=$URL
    python3 - "$BIN" "$src" "$MID" "$((MID + 10))" >> "$rows" "$which" <<'PY'
import subprocess, sys, time
b, src, f, t = sys.argv[1:5]
t0 = time.monotonic()
p = subprocess.Popen([b, "extract", src, "--from", f, "--to", t, "-q", "-w", "-"], stdout=subprocess.PIPE)
p.stdout.read(1)
first = time.monotonic() - t0
n = 1 + len(p.stdout.read())
p.wait()
print(f"ttfb-{sys.argv[5]} {first:.4f} 0 0")
PY
  done
done
# RSS with idle connections (a fresh server).
kill "$API_PID" "$PLAIN_PID"; wait "$API_PID" "$PLAIN_PID" 2>/dev/null || true
start_api
rss() { awk '/VmRSS/{print $2}' "/proc/$API_PID/status"; }
echo "rss-0 $(rss)" >> "$WORK/rss"
HP=${URL#https://}
python3 - "$HP" "$WORK/tls" "$API_PID" >> "$WORK/rss" <<'PY'
import ssl, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
d, pid = sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=f"{d}/ca.pem")
ctx.load_cert_chain(f"{d}/client-bench.pem", f"{d}/client-bench.key")
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
conns = []
for want in (1, 100, 1000):
    while len(conns) < want:
        s = ctx.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
        conns.append(s)
    time.sleep(1)
    print(f"rss-{want} {rss()}")
PY
python3 - "$rows" "$WORK/rss" "$BYTES" "$GB" <<'PY' | tee "$OUT"
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    k, e, c, s = l.split(); rows.setdefault(k, []).append((float(e), float(c), float(s)))
rss = dict(l.split() for l in open(sys.argv[2]))
B = int(sys.argv[3]) / 1e9
def m(v, f="{:.2f}"):
    v = sorted(v); return f"{f.format(st.median(v))} [{f.format(v[0])}..{f.format(v[-1])}]"
print(f"# The sensor API against local extract ({B:.1f} GB store, loopback, mutual TLS; `benches/api.sh -g {sys.argv[4]}`)")
print()
print("| whole store to /dev/null | wall s | GB/s | client CPU s/GB | server CPU s/GB | total CPU s/GB |")
print("|---|---|---|---|---|---|")
for k in ("whole-local", "whole-remote", "whole-remote-plain"):
    v = rows[k]
    name = {"whole-local": "local", "whole-remote": "remote (mutual TLS)", "whole-remote-plain": "remote (plain HTTP)"}[k]
    print(f"| {name} | {m([x[0] for x in v])} | {m([B/x[0] for x in v])} | {m([x[1]/B for x in v])} | "
          f"{m([x[2]/B for x in v])} | {m([(x[1]+x[2])/B for x in v])} |")
lw = st.median(x[0] for x in rows["whole-local"]); rw = st.median(x[0] for x in rows["whole-remote"])
print()
pw = st.median(x[0] for x in rows["whole-remote-plain"])
print(f"remote throughput = {100*lw/rw:.0f}% of local over mutual TLS, {100*lw/pw:.0f}% over plain HTTP (medians)")
print()
print("| 10 s window, time to first byte | ms |")
print("|---|---|")
for k in ("ttfb-local", "ttfb-remote"):
    print(f"| {k[5:]} | {m([x[0]*1000 for x in rows[k]], '{:.1f}')} |")
tl = st.median(x[0] for x in rows["ttfb-local"]); tr = st.median(x[0] for x in rows["ttfb-remote"])
print()
print(f"remote - local = {1000*(tr-tl):.1f} ms (medians)")
print()
print("| idle TLS connections | server RSS kB |")
print("|---|---|")
for n in ("0", "1", "100", "1000"):
    print(f"| {n} | {rss['rss-'+n]} |")
PY
