//! `extract` over inputs of several link types (issue 23): with pcapng
//! output, one file with one interface (IDB) per link type, each frame's
//! EPB naming its link type's, frames merged by time; with pcap output a
//! refusal (exit 2, one line naming the files and link types, nothing
//! written). A filter is compiled per link type (libpcap's program differs
//! per DLT) and selects what `tcpdump -r` selects in each input; one that
//! does not compile for a link type is refused, naming it. The API's
//! `/v1/extract` answers the same: pcapng works, pcap is a 400 with the
//! same line. Checked against tcpdump (`--nano -r each-input -w -`),
//! tshark (interface and encapsulation of every frame) and an independent
//! pcapng parser here (bytes, lengths, stamps). No network.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const T0: u64 = 1_700_000_000_000_000_000;

fn ipv4(i: usize) -> Vec<u8> {
    let tcp = i.is_multiple_of(3);
    let payload = vec![i as u8; 12 + i % 40];
    let mut l4 = Vec::new();
    l4.extend_from_slice(&(1000 + i as u16).to_be_bytes());
    l4.extend_from_slice(&(if tcp { 443u16 } else { 53 }).to_be_bytes());
    if tcp {
        l4.extend_from_slice(&(i as u32).to_be_bytes());
        l4.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x02, 4, 0, 0, 0, 0, 0]);
    } else {
        l4.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
    }
    l4.extend_from_slice(&payload);
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&(20 + l4.len() as u16).to_be_bytes());
    p.extend_from_slice(&(i as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 64, if tcp { 6 } else { 17 }, 0, 0]);
    p.extend_from_slice(&[10, 0, 0, 1 + (i % 5) as u8, 10, 0, 1, 9]);
    p.extend_from_slice(&l4);
    p
}

/// A frame of link type `lt` (Ethernet 1, RAW 101, LINUX_SLL 113): IPv4
/// mostly, ARP (Ethernet, SLL) or IPv6 (RAW) now and then, which `ip` does
/// not select.
fn frame(lt: u32, i: usize) -> Vec<u8> {
    let other = i % 4 == 1;
    match lt {
        1 => {
            let mut f = vec![2, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2];
            if other {
                f.extend_from_slice(&[0x08, 0x06]);
                f.extend_from_slice(&[0u8; 28]);
            } else {
                f.extend_from_slice(&[0x08, 0x00]);
                f.extend_from_slice(&ipv4(i));
            }
            f
        }
        101 => {
            if other {
                let mut f = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
                f.extend_from_slice(&[0xfe; 32]);
                f.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
                f
            } else {
                ipv4(i)
            }
        }
        113 => {
            let mut f = vec![0, 0, 0, 1, 0, 6, 4, 0, 0, 0, 0, 2, 0, 0];
            if other {
                f.extend_from_slice(&[0x08, 0x06]);
                f.extend_from_slice(&[0u8; 28]);
            } else {
                f.extend_from_slice(&[0x08, 0x00]);
                f.extend_from_slice(&ipv4(i));
            }
            f
        }
        _ => unreachable!(),
    }
}

/// A pcap file of link type `lt` (µs or ns stamps, either byte order):
/// `n` frames stamped `T0 + i * step + shift` ns (whole µs in µs files).
fn pcap(path: &Path, lt: u32, nanos: bool, be: bool, n: usize, step: u64, shift: u64) {
    let w32 = |b: &mut Vec<u8>, v: u32| {
        b.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() })
    };
    let mut b = Vec::new();
    w32(&mut b, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    let v = if be { [0, 2, 0, 4] } else { [2, 0, 4, 0] };
    b.extend_from_slice(&v);
    b.extend_from_slice(&[0; 8]);
    w32(&mut b, 262_144);
    w32(&mut b, lt);
    for i in 0..n {
        let ts = T0 + i as u64 * step + shift;
        let d = frame(lt, i);
        w32(&mut b, (ts / 1_000_000_000) as u32);
        let frac = (ts % 1_000_000_000) as u32;
        w32(&mut b, if nanos { frac } else { frac / 1000 });
        w32(&mut b, d.len() as u32);
        w32(&mut b, d.len() as u32 + (i % 3 == 2) as u32 * 100);
        b.extend_from_slice(&d);
    }
    std::fs::write(path, b).unwrap();
}

