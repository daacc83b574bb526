#!/usr/bin/env bash
# tests/package.sh: the Debian package, installed as an operator would on a
# fresh Debian bookworm with systemd as PID 1.
#
# 1. scripts/package.sh builds the .deb (of target/release/wiretape, the
#    suite's build, when it is there: --profile release --no-build); `dpkg -c`
#    must list the binary, a man page per subcommand, the three completions,
#    both units, the conffiles, the sysusers and tmpfiles entries; lintian
#    must report no error (its output is printed).
# 2. debootstrap makes a bookworm root (minbase + systemd, systemd-sysv,
#    dbus) from the Debian mirror this machine's apt uses, and systemd-nspawn
#    boots it (--boot --register=no --keep-unit, a private network); commands
#    go in through nsenter into its PID 1's namespaces (apt with the host's
#    network).
# 3. Inside: `apt-get install ./wiretape_*.deb` pulls every dependency (the
#    test's clients man-db, curl, tcpdump, iproute2 are installed after it);
#    `man -w wiretape-record` finds the page, and every page's long flags are
#    those of the subcommand's --help; `wiretape certs` makes the CA, server
#    and client certificates in /etc/wiretape/api; `wiretape api --config
#    /etc/wiretape/api.conf` (the package's config, unchanged) and then
#    wiretape-api.service serve a store laid in /var/lib/wiretape/eth0, and
#    curl with the client certificate gets /v1/status (frames counted) and an
#    extract with a filter that tcpdump reads (frames counted);
#    wiretape@eth0.service (with /etc/wiretape/example.conf as eth0.conf)
#    records a veth pair made in the container while `wiretape gen` sends a
#    known count, `systemctl stop` leaves files tcpdump reads (frames
#    counted); an edited conffile survives a reinstall; `dpkg -r` stops both
#    services and removes the binary, keeping the configs; `dpkg -P` removes
#    the configs.
# Where the machine cannot boot a container, one line says why and every
# step that needs no running systemd still runs in a chroot of the same root.
# Everything it starts (the container, mounts) is stopped and removed, also
# on failure. Needs root; the debootstrap tarball is kept for the run only.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
T0=$(date +%s)
[ "$(id -u)" = 0 ] || { echo "package test: needs root (debootstrap, nspawn)" >&2; exit 1; }
for t in debootstrap systemd-nspawn nsenter lintian dpkg-deb; do
  command -v "$t" >/dev/null || { echo "package test: $t missing: scripts/setup.sh installs it" >&2; exit 1; }
