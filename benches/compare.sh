#!/usr/bin/env bash
# benches/compare.sh: wiretape beside tcpdump, netsniff-ng, dumpcap and
# stenotype on the shared rig (../shared/rig), as a table anyone can regenerate.
#
#   benches/compare.sh [-r RUNS] [-n N64] [-N N1514] [-s SIZES] [-m MEM] [-b PPS] [-w BPS] [-g CONF] [-o DIR] [TOOL...]
#
# Each trial is one rig trial (rig/peers.sh: trafgen sends a fixed count from
# netns pbgen on CPU 0, the tool records pb-cap in netns pbcap on CPU 1, same
# disk for every tool), run inside a memory cgroup of MEM (default 2G) so the
# page cache cannot hide a slow writer. Trials are interleaved, the tools' order
# rotating from run to run (run 1 of every
# tool and size, then run 2, ...). Frames written are counted with capinfos
# (Wireshark), not with wiretape's reader (stenotype's own block format: the
# rig's pcapcount). Output: DIR/compare.md (median [min..max] per size and
# tool, and wiretape's ratios to each peer), DIR/compare.png, DIR/trials.csv.
# CPU per million frames in three columns: process (the tool's own), kernel
# (irq+softirq of all CPUs, the rig's kirq_s, above the median of the `none`
# trials of that size: the kernel work the tool causes, on the sender's CPU
# too) and whole (process + kernel: what the machine pays); ratios on both.
# -b PPS: the generator at a fixed rate for every tool (same offered load),
# instead of as fast as it goes (a tool's kernel-side cost slows the sender
# on veth, so at full speed each tool faces a different load).
# -w BPS: the disk under the rig's output held to BPS bytes/s of writes for
# every tool (the kernel's block throttle: cgroup v1 blkio or v2 io.max), a
# disk slower than the link: who loses what when the disk falls behind.
# -g CONF: the 64 B frames from this trafgen config instead of the rig's
# (e.g. benches/gen/udp64-10ports.trafgen: ten UDP source ports), run from a
# private copy of the rig in target/rig.
# Tools: none (generator alone), wiretape, tcpdump, netsniff-ng, dumpcap,
# stenotype; wiretape-before: the wiretape binary named by the BEFORE
# environment variable (an older build, for before/after in the same run);
# and wiretape with a capture filter in its XDP program:
# wiretape-fall ('udp': keeps every frame), wiretape-f10 ('udp src port
# 40000': keeps 10 % of the -g benches/gen/udp64-10ports.trafgen frames; its
# "loss" column is then the 90 % it filtered, by design).
# wiretape: record --format pcapng --packet-in-place (the packet engine lays
# pcapng out in place in its ring and writes it as it lies, frames not
# copied: stenotype's way; blocks copied into RAM only while the disk is
# behind);
# wiretape-nokeys: as wiretape, without the key index (.kdx): the flow sets of
# the .idx alone, as before the key index (what the key index costs);
# wiretape-nosessions: as wiretape, without the session tables
# (--no-sessions: what the session tables cost the recording);
# wiretape-pcap: record with every default (pcap: frames copied, RAM buffer);
# wiretape-afxdp / wiretape-packet: --engine afxdp / packet forced (pcap);
# wiretape-packet-ng / wiretape-ng-copy: --format pcapng, frames copied.
# wiretape-lz4 and wiretape-zstd: record --compress lz4 / zstd (capinfos
# counts the compressed files as they are).
# wiretape-age and wiretape-lz4-age: record --encrypt-to (age; with
# --compress lz4): a key made for the run in OUT/age.key (age-keygen), the
# files counted through `age -d` (and `lz4 -dc`).
# The live side (what consumers cost the recorder): wiretape-sub1 and
# wiretape-sub4 (1 or 4 in-process lossless subscribers, each reading every
# frame: the hidden --bench-subscribers N), wiretape-serve (--serve with one
# PCAP-over-IP client, benches/serve-client.sh: nc on the same CPU, the bytes
# it received in DIR/serve-*.bytes).
# Any other rig tool spec works too, e.g. 'cmd:NAME=/path/to/wiretape record
# -i {IF} -w {DIR} -q' (an older build under its own NAME).
# Defaults: 3 runs, 10M x 64 B and 2M x 1514 B, tools none wiretape tcpdump
# netsniff-ng dumpcap stenotype. Takes ~5 min per run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RUNS=3; N64=10000000; N1514=2000000; SIZES=64,1514; MEM=2G; OUT=$ROOT/target/compare; RATE=""; GEN64=""; WBPS=""
while getopts "r:n:N:s:m:o:b:w:g:h" o; do
  case $o in
    r) RUNS=$OPTARG ;; n) N64=$OPTARG ;; N) N1514=$OPTARG ;; s) SIZES=$OPTARG ;;
    m) MEM=$OPTARG ;; o) OUT=$OPTARG ;; b) RATE=$OPTARG ;; w) WBPS=$OPTARG ;; g) GEN64=$(realpath "$OPTARG") ;;
    *) sed -n '2,41p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND-1))
