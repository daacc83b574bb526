//! wiretape beside the real Stenographer (Debian's 1.0.1: the `stenographer`
//! server, `stenotype`, and the clients `stenoread` and `stenocurl`, all
//! unchanged; scripts/setup.sh installs them, this test installs nothing).
//!
//! In a private namespace, stenotype (under its server, as user
//! `stenographer`) and `wiretape record --engine packet` record the same
//! veth at once: the testbed's UDP frames and frames of every kind a query
//! primitive looks at (TCP, ICMP, a VLAN tag, QinQ, a 0x9100 tag, IPv6
//! with TCP/UDP/ICMPv6, a hop-by-hop header and fragments, MPLS), in three
//! bursts a second apart. Then `wiretape api` serves wiretape's files with
//! mutual TLS, the certificates made by `wiretape certs` (`certs client
//! --stenographer` writes stenoread's config; Stenographer's server gets the
//! same CA and a server certificate of it), and for 40 queries covering
//! every primitive, both operators, parentheses and each time form:
//!
//! * both stores hold the same frames (Stenographer's without the outermost
//!   802.1Q/802.1ad tag: the kernel takes it off and stenotype does not put
//!   it back, its issue #211);
//! * without time bounds: `stenoread` against wiretape returns, byte for
//!   byte as multisets, what it returns against Stenographer (for `vlan N`
//!   of an outermost tag, exactly the frames Stenographer's copies lost the
//!   tag of); each side equals the reference evaluator over its own store,
//!   which ties the reference to Stenographer's own answers;
//! * with time bounds: wiretape returns exactly the frames of its store in
//!   the bounds (a bound on a frame's own nanosecond too), Stenographer a
//!   superset (whole files, a minute wide);
//! * `--limit-packets` and `--limit-bytes` as Stenographer counts them;
//! * unparseable queries: 400 from both, no pcap; what Stenographer 1.0.1
//!   silently cuts short (`port 9 AND udp`) is 400 here; a 100 KiB query
//!   and 10,000 parentheses: 400, and the API answers on;
//! * transport: one log line per query; another CA's client fails the
//!   handshake; a name not in --allow-client gets 403.
//!
//! About 45 s, a third of it waiting for stenotype to rotate its files and
//! its server to pick them up.
//!
//! Stenographer's own files as inputs (issue 36, item 4): `info`, `extract`
//! and `timeline` (after `index --index-dir`) over Stenographer's directory
//! agree frame for frame with tcpdump reading Stenographer's own export of
//! all frames, and with the frames sent; a third server, `wiretape api -w
//! <Stenographer's directory> --index-dir DIR`, answers every query through
//! the same unchanged `stenoread` with Stenographer's frames (the same
//! copies, tags and all) as multisets without time bounds, and exactly the
//! frames of the bounds with them; nothing is written in Stenographer's
//! directories.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wiretape::files::Record;
use wiretape::query::steno::{self, Decoded};
use wiretape_testbed::{SizeFn, Testbed, CAP_IF, GEN_IF};

/// Stenographer's port inside the namespace.
const STENO_PORT: u16 = 18123;

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The real Stenographer server (and its stenotype) in the namespace;
/// killed on drop (the server first, so that it does not start stenotype
/// again, then stenotype, which hangs at exit: SIGKILL, by pid).
struct Stenographer {
    server: Child,
    stenotype: Option<u32>,
    scratch: Option<PathBuf>,
    log: PathBuf,
}

