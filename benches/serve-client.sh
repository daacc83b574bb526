#!/usr/bin/env bash
# benches/serve-client.sh OUT PORT COMMAND...
# compare.sh's wiretape-serve: one PCAP-over-IP client beside the recorder.
# Brings up lo in this network namespace, starts COMMAND (the recorder, with
# --serve 127.0.0.1:PORT) as this process, and in the background waits until
# PORT listens, then connects one client (`nc -d 127.0.0.1 PORT`) that counts
# the bytes it receives into OUT (and its own CPU seconds into OUT.cpu) when
# the recorder closes the stream. The client inherits the recorder's CPU
# affinity and runs 10 nice steps below it (the rig starts the recorder at
# nice -10: the client at the default 0, as a user's tool would run); its
# CPU is not the recorder's (time(1) counts only the recorder).
set -euo pipefail
out=$1 port=$2; shift 2
ip link set lo up
(
  for _ in $(seq 200); do
    ss -ltnH "sport = :$port" | grep -q . && break
    sleep 0.05
  done
  nice -n 10 /usr/bin/time -f '%U %S' -o "$out.cpu" bash -c "cat </dev/tcp/127.0.0.1/$port | wc -c > '$out'"
) </dev/null >/dev/null 2>&1 &
exec "$@"