/// One frame: link type, ns stamp, caplen, orig_len, bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct F {
    lt: u32,
    ts: u64,
    orig: u32,
    data: Vec<u8>,
}

/// `tcpdump --nano -r F -w - [EXPR]`: its frames (pcap ns, little-endian
/// on this machine), under its link type.
fn tcpdump(f: &Path, expr: Option<&str>) -> Vec<F> {
    let mut c = Command::new("tcpdump");
    c.args(["--nano", "-r"]).arg(f).args(["-w", "-"]);
    if let Some(e) = expr {
        c.arg(e);
    }
    let o = c.output().expect("tcpdump is installed (scripts/setup.sh)");
    assert!(o.status.success(), "tcpdump -r {}: {:?}", f.display(), o);
    let b = o.stdout;
    assert_eq!(
        &b[0..4],
        &0xa1b2_3c4du32.to_le_bytes(),
        "tcpdump --nano -w -"
    );
    let rd = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let lt = rd(20) & 0xffff;
    let mut v = Vec::new();
    let mut o = 24;
    while o + 16 <= b.len() {
        let (sec, ns, cap, orig) = (rd(o), rd(o + 4), rd(o + 8), rd(o + 12));
        let end = o + 16 + cap as usize;
        v.push(F {
            lt,
            ts: sec as u64 * 1_000_000_000 + ns as u64,
            orig,
            data: b[o + 16..end].to_vec(),
        });
        o = end;
    }
    assert_eq!(o, b.len());
    v
}

/// A little-endian pcapng file as written here, parsed independently of
/// wiretape's reader: the IDBs' link types (with if_tsresol 9) and every
/// EPB's frame with its interface's link type.
fn parse_pcapng(b: &[u8]) -> (Vec<u32>, Vec<F>) {
    let rd = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let mut lts = Vec::new();
    let mut frames = Vec::new();
    let mut o = 0;
    while o < b.len() {
        let (kind, total) = (rd(o), rd(o + 4) as usize);
        assert_eq!(rd(o + total - 4) as usize, total, "trailer at {o}");
        match kind {
            0x0a0d_0d0a => assert_eq!(rd(o + 8), 0x1a2b_3c4d),
            1 => {
                lts.push(u32::from(u16::from_le_bytes([b[o + 8], b[o + 9]])));
                // if_tsresol = 9 among the options.
                let opts = &b[o + 16..o + total - 4];
                let mut k = 0;
                let mut res = None;
                while k + 4 <= opts.len() {
                    let code = u16::from_le_bytes([opts[k], opts[k + 1]]);
                    let len = u16::from_le_bytes([opts[k + 2], opts[k + 3]]) as usize;
                    if code == 9 {
                        res = Some(opts[k + 4]);
                    }
                    if code == 0 {
                        break;
                    }
                    k += 4 + len.div_ceil(4) * 4;
                }
                assert_eq!(res, Some(9), "ns stamps");
            }
            6 => {
                let itf = rd(o + 8) as usize;
                let ts = ((rd(o + 12) as u64) << 32) | rd(o + 16) as u64;
                let (cap, orig) = (rd(o + 20) as usize, rd(o + 24));
                frames.push(F {
                    lt: *lts.get(itf).expect("an EPB of a described interface"),
                    ts,
                    orig,
                    data: b[o + 28..o + 28 + cap].to_vec(),
                });
            }
            k => panic!("block type {k:#x} at {o}"),
        }
        o += total;
    }
    (lts, frames)
}

/// tshark's view of every frame: (interface id, Wireshark encapsulation,
/// ns stamp, caplen).
fn tshark(f: &Path) -> Vec<(u32, u32, String, u32)> {
    let o = Command::new("tshark")
        .arg("-r")
        .arg(f)
        .args(["-T", "fields", "-e", "frame.interface_id", "-e"])
        .args([
            "frame.encap_type",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.cap_len",
        ])
        .output()
        .expect("tshark is installed (scripts/setup.sh)");
    assert!(o.status.success(), "tshark: {o:?}");
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.split('\t').collect();
            (
                v[0].parse().unwrap(),
                v[1].parse().unwrap(),
                v[2].to_string(),
                v[3].parse().unwrap(),
            )
        })
        .collect()
}