impl Drop for Stenographer {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        if let Some(p) = self.stenotype {
            let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
            // Gone (or a zombie for init to reap) before the namespace goes.
            for _ in 0..50 {
                let st = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                if st
                    .rsplit(')')
                    .next()
                    .is_none_or(|r| r.trim_start().starts_with('Z'))
                {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if let Some(d) = &self.scratch {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn chown_steno(p: &Path) {
    let st = Command::new("chown")
        .args(["-R", "stenographer:stenographer"])
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

impl Stenographer {
    /// Starts the server as user stenographer on `CAP_IF` recording into
    /// `dir`, TLS from `certs` (ca_cert.pem, server_cert.pem, server_key.pem).
    fn start(tb: &Testbed, dir: &Path, certs: &Path) -> Stenographer {
        let pk = dir.join("thread0/packets");
        let ix = dir.join("thread0/index");
        std::fs::create_dir_all(&pk).unwrap();
        std::fs::create_dir_all(&ix).unwrap();
        let config = dir.join("config");
        let cfg = serde_json::json!({
            "Threads": [{ "PacketsDirectory": pk, "IndexDirectory": ix,
                          "MaxDirectoryFiles": 30000, "DiskFreePercentage": 1 }],
            "StenotypePath": "/usr/sbin/stenotype",
            "Interface": CAP_IF,
            "Port": STENO_PORT,
            "Host": "127.0.0.1",
            "Flags": ["--seccomp=none", "--no_watchdogs", "--fileage_sec=5", "--blockage_sec=1"],
            "CertPath": certs,
        });
        std::fs::write(&config, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
        chown_steno(dir);
        chown_steno(certs);
        let log = dir.join("server.log");
        let server = tb
            .command("setpriv")
            .args([
                "--reuid=stenographer",
                "--regid=stenographer",
                "--init-groups",
                "stenographer",
                "-syslog=false",
                "-config",
            ])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("run stenographer");
        let mut s = Stenographer {
            server,
            stenotype: None,
            scratch: None,
            log,
        };
        // stenotype starts under the server and binds its ring to the interface.
        let pid = s.server.id();
        let deadline = Instant::now() + Duration::from_secs(20);
        while s.stenotype.is_none() {
            assert!(
                Instant::now() < deadline,
                "stenotype did not start: {}",
                std::fs::read_to_string(&s.log).unwrap_or_default()
            );
            if let Ok(Some(st)) = s.server.try_wait() {
                panic!(
                    "the stenographer server exited ({st}): {}",
                    std::fs::read_to_string(&s.log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
            let o = Command::new("pgrep")
                .args(["-P", &pid.to_string(), "-x", "stenotype"])
                .output()
                .unwrap();
            s.stenotype = String::from_utf8_lossy(&o.stdout).trim().parse().ok();
        }
        let st = s.stenotype.unwrap();
        let cmdline = std::fs::read(format!("/proc/{st}/cmdline")).unwrap_or_default();
        s.scratch = cmdline
            .split(|&b| b == 0)
            .filter_map(|a| std::str::from_utf8(a).ok()?.strip_prefix("--dir="))
            .map(PathBuf::from)
            .next();
        s
    }
}

/// The uid of a user.
fn uid(user: &str) -> u32 {
    let o = Command::new("id").args(["-u", user]).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

/// Packet sockets bound to `ifname` in the namespace, per owner uid.
fn packet_sockets(tb: &Testbed, ifname: &str) -> Vec<u32> {
    let ifindex: u32 = tb
        .exec(&["cat", &format!("/sys/class/net/{ifname}/ifindex")])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let t = tb.exec(&["cat", "/proc/net/packet"]).unwrap();
    t.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(4)?.parse::<u32>().ok()? == ifindex && *f.get(5)? == "1")
                .then(|| f.get(7)?.parse().ok())
                .flatten()
        })
        .collect()
}

// ---- the frames ----

fn be16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_be_bytes());
}

fn eth(t: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0x77, 0x74, 0, 0, 0x99, 0x02, 0x77, 0x74, 0, 0, 0x01];
    be16(&mut f, t);
    f
}

fn tag(f: &mut Vec<u8>, tci: u16, next: u16) {
    be16(f, tci);
    be16(f, next);
}

fn ip4(src: [u8; 4], dst: [u8; 4], proto: u8, body: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0];
    be16(&mut h, (20 + body.len()) as u16);
    h.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(body);
    h
}

fn ip6(src: &str, dst: &str, nh: u8, body: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    be16(&mut h, body.len() as u16);
    h.extend_from_slice(&[nh, 64]);
    h.extend_from_slice(&src.parse::<std::net::Ipv6Addr>().unwrap().octets());
    h.extend_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
    h.extend_from_slice(body);
    h
}

fn udp(sp: u16, dp: u16, tag: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    be16(&mut h, sp);
    be16(&mut h, dp);
    be16(&mut h, (8 + tag.len()) as u16);
    be16(&mut h, 0);
    h.extend_from_slice(tag);
    h
}

fn tcp(sp: u16, dp: u16, tag: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    be16(&mut h, sp);
    be16(&mut h, dp);
    h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0]);
    h.extend_from_slice(tag);
    h
}

fn icmp(t: u8, tag: &[u8]) -> Vec<u8> {
    let mut h = vec![t, 0, 0, 0, 0, 1, 0, 1];
    h.extend_from_slice(tag);
    h
}

/// The frames of burst `k` other than the testbed's: each kind a few
/// times, each frame unique (its tag names the burst, kind and copy).
fn special(k: u8) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..3u8 {
        let t = [b'S', b'T', b'N', k, out.len() as u8, i, 0xa5, 0x5a];
        let v4 = |proto: u8, body: Vec<u8>| ip4([10, 1, 0, 1], [10, 1, 0, 2], proto, &body);
        // TCP to port 80, and another conversation on 443.
        out.push([eth(0x0800), v4(6, tcp(40000 + u16::from(i), 80, &t))].concat());
        out.push(
            [
                eth(0x0800),
                ip4([10, 1, 0, 3], [10, 2, 0, 4], 6, &tcp(41000, 443, &t)),
            ]
            .concat(),
        );
        // ICMP echo.
        out.push(
            [
                eth(0x0800),
                ip4([10, 1, 0, 1], [10, 9, 9, 9], 1, &icmp(8, &t)),
            ]
            .concat(),
        );
        // DNS.
        out.push(
            [
                eth(0x0800),
                ip4([10, 1, 0, 5], [8, 8, 8, 8], 17, &udp(5353, 53, &t)),
            ]
            .concat(),
        );
        // One 802.1Q tag (8): the kernel takes it off for stenotype.
        let mut f = eth(0x8100);
        tag(&mut f, 8, 0x0800);
        f.extend(ip4([10, 8, 0, 1], [10, 8, 0, 2], 17, &udp(1234, 514, &t)));
        out.push(f);
        // QinQ: 802.1ad 100 outside (taken off for stenotype), 802.1Q 7 inside.
        let mut f = eth(0x88a8);
        tag(&mut f, 100, 0x8100);
        tag(&mut f, 7, 0x0800);
        f.extend(ip4([10, 20, 0, 1], [10, 20, 0, 2], 17, &udp(1235, 514, &t)));
        out.push(f);
        // A 0x9100 tag (30): the kernel keeps it in the frame.
        let mut f = eth(0x9100);
        tag(&mut f, 30, 0x0800);
        f.extend(ip4([10, 30, 0, 1], [10, 30, 0, 2], 6, &tcp(2222, 22, &t)));
        out.push(f);
        // IPv6: UDP, TCP, ICMPv6.
        let s6 = "2001:db8::1";
        out.push([eth(0x86dd), ip6(s6, "2001:db8::2", 17, &udp(5353, 53, &t))].concat());
        out.push(
            [
                eth(0x86dd),
                ip6("fe80::1", "2001:db8::99", 6, &tcp(43000, 443, &t)),
            ]
            .concat(),
        );
        if i < 2 {
            out.push([eth(0x86dd), ip6(s6, "ff02::1", 58, &icmp(128, &t))].concat());
            // A hop-by-hop header, then UDP to 5000.
            let mut body = vec![17, 0, 1, 4, 0, 0, 0, 0];
            body.extend(udp(4999, 5000, &t));
            out.push([eth(0x86dd), ip6("2001:db8::5", "2001:db8::6", 0, &body)].concat());
            // MPLS (label 16, bottom of the stack), then IPv4 DNS.
            let mut f = eth(0x8847);
            f.extend_from_slice(&((16u32 << 12) | 0x100 | 64).to_be_bytes());
            f.extend(ip4([10, 40, 0, 1], [10, 40, 0, 2], 17, &udp(6000, 53, &t)));
            out.push(f);
        }
        if i == 0 {
            // A first fragment (UDP to 7000) and a later one.
            let mut body = vec![17, 0, 0, 1, 0, 0, 0, 9];
            body.extend(udp(6999, 7000, &t));
            out.push([eth(0x86dd), ip6("2001:db8::7", "2001:db8::8", 44, &body)].concat());
            let mut body = vec![17, 0, 0, 0x21, 0, 0, 0, 9];
            body.extend_from_slice(&t);
            out.push([eth(0x86dd), ip6("2001:db8::7", "2001:db8::8", 44, &body)].concat());
        }
    }
    for f in &mut out {
        if f.len() < 60 {
            f.resize(60, 0);
        }
    }
    out
}

fn send_frames(tb: &Testbed, frames: Vec<Vec<u8>>) {
    let ns = tb.netns().to_string();
    std::thread::spawn(move || {
        wiretape_testbed::sys::enter_netns(&ns).unwrap();
        let s = wiretape_testbed::sys::PacketSender::open(GEN_IF).unwrap();
        for f in &frames {
            s.send(f).unwrap();
            std::thread::sleep(Duration::from_micros(50));
        }
    })
    .join()
    .unwrap();
}

// ---- asking ----

/// A frame as compared: its bytes and wire length.
type Key = (Vec<u8>, u32);

fn multiset(recs: &[Record]) -> BTreeMap<Key, usize> {
    let mut m = BTreeMap::new();
    for r in recs {
        *m.entry((r.data.clone(), r.orig_len)).or_insert(0) += 1;
    }
    m
}

/// The frame as stenotype stored it: the outermost 802.1Q/802.1ad tag off.
fn stripped(r: &Record) -> Record {
    let mut r = r.clone();
    if r.data.len() >= 18
        && matches!(
            u16::from_be_bytes([r.data[12], r.data[13]]),
            0x8100 | 0x88a8
        )
    {
        r.data.drain(12..16);
        r.orig_len -= 4;
    }
    r
}

struct Asker<'a> {
    tb: &'a Testbed,
    scratch: PathBuf,
    n: usize,
    /// Requests sent to wiretape's /query.
    asked_wiretape: usize,
}

