//! Session tables written by the recorder (issue 38): `record` writes
//! `<file>.sessions.parquet` beside every capture file as it closes, from
//! a copy of each block taken on its way to the disk, on a thread of its
//! own. Checked with real parts: a generated mix (DNS over IPv4 and IPv6,
//! TLS ClientHellos with SNI, HTTP/1.1 requests, the `wiretape-sessions`
//! generators) recorded from a veth pair and from a file (`record -r`),
//! rotated so that connections span files; every connection tshark's
//! `-z conv,tcp` / `-z conv,udp` sees in a file is a row of that file's
//! table with the same endpoints and frames and bytes each way, a
//! connection spanning files keeps its session_id; DuckDB over
//! `*.sessions.parquet` and `wiretape sessions --where ... --json` agree;
//! `wiretape index` writes the same tables for files recorded without;
//! with the session thread starved (the fault-injection hook
//! `WIRETAPE_FAULT_SESSIONS_STALL_MS`, test builds only) no frame is lost,
//! `sessions_skipped` counts and the tables say complete = 0;
//! `--no-sessions` writes none.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use wiretape::files::Record;
use wiretape_sessions::synth::{self, Hello, Tcp};
use wiretape_testbed::{Testbed, GEN_IF};

fn v4(d: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, d])
}

fn v6(d: u16) -> IpAddr {
    IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, d])
}

/// The mix, in two halves: the TLS connection to tls.example.com and the
/// HTTP one are open across the halves (a rotation between them makes
/// them span files).
fn mix() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..8u16 {
        let (c, s) = ((v4(10), 53000 + i), (v4(53), 53));
        let name = format!("host{i}.example.com");
        a.push(synth::udp(None, c, s, &synth::dns_query(i, &name, 1)));
        a.push(synth::udp(
            None,
            s,
            c,
            &synth::dns_response(i, &name, 1, &[synth::Answer::Addr(v4(100 + i as u8))]),
        ));
    }
    let (c, s) = ((v6(10), 53100), (v6(53), 53));
    a.push(synth::udp(
        None,
        c,
        s,
        &synth::dns_query(99, "six.example.org", 28),
    ));
    a.push(synth::udp(
        None,
        s,
        c,
        &synth::dns_response(99, "six.example.org", 28, &[synth::Answer::Addr(v6(443))]),
    ));
    let mut t = Tcp::new((v4(11), 40001), (v4(44), 443), None, 1000);
    a.extend(t.open());
    let h = Hello::browser(Some(b"tls.example.com"), &[b"h2", b"http/1.1"], 0x1a1a);
    a.push(t.seg(false, 0x18, &h.records(1 << 14)));
    a.push(t.seg(true, 0x18, &[0x16, 3, 3, 0, 4, 2, 0, 0, 0]));
    let mut u = Tcp::new((v4(12), 40002), (v4(80), 80), None, 2000);
    a.extend(u.open());
    a.push(u.seg(
        false,
        0x18,
        &synth::http_get("www.example.com", "/a?b=1", "curl/8.5.0"),
    ));
    // The second half: both connections go on and close; more names.
    for k in 0..6 {
        b.push(t.seg(
            k % 2 == 1,
            0x18,
            &[0x17, 3, 3, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8],
        ));
    }
    b.extend(t.close());
    b.push(u.seg(true, 0x18, b"HTTP/1.1 204 No Content\r\n\r\n"));
    b.extend(u.close());
    let mut t2 = Tcp::new((v6(11), 40003), (v6(44), 8443), None, 3000);
    b.extend(t2.open());
    b.push(t2.seg(
        false,
        0x18,
        &Hello::tls12(Some(b"evil.cdn-test.net")).records(1 << 14),
    ));
    b.extend(t2.close());
    (a, b)
}

/// Scrapes URL (`/metrics`) with the Prometheus project's OpenMetrics
/// parser; prints the unlabelled wiretape_sessions_* samples as JSON.
const PROM: &str = r#"
import json, sys, urllib.request
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
print(json.dumps({s.name: s.value for f in om(text) for s in f.samples if s.name.startswith("wiretape_sessions_")}))
"#;

use common::{conn_key as key, ConnKey as Key};