/// The frames of `inputs` as tcpdump reads each (with `expr`), merged by
/// stamp; equal stamps in the order of the inputs, then of the file.
fn reference(inputs: &[PathBuf], expr: Option<&str>) -> Vec<F> {
    let mut all: Vec<(usize, F)> = Vec::new();
    for (k, f) in inputs.iter().enumerate() {
        all.extend(tcpdump(f, expr).into_iter().map(|x| (k, x)));
    }
    all.sort_by_key(|(k, f)| (f.ts, *k)); // stable: file order within a file
    all.into_iter().map(|(_, f)| f).collect()
}

/// Ours against the reference: count, order, link type, stamp, bytes and
/// orig_len, frame by frame.
fn same(what: &str, ours: &[F], want: &[F]) {
    assert_eq!(ours.len(), want.len(), "{what}: frame count");
    for (k, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(a, b, "{what}: frame {k}");
    }
}

/// Three inputs: Ethernet (pcap ns, LE), RAW (pcap µs, BE), LINUX_SLL
/// (pcap ns, LE), interleaved in time with equal stamps across them.
fn inputs(t: &TempDir) -> Vec<PathBuf> {
    let p = |n: &str| t.path().join(n);
    pcap(&p("eth.pcap"), 1, true, false, 60, 10_000, 0);
    pcap(&p("raw.pcap"), 101, false, true, 45, 13_000, 0);
    pcap(&p("sll.pcap"), 113, true, false, 50, 11_000, 3_000);
    vec![p("eth.pcap"), p("raw.pcap"), p("sll.pcap")]
}

fn strs(v: &[PathBuf]) -> Vec<&str> {
    v.iter().map(|p| p.to_str().unwrap()).collect()
}

#[test]
fn extract_writes_one_pcapng_with_an_interface_per_link_type() {
    let t = TempDir::new("linktypes");
    let ins = inputs(&t);
    let want = reference(&ins, None);
    assert_eq!(want.len(), 155);
    assert!(
        want.windows(2)
            .any(|w| w[0].ts == w[1].ts && w[0].lt != w[1].lt),
        "equal stamps across link types"
    );
    let out = t.path().join("all.pcapng");
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend(["-w", out.to_str().unwrap(), "--format", "pcapng", "--json"]);
    let (code, o, e) = run_wiretape_in(t.path(), &a);
    assert_eq!(code, 0, "{e}");
    let j: Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["frames"], 155);
    assert_eq!(j["format"], "pcapng");
    let lts: Vec<(u64, u64)> = j["linktypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["linktype"].as_u64().unwrap(),
                l["frames"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(lts, [(1, 60), (101, 45), (113, 50)], "{j}");
    assert_eq!(j["linktypes"][1]["name"], "RAW (101)");
    let (idbs, ours) = parse_pcapng(&std::fs::read(&out).unwrap());
    assert_eq!(
        idbs,
        [1, 101, 113],
        "one interface per link type, in input order"
    );
    same("extract --format pcapng", &ours, &want);
    assert!(ours.windows(2).all(|w| w[0].ts <= w[1].ts), "time order");
    // tshark reads every frame under its own interface and encapsulation
    // (Wireshark's: Ethernet 1, Raw IP 7, Linux cooked 25).
    let ts = tshark(&out);
    assert_eq!(ts.len(), want.len(), "tshark reads every frame");
    for (k, ((itf, encap, when, cap), w)) in ts.iter().zip(&want).enumerate() {
        let (i, enc) = match w.lt {
            1 => (0, 1),
            101 => (1, 7),
            _ => (2, 25),
        };
        assert_eq!(
            (*itf, *encap, *cap),
            (i, enc, w.data.len() as u32),
            "frame {k}"
        );
        let ns = format!("{}.{:09}", w.ts / 1_000_000_000, w.ts % 1_000_000_000);
        assert_eq!(when, &ns, "frame {k}: stamp");
    }
    let o = Command::new("capinfos")
        .arg("-c")
        .arg(&out)
        .output()
        .expect("capinfos");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("155"), "{text}");
    // A filter, compiled per link type: what tcpdump selects in each input.
    let sel = t.path().join("ip.pcapng");
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend(["-w", sel.to_str().unwrap(), "--format", "pcapng", "ip"]);
    let (code, _, e) = run_wiretape_in(t.path(), &a);
    assert_eq!(code, 0, "{e}");
    let want_ip = reference(&ins, Some("ip"));
    assert!(want_ip.len() < want.len() && want_ip.len() > 100);
    same(
        "extract --format pcapng ip",
        &parse_pcapng(&std::fs::read(&sel).unwrap()).1,
        &want_ip,
    );
    let want_tcp = reference(&ins, Some("tcp port 443"));
    let sel = t.path().join("tcp.pcapng");
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend([
        "-w",
        sel.to_str().unwrap(),
        "--format",
        "pcapng",
        "tcp",
        "port",
        "443",
    ]);
    let (code, _, e) = run_wiretape_in(t.path(), &a);
    assert_eq!(code, 0, "{e}");
    same(
        "extract tcp port 443",
        &parse_pcapng(&std::fs::read(&sel).unwrap()).1,
        &want_tcp,
    );
    // --count-only keeps working, per link type in --json.
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend(["--count-only", "--json", "ip"]);
    let (code, o, e) = run_wiretape_in(t.path(), &a);
    assert_eq!(code, 0, "{e}");
    let j: Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["frames"].as_u64(), Some(want_ip.len() as u64));
    let per: Vec<u64> = j["linktypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["frames"].as_u64().unwrap())
        .collect();
    let count = |lt| want_ip.iter().filter(|f| f.lt == lt).count() as u64;
    assert_eq!(per, [count(1), count(101), count(113)]);
    // To stdout too.
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend(["-w", "-", "--format", "pcapng", "-q"]);
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert!(o.status.success());
    assert_eq!(
        o.stdout,
        std::fs::read(&out).unwrap(),
        "stdout: the same bytes"
    );
}