done
BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/wiretape
passed=0
ok() { passed=$((passed + 1)); echo "  ok: $*"; }
fail() { echo "package test: FAILED: $*" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/wt-pkgtest.XXXXXX")
R=$WORK/root
NSPAWN=""
cleanup() {
  set +e
  if [ -n "$NSPAWN" ] && kill -0 "$NSPAWN" 2>/dev/null; then
    kill -TERM "$NSPAWN" 2>/dev/null # nspawn powers the container off
    for _ in $(seq 1 40); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$NSPAWN" 2>/dev/null
    wait "$NSPAWN" 2>/dev/null
  fi
  # Mounts of the chroot mode, deepest first.
  for m in $(awk -v r="$R" '$2 ~ "^"r {print $2}' /proc/mounts | sort -r); do umount -l "$m"; done
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT

# ---- 1. the package
echo "== package: build"
# The suite's release binary when it is there (scripts/test.sh built it): the
# shipped package's dist profile (LTO) would cost a second full build here.
if [ -x "$BIN" ]; then scripts/package.sh --profile release --no-build > "$WORK/package.log" 2>&1 || { cat "$WORK/package.log"; fail "scripts/package.sh"; }
else scripts/package.sh > "$WORK/package.log" 2>&1 || { cat "$WORK/package.log"; fail "scripts/package.sh"; }; fi
DEB=$(tail -n 1 "$WORK/package.log")
[ -f "$DEB" ] || fail "no .deb: $(tail -n 3 "$WORK/package.log")"
echo "  $(grep '^package: wiretape' "$WORK/package.log")"
case ${DEB##*/} in wiretape_*_amd64.deb) ok "named ${DEB##*/}" ;; *) fail "named ${DEB##*/}" ;; esac
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' > "$WORK/contents"
has() { grep -qx "$1" "$WORK/contents" || fail "dpkg -c lacks $1"; }
has /usr/bin/wiretape
# A page per subcommand (and per sub-subcommand: certs init, ctl dump...).
pages=(wiretape)
for s in $("$BIN" --help | awk '/^Commands:/{c=1;next} /^$/{c=0} c{print $1}' | grep -vx help); do
  pages+=("wiretape-$s")
  for ss in $("$BIN" "$s" --help | awk '/^Commands:/{c=1;next} /^$/{c=0} c{print $1}' | grep -vx help); do
    pages+=("wiretape-$s-$ss")
  done
done
for p in "${pages[@]}"; do has "/usr/share/man/man1/$p.1.gz"; done
ok "${#pages[@]} man pages, one per subcommand"
has /usr/share/bash-completion/completions/wiretape
has /usr/share/zsh/vendor-completions/_wiretape
has /usr/share/fish/vendor_completions.d/wiretape.fish
has /usr/lib/systemd/system/wiretape@.service
has /usr/lib/systemd/system/wiretape-api.service
has /usr/lib/sysusers.d/wiretape.conf
has /usr/lib/tmpfiles.d/wiretape.conf
has /usr/share/doc/wiretape/copyright
has /usr/share/doc/wiretape/changelog.Debian.gz
dpkg-deb -e "$DEB" "$WORK/control"
for c in /etc/wiretape/api.conf /etc/wiretape/example.conf; do
  grep -qx "$c" "$WORK/control/conffiles" || fail "$c is not a conffile"
done
ok "binary, completions, both units, sysusers, tmpfiles, copyright, changelog; conffiles $(paste -sd' ' "$WORK/control/conffiles")"
lintian --info "$DEB" > "$WORK/lintian" 2>&1 || true
grep -E '^[EWIN]: ' "$WORK/lintian" | grep -v '^N: *$' | grep -E '^[EW]:' | sed 's/^/  lintian: /' || true
if grep -q '^E: ' "$WORK/lintian"; then fail "lintian reports errors"; fi
ok "lintian: no errors ($(grep -c '^W: ' "$WORK/lintian" || true) warnings, each named in docs/08-operations.md)"

# ---- 2. a bookworm root, booted if this machine can
MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=$(awk '$1=="deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
echo "== debootstrap bookworm (minbase + systemd) from $MIRROR"
t=$(date +%s)
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus \
  --make-tarball="$WORK/bookworm.tgz" bookworm "$WORK/dl" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 ||
  { tail -n 5 "$WORK/debootstrap.log"; fail "debootstrap --make-tarball"; }
rm -rf --one-file-system "$WORK/dl"
debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus \
  --unpack-tarball="$WORK/bookworm.tgz" bookworm "$R" "$MIRROR" >> "$WORK/debootstrap.log" 2>&1 ||
  { tail -n 5 "$WORK/debootstrap.log"; fail "debootstrap"; }
echo "  root made in $(($(date +%s) - t)) s"
cp "$DEB" "$R/root/"
DEBNAME=${DEB##*/}
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
echo "sensor1" > "$R/etc/hostname"
PY=$(command -v python3)

# Boots it; the container's PID 1 in $PID, or a one-line reason in $WHY.
PID=""; WHY=""
boot() {
  systemd-nspawn -D "$R" --boot --register=no --keep-unit --private-network \
    --capability=CAP_BPF,CAP_PERFMON,CAP_IPC_LOCK --resolv-conf=copy-host \
    > "$WORK/nspawn.log" 2>&1 < /dev/null &
  NSPAWN=$!
  for _ in $(seq 1 120); do
    kill -0 "$NSPAWN" 2>/dev/null || { WHY="systemd-nspawn exited: $(grep -v '^$' "$WORK/nspawn.log" | tail -n 1)"; return 1; }
    if [ -z "$PID" ]; then
      for p in $(pgrep -x systemd); do
        # Its root is the container's, and it is PID 1 in its namespace.
        if [ "$(stat -L -c %i "/proc/$p/root" 2>/dev/null)" = "$(stat -c %i "$R")" ] &&
           grep -qE '^NSpid:.*[[:space:]]1$' "/proc/$p/status" 2>/dev/null; then PID=$p; fi
      done
    fi
    if [ -n "$PID" ]; then
      st=$(nsenter -t "$PID" -a systemctl is-system-running 2>/dev/null || true)
      case $st in running|degraded) return 0 ;; esac
    fi
    sleep 0.5
  done
  WHY="the container did not reach multi-user.target in 60 s (state: ${st:-unknown}; $(grep -v '^$' "$WORK/nspawn.log" | tail -n 1))"
  return 1
}
ENVV=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
MODE=boot
echo "== boot the root with systemd-nspawn"
if boot; then
  echo "  booted: container PID 1 is $PID on the host ($(nsenter -t "$PID" -a systemctl is-system-running))"
  # cin: a command in the container; cin_net: with the host's network (apt).
  cin() { nsenter -t "$PID" -a "${ENVV[@]}" "$@"; }
  cin_net() { nsenter -t "$PID" -m -u -i -p "${ENVV[@]}" "$@"; }
  net() { nsenter -t "$PID" -n "$@"; } # a host tool in the container's network
else
  echo "package test: cannot boot a container on this machine: $WHY; the steps that need a running systemd are skipped, the rest run in a chroot"
  MODE=chroot
  kill -KILL "$NSPAWN" 2>/dev/null || true; wait "$NSPAWN" 2>/dev/null || true; NSPAWN=""
  mount -t proc proc "$R/proc"; mount --rbind /dev "$R/dev"; mount -t sysfs sysfs "$R/sys"
  cin() { chroot "$R" "${ENVV[@]}" "$@"; }
  cin_net() { cin "$@"; }
fi
cin_sh() { cin sh -c "$1"; }

# ---- 3. as an operator
echo "== install ($MODE)"
cin_net apt-get update -qq > "$WORK/apt.log" 2>&1 || { tail -n 5 "$WORK/apt.log"; fail "apt-get update in the root"; }
before=$(cin dpkg-query -W -f '${Package}\n' | sort)
cin_net apt-get install -y -q --no-install-recommends "/root/$DEBNAME" >> "$WORK/apt.log" 2>&1 ||
  { tail -n 15 "$WORK/apt.log"; fail "apt-get install ./$DEBNAME"; }
pulled=$(comm -13 <(echo "$before") <(cin dpkg-query -W -f '${Package}\n' | sort) | { grep -vx wiretape || true; } | paste -sd' ')
for d in $(dpkg-deb -f "$DEB" Depends | tr ',' '\n' | awk '{print $1}'); do
  cin dpkg -s "$d" > /dev/null 2>&1 || fail "dependency $d not installed"
done
ok "apt-get install ./$DEBNAME pulled: ${pulled:-nothing}; every Depends installed"
# The test's own clients, after the package (so that they pulled none of its
# dependencies for it): man-db, curl, tcpdump, iproute2.
cin_net apt-get install -y -q --no-install-recommends man-db curl tcpdump iproute2 >> "$WORK/apt.log" 2>&1 ||
  { tail -n 15 "$WORK/apt.log"; fail "apt-get install man-db curl tcpdump iproute2"; }
cin wiretape --version | grep -Eq '^wiretape [0-9.]+ \((commit [0-9a-f]{12}|unknown commit)\)$' || fail "wiretape --version: $(cin wiretape --version)"
ok "$(cin wiretape --version)"
cin getent passwd wiretape > /dev/null || fail "no user wiretape (sysusers.d)"
[ "$(cin stat -c %U:%a /var/lib/wiretape)" = "wiretape:750" ] || fail "/var/lib/wiretape: $(cin stat -c %U:%a /var/lib/wiretape)"
ok "user wiretape ($(cin getent passwd wiretape | cut -d: -f3,6,7)), /var/lib/wiretape wiretape 750"

# The man pages: found by man, and each page's long flags are its --help's.
cin man -w wiretape-record | grep -q '/usr/share/man/man1/wiretape-record.1.gz' || fail "man -w wiretape-record: $(cin man -w wiretape-record 2>&1)"
flags() { grep -oE -- '--[a-z][a-z0-9-]+' | sort -u; }
for p in "${pages[@]}"; do
  words=${p#wiretape}; words=${words//-/ }
  h=$(cin wiretape $words --help | flags)
  m=$(cin sh -c "MANWIDTH=200 man --nh --nj -P cat $p 2>/dev/null" | sed 's/\x08.//g; s/‐/-/g' | flags)
  [ "$h" = "$m" ] || fail "man $p and wiretape$words --help differ: $(diff <(echo "$h") <(echo "$m") | grep '^[<>]' | paste -sd' ')"
done
ok "man -w wiretape-record finds the page; ${#pages[@]} pages have exactly their --help's long flags"

# A store laid in /var/lib/wiretape/eth0: 1000 UDP frames, 600 to port 5000
# and 400 to port 6000, 1 ms apart, in a pcap (ns) named like wiretape's.
mkdir -p "$R/var/lib/wiretape/eth0"
"$PY" - "$R/var/lib/wiretape/eth0/wiretape-eth0-q0-20261127T120000.000000000Z.pcap" <<'EOF'
import struct, sys
t0 = 1795780800 * 10**9  # 2026-11-27T12:00:00Z
out = [struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 262144, 1)]
for i in range(1000):
    dport = 5000 if i % 5 < 3 else 6000
    payload = struct.pack(">I", i) * 8
    udp = struct.pack(">HHHH", 40000, dport, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i & 0xffff, 0, 64, 17, 0,
                     bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2]))
    s = sum(struct.unpack(">10H", ip))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    ip = ip[:10] + struct.pack(">H", ~s & 0xffff) + ip[12:]
    frame = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + ip + udp
    ts = t0 + i * 10**6
    out.append(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(frame), len(frame)) + frame)
open(sys.argv[1], "wb").write(b"".join(out))
EOF
cin chown -R wiretape:wiretape /var/lib/wiretape/eth0
cin wiretape index /var/lib/wiretape/eth0 > /dev/null 2>&1 || fail "wiretape index /var/lib/wiretape/eth0"
cin chown -R wiretape:wiretape /var/lib/wiretape/eth0
[ "$(cin_sh 'tcpdump -nr /var/lib/wiretape/eth0/*.pcap 2>/dev/null | wc -l')" = 1000 ] || fail "the laid store does not read as 1000 frames"

# Certificates where api.conf expects them, as the README says.
cin wiretape certs init /etc/wiretape/api --server-name localhost --server-name sensor1.example > /dev/null || fail "wiretape certs init"
cin wiretape certs client /etc/wiretape/api analyst1 > /dev/null || fail "wiretape certs client"
CURL="curl -sS --max-time 20 --cacert /etc/wiretape/api/ca.pem --cert /etc/wiretape/api/client-analyst1.pem --key /etc/wiretape/api/client-analyst1.key"
frames_of_status() { cin_sh "$CURL https://localhost:8443/v1/status" | grep -oE '"frames": ?[0-9]+' | grep -oE '[0-9]+$'; }
wait_port() {
  for _ in $(seq 1 60); do cin_sh "$CURL -o /dev/null https://localhost:8443/v1/status" 2>/dev/null && return 0; sleep 0.5; done
  return 1
}
check_api() { # $1: frames the store holds
  local n
  n=$(frames_of_status)
  [ "$n" = "$1" ] || fail "/v1/status: frames ${n:-none}, want $1"
  n=$(cin_sh "$CURL 'https://localhost:8443/v1/extract?filter=udp+dst+port+5000' | tcpdump -nr - 2>/dev/null | wc -l")
  [ "$n" = 600 ] || fail "/v1/extract?filter=udp dst port 5000: tcpdump reads $n frames, want 600"
  n=$(cin_sh "curl -sS --max-time 10 --cacert /etc/wiretape/api/ca.pem -o /dev/null https://localhost:8443/v1/status 2>&1; echo rc=\$?" | tail -n 1)
  [ "$n" != rc=0 ] || fail "a client without a certificate was served"
}

# `wiretape api --config` with the package's config, unchanged, by hand
# (as root, as an operator trying it would).
cmp -s "$R/etc/wiretape/api.conf" "$REPO/dist/systemd/api.conf" || fail "/etc/wiretape/api.conf is not the package's"
cin_sh 'wiretape api --config /etc/wiretape/api.conf >/tmp/api.log 2>&1 & echo $! > /tmp/api.pid'
wait_port || fail "wiretape api --config /etc/wiretape/api.conf did not serve: $(cin cat /tmp/api.log)"
check_api 1000
cin_sh 'kill $(cat /tmp/api.pid); while kill -0 $(cat /tmp/api.pid) 2>/dev/null; do sleep 0.1; done'
ok "wiretape api --config /etc/wiretape/api.conf (unchanged): /v1/status 1000 frames, extract udp dst port 5000: tcpdump reads 600, no certificate: refused"

if [ "$MODE" = boot ]; then
  cin systemctl start wiretape-api || fail "systemctl start wiretape-api: $(cin journalctl -u wiretape-api -n 5 --no-pager)"
  wait_port || fail "wiretape-api.service does not serve: $(cin journalctl -u wiretape-api -n 5 --no-pager)"
  check_api 1000
  [ "$(cin stat -c %U "/proc/$(cin systemctl show -p MainPID --value wiretape-api)")" = wiretape ] || fail "the API does not run as wiretape"
  ok "systemctl start wiretape-api: the same over the service (user wiretape, key by LoadCredential)"

  # The recorder: a veth pair in the container, eth0 recorded by
  # wiretape@eth0 with the example config, gen0 sending.
  net ip link add eth0 type veth peer name gen0
  for i in eth0 gen0; do
    net sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1"
    net ip link set "$i" up
  done
  cin cp /etc/wiretape/example.conf /etc/wiretape/eth0.conf
  cin systemctl start wiretape@eth0 || fail "systemctl start wiretape@eth0: $(cin journalctl -u wiretape@eth0 -n 8 --no-pager)"
  N=3000
  net "$BIN" gen -i gen0 --count "$N" --rate 20000 --size 128 -q > /dev/null || fail "wiretape gen on gen0"
  sleep 1
  cin systemctl stop wiretape@eth0
  got=0
  for f in $(cin_sh 'ls /var/lib/wiretape/eth0/wiretape-eth0-q*.pcap' | grep -v 20261127T120000); do
    [ "$(cin stat -c %U "$f")" = wiretape ] || fail "$f is not wiretape's"
    got=$((got + $(cin_sh "tcpdump -nr $f udp 2>/dev/null | wc -l")))
  done
  [ "$got" = "$N" ] || fail "wiretape@eth0 recorded $got UDP frames (tcpdump), $N sent: $(cin journalctl -u wiretape@eth0 -n 8 --no-pager)"
  ok "wiretape@eth0 recorded a veth pair: $got of $N frames in files tcpdump reads after systemctl stop"
  check_api $((1000 + N))
  ok "the API serves the recording too: /v1/status $((1000 + N)) frames"

  cin_sh 'echo "# edited by the operator" >> /etc/wiretape/api.conf'
  cin_net dpkg -i "/root/$DEBNAME" < /dev/null >> "$WORK/apt.log" 2>&1 || fail "reinstall: $(tail -n 5 "$WORK/apt.log")"
  cin grep -q "edited by the operator" /etc/wiretape/api.conf || fail "the reinstall overwrote the edited /etc/wiretape/api.conf"
  ok "reinstalled over an edited conffile: the edit kept"

  cin systemctl start wiretape@eth0 wiretape-api
  cin systemctl is-active -q wiretape@eth0 wiretape-api || fail "services not running before dpkg -r"
  cin_net dpkg -r wiretape >> "$WORK/apt.log" 2>&1 || fail "dpkg -r: $(tail -n 5 "$WORK/apt.log")"
  for u in wiretape@eth0 wiretape-api; do
    ! cin systemctl is-active -q "$u" || fail "$u still running after dpkg -r"
  done
  [ ! -e "$R/usr/bin/wiretape" ] || fail "dpkg -r left /usr/bin/wiretape"
  [ -f "$R/etc/wiretape/api.conf" ] || fail "dpkg -r removed the conffile"
  ok "dpkg -r: both services stopped, binary gone, configs kept"
else
  echo "  skipped (no running systemd): wiretape-api.service, wiretape@eth0.service, services stopped by dpkg -r"
  cin_sh 'echo "# edited by the operator" >> /etc/wiretape/api.conf'
  cin dpkg -i "/root/$DEBNAME" < /dev/null >> "$WORK/apt.log" 2>&1 || fail "reinstall: $(tail -n 5 "$WORK/apt.log")"
  cin grep -q "edited by the operator" /etc/wiretape/api.conf || fail "the reinstall overwrote the edited /etc/wiretape/api.conf"
  ok "reinstalled over an edited conffile: the edit kept"
  cin dpkg -r wiretape >> "$WORK/apt.log" 2>&1 || fail "dpkg -r: $(tail -n 5 "$WORK/apt.log")"
  [ ! -e "$R/usr/bin/wiretape" ] || fail "dpkg -r left /usr/bin/wiretape"
  [ -f "$R/etc/wiretape/api.conf" ] || fail "dpkg -r removed the conffile"
  ok "dpkg -r: binary gone, configs kept"
fi
n=$(cin_sh 'cat /var/lib/wiretape/eth0/*.pcap | wc -c')
[ "$n" -gt 0 ] || fail "dpkg -r removed the recordings"
cin_net dpkg -P wiretape >> "$WORK/apt.log" 2>&1 || fail "dpkg -P: $(tail -n 5 "$WORK/apt.log")"
for c in api.conf example.conf; do [ ! -e "$R/etc/wiretape/$c" ] || fail "dpkg -P left /etc/wiretape/$c"; done
ok "dpkg -P: the conffiles removed; the recordings in /var/lib/wiretape kept"

echo "package test: $MODE mode, $(($(date +%s) - T0)) s"
echo "package: $passed passed, 0 failed"
