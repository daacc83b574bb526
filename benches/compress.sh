#!/usr/bin/env bash
# Compression at rest and the per-connection cutoff (issue 25), one run,
# side by side, through the file engine (`record -r`, as fast as it goes):
#  1. bytes on disk and record CPU per frame (user+sys of the whole process,
#     compression threads included; --compress-threads 1) for plain, lz4,
#     zstd:1, zstd:3 on a cleartext-heavy trace and on a random-payload one;
#  2. extract of a 10 s window and of the whole store, compressed vs plain
#     (wall and CPU, page cache warm: the files were just written; bytes
#     read and blocks decompressed from `--json`);
#  3. the volume kept with --cutoff 15K on a heavy-tailed (Pareto) trace.
#   benches/compress.sh [FRAMES] [SPAN_S]     (defaults: 300000 frames, 60 s)
# Env: SPEED (record's --speed for part 1; default max: the file as fast as
# it is read, which outruns one compression thread on 2 cores, so part of
# the blocks go out uncompressed; e.g. SPEED=8x paces it at 8 times the
# trace's own rate); ONLY=1 runs part 1 alone.
# Run under `flock /work/team/bench.lock`. Prints a Markdown report.
set -euo pipefail
cd "$(dirname "$0")/.."
FRAMES=${1:-300000}; SPAN=${2:-60}; SPEED=${SPEED:-max}
cargo build --release -q -p wiretape-cli
W=${CARGO_TARGET_DIR:-$PWD/target}/release/wiretape
T=$(mktemp -d /tmp/wt-compress-bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
for k in clear random pareto; do python3 benches/compress_gen.py "$k" "$T/$k.pcap" "$FRAMES" "$SPAN"; done

cpu() { awk '{printf "%.2f", $2 + $3}' "$1"; }
wall() { awk '{printf "%.2f", $1}' "$1"; }

echo "# Compression and cutoff, $(date -u +%Y-%m-%d) ($(nproc) cores, $(uname -r))"
echo
echo "\`SPEED=$SPEED benches/compress.sh $FRAMES $SPAN\`: $FRAMES frames per trace over $SPAN s, Ethernet/IPv4/TCP, 60..1514 bytes; record --speed $SPEED."
echo
echo "## Bytes on disk and record CPU per frame"
echo
echo "| trace | compress | trace bytes | on disk | ratio | record CPU s | ns/frame | blocks | stored uncompressed |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for k in clear random; do
  in=$(stat -c %s "$T/$k.pcap")
  for c in none lz4 zstd:1 zstd:3; do
    d="$T/$k-${c/:/}"
    /usr/bin/time -o "$T/t" -f "%e %U %S" "$W" record -r "$T/$k.pcap" -w "$d" -q --speed "$SPEED" \
      --compress "$c" --compress-threads 1 --summary-json "$T/s.json" 2>/dev/null
    disk=$(find "$d" -type f ! -name '*.idx' -printf '%s\n' | awk '{s+=$1} END {print s}')
    read -r blocks stored < <(python3 -c "import json,sys; c=json.load(open('$T/s.json'))['compress'] or {}; print(c.get('blocks',0), c.get('blocks_uncompressed',0))")
    awk -v k="$k" -v c="$c" -v in_="$in" -v disk="$disk" -v cpu="$(cpu "$T/t")" -v n="$FRAMES" -v b="$blocks" -v s="$stored" \
      'BEGIN {printf "| %s | %s | %d | %d | %.3f | %.2f | %.0f | %d | %d |\n", k, c, in_, disk, disk/in_, cpu, cpu*1e9/n, b, s}'
  done
done
[ -n "${ONLY:-}" ] && exit 0
echo
echo "## Extract, compressed vs plain (cleartext store)"
echo
echo "| store | window | frames | wall s | CPU s | bytes read | blocks decompressed |"
echo "|---|---|---:|---:|---:|---:|---:|"
first=$("$W" info --json "$T/clear.pcap" | python3 -c "import json,sys; print(json.load(sys.stdin)['first_ns'])")
from=$(python3 -c "print('%.9f' % (($first / 1e9) + 20))")
to=$(python3 -c "print('%.9f' % (($first / 1e9) + 30))")
for c in none lz4 zstd3; do
  for w in "10 s" whole; do
    args=(); [ "$w" = "10 s" ] && args=(--from "$from" --to "$to")
    /usr/bin/time -o "$T/t" -f "%e %U %S" "$W" extract "$T/clear-$c" "${args[@]}" -w "$T/x.pcap" --json > "$T/x.json"
    read -r fr br bd < <(python3 -c "import json; j=json.load(open('$T/x.json')); print(j['frames'], j['bytes_read'], j.get('blocks_decompressed',0))")
    echo "| $c | $w | $fr | $(wall "$T/t") | $(cpu "$T/t") | $br | $bd |"
    rm -f "$T/x.pcap"
  done
done
echo
echo "## Volume kept with --cutoff 15K (Pareto trace)"
echo
"$W" record -r "$T/pareto.pcap" -w "$T/cut" -q --cutoff 15K --summary-json "$T/c.json" 2>/dev/null
python3 - "$T/c.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
seen, cut = j["bytes_seen"], j["bytes_cutoff"]
print("| frames seen | frames kept | frames cut | bytes seen | bytes kept | volume kept |")
print("|---:|---:|---:|---:|---:|---:|")
print(f"| {j['packets_seen']} | {j['packets_written']} | {j['packets_cutoff']} | {seen} | {j['bytes_written']} | {100 * j['bytes_written'] / seen:.1f} % |")
EOF