#[test]
fn pcap_output_and_filters_that_do_not_compile_are_refused() {
    let t = TempDir::new("linktypes-no");
    let ins = inputs(&t);
    // pcap output: one line naming the files and link types, exit 2,
    // nothing written.
    let out = t.path().join("all.pcap");
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend(["-w", out.to_str().unwrap()]);
    let (code, o, e) = run_wiretape_in(t.path(), &a);
    assert_eq!(code, 2, "{e}");
    assert!(o.is_empty());
    assert_eq!(e.lines().count(), 1, "{e}");
    for w in [
        "Ethernet (1)",
        "RAW (101)",
        "LINUX_SLL (113)",
        "--format pcapng",
    ] {
        assert!(e.contains(w), "{w}: {e}");
    }
    for f in &ins {
        assert!(e.contains(f.to_str().unwrap()), "{e}");
    }
    assert!(!out.exists(), "nothing written");
    // A filter libpcap refuses for one of the link types: exit 2, one line
    // naming that link type with libpcap's message, nothing written.
    let out = t.path().join("ether.pcapng");
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend(["-w", out.to_str().unwrap(), "--format", "pcapng"]);
    a.extend(["ether", "host", "02:00:00:00:00:01"]);
    let (code, o, e) = run_wiretape_in(t.path(), &a);
    assert_eq!(code, 2, "{e}");
    assert!(o.is_empty());
    assert_eq!(e.lines().count(), 1, "{e}");
    let theirs = Command::new("tcpdump")
        .arg("-r")
        .arg(&ins[1])
        .args(["ether", "host", "02:00:00:00:00:01"])
        .output()
        .unwrap();
    assert!(!theirs.status.success(), "tcpdump refuses it for RAW too");
    let msg = String::from_utf8_lossy(&theirs.stderr);
    let msg = msg.lines().last().unwrap().trim_start_matches("tcpdump: ");
    assert!(e.contains(msg), "libpcap's message '{msg}': {e}");
    assert!(e.contains("RAW (101)") && e.contains("raw.pcap"), "{e}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn the_api_writes_pcapng_over_link_types_and_refuses_pcap_alike() {
    let t = TempDir::new("linktypes-api");
    let ins = inputs(&t);
    let mut a = vec!["-q", "--listen", "127.0.0.1:0"];
    for f in &ins {
        a.extend(["-w", f.to_str().unwrap()]);
    }
    let api = Api::start(&a);
    let get = |q: &str| {
        let o = Command::new("curl")
            .args(["-s", "-g", "-o", "-", "-w", "\n%{http_code}"])
            .arg(format!("{}/v1/extract?{q}", api.url))
            .output()
            .expect("curl is installed (scripts/setup.sh)");
        let mut b = o.stdout;
        let nl = b.iter().rposition(|&c| c == b'\n').unwrap();
        let code: u32 = String::from_utf8_lossy(&b[nl + 1..])
            .trim()
            .parse()
            .unwrap();
        b.truncate(nl);
        (code, b)
    };
    let (code, body) = get("format=pcapng");
    assert_eq!(code, 200);
    let (idbs, ours) = parse_pcapng(&body);
    assert_eq!(idbs, [1, 101, 113]);
    same("/v1/extract format=pcapng", &ours, &reference(&ins, None));
    let (code, body) = get("format=pcapng&filter=ip");
    assert_eq!(code, 200);
    same(
        "/v1/extract filter=ip",
        &parse_pcapng(&body).1,
        &reference(&ins, Some("ip")),
    );
    // pcap: 400, the line extract prints, in the API's words: the query
    // parameter `format=pcapng` where the command says `--format pcapng`.
    let (code, body) = get("format=pcap");
    assert_eq!(code, 400);
    let mut a = vec!["extract"];
    a.extend(strs(&ins));
    a.extend(["-w", "x.pcap"]);
    let (c, _, e) = run_wiretape_in(t.path(), &a);
    assert_eq!(c, 2);
    let line = e.trim().trim_start_matches("wiretape: error: ");
    let body = String::from_utf8_lossy(&body);
    let j: Value = serde_json::from_str(&body).unwrap_or_else(|_| Value::String(body.to_string()));
    let said = j["error"]
        .as_str()
        .map(str::to_string)
        .unwrap_or(body.to_string());
    assert!(line.contains("(--format pcapng: "), "{line}");
    assert!(!said.contains("--"), "{said}");
    assert_eq!(said, line.replace("--format pcapng", "format=pcapng"));
    // A filter refused for one link type: 400 naming it.
    let (code, body) = get("format=pcapng&filter=ether%20host%2002:00:00:00:00:01");
    assert_eq!(code, 400);
    assert!(String::from_utf8_lossy(&body).contains("RAW (101)"));
}

/// `record -r` of a file of another link type with `--serve`: the
/// PCAP-over-IP stream's header carries the file's link type (RAW), and
/// the frames that follow are the file's, byte for byte.
#[test]
fn record_r_serves_the_files_link_type() {
    let t = TempDir::new("linktypes-serve");
    let raw = t.path().join("raw.pcap");
    pcap(&raw, 101, true, false, 150, 1_000, 0);
    let want = tcpdump(&raw, None);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let dir = t.path().join("rec");
    let child = Command::new(bin())
        .args(["record", "-r", raw.to_str().unwrap(), "-w"])
        .arg(&dir)
        .args(["-q", "--speed", "50", "--serve", &addr])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Connect as soon as it listens (the file takes 3 s at 50 frames/s).
    let mut conn = None;
    for _ in 0..300 {
        if let Ok(s) = std::net::TcpStream::connect(&addr) {
            conn = Some(s);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut conn = conn.expect("record -r --serve listens");
    let mut b = Vec::new();
    std::io::Read::read_to_end(&mut conn, &mut b).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(b.len() >= 24, "a pcap header");
    let rd = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(rd(0), 0xa1b2_3c4d, "ns stamps");
    assert_eq!(rd(20), 101, "the file's link type, not Ethernet");
    // What follows: a run of the file's frames (those from the connect on).
    let mut got = Vec::new();
    let mut o = 24;
    while o + 16 <= b.len() {
        let cap = rd(o + 8) as usize;
        got.push(F {
            lt: 101,
            ts: rd(o) as u64 * 1_000_000_000 + rd(o + 4) as u64,
            orig: rd(o + 12),
            data: b[o + 16..o + 16 + cap].to_vec(),
        });
        o += 16 + cap;
    }
    assert_eq!(o, b.len(), "whole records");
    assert!(!got.is_empty(), "frames after the connect");
    let first = want
        .iter()
        .position(|f| f == &got[0])
        .expect("the first frame served is the file's");
    same("served", &got, &want[first..first + got.len()]);
}