/// Which server a client config points at.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Wiretape,
    Steno,
    /// wiretape's API over Stenographer's files.
    WiretapeOnSteno,
}

impl Asker<'_> {
    fn command(&self, side: Side, program: &str, cfg: &Path) -> Command {
        let mut c = match side {
            // Stenographer listens inside the namespace.
            Side::Steno => self.tb.command("env"),
            Side::Wiretape | Side::WiretapeOnSteno => Command::new("env"),
        };
        c.arg(format!("STENOGRAPHER_CONFIG={}", cfg.display()))
            .arg(program);
        c
    }

    /// `stenoread [ARGS] QUERY -w FILE` (unchanged, from the package): the
    /// frames.
    fn stenoread(&mut self, side: Side, cfg: &Path, args: &[&str], q: &str) -> Vec<Record> {
        self.n += 1;
        if side == Side::Wiretape {
            self.asked_wiretape += 1;
        }
        let out = self.scratch.join(format!("{}-{:?}.pcap", self.n, side));
        let o = self
            .command(side, "stenoread", cfg)
            .args(args)
            .arg(q)
            .arg("-w")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success(),
            "stenoread {q:?} against {side:?}: {err}"
        );
        read_all(&out)
    }

    /// `stenocurl /query -d QUERY`: the HTTP status and the body.
    fn post(&mut self, side: Side, cfg: &Path, q: &[u8]) -> (u16, Vec<u8>) {
        self.n += 1;
        if side == Side::Wiretape {
            self.asked_wiretape += 1;
        }
        let body = self.scratch.join(format!("{}-{:?}.body", self.n, side));
        let data = self.scratch.join(format!("{}.query", self.n));
        std::fs::write(&data, q).unwrap();
        let o = self
            .command(side, "stenocurl", cfg)
            .arg("/query")
            .arg("--data-binary")
            .arg(format!("@{}", data.display()))
            .args(["-s", "-o"])
            .arg(&body)
            .args(["-w", "%{http_code}"])
            .output()
            .unwrap();
        let code = String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        (code, std::fs::read(&body).unwrap_or_default())
    }
}