TOOLS=("$@"); [ ${#TOOLS[@]} -gt 0 ] || TOOLS=(none wiretape tcpdump netsniff-ng dumpcap stenotype)
RIG=$(cd "${RIG:-$ROOT/../shared/rig}" 2>/dev/null && pwd) || { echo "compare.sh: the rig ../shared/rig is missing (RIG=DIR names another)" >&2; exit 1; }
# A private copy of the rig (it writes into its tmp/): with -g, or when the
# shared one is not ours to write (a read-only checkout).
if [ -n "$GEN64" ] || [ ! -w "$RIG" ] || [ "$(stat -c %a "$RIG")" = 555 ]; then
  [ -z "$GEN64" ] || [ -f "$GEN64" ] || { echo "compare.sh: -g $GEN64: no such trafgen config" >&2; exit 2; }
  rm -rf "$ROOT/target/rig"; mkdir -p "$ROOT/target"; cp -r "$RIG" "$ROOT/target/rig"; chmod -R u+w "$ROOT/target/rig"
  RIG=$ROOT/target/rig; rm -rf "$RIG"/tmp
  [ -z "$GEN64" ] || cp "$GEN64" "$RIG/gen/udp64.trafgen"
fi
[ "$(id -u)" = 0 ] || { echo "compare.sh: run as root (namespaces, XDP, cgroups)" >&2; exit 1; }

# What it needs, installed if missing.
command -v trafgen >/dev/null && command -v tcpdump >/dev/null && command -v dumpcap >/dev/null || "$RIG/install.sh"
command -v capinfos >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tshark >/dev/null
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-matplotlib >/dev/null
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release -q -p wiretape-cli
W=${CARGO_TARGET_DIR:-$ROOT/target}/release/wiretape

# The memory cgroup (v2 or v1), removed at the end.
bytes=$(/usr/bin/python3 -c "import sys;s='$MEM'.upper().rstrip('B');m={'K':1<<10,'M':1<<20,'G':1<<30}.get(s[-1:],1);print(int(float(s.rstrip('KMG'))*m))")
CG=wtcmp$$
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  CGDIR=/sys/fs/cgroup/$CG; mkdir "$CGDIR"; echo "$bytes" > "$CGDIR/memory.max"
else
  CGDIR=/sys/fs/cgroup/memory/$CG; mkdir "$CGDIR"; echo "$bytes" > "$CGDIR/memory.limit_in_bytes"
fi
# -w: the write throttle, on the disk holding the rig's output (its whole
# disk when that is a partition), in the same cgroup (v2) or a blkio one (v1).
BLKCG=""
if [ -n "$WBPS" ]; then
  mkdir -p "$RIG/tmp"
  dev=$(stat -c '%Hd:%Ld' "$RIG/tmp")
  [ -e "/sys/dev/block/$dev/partition" ] && dev=$(cat "/sys/dev/block/$dev/../dev")
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo +io > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    echo "$dev wbps=$WBPS" > "$CGDIR/io.max"
  else
    BLKCG=/sys/fs/cgroup/blkio/$CG; mkdir "$BLKCG"
    echo "$dev $WBPS" > "$BLKCG/blkio.throttle.write_bps_device"
  fi
fi
cleanup() {
  for p in $(cat "$CGDIR/cgroup.procs" 2>/dev/null); do kill "$p" 2>/dev/null || true; done; sleep 0.2; rmdir "$CGDIR" 2>/dev/null || true
  [ -z "$BLKCG" ] || rmdir "$BLKCG" 2>/dev/null || true
}
# Each trial starts from an empty cgroup: the page cache a buffered writer
# left behind would otherwise be reclaimed by (and charged to) whichever tool
# runs next, so a tool's figures would depend on the one before it.
drain() {
  sync
  if [ -f "$CGDIR/memory.reclaim" ]; then echo "$bytes" > "$CGDIR/memory.reclaim" 2>/dev/null || true
  else echo 0 > "$CGDIR/memory.force_empty" 2>/dev/null || true; fi
}
trap cleanup EXIT
# Each trial starts with warm kernel memory (benches/prewarm.py says why).
prewarm() { /usr/bin/python3 "$ROOT/benches/prewarm.py" 2>/dev/null || true; }

mkdir -p "$OUT"
CSV=$OUT/trials.csv; COUNTS=$OUT/counts.csv
rm -f "$CSV"; echo "size,tool,run,written_capinfos,counter" > "$COUNTS"
age_recipient() { # the run's age key (made once), its recipient
  [ -f "$OUT/age.key" ] || age-keygen -o "$OUT/age.key" 2>/dev/null
  age-keygen -y "$OUT/age.key"
}
spec() { # the rig's tool argument
  case $1 in
    wiretape) echo "cmd:wiretape=$W record -i {IF} -w {DIR} -q --format pcapng --packet-in-place" ;;
    wiretape-pcap) echo "cmd:wiretape-pcap=$W record -i {IF} -w {DIR} -q" ;;
    wiretape-nokeys) echo "cmd:wiretape-nokeys=$W record -i {IF} -w {DIR} -q --format pcapng --packet-in-place --no-key-index" ;;
    wiretape-nosessions) echo "cmd:wiretape-nosessions=$W record -i {IF} -w {DIR} -q --format pcapng --packet-in-place --no-sessions" ;;
    wiretape-ng-copy) echo "cmd:wiretape-ng-copy=$W record -i {IF} -w {DIR} -q --format pcapng" ;;
    wiretape-before) [ -x "${BEFORE:-}" ] || { echo "compare.sh: wiretape-before needs BEFORE=/path/to/wiretape" >&2; exit 2; }
                     echo "cmd:wiretape-before=$BEFORE record -i {IF} -w {DIR} -q" ;;
    wiretape-sub1) echo "cmd:wiretape-sub1=$W record -i {IF} -w {DIR} -q --bench-subscribers 1" ;;
    wiretape-sub4) echo "cmd:wiretape-sub4=$W record -i {IF} -w {DIR} -q --bench-subscribers 4" ;;
    wiretape-serve) echo "cmd:wiretape-serve=$ROOT/benches/serve-client.sh $OUT/serve-\$(date +%s%N).bytes 57012 $W record -i {IF} -w {DIR} -q --serve 127.0.0.1:57012" ;;
    wiretape-fall) echo "cmd:wiretape-fall=$W record -i {IF} -w {DIR} -q udp" ;;
    wiretape-afxdp) echo "cmd:wiretape-afxdp=$W record -i {IF} -w {DIR} -q --engine afxdp" ;;
    wiretape-packet) echo "cmd:wiretape-packet=$W record -i {IF} -w {DIR} -q --engine packet" ;;
    wiretape-packet-ng) echo "cmd:wiretape-packet-ng=$W record -i {IF} -w {DIR} -q --engine packet --format pcapng" ;;
    wiretape-lz4) echo "cmd:wiretape-lz4=$W record -i {IF} -w {DIR} -q --compress lz4" ;;
    wiretape-zstd) echo "cmd:wiretape-zstd=$W record -i {IF} -w {DIR} -q --compress zstd" ;;
    wiretape-age) echo "cmd:wiretape-age=$W record -i {IF} -w {DIR} -q --encrypt-to $(age_recipient)" ;;
    wiretape-lz4-age) echo "cmd:wiretape-lz4-age=$W record -i {IF} -w {DIR} -q --compress lz4 --encrypt-to $(age_recipient)" ;;
    wiretape-f10) echo "cmd:wiretape-f10=$W record -i {IF} -w {DIR} -q udp src port 40000" ;;
    *) echo "$1" ;;
  esac
}
count() { # dir tool -> frames written, by capinfos
  local d=$1 n=0 c f
  if [ "$2" = stenotype ]; then
    find "$d/PKT0" -type f -print0 2>/dev/null | PCAPCOUNT_MODE=steno xargs -0 -r "$RIG/tmp/pcapcount" | awk '{print $1}'
    return
  fi
  while IFS= read -r -d '' f; do
    if [ "${f%.age}" != "$f" ]; then
      # Encrypted (record --encrypt-to): decrypted with the run's key.
      if [ "${f%.lz4.age}" != "$f" ]; then
        age -d -i "$OUT/age.key" "$f" | lz4 -dc > "$d/.count.tmp"
      else
        age -d -i "$OUT/age.key" "$f" > "$d/.count.tmp"
      fi
      c=$(capinfos -c -M "$d/.count.tmp" 2>/dev/null | awk -F': *' '/Number of packets/{print $2}')
      rm -f "$d/.count.tmp"
    elif [ "${f%.zst}" != "$f" ]; then
      # Wireshark 4.0 reads only the first of a file's zstd frames.
      zstd -dcq "$f" > "$d/.count.tmp"
      c=$(capinfos -c -M "$d/.count.tmp" 2>/dev/null | awk -F': *' '/Number of packets/{print $2}')
      rm -f "$d/.count.tmp"
    else
      c=$(capinfos -c -M "$f" 2>/dev/null | awk -F': *' '/Number of packets/{print $2}')
    fi
    n=$((n + ${c:-0}))
  done < <(find "$d" -type f \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.pcap.lz4' -o -name '*.pcapng.lz4' -o -name '*.pcap.zst' -o -name '*.pcapng.zst' -o -name '*.age' \) -print0)
  echo "$n"
}
echo "compare.sh: runs=$RUNS sizes=$SIZES n64=$N64 n1514=$N1514 rate=${RATE:-max} disk=${WBPS:-unthrottled} memory.max=$MEM gen64=${GEN64:-rig} tools=${TOOLS[*]}"
IFS=, read -r -a SZ <<<"$SIZES"
NT=${#TOOLS[@]}
for run in $(seq 1 "$RUNS"); do
  for size in "${SZ[@]}"; do
    # The order rotates from run to run (run 2 starts with the second tool):
    # a tool's start-up is cheaper right after a trial that freed memory
    # (on this VM, memory a trial gave back is faster to take again than
    # memory the host reclaimed), so no tool may always run first.
    for k in $(seq 0 $((NT - 1))); do
      spec_arg=${TOOLS[$(( (k + run - 1) % NT ))]}
      tool=$spec_arg; case $tool in cmd:*) tool=${tool#cmd:}; tool=${tool%%=*} ;; esac
      rm -rf "$RIG/tmp/cap-$tool-$size-1"
      drain
      prewarm
      BLKCG=$BLKCG "$ROOT/benches/incgroup.sh" "$CG" env CMD_READY=sleep CMD_WARM=3 \
        "$RIG/peers.sh" -r 1 -s "$size" -n "$N64" -N "$N1514" ${RATE:+-b "$RATE"} -k -o "$CSV" "$(spec "$spec_arg")" \
        | grep -E "^  $tool " | sed "s/run1 /run$run /" || true
      if [ "$tool" != none ]; then
        k="$RIG/tmp/cap-$tool-$size-1"
        echo "$size,$tool,$run,$(count "$k" "$tool"),$([ "$tool" = stenotype ] && echo pcapcount || echo capinfos)" >> "$COUNTS"
        rm -rf "$k"
      fi
    done
  done
done
/usr/bin/python3 "$ROOT/benches/compare_report.py" "$CSV" "$COUNTS" "$OUT" "$MEM"