/// Frames and bytes of each connection of `file` per direction (from the
/// lower endpoint, to it), as tshark's conversation tables count them.
fn tshark_conv(file: &Path) -> BTreeMap<Key, [u64; 4]> {
    let o = Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-q", "-z", "conv,tcp", "-z", "conv,udp"])
        .output()
        .expect("tshark (scripts/setup.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let mut proto = 0u8;
    let mut out = BTreeMap::new();
    for l in text.lines() {
        if l.starts_with("TCP Conversations") {
            proto = 6;
        } else if l.starts_with("UDP Conversations") {
            proto = 17;
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        if t.len() < 9 || t[1] != "<->" {
            continue;
        }
        let ep = |s: &str| {
            let (a, p) = s.rsplit_once(':').unwrap();
            (a.to_string(), p.parse::<u16>().unwrap())
        };
        // A <-> B, then "<-" (B to A) frames, bytes and unit, "->" (A to B).
        let n = |s: &str| s.replace(',', "").parse::<u64>().unwrap();
        assert!(
            t[5] == "bytes" && t[8] == "bytes",
            "byte counts in bytes: {l}"
        );
        let (to_a, to_a_bytes, from_a, from_a_bytes) = (n(t[3]), n(t[4]), n(t[6]), n(t[7]));
        let (k, swapped) = key(proto, ep(t[0]), ep(t[2]));
        let v = if swapped {
            [to_a, to_a_bytes, from_a, from_a_bytes]
        } else {
            [from_a, from_a_bytes, to_a, to_a_bytes]
        };
        out.insert(k, v);
    }
    out
}

/// The rows of a table by connection: (session_id, counts as tshark's).
fn table_conv(rows: &[Value]) -> BTreeMap<Key, (u64, [u64; 4])> {
    let mut out = BTreeMap::new();
    for r in rows {
        let (k, v) = row_conn(r);
        let g = |f: &str| r[f].as_u64().unwrap();
        assert!(
            out.insert(k.clone(), (g("session_id"), v)).is_none(),
            "one row per connection: {k:?}"
        );
    }
    out
}

/// `wiretape sessions ARGS --json`: the rows.
fn sessions_json(args: &[&str]) -> Vec<Value> {
    let o = Command::new(bin())
        .arg("sessions")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// DuckDB (its Python package) over the store's tables: `select` of
/// session_id and file, as a sorted list.
fn duckdb(dir: &Path, wher: &str) -> Vec<(u64, String)> {
    let all = dir.join("*.sessions.parquet");
    let got = duck(
        &all,
        &format!("select session_id, file from TABLE where {wher}"),
    );
    let mut v: Vec<(u64, String)> = serde_json::from_value(got).unwrap();
    v.sort();
    v
}

fn metadata(table: &Path) -> BTreeMap<String, String> {
    let script = format!(
        "import duckdb, json\nprint(json.dumps([[k.decode(), v.decode()] for k, v in duckdb.sql(\"select key, value from parquet_kv_metadata('{}')\").fetchall()]))\n",
        table.display()
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Vec<(String, String)> = serde_json::from_slice(&o.stdout).unwrap();
    v.into_iter().collect()
}

/// Checks a recorded store: every file has its table, each table equals
/// tshark's conversations of its file, connections spanning files keep
/// their id, DuckDB and `wiretape sessions --where` agree. Returns the
/// files.
fn check_store(dir: &Path) -> Vec<PathBuf> {
    let files = pcaps(dir);
    assert!(files.len() >= 2, "the recording rotated: {files:?}");
    let mut ids: BTreeMap<Key, Vec<u64>> = BTreeMap::new();
    for f in &files {
        let table = wiretape_storage::sessions::path_for(f);
        assert!(table.exists(), "{} has a session table", f.display());
        let meta = metadata(&table);
        assert_eq!(meta["wiretape.sessions.complete"], "1", "{}", f.display());
        let rows = sessions_json(&[f.to_str().unwrap()]);
        let ours = table_conv(&rows);
        let theirs = tshark_conv(f);
        assert!(!theirs.is_empty());
        let ours_counts: BTreeMap<_, _> = ours.iter().map(|(k, v)| (k.clone(), v.1)).collect();
        assert_eq!(
            ours_counts,
            theirs,
            "{}: rows against tshark -z conv",
            f.display()
        );
        for (k, (id, _)) in ours {
            ids.entry(k).or_default().push(id);
        }
    }
    let spanning: Vec<_> = ids.iter().filter(|(_, v)| v.len() > 1).collect();
    assert!(!spanning.is_empty(), "a connection spans files");
    for (k, v) in &spanning {
        assert!(
            v.iter().all(|x| *x == v[0]),
            "{k:?}: one session_id across files: {v:?}"
        );
    }
    // DuckDB and `wiretape sessions --where` agree.
    let d = dir.to_str().unwrap();
    for (sql, wher, n) in [
        ("tls_sni like '%example.com'", "tls_sni ~ '*example.com'", 1),
        (
            "tls_sni like '%evil%' and server_port = 8443",
            "tls_sni ~ evil and server_port = 8443",
            1,
        ),
        (
            "http_host = 'www.example.com'",
            "http_host = www.example.com",
            1,
        ),
        (
            "dns_query like 'host%' and client_port >= 53004",
            "dns_query ~ 'host*' and client_port >= 53004",
            4,
        ),
        (
            "list_contains(dns_answers, 'fd00::1bb')",
            "dns_answers = fd00::1bb",
            1,
        ),
    ] {
        let want = duckdb(dir, sql);
        let mut got: Vec<(u64, String)> = sessions_json(&[d, "--where", wher])
            .iter()
            .map(|r| {
                (
                    r["session_id"].as_u64().unwrap(),
                    r["file"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, want, "--where {wher} against DuckDB's {sql}");
        let distinct: std::collections::BTreeSet<_> = got.iter().map(|x| x.0).collect();
        assert_eq!(distinct.len(), n, "{wher}: {got:?}");
    }
    files
}

fn trace(dir: &Path) -> PathBuf {
    trace_at(dir, "mix.pcap", 1_764_000_000_000_000_000)
}

/// The mix from `t0`, written as `dir/name`.
fn trace_at(dir: &Path, name: &str, t0: u64) -> PathBuf {
    // The second half 10 s after the first: `--rotate-time 5s` cuts there.
    let (a, b) = mix();
    let na = a.len();
    let frames: Vec<(u64, Vec<u8>)> = a
        .into_iter()
        .chain(b)
        .enumerate()
        .map(|(i, f)| {
            let gap = if i >= na { 10_000_000_000 } else { 0 };
            (t0 + gap + i as u64 * 1_000_000, f)
        })
        .collect();
    let p = dir.join(name);
    std::fs::write(&p, synth::pcap(&frames)).unwrap();
    p
}

#[test]
fn record_r_writes_tables_tshark_and_duckdb_agree_and_index_writes_the_same() {
    let tmp = TempDir::new("sess-file");
    let tr = trace(tmp.path());
    let dir = tmp.path().join("store");
    // Two files: the TLS and HTTP connections span them.
    record_file(&tr, &dir, &["--rotate-time", "5s"]);
    let files = check_store(&dir);
    // Without tables (--no-sessions), `wiretape index` writes the same ones.
    let bare = tmp.path().join("bare");
    record_file(&tr, &bare, &["--rotate-time", "5s", "--no-sessions"]);
    let bare_files = pcaps(&bare);
    assert_eq!(bare_files.len(), files.len());
    for f in &bare_files {
        assert!(
            !wiretape_storage::sessions::path_for(f).exists(),
            "--no-sessions: no table"
        );
    }
    let (code, _, err) = run_wiretape(None, &["index", bare.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for (f, g) in files.iter().zip(&bare_files) {
        let strip = |mut v: Vec<Value>| {
            for r in &mut v {
                r.as_object_mut().unwrap().remove("file");
            }
            v
        };
        assert_eq!(
            strip(sessions_json(&[g.to_str().unwrap()])),
            strip(sessions_json(&[f.to_str().unwrap()])),
            "index and record write the same table for {}",
            f.display()
        );
    }
    // A --where mistake names its position.
    let (code, _, err) = run_wiretape(
        None,
        &[
            "sessions",
            dir.to_str().unwrap(),
            "--where",
            "tls_sni ~ x and srv_port = 1",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("--where: at character 17: unknown field \"srv_port\""),
        "{err}"
    );
}

/// Sends `frames` from the generator end, one by one.
fn send_frames(tb: &Testbed, frames: Vec<Vec<u8>>) {
    let ns = tb.netns().to_owned();
    std::thread::spawn(move || {
        wiretape_testbed::sys::enter_netns(&ns).unwrap();
        let s = wiretape_testbed::sys::PacketSender::open(GEN_IF).unwrap();
        for f in &frames {
            s.send(f).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
    })
    .join()
    .unwrap();
}

#[test]
fn live_recording_rotated_by_sighup_writes_tables_that_tshark_agrees_with() {
    require_root();
    let tb = Testbed::create("sess", 1).unwrap();
    let out = TempDir::new("sess-live");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut r = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ],
    );
    let (a, b) = mix();
    let n = (a.len() + b.len()) as u64;
    send_frames(&tb, a);
    std::thread::sleep(Duration::from_millis(300));
    r.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(500));
    send_frames(&tb, b);
    std::thread::sleep(Duration::from_millis(300));
    r.signal(libc::SIGINT);
    assert!(r.wait(30).success(), "{}", r.stderr_text());
    let s = read_json(&json);
    assert_eq!(s["packets_written"].as_u64(), Some(n), "{s}");
    assert_eq!(s["sessions_skipped"].as_u64(), Some(0));
    assert_eq!(s["sessions"]["tables"].as_u64(), Some(2), "{s}");
    check_store(&dir);
}

#[test]
fn a_starved_session_thread_loses_no_frame_and_marks_its_tables_incomplete() {
    require_root();
    let tb = Testbed::create("sstv", 1).unwrap();
    let out = TempDir::new("sess-starve");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let bin = bin();
    let mut c = tb.command(bin.to_str().unwrap());
    // 64 KiB blocks, the session thread asleep 300 ms before each: its
    // 8 buffers fill within the first blocks, the rest are skipped.
    c.env("WIRETAPE_FAULT_SESSIONS_STALL_MS", "300").args([
        "record",
        "-i",
        wiretape_testbed::CAP_IF,
        "-w",
        dir.to_str().unwrap(),
        "--block-kib",
        "64",
        "--metrics",
        "127.0.0.1:0",
        "--summary-json",
        json.to_str().unwrap(),
        "-q",
    ]);
    let mut r = Recorder::started(Recorder::spawn_command(c));
    let url = r
        .stderr
        .iter()
        .find_map(|l| l.strip_prefix("wiretape: metrics on "))
        .expect("the metrics address is printed")
        .to_string();
    let n = 20_000;
    let sent = tb
        .send(0..n, wiretape_testbed::SizeFn::Fixed(200), 64, None)
        .unwrap();
    assert_eq!(sent.sent, n);
    // While recording: `ctl status` and /metrics (read by the Prometheus
    // project's parser) say the same frames skipped; once the rotated
    // file's table is written, one incomplete table.
    let d = dir.to_str().unwrap();
    let status = || -> Value {
        let (code, o, e) = run_wiretape(Some(&tb), &["ctl", "-w", d, "status"]);
        assert_eq!(code, 0, "ctl status: {e}");
        serde_json::from_str(&o).unwrap()
    };
    let metrics = || -> BTreeMap<String, f64> {
        let o = tb
            .command("python3")
            .args(["-c", PROM, &url])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "prometheus_client (scripts/setup.sh): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let settle = |want_tables: u64| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let (st, m) = (status(), metrics());
            // Until the storage's first report the families are absent
            // (and the status has no `sessions` object): not settled yet.
            let skipped = st["sessions_skipped"].as_u64().unwrap_or(0);
            let same = m.get("wiretape_sessions_skipped_frames_total") == Some(&(skipped as f64))
                && m.get("wiretape_sessions_tables_total").copied()
                    == st["sessions"]["tables"].as_f64()
                && m.get("wiretape_sessions_tables_incomplete_total").copied()
                    == st["sessions"]["incomplete"].as_f64();
            if same && skipped > 0 && st["sessions"]["tables"].as_u64() == Some(want_tables) {
                return (st, m);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "ctl status and /metrics: {st} {m:?}"
            );
        }
    };
    let (live, _) = settle(0);
    assert_eq!(live["sessions"]["incomplete"].as_u64(), Some(0), "{live}");
    // A rotation (it takes effect with the next frames): the first file's
    // table is written, incomplete.
    r.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    let more = tb
        .send(n..n + 100, wiretape_testbed::SizeFn::Fixed(200), 64, None)
        .unwrap();
    assert_eq!(more.sent, 100);
    let (rotated, m) = settle(1);
    assert_eq!(
        rotated["sessions"]["incomplete"].as_u64(),
        Some(1),
        "{rotated}"
    );
    assert_eq!(m["wiretape_sessions_tables_incomplete_total"], 1.0);
    let live_skipped = rotated["sessions_skipped"].as_u64().unwrap();
    r.signal(libc::SIGINT);
    assert!(r.wait(60).success(), "{}", r.stderr_text());
    let s = read_json(&json);
    assert_identity(&s);
    let all = n + 100;
    let v = verify_dir(&dir, all, 262_144, 0, u64::MAX);
    assert_eq!(v.frames, all, "no frame lost");
    assert_eq!(v.original_bytes, sent.bytes + more.bytes, "no byte lost");
    assert_eq!(s["packets_written"].as_u64(), Some(all));
    let total_skipped = s["sessions_skipped"].as_u64().unwrap();
    assert!(total_skipped >= live_skipped && total_skipped < all, "{s}");
    assert_eq!(
        s["sessions"]["skipped_frames"].as_u64(),
        Some(total_skipped)
    );
    assert_eq!(s["sessions"]["tables"].as_u64(), Some(2), "{s}");
    assert!(s["sessions"]["incomplete"].as_u64() >= Some(1), "{s}");
    // The first file's table: its frames read or counted as skipped.
    let f = &pcaps(&dir)[0];
    let meta = metadata(&wiretape_storage::sessions::path_for(f));
    assert_eq!(meta["wiretape.sessions.complete"], "0");
    let skipped: u64 = meta["wiretape.sessions.skipped"].parse().unwrap();
    assert!(
        skipped > 0 && skipped <= live_skipped,
        "{skipped} {live_skipped}"
    );
    let read: u64 = meta["wiretape.sessions.frames"].parse().unwrap();
    assert_eq!(read + skipped, n, "every frame read or counted as skipped");
}

/// `wiretape certs init` (server name 127.0.0.1) and a client, alice:
/// the client's flags.
fn certs(dir: &Path) -> Vec<String> {
    let d = dir.to_str().unwrap();
    let (code, _, e) = run_wiretape(None, &["certs", "init", d, "--server-name", "127.0.0.1"]);
    assert_eq!(code, 0, "{e}");
    let (code, _, e) = run_wiretape(None, &["certs", "client", d, "alice"]);
    assert_eq!(code, 0, "{e}");
    let c = |f: &str| dir.join(f).to_str().unwrap().to_string();
    vec![
        "--cert".into(),
        c("client-alice.pem"),
        "--key".into(),
        c("client-alice.key"),
        "--ca".into(),
        c("ca.pem"),
    ]
}

/// A sensor `node` over `store` with mutual TLS (the certificates of
/// `certs`).
fn sensor(store: &Path, certs: &Path, node: &str) -> Api {
    let c = |f: &str| certs.join(f).to_str().unwrap().to_string();
    Api::start(&[
        "-w",
        store.to_str().unwrap(),
        "--node",
        node,
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        &c("server.pem"),
        "--tls-key",
        &c("server.key"),
        "--client-ca",
        &c("ca.pem"),
    ])
}

/// curl with alice's certificate: (status, headers and body).
fn curl(certs: &Path, url: &str) -> (u32, String, Vec<u8>) {
    let c = |f: &str| certs.join(f).to_str().unwrap().to_string();
    let tmp = certs.join("head.txt");
    let o = Command::new("curl")
        .args(["-s", "-g", "-o", "-", "-D"])
        .arg(&tmp)
        .args(["-w", "\n%{http_code}", "--cacert"])
        .arg(c("ca.pem"))
        .arg("--cert")
        .arg(c("client-alice.pem"))
        .arg("--key")
        .arg(c("client-alice.key"))
        .arg(url)
        .output()
        .expect("curl (scripts/setup.sh)");
    let mut out = o.stdout;
    let nl = out.iter().rposition(|&b| b == b'\n').unwrap();
    let code = String::from_utf8_lossy(&out[nl + 1..])
        .trim()
        .parse()
        .unwrap();
    out.truncate(nl);
    (code, std::fs::read_to_string(&tmp).unwrap_or_default(), out)
}

/// JSON lines, parsed.
fn lines(b: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(b)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// DuckDB over one Parquet file (or a glob): `sql` with `TABLE` standing
/// for it.
fn duck(file: &Path, sql: &str) -> Value {
    let sql = sql.replace("TABLE", &format!("'{}'", file.display()));
    let script = format!(
        "import duckdb, json\nprint(json.dumps(duckdb.sql(\"\"\"{sql}\"\"\").fetchall(), default=str))\n"
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "DuckDB (pip package duckdb, scripts/setup.sh): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The tcpdump expression of connections (`(proto, (a, port), (b, port))`):
/// both addresses, both ports, the protocol.
fn five_tuples(conns: &[Key]) -> String {
    conns
        .iter()
        .map(|(p, (a, x), (b, y))| {
            let proto = if *p == 6 { "tcp" } else { "udp" };
            format!("({proto} and host {a} and host {b} and port {x} and port {y})")
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The connections of rows, as keys.
fn conns_of(rows: &[Value]) -> Vec<Key> {
    let mut v: Vec<Key> = rows
        .iter()
        .map(|r| {
            let ep = |ip: &str, port: &str| {
                (
                    r[ip].as_str().unwrap().to_string(),
                    r[port].as_u64().unwrap() as u16,
                )
            };
            key(
                r["proto"].as_u64().unwrap() as u8,
                ep("client_ip", "client_port"),
                ep("server_ip", "server_port"),
            )
            .0
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// `extract ARGS -w OUT`: the frames written (as tcpdump writes records).
fn extract_frames(args: &[&str], out: &Path) -> Vec<Record> {
    let mut a = vec!["extract"];
    a.extend(args);
    a.extend(["-w", out.to_str().unwrap(), "-q"]);
    let (code, _, e) = run_wiretape(None, &a);
    assert_eq!(code, 0, "extract {args:?}: {e}");
    read_all(out)
}

#[test]
fn sessions_from_sensors_as_parquet_and_their_frames_by_session_where() {
    let tmp = TempDir::new("sess-api");
    // Two stores (two sensors): the mix, and the mix an hour later.
    let t1 = 1_764_000_000_000_000_000u64;
    let t2 = t1 + 3_600_000_000_000;
    let (s1, s2) = (tmp.path().join("s1"), tmp.path().join("s2"));
    let tr1 = trace_at(tmp.path(), "one.pcap", t1);
    let tr2 = trace_at(tmp.path(), "two.pcap", t2);
    record_file(&tr1, &s1, &["--rotate-time", "5s"]);
    record_file(&tr2, &s2, &["--rotate-time", "5s"]);
    let cd = tmp.path().join("certs");
    let cargs = certs(&cd);
    let ca: Vec<&str> = cargs.iter().map(String::as_str).collect();
    let (a1, a2) = (sensor(&s1, &cd, "sensor1"), sensor(&s2, &cd, "sensor2"));
    let (d1, d2) = (s1.to_str().unwrap(), s2.to_str().unwrap());

    // /v1/sessions answers the rows of `sessions --json`, with `where`.
    let wher = "dns_query ~ 'host*' and client_port >= 53004";
    let enc: String = wher
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let q = format!("{}/v1/sessions?where={enc}", a1.url);
    let (code, head, body) = curl(&cd, &q);
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let head = head.to_ascii_lowercase();
    assert!(
        head.contains("content-type: application/x-ndjson"),
        "{head}"
    );
    assert!(head.contains("wiretape-tables: 2"), "{head}");
    assert!(head.contains("wiretape-tables-incomplete: 0"), "{head}");
    let api_rows = lines(&body);
    assert_eq!(api_rows.len(), 4, "{api_rows:?}");
    assert_eq!(api_rows, sessions_json(&[d1, "--where", wher]));
    assert!(!head.contains("wiretape-sessions-cut"), "{head}");
    // `limit`: the first rows by first frame, and a header saying the
    // answer was cut; as many as matched: no such header.
    let (code, head, body) = curl(&cd, &format!("{q}&limit=1"));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(lines(&body), api_rows[..1]);
    assert!(
        head.to_ascii_lowercase()
            .contains("wiretape-sessions-cut: 1"),
        "{head}"
    );
    let (code, head, body) = curl(&cd, &format!("{q}&limit=4"));
    assert_eq!(code, 200);
    assert_eq!(lines(&body), api_rows);
    assert!(!head.to_ascii_lowercase().contains("wiretape-sessions-cut"));
    for bad in ["0", "100001", "x"] {
        let (code, _, body) = curl(&cd, &format!("{q}&limit={bad}"));
        assert_eq!(code, 400, "limit={bad}");
        let e = String::from_utf8_lossy(&body);
        assert!(e.contains("parameter 'limit'"), "{e}");
    }
    // A bad expression: 400 naming the parameter and the position.
    let (code, _, body) = curl(&cd, &format!("{}/v1/sessions?where=srv_port+%3D+1", a1.url));
    assert_eq!(code, 400);
    let e = String::from_utf8_lossy(&body);
    assert!(
        e.contains("parameter 'where': at character 1: unknown field"),
        "{e}"
    );

    // `sessions https://S1 https://S2` merges the sensors: the same rows
    // as both stores read locally.
    let mut args = vec![a1.url.as_str(), a2.url.as_str()];
    args.extend(&ca);
    let remote_all = sessions_json(&args);
    let local_all = sessions_json(&[d1, d2]);
    assert!(local_all.len() >= 22, "{}", local_all.len());
    assert_eq!(remote_all, local_all, "two sensors merged = both stores");
    let mut args = vec![a1.url.as_str(), d2, "--where", "proto = 6"];
    args.extend(&ca);
    let mixed = sessions_json(&args);
    assert_eq!(mixed, sessions_json(&[d1, d2, "--where", "proto = 6"]));
    assert_eq!(conns_of(&mixed).len(), 3, "3 TCP connections");

    // --parquet: one file, the table's columns; DuckDB reads the rows.
    let out = tmp.path().join("fleet.parquet");
    let mut args = vec!["sessions", a1.url.as_str(), a2.url.as_str(), "--parquet"];
    args.push(out.to_str().unwrap());
    args.extend(&ca);
    let (code, _, e) = run_wiretape(None, &args);
    assert_eq!(code, 0, "{e}");
    let cols = |f: &Path| {
        duck(
            f,
            "select column_name, column_type from (describe select * from TABLE)",
        )
    };
    let one_table = wiretape_storage::sessions::path_for(&pcaps(&s1)[0]);
    assert_eq!(cols(&out), cols(&one_table), "the session table's columns");
    let got = duck(
        &out,
        "select session_id, file, client_bytes, tls_sni from TABLE order by first_ns, session_id, file",
    );
    let want: Vec<Value> = local_all
        .iter()
        .map(|r| serde_json::json!([r["session_id"], r["file"], r["client_bytes"], r["tls_sni"]]))
        .collect();
    assert_eq!(
        got,
        Value::from(want),
        "DuckDB reads the rows of sessions --json"
    );
    let n = duck(
        &out,
        "select count(*) from TABLE where tls_sni like '%example.com'",
    );
    assert_eq!(
        n,
        serde_json::json!([[4]]),
        "2 rows (spanning 2 files) per sensor"
    );

    // index --parquet gathers the fleet's session tables too: one file in
    // sessions/ beside the block index, a node column first.
    let idx = tmp.path().join("idx").join("fleet.parquet");
    std::fs::create_dir(tmp.path().join("idx")).unwrap();
    let mut args = vec!["index", "-q", "--parquet", idx.to_str().unwrap(), d1];
    args.extend([a2.url.as_str()]);
    args.extend(&ca);
    let (code, _, e) = run_wiretape(None, &args);
    assert_eq!(code, 0, "{e}");
    let fleet = tmp
        .path()
        .join("idx")
        .join("sessions")
        .join("fleet.parquet");
    let mut want_cols = cols(&one_table).as_array().unwrap().clone();
    want_cols.insert(0, serde_json::json!(["node", "VARCHAR"]));
    assert_eq!(cols(&fleet), Value::from(want_cols));
    let host = wiretape::query::fleet::hostname();
    let got = duck(
        &fleet,
        "select node, session_id, file from TABLE order by node, first_ns, session_id, file",
    );
    let mut want: Vec<Value> = sessions_json(&[d1])
        .iter()
        .map(|r| serde_json::json!([host, r["session_id"], r["file"]]))
        .collect();
    want.extend(
        sessions_json(&[d2])
            .iter()
            .map(|r| serde_json::json!(["sensor2", r["session_id"], r["file"]])),
    );
    want.sort_by_key(|v| v[0].as_str().unwrap().to_string());
    assert_eq!(
        got,
        Value::from(want),
        "the fleet's sessions, each under its node"
    );
    // The block index's glob does not take the sessions.
    let n = duck(&idx, "select count(distinct node) from TABLE");
    assert_eq!(n, serde_json::json!([[2]]));

    // extract --session-where: exactly the frames of the chosen
    // connections, against tcpdump with their 5-tuples.
    let merged = tmp.path().join("both.pcap");
    mergecap(&[tr1.clone(), tr2.clone()], &merged);
    for wher in [
        "tls_sni ~ '*example.com'",
        "dns_query ~ 'host*' and client_port >= 53004",
        "proto = 6",
    ] {
        let rows = sessions_json(&[d1, d2, "--where", wher]);
        let conns = conns_of(&rows);
        assert!(!conns.is_empty(), "{wher}");
        let want = tcpdump_select(&merged, &five_tuples(&conns), tmp.path());
        let wbytes: usize = want.iter().map(|r| r.data.len()).sum();
        // A local store, both local stores, two sensors, a sensor and a store.
        let one = extract_frames(&[d1, "--session-where", wher], &tmp.path().join("x1.pcap"));
        let want1: Vec<_> = want.iter().filter(|r| r.ts_ns < t2).cloned().collect();
        assert_eq!(one.len(), want1.len(), "{wher}: one store");
        assert!(one == want1, "{wher}: one store, frame by frame");
        let both = extract_frames(
            &[d1, d2, "--session-where", wher],
            &tmp.path().join("x2.pcap"),
        );
        assert_eq!(both.len(), want.len(), "{wher}");
        assert_eq!(
            both.iter().map(|r| r.data.len()).sum::<usize>(),
            wbytes,
            "{wher}"
        );
        assert!(both == want, "{wher}: two stores, frame by frame");
        let mut a = vec![a1.url.as_str(), a2.url.as_str(), "--session-where", wher];
        a.extend(&ca);
        let sensors = extract_frames(&a, &tmp.path().join("x3.pcap"));
        assert_eq!(sensors.len(), want.len(), "{wher}: two sensors");
        assert!(sensors == want, "{wher}: two sensors, frame by frame");
        let mut a = vec![a1.url.as_str(), d2, "--session-where", wher];
        a.extend(&ca);
        let mixed = extract_frames(&a, &tmp.path().join("x4.pcap"));
        assert!(mixed == want, "{wher}: a sensor and a store");
    }
    // With a filter too: the frames both keep; a window cuts the sessions.
    let wher = "proto = 6";
    let conns = conns_of(&sessions_json(&[d1, "--where", wher]));
    let want = tcpdump_select(
        &tr1,
        &format!("({}) and port 443", five_tuples(&conns)),
        tmp.path(),
    );
    assert!(!want.is_empty());
    let got = extract_frames(
        &[d1, "--session-where", wher, "port", "443"],
        &tmp.path().join("x5.pcap"),
    );
    assert!(got == want, "session-where and a filter");
    // --count-only --json says what was chosen.
    let (code, o, e) = run_wiretape(
        None,
        &[
            "extract",
            d1,
            "--session-where",
            wher,
            "--count-only",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{e}");
    let j: Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["sessions"]["connections"], 3, "{j}");
    assert_eq!(j["sessions"]["matched"], 3, "{j}");
    let all = tcpdump_select(&tr1, &five_tuples(&conns), tmp.path());
    assert_eq!(j["frames"].as_u64(), Some(all.len() as u64));
    // A mistake is a usage error naming its position; nothing is written.
    let (code, _, e) = run_wiretape(
        None,
        &[
            "extract",
            d1,
            "--session-where",
            "tls_sni ~ x or proto = 6",
            "--count-only",
        ],
    );
    assert_eq!(code, 2);
    assert!(
        e.contains("--session-where: at character 13: 'and' expected"),
        "{e}"
    );
}

/// A resolver reusing its source port to one server asks three names on
/// one UDP connection: its row holds every question (`dns_queries`, the
/// first also as `dns_query`), `--where dns_queries ~ ...` finds it by
/// any. A table written before those columns existed (the same rows
/// without them, as DuckDB copies them) beside a new one: `sessions`
/// reads both (the old row's `dns_queries` is its `dns_query`), and
/// DuckDB reads both with `union_by_name` (the old rows' `dns_queries`
/// NULL); without it a query naming only columns both have still reads
/// the mix.
#[test]
fn every_question_of_a_reused_resolver_port_in_new_and_old_tables() {
    let tmp = TempDir::new("sessq");
    let (c, s) = ((v4(10), 5301), (v4(53), 53));
    let names = ["first.example", "second.example", "third.example"];
    let mut frames = Vec::new();
    for (i, n) in names.iter().chain(&names[..1]).enumerate() {
        let id = i as u16;
        let addr = synth::Answer::Addr(v4(100 + i as u8));
        frames.push(synth::udp(None, c, s, &synth::dns_query(id, n, 1)));
        frames.push(synth::udp(
            None,
            s,
            c,
            &synth::dns_response(id, n, 1, &[addr]),
        ));
    }
    let t0 = 1_764_000_000_000_000_000u64;
    let frames: Vec<(u64, Vec<u8>)> = frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| (t0 + i as u64 * 1_000_000, f))
        .collect();
    let (new, old) = (tmp.path().join("new.pcap"), tmp.path().join("old.pcap"));
    for p in [&new, &old] {
        std::fs::write(p, synth::pcap(&frames)).unwrap();
        let (code, _, e) = run_wiretape(None, &["index", "-q", p.to_str().unwrap()]);
        assert_eq!(code, 0, "{e}");
    }
    let old_table = tmp.path().join("old.pcap.sessions.parquet");
    let copy = tmp.path().join("old.copy");
    let script = format!(
        "import duckdb\nduckdb.sql(\"copy (select * exclude (dns_queries, dns_queries_cut) \
         from '{}') to '{}' (format parquet, compression uncompressed)\")\n",
        old_table.display(),
        copy.display()
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::rename(&copy, &old_table).unwrap();

    let (n, o) = (new.to_str().unwrap(), old.to_str().unwrap());
    let rows = sessions_json(&[n, "--where", "dns_queries ~ second"]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["dns_query"], "first.example");
    assert_eq!(rows[0]["dns_queries"], serde_json::json!(names));
    assert_eq!(rows[0]["dns_queries_cut"], 0);
    assert_eq!(rows[0]["client_packets"], 4);
    // The mix: the old table's row is found by its first question only.
    let file_of = |rows: &[Value]| -> Vec<String> {
        let mut v: Vec<String> = rows
            .iter()
            .map(|r| r["file"].as_str().unwrap().into())
            .collect();
        v.sort();
        v
    };
    let both = sessions_json(&[n, o, "--where", "dns_queries ~ first"]);
    assert_eq!(file_of(&both), ["new.pcap", "old.pcap"]);
    let old_row = both.iter().find(|r| r["file"] == "old.pcap").unwrap();
    assert_eq!(old_row["dns_queries"], serde_json::json!(["first.example"]));
    let third = sessions_json(&[n, o, "--where", "dns_queries ~ third"]);
    assert_eq!(file_of(&third), ["new.pcap"]);
    // DuckDB over the same mix.
    let glob = tmp.path().join("*.sessions.parquet");
    let got = duck(
        &glob,
        "select file, dns_queries from read_parquet(TABLE, union_by_name = true) \
         where list_contains(dns_queries, 'third.example')",
    );
    assert_eq!(got, serde_json::json!([["new.pcap", names]]));
    let got = duck(
        &glob,
        "select file, dns_queries is null from read_parquet(TABLE, union_by_name = true) \
         where dns_query = 'first.example' order by file",
    );
    assert_eq!(
        got,
        serde_json::json!([["new.pcap", false], ["old.pcap", true]])
    );
    let got = duck(
        &glob,
        "select file from TABLE where dns_query = 'first.example' order by file",
    );
    assert_eq!(got, serde_json::json!([["new.pcap"], ["old.pcap"]]));
}