/// The frames of `all` that `q` selects (the reference evaluator).
fn reference(q: &steno::Query, all: &[Record]) -> Vec<Record> {
    all.iter()
        .filter(|r| steno::eval(q, &Decoded::of(&r.data), r.ts_ns))
        .cloned()
        .collect()
}

/// The frames of `frames` a `--limit-bytes` of `limit` lets through, as
/// Stenographer counts: the 16-byte file header, then each frame with its
/// 16-byte record header; the frame that reaches the limit is the last.
fn frames_in_bytes(frames: &[Record], limit: i64) -> usize {
    let mut left = limit - 16;
    frames
        .iter()
        .position(|r| {
            left -= r.data.len() as i64 + 16;
            left <= 0
        })
        .map_or(frames.len(), |i| i + 1)
}

/// Every file under `d`.
fn walk(d: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

/// tcpdump's reading of a pcap, one line per frame (µs stamp, headers,
/// bytes in hex), sorted: frame for frame, in any order.
fn tcpdump_lines(p: &Path) -> Vec<String> {
    let o = Command::new("tcpdump")
        .args(["-nn", "-tt", "-x", "-r"])
        .arg(p)
        .output()
        .expect("tcpdump");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut frames: Vec<String> = Vec::new();
    for l in String::from_utf8_lossy(&o.stdout).lines() {
        if l.starts_with('\t') {
            frames.last_mut().unwrap().push_str(l.trim());
        } else {
            frames.push(l.to_string());
        }
    }
    frames.sort();
    frames
}

fn rfc3339(ns: u64) -> String {
    wiretape::timestamp::format_rfc3339(ns)
}

/// `ns` as RFC 3339 in the +01:00 zone.
fn rfc3339_plus1(ns: u64) -> String {
    let s = rfc3339(ns + 3_600_000_000_000);
    format!("{}+01:00", s.trim_end_matches('Z'))
}

#[test]
fn stenoread_gets_the_same_frames_from_wiretape_as_from_stenographer() {
    assert!(
        wiretape::capture::sys::is_root(),
        "run as root: namespaces, stenotype"
    );
    for c in [
        "stenographer",
        "stenotype",
        "stenoread",
        "stenocurl",
        "jq",
        "curl",
        "tcpdump",
    ] {
        assert!(
            have(c),
            "{c} is missing: scripts/setup.sh installs Debian's stenographer and stenographer-client"
        );
    }
    let v = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "stenographer"])
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&v.stdout).to_string();
    assert!(
        version.starts_with("1.0.1"),
        "this test checks Stenographer 1.0.1 (Debian's), not {version:?}"
    );
    let started = Instant::now();
    let t = TempDir::new("steno");
    let tb = Testbed::create("steno", 1).unwrap();
    let steno_uid = uid("stenographer");

    // Certificates: one CA for both servers; wiretape's client files for
    // stenoread, pointed at each server.
    let certs = t.path().join("certs");
    let c = certs.to_str().unwrap();
    let (code, _, e) = run_wiretape(None, &["certs", "init", c, "--server-name", "127.0.0.1"]);
    assert_eq!(code, 0, "{e}");
    for name in ["analyst", "intruder"] {
        let (code, _, e) = run_wiretape(None, &["certs", "client", c, name]);
        assert_eq!(code, 0, "{e}");
    }
    let steno_certs = t.path().join("steno-certs");
    std::fs::create_dir_all(&steno_certs).unwrap();
    for (from, to) in [
        ("ca.pem", "ca_cert.pem"),
        ("server.pem", "server_cert.pem"),
        ("server.key", "server_key.pem"),
    ] {
        std::fs::copy(certs.join(from), steno_certs.join(to)).unwrap();
    }

    // Both recorders on the capture end.
    let store = t.path().join("wiretape");
    let steno_dir = t.path().join("stenographer");
    let mut rec = Recorder::start(
        &tb,
        &["-w", store.to_str().unwrap(), "--engine", "packet", "-q"],
    );
    let stenographer = Stenographer::start(&tb, &steno_dir, &steno_certs);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !packet_sockets(&tb, CAP_IF).contains(&steno_uid) {
        assert!(
            Instant::now() < deadline,
            "stenotype bound no socket to {CAP_IF}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));

    // Three bursts a second apart: testbed frames and the special ones.
    let per_burst = 200u64;
    let mut sent = 0u64;
    for k in 0..3u8 {
        let from = u64::from(k) * per_burst;
        let rep = tb
            .send(from..from + per_burst, SizeFn::Mixed, 8, Some(20_000))
            .unwrap();
        let sp = special(k);
        sent += rep.sent + sp.len() as u64;
        send_frames(&tb, sp);
        if k < 2 {
            std::thread::sleep(Duration::from_millis(1200));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    rec.signal(libc::SIGINT);
    let st = rec.wait(20);
    assert!(st.success(), "wiretape record: {}", rec.stderr_text());
    let w_all: Vec<Record> = pcaps(&store).iter().flat_map(|p| read_all(p)).collect();
    assert_eq!(
        w_all.len() as u64,
        sent,
        "wiretape recorded every frame sent"
    );
    // Finished files with complete key indexes: the queries below are
    // planned by them (each piece of time by its own keys).
    for p in pcaps(&store) {
        let len = std::fs::metadata(&p).unwrap().len();
        let k = wiretape::files::keys::KeyIndex::open(&p, &Default::default())
            .unwrap()
            .unwrap_or_else(|| panic!("{}: no key index", p.display()));
        assert!(k.complete_for(len), "{}: key index incomplete", p.display());
    }

    // wiretape's API over its store, and stenoread's configs.
    let tls: Vec<String> = ["server.pem", "server.key", "ca.pem"]
        .iter()
        .map(|f| certs.join(f).display().to_string())
        .collect();
    // `wiretape api` with mutual TLS, `analyst` allowed, on ARGS' stores.
    let start_api = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend([
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &tls[0],
            "--tls-key",
            &tls[1],
            "--client-ca",
            &tls[2],
            "--allow-client",
            "analyst",
        ]);
        Api::start(&a)
    };
    let api = start_api(&["-w", store.to_str().unwrap()]);
    let port = api.url.rsplit(':').next().unwrap().to_string();
    let wt_conf_dir = t.path().join("stenoread-wiretape");
    let (code, out, e) = run_wiretape(
        None,
        &[
            "certs",
            "client",
            c,
            "analyst",
            "--stenographer",
            wt_conf_dir.to_str().unwrap(),
            "--port",
            &port,
        ],
    );
    assert_eq!(code, 0, "{e}");
    assert!(out.contains("stenoread"), "{out}");
    let wt_cfg = wt_conf_dir.join("config");
    let conf: serde_json::Value = serde_json::from_slice(&std::fs::read(&wt_cfg).unwrap()).unwrap();
    assert_eq!(conf["Host"], "127.0.0.1");
    assert_eq!(conf["Port"].as_u64(), port.parse().ok());
    for f in [
        "client_cert.pem",
        "client_key.pem",
        "ca_cert.pem",
        "server_cert.pem",
    ] {
        assert!(wt_conf_dir.join(f).exists(), "{f}");
    }
    // The same client files, pointed at Stenographer.
    let steno_cfg = t.path().join("stenoread-stenographer.json");
    let mut sc = conf.clone();
    sc["Port"] = STENO_PORT.into();
    std::fs::write(&steno_cfg, serde_json::to_vec(&sc).unwrap()).unwrap();

    let scratch = t.path().join("answers");
    std::fs::create_dir_all(&scratch).unwrap();
    // tcpdump (under stenoread) may write as user tcpdump.
    Command::new("chmod")
        .args(["777"])
        .arg(&scratch)
        .status()
        .unwrap();
    let mut ask = Asker {
        tb: &tb,
        scratch,
        n: 0,
        asked_wiretape: 0,
    };

    // Stenographer's frames become queryable once stenotype rotated its
    // files and the server rescanned: ask for all of them until they are.
    let all_q = "after 2000-01-01T00:00:00Z";
    let deadline = Instant::now() + Duration::from_secs(75);
    let s_all = loop {
        let got = ask.stenoread(Side::Steno, &steno_cfg, &[], all_q);
        if got.len() as u64 >= sent {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "Stenographer has {} of {sent} frames after 75 s: {}",
            got.len(),
            std::fs::read_to_string(&stenographer.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_secs(2));
    };
    let waited = started.elapsed();
    // The same traffic in both stores (Stenographer's without the tag the
    // kernel took off).
    let w_stripped: Vec<Record> = w_all.iter().map(stripped).collect();
    assert_eq!(
        multiset(&s_all),
        multiset(&w_stripped),
        "Stenographer's frames are wiretape's, the outermost 802.1Q/802.1ad tag taken off"
    );

    // ---- Stenographer's files as inputs ----
    let sd = steno_dir.to_str().unwrap();
    let steno_files = |d: &Path| -> Vec<(PathBuf, u64)> {
        let mut v: Vec<(PathBuf, u64)> = walk(d)
            .into_iter()
            // Not the dot-file stenotype writes: it grows, and is renamed.
            .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .map(|p| (p.clone(), p.metadata().map_or(0, |m| m.len())))
            .collect();
        v.sort();
        v
    };
    let before = steno_files(&steno_dir.join("thread0/packets"));
    // Stenographer's export of all its frames, as tcpdump reads it.
    let export = t.path().join("answers/export.pcap");
    let o = ask
        .command(Side::Steno, "stenoread", &steno_cfg)
        .arg(all_q)
        .arg("-w")
        .arg(&export)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let exported = tcpdump_lines(&export);
    assert_eq!(exported.len() as u64, sent);
    // info over the directory: every frame.
    let (code, out, e) = run_wiretape(None, &["info", "--json", sd]);
    assert_eq!(code, 0, "{e}");
    let n: u64 = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["packets"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(n, sent, "info over Stenographer's directory");
    // extract: the same frames as Stenographer's export (tcpdump's lines,
    // µs stamps and bytes), and as those sent.
    let all_pcap = t.path().join("steno-all.pcap");
    let (code, _, e) = run_wiretape(None, &["extract", sd, "-w", all_pcap.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    assert_eq!(
        tcpdump_lines(&all_pcap),
        exported,
        "extract against Stenographer's export"
    );
    let sn_all = read_all(&all_pcap);
    assert_eq!(
        multiset(&sn_all),
        multiset(&w_stripped),
        "extract against the frames sent"
    );
    // index --index-dir, then timeline by it: every frame counted.
    let idx = t.path().join("steno-idx");
    let ix = idx.to_str().unwrap();
    let (code, _, e) = run_wiretape(None, &["index", "-q", "--index-dir", ix, sd]);
    assert_eq!(code, 0, "{e}");
    let (code, out, e) = run_wiretape(None, &["timeline", "--json", "--index-dir", ix, sd]);
    assert_eq!(code, 0, "{e}");
    let tl: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        tl["totals"]["frames"].as_u64(),
        Some(sent),
        "timeline: {out}"
    );
    // wiretape's API over Stenographer's files (by the index in --index-dir).
    let api_s = start_api(&["-w", sd, "--index-dir", ix]);
    let ws_cfg = t.path().join("stenoread-wiretape-on-steno.json");
    let mut wc = conf.clone();
    wc["Port"] = api_s
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u64>()
        .unwrap()
        .into();
    std::fs::write(&ws_cfg, serde_json::to_vec(&wc).unwrap()).unwrap();

    // Bounds between the bursts, and on a frame's own nanosecond.
    let mut stamps: Vec<u64> = w_all.iter().map(|r| r.ts_ns).collect();
    stamps.sort_unstable();
    let gaps: Vec<u64> = stamps
        .windows(2)
        .filter(|w| w[1] - w[0] > 500_000_000)
        .map(|w| w[0] + (w[1] - w[0]) / 2)
        .collect();
    assert_eq!(gaps.len(), 2, "three bursts: {gaps:?}");
    let (t12, t23) = (gaps[0], gaps[1]);
    let edge = stamps[stamps.len() / 2];

    // (query, time-bounded, Stenographer's copies lost the tag it asks for)
    let mut queries: Vec<(String, bool, bool)> = [
        "host 198.18.0.1",
        "host 10.1.0.1",
        "host 2001:db8::1",
        "host ::ffff:10.1.0.2",
        "net 10.1.0.0/16",
        "net 10.0.0.0 mask 255.0.0.0",
        "net 2001:db8::/32",
        "net 10.1.0.0 mask 255.255.0.254",
        "port 80",
        "port 514",
        "port 53",
        "port 5000",
        "port 7000",
        "ip proto 6",
        "ip proto 58",
        "ip proto 44",
        "tcp",
        "udp",
        "icmp",
        "vlan 7",
        "vlan 30",
        "mpls 16",
        "tcp and port 443",
        "udp && port 514",
        "tcp or icmp",
        "udp || ip proto 58",
        "udp and port 514 or tcp and port 80",
        "(udp and port 514) or (tcp and port 80)",
        "host 10.1.0.1 and (port 80 or icmp)",
        "(vlan 7 or mpls 16) and udp",
        "net 198.18.0.0/15 and port 10003",
        "host 10.1.0.1&&port 80||host 8.8.8.8",
    ]
    .iter()
    .map(|q| (q.to_string(), false, false))
    .collect();
    for q in ["vlan 8", "vlan 100", "vlan 100 and host 10.20.0.2"] {
        queries.push((q.into(), false, true));
    }
    for q in [
        format!("after {}", rfc3339(t12)),
        format!("before {} and udp", rfc3339(t23)),
        format!("after {} and before {}", rfc3339(t12), rfc3339(t23)),
        format!(
            "(port 80 and before {}) or (port 53 and after {})",
            rfc3339(t12),
            rfc3339(t23)
        ),
        format!("after {}", rfc3339(edge)),
        format!("before {}", rfc3339(edge)),
        format!("after {} and tcp", rfc3339_plus1(t12)),
        "after 30m ago".to_string(),
        "before 2h ago".to_string(),
        "udp and after 1h ago".to_string(),
        "before 1h ago or icmp".to_string(),
    ] {
        queries.push((q, true, false));
    }
    assert!(queries.len() >= 30);
    let mut untimed_same = 0;
    for (q, timed, tag_lost) in &queries {
        let parsed = steno::parse(q, wiretape::timestamp::realtime_ns()).unwrap();
        let w = ask.stenoread(Side::Wiretape, &wt_cfg, &[], q);
        let s = ask.stenoread(Side::Steno, &steno_cfg, &[], q);
        let w_ref = reference(&parsed, &w_all);
        // wiretape over Stenographer's files: exactly the frames of that
        // store the query selects (to the ns); without bounds, byte for
        // byte Stenographer's own answer.
        let ws = ask.stenoread(Side::WiretapeOnSteno, &ws_cfg, &[], q);
        assert_eq!(
            multiset(&ws),
            multiset(&reference(&parsed, &sn_all)),
            "{q}: wiretape over Stenographer's files against the reference"
        );
        if !*timed {
            assert_eq!(
                multiset(&ws),
                multiset(&s),
                "{q}: wiretape over Stenographer's files against Stenographer"
            );
        }
        // wiretape: exactly the frames of its store the query selects (to
        // the nanosecond for time bounds: frames of the reference come
        // with ns stamps, and nothing else is there).
        assert_eq!(
            multiset(&w),
            multiset(&w_ref),
            "{q}: wiretape against the reference"
        );
        let w_str: Vec<Record> = w.iter().map(stripped).collect();
        if *timed {
            // Stenographer reads whole files, a minute wide.
            let sm = multiset(&s);
            for (k, n) in multiset(&w_str) {
                assert!(
                    sm.get(&k).copied().unwrap_or(0) >= n,
                    "{q}: Stenographer lacks a frame"
                );
            }
            continue;
        }
        // Stenographer: the reference over its own copies.
        assert_eq!(
            multiset(&s),
            multiset(&reference(&parsed, &s_all)),
            "{q}: Stenographer against the reference"
        );
        if *tag_lost {
            // The frames whose tag only wiretape has: wiretape returns them.
            assert!(
                w.len() > s.len(),
                "{q}: wiretape {} Stenographer {}",
                w.len(),
                s.len()
            );
        } else {
            assert!(!w.is_empty(), "{q}: selects nothing");
            assert_eq!(
                multiset(&w_str),
                multiset(&s),
                "{q}: wiretape against Stenographer"
            );
            untimed_same += 1;
        }
    }
    assert!(untimed_same >= 30);
    // Nothing of wiretape's in Stenographer's packets directory: its files
    // as they were (stenotype may have added files of its own since).
    let after = steno_files(&steno_dir.join("thread0/packets"));
    for f in &before {
        assert!(after.contains(f), "{} changed", f.0.display());
    }
    assert!(after.iter().all(|(p, _)| p
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(wiretape::files::steno::is_file_name)));
    drop(api_s);

    // Limits, as Stenographer counts them.
    let udp = steno::parse("udp", 0).unwrap();
    let w_udp = reference(&udp, &w_all);
    let w = ask.stenoread(Side::Wiretape, &wt_cfg, &["--limit-packets", "7"], "udp");
    let s = ask.stenoread(Side::Steno, &steno_cfg, &["--limit-packets", "7"], "udp");
    assert_eq!((w.len(), s.len()), (7, 7));
    assert_eq!(multiset(&w), multiset(&w_udp[..7]));
    // Bytes: the file header, then each frame and its 16-byte header; the
    // frame that reaches the limit is the last.
    let n = frames_in_bytes(&w_udp, 3000);
    let w = ask.stenoread(Side::Wiretape, &wt_cfg, &["--limit-bytes", "3000"], "udp");
    let s = ask.stenoread(Side::Steno, &steno_cfg, &["--limit-bytes", "3000"], "udp");
    assert_eq!(w.len(), n, "--limit-bytes 3000: wiretape");
    assert_eq!(multiset(&w), multiset(&w_udp[..n]));
    let sn = frames_in_bytes(&reference(&udp, &s_all), 3000);
    assert_eq!(s.len(), sn, "--limit-bytes 3000: Stenographer");

    // Unparseable: 400 from both, no pcap.
    let pcap_magic = [0xd4, 0xc3, 0xb2, 0xa1];
    for q in [
        "host 1.2.3",
        "port 77777",
        "net 10.0.0.0/33",
        "protocol 6",
        "tcp and",
        "(udp",
        "udp)",
        "after 2015-02-29T00:00:00Z",
        "after 3h",
        "vlan 65536",
        "",
    ] {
        for (side, cfg) in [(Side::Wiretape, &wt_cfg), (Side::Steno, &steno_cfg)] {
            let (code, body) = ask.post(side, cfg, q.as_bytes());
            assert_eq!(
                code,
                400,
                "{q:?} to {side:?}: {}",
                String::from_utf8_lossy(&body)
            );
            assert!(
                !body.starts_with(&pcap_magic),
                "{q:?} to {side:?} streamed a capture"
            );
            if side == Side::Wiretape && !q.is_empty() {
                assert!(
                    String::from_utf8_lossy(&body).contains("at character"),
                    "{q:?}: the position is named: {}",
                    String::from_utf8_lossy(&body)
                );
            }
        }
    }
    // Taken by both: an offset Go 1.19 does not range-check.
    for side in [Side::Wiretape, Side::Steno] {
        let cfg = if side == Side::Wiretape {
            &wt_cfg
        } else {
            &steno_cfg
        };
        let (code, body) = ask.post(side, cfg, b"after 2015-01-01T13:14:15+99:99");
        assert_eq!(code, 200, "{side:?}");
        assert!(body.starts_with(&pcap_magic));
    }
    // Stenographer 1.0.1 ends the query at a character it cannot read and
    // answers the rest; wiretape refuses it.
    let (code, body) = ask.post(Side::Steno, &steno_cfg, b"port 9 AND udp");
    assert_eq!(code, 200);
    assert!(body.len() > 24 + 16 * 500, "Stenographer answered `port 9`");
    let (code, body) = ask.post(Side::Wiretape, &wt_cfg, b"port 9 AND udp");
    let msg = String::from_utf8_lossy(&body);
    assert_eq!(code, 400, "{msg}");
    assert!(
        msg.contains("at character 7") && msg.contains("Stenographer 1.0.1 would end"),
        "{msg}"
    );
    // Too big, too deep: 400, and the API answers on.
    let big = format!("udp{}", " ".repeat(100 << 10));
    let deep = format!("{}udp{}", "(".repeat(10_000), ")".repeat(10_000));
    for q in [big, deep] {
        let (code, body) = ask.post(Side::Wiretape, &wt_cfg, q.as_bytes());
        assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    }
    let w = ask.stenoread(Side::Wiretape, &wt_cfg, &[], "icmp");
    assert_eq!(
        multiset(&w),
        multiset(&reference(&steno::parse("icmp", 0).unwrap(), &w_all))
    );

    // Transport: another CA's client cannot connect; a name not admitted
    // gets 403; one log line per query.
    let other = t.path().join("other");
    let o = other.to_str().unwrap();
    run_wiretape(None, &["certs", "init", o, "--server-name", "127.0.0.1"]);
    run_wiretape(None, &["certs", "client", o, "analyst"]);
    let curl = |cert: &Path, key: &Path| {
        Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(certs.join("ca.pem"))
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .args(["-d", "udp"])
            .arg(format!("https://127.0.0.1:{port}/query"))
            .output()
            .unwrap()
    };
    let o = curl(
        &other.join("client-analyst.pem"),
        &other.join("client-analyst.key"),
    );
    assert!(!o.status.success(), "another CA's client was let in");
    let o = curl(
        &certs.join("client-intruder.pem"),
        &certs.join("client-intruder.key"),
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "403");
    drop(stenographer);
    let mut api = api;
    let _ = api.proc.child.kill();
    let _ = api.proc.wait(5);
    let lines = api
        .proc
        .stderr
        .iter()
        .filter(|l| l.contains(" POST /query") && l.contains("analyst"))
        .count();
    assert_eq!(lines, ask.asked_wiretape, "one log line per query");
    eprintln!(
        "steno: {} queries on both, {sent} frames; {:.1} s in all, {:.1} s of it until Stenographer had them",
        queries.len(),
        started.elapsed().as_secs_f64(),
        waited.as_secs_f64()
    );
}
