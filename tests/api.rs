//! `wiretape api` and its clients, with real parts: three servers (rustls,
//! mutual TLS) over three stores recorded by the file engine, asked by
//! `wiretape extract https://...`, curl, Python's ssl, tshark and DuckDB.
//!
//! * remote extract over the three sensors = local extract over the three
//!   stores, byte for byte, for many filters and windows (edges on frames,
//!   1 ns beside, open ends, empty), in pcap and pcapng; curl on each sensor
//!   = local extract of its store; `/v1/count`, `/v1/plan`, `/v1/status`
//!   against the local commands; the 5-tuple form against its translation;
//!   `curl | tshark -r -` reads every frame; DuckDB reads
//!   `/v1/index.parquet` and `index --parquet` over the sensors;
//! * refusals: no client certificate, another CA's, an expired one, a name
//!   not in `--allow-client`; every 400; 404, 405, 431 (JSON); 503 with
//!   `--max-queries`; a sensor that is down (the others' frames written,
//!   exit 1);
//! * every TLS mistake said with its cause and fix on the side that sees
//!   it: an expired client certificate (with the date), one not yet valid,
//!   another CA's (both CA names), the sensor's of another CA, a name the
//!   sensor's certificate lacks, a server certificate as client's, http://
//!   to TLS and https:// to plain, no certificate, a missing --cert, --key,
//!   --ca or --tls-*; `certs --days 0` refused; an expired server
//!   certificate refused at start;
//! * nothing a client sends reaches the log or an answer raw: an escape
//!   sequence and a NUL escaped, a 15 KB filter cut with its length, a
//!   head over 16 KiB and an unparsable request answered in JSON and
//!   logged like every refusal;
//! * bounds: a client killed mid-download stops the server's reads (its
//!   /proc/PID/io); 200 idle connections while a query is answered;
//! * root: a non-loopback listen without TLS (an address of a veth in a
//!   private namespace) exits 2 within a second, listening on nothing.

mod common;
#[allow(dead_code, unreachable_pub)]
#[path = "../crates/filter/tests/common/frames.rs"]
mod gen;

use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Mixed frames of the filter crate's generator, each a whole frame.
fn mixed(seed: u64, n: usize) -> Vec<(Vec<u8>, u32)> {
    let mut rng = gen::Rng::new(seed);
    let mut out = Vec::new();
    while out.len() < n {
        let f = gen::frame(&mut rng);
        if f.data.is_empty() {
            continue;
        }
        out.push((f.data, f.wire_len));
    }
    out
}

const T0_US: u64 = 1_700_000_000_000_000;

/// Three stores recorded by the file engine from three traces whose µs
/// stamps interleave (and collide: every 5th stamp of each is shared), each
/// rotated at 128 KiB in 64 KiB blocks; the third as pcapng.
fn stores(t: &TempDir) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for k in 0..3u64 {
        let dir = t.path().join(format!("store{k}"));
        let frames: Vec<_> = mixed(0xa91_0000 + k, 1200)
            .into_iter()
            .enumerate()
            .map(|(i, (f, w))| {
                let i = i as u64;
                let us = if i.is_multiple_of(5) {
                    T0_US + i * 30
                } else {
                    T0_US + i * 30 + k * 7 + 1
                };
                (f, w, us)
            })
            .collect();
        let trace = t.path().join(format!("t{k}.pcap"));
        write_us_pcap(&trace, &frames);
        let mut extra = vec!["--rotate-size", "128K", "--block-kib", "64"];
        if k == 2 {
            extra.extend(["--format", "pcapng"]);
        }
        record_file(&trace, &dir, &extra);
        assert!(pcaps(&dir).len() >= 3, "rotation made several files");
        out.push(dir);
    }
    out
}

/// `wiretape certs init` (server names 127.0.0.1, localhost) and clients
/// alice and bob.
fn certs(dir: &Path) {
    let d = dir.to_str().unwrap();
    let (code, o, e) = run_wiretape(
        None,
        &[
            "certs",
            "init",
            d,
            "--server-name",
            "127.0.0.1",
            "--server-name",
            "localhost",
        ],
    );
    assert_eq!(code, 0, "{e}");
    assert!(o.contains("wrote") && o.contains("wiretape api"), "{o}");
    for name in ["alice", "bob"] {
        let (code, _, e) = run_wiretape(None, &["certs", "client", d, name]);
        assert_eq!(code, 0, "{e}");
    }
    // Never over an existing file without --force.
    let (code, _, e) = run_wiretape(None, &["certs", "client", d, "alice"]);
    assert_eq!(code, 1);
    assert!(e.contains("--force"), "{e}");
}

/// `wiretape certs init DIR --server-name NAME...`, which must succeed:
/// its standard output.
fn init_ca(dir: &Path, names: &[&str]) -> String {
    let mut a = vec!["certs", "init", dir.to_str().unwrap()];
    for n in names {
        a.extend(["--server-name", n]);
    }
    let (code, o, e) = run_wiretape(None, &a);
    assert_eq!(code, 0, "{e}");
    o
}

fn tls_server_args(certs: &Path) -> Vec<String> {
    let c = |f: &str| certs.join(f).to_str().unwrap().to_string();
    vec![
        "--tls-cert".into(),
        c("server.pem"),
        "--tls-key".into(),
        c("server.key"),
        "--client-ca".into(),
        c("ca.pem"),
    ]
}

/// `wiretape api -w STORE --listen 127.0.0.1:0 EXTRA... --tls-cert ...`
/// with the certificates of `certs`.
fn tls_api(store: &Path, certs: &Path, extra: &[&str]) -> Api {
    let mut a: Vec<String> = vec![
        "-w".into(),
        store.to_str().unwrap().into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(tls_server_args(certs));
    Api::start(&a.iter().map(String::as_str).collect::<Vec<_>>())
}

fn client_args(certs: &Path, name: &str) -> Vec<String> {
    let c = |f: String| certs.join(f).to_str().unwrap().to_string();
    vec![
        "--cert".into(),
        c(format!("client-{name}.pem")),
        "--key".into(),
        c(format!("client-{name}.key")),
        "--ca".into(),
        c("ca.pem".into()),
    ]
}

/// curl with alice's certificate: (HTTP status, body).
fn curl(certs: &Path, url: &str, extra: &[&str]) -> (u32, Vec<u8>) {
    let c = |f: &str| certs.join(f).to_str().unwrap().to_string();
    let o = Command::new("curl")
        .args(["-s", "-g", "-o", "-", "-w", "\n%{http_code}", "--cacert"])
        .arg(c("ca.pem"))
        .arg("--cert")
        .arg(c("client-alice.pem"))
        .arg("--key")
        .arg(c("client-alice.key"))
        .args(extra)
        .arg(url)
        .output()
        .expect("curl is installed (scripts/setup.sh)");
    let mut out = o.stdout;
    let nl = out
        .iter()
        .rposition(|&b| b == b'\n')
        .expect("curl's status line");
    let code = String::from_utf8_lossy(&out[nl + 1..])
        .trim()
        .parse()
        .unwrap_or(0);
    out.truncate(nl);
    (code, out)
}

fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(b)))
}

/// The API keeps the key indexes' upper pages between queries (as
/// Stenographer's server keeps its tables' index blocks), so it reads no
/// more index bytes than a command that opens them anew: checked, then
/// set aside for the field-by-field comparison.
fn same_but_index_bytes(local: &mut Value, api: &mut Value, what: &str) {
    let ib = |j: &Value| j["index_bytes_read"].as_u64().expect("index_bytes_read");
    assert!(
        ib(api) <= ib(local),
        "{what}: the API read more index bytes ({}) than extract ({})",
        ib(api),
        ib(local)
    );
    local["index_bytes_read"] = 0.into();
    api["index_bytes_read"] = 0.into();
}

fn win_args(from: Option<u64>, to: Option<u64>) -> Vec<String> {
    let t = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let mut v = Vec::new();
    if let Some(f) = from {
        v.extend(["--from".to_string(), t(f)]);
    }
    if let Some(to) = to {
        v.extend(["--to".to_string(), t(to)]);
    }
    v
}

fn query(from: Option<u64>, to: Option<u64>, filter: &str) -> String {
    let t = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let mut q = Vec::new();
    if let Some(f) = from {
        q.push(format!("from={}", t(f)));
    }
    if let Some(to) = to {
        q.push(format!("to={}", t(to)));
    }
    if !filter.is_empty() {
        q.push(format!("filter={}", filter.replace(' ', "+")));
    }
    q.join("&")
}

/// `wiretape extract ARGS -w OUT`: (exit code, the file's bytes, stderr).
fn extract_to(args: &[String], out: &Path) -> (i32, Vec<u8>, String) {
    let mut a: Vec<&str> = vec!["extract"];
    a.extend(args.iter().map(String::as_str));
    a.extend(["-w", out.to_str().unwrap(), "-q"]);
    let (code, _, e) = run_wiretape(None, &a);
    (code, std::fs::read(out).unwrap_or_default(), e)
}

#[test]
fn three_sensors_answer_exactly_as_local_extract() {
    let t = TempDir::new("api3");
    let st = stores(&t);
    let cd = t.path().join("tls");
    certs(&cd);
    let sargs = tls_server_args(&cd);
    let apis: Vec<Api> = st
        .iter()
        .enumerate()
        .map(|(k, d)| {
            let mut a = vec![
                "-w".to_string(),
                d.to_str().unwrap().to_string(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                "--node".into(),
                format!("sensor{k}"),
            ];
            a.extend(sargs.iter().cloned());
            Api::start(&a.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    for a in &apis {
        assert!(a.url.starts_with("https://127.0.0.1:"), "{}", a.url);
    }
    let cargs = client_args(&cd, "alice");
    // Stamps of the stores' frames, for windows on and beside frames.
    let mut all: Vec<u64> = st
        .iter()
        .flat_map(|d| {
            pcaps(d)
                .into_iter()
                .flat_map(|f| read_all(&f).into_iter().map(|r| r.ts_ns))
        })
        .collect();
    all.sort();
    let n = all.len();
    let wins: Vec<(&str, Option<u64>, Option<u64>)> = vec![
        ("everything", None, None),
        ("edges on frames", Some(all[n / 3]), Some(all[2 * n / 3])),
        ("1 ns beside", Some(all[n / 5] + 1), Some(all[n / 2] - 1)),
        ("only from", Some(all[3 * n / 4]), None),
        ("only to", None, Some(all[n / 4])),
        ("empty, before everything", None, Some(all[0])),
    ];
    let exprs = [
        "",
        "tcp",
        "udp and not port 53",
        "host 10.0.0.1",
        "ip6",
        "vlan",
        "icmp or arp",
        "greater 500",
    ];
    let scratch = t.path().join("s");
    std::fs::create_dir_all(&scratch).unwrap();
    let (mut runs, mut frames) = (0, 0usize);
    for (k, expr) in exprs.iter().enumerate() {
        for (wi, (what, from, to)) in wins.iter().enumerate() {
            let fmt = if (k + wi) % 2 == 0 { "pcap" } else { "pcapng" };
            let mut common: Vec<String> = win_args(*from, *to);
            common.extend(["--format".into(), fmt.into()]);
            let fw: Vec<String> = expr.split_whitespace().map(String::from).collect();
            let mut local: Vec<String> = st.iter().map(|d| d.to_str().unwrap().into()).collect();
            local.extend(common.iter().cloned());
            local.extend(fw.iter().cloned());
            let (lc, lbytes, le) = extract_to(&local, &scratch.join(format!("l.{fmt}")));
            assert_eq!(lc, 0, "{le}");
            let mut remote: Vec<String> = apis.iter().map(|a| a.url.clone()).collect();
            remote.extend(cargs.iter().cloned());
            remote.extend(common.iter().cloned());
            remote.extend(fw.iter().cloned());
            let (rc, rbytes, re) = extract_to(&remote, &scratch.join(format!("r.{fmt}")));
            assert_eq!(rc, 0, "'{expr}' {what}: {re}");
            assert!(
                lbytes == rbytes,
                "'{expr}', {what} ({fmt}): remote extract ({} bytes) differs from local ({} bytes)",
                rbytes.len(),
                lbytes.len()
            );
            let got = read_all(&scratch.join(format!("r.{fmt}"))).len();
            frames += got;
            runs += 1;
        }
    }
    assert!(frames > 3000, "the comparisons carried frames: {frames}");
    eprintln!("{runs} remote extractions over 3 sensors equal to local ones, {frames} frames");

    // A mix: sensor 0, the local store 1, sensor 2 = the three local stores.
    let mut mix = vec![
        apis[0].url.clone(),
        st[1].to_str().unwrap().into(),
        apis[2].url.clone(),
    ];
    mix.extend(cargs.iter().cloned());
    mix.push("tcp".into());
    let (c, mb, e) = extract_to(&mix, &scratch.join("m.pcap"));
    assert_eq!(c, 0, "{e}");
    let mut local: Vec<String> = st.iter().map(|d| d.to_str().unwrap().into()).collect();
    local.push("tcp".into());
    let (_, lb, _) = extract_to(&local, &scratch.join("ml.pcap"));
    assert!(mb == lb, "local and remote inputs mixed = local extract");

    // curl on each sensor = local extract of its store (every byte from
    // the 25th on: the file header is the writer's), pcap and pcapng.
    for (k, a) in apis.iter().enumerate() {
        for (fmt, q) in [
            ("pcap", "filter=udp"),
            ("pcapng", "format=pcapng&filter=udp"),
        ] {
            let (code, body) = curl(&cd, &format!("{}/v1/extract?{q}", a.url), &[]);
            assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
            let args = vec![
                st[k].to_str().unwrap().to_string(),
                "--format".into(),
                fmt.into(),
                "udp".into(),
            ];
            let (_, lb, _) = extract_to(&args, &scratch.join(format!("c.{fmt}")));
            if fmt == "pcap" {
                assert_eq!(body[24..], lb[24..], "curl sensor {k} = local extract");
            } else {
                let p = scratch.join("curl.pcapng");
                std::fs::write(&p, &body).unwrap();
                let (a, b) = (read_all(&p), read_all(&scratch.join("c.pcapng")));
                assert_eq!(a.len(), b.len());
                assert!(a
                    .iter()
                    .zip(&b)
                    .all(|(x, y)| x.ts_ns == y.ts_ns && x.data == y.data));
            }
        }
        // Status against the store itself.
        let (code, body) = curl(&cd, &format!("{}/v1/status", a.url), &[]);
        assert_eq!(code, 200);
        let s = json(&body);
        let recs: Vec<u64> = pcaps(&st[k])
            .iter()
            .flat_map(|f| read_all(f).into_iter().map(|r| r.ts_ns))
            .collect();
        assert_eq!(s["frames"], recs.len() as u64);
        assert_eq!(s["first_ns"], *recs.iter().min().unwrap());
        assert_eq!(s["last_ns"], *recs.iter().max().unwrap());
        assert_eq!(s["files"], pcaps(&st[k]).len() as u64);
        let bytes: u64 = pcaps(&st[k])
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        assert_eq!(s["bytes"], bytes);
        assert_eq!(s["node"], format!("sensor{k}"));
        assert_eq!(s["recording"], false);
        assert!(s["free_bytes"].as_u64().unwrap() > 0);
        assert!(s["version"].is_string());
    }

    // /v1/count and /v1/plan = the local commands' JSON (but the seconds).
    let (from, to) = (Some(all[n / 4]), Some(all[3 * n / 4]));
    for expr in ["", "udp port 53", "host 10.0.0.1"] {
        let q = query(from, to, expr);
        let mut la = vec![st[1].to_str().unwrap().to_string()];
        la.extend(win_args(from, to));
        let mut cnt = la.clone();
        cnt.extend(["--count-only".into(), "--json".into()]);
        cnt.extend(expr.split_whitespace().map(String::from));
        cnt.insert(0, "extract".into());
        let (_, lo, _) = run_wiretape(None, &cnt.iter().map(String::as_str).collect::<Vec<_>>());
        let mut lj = json(lo.trim().as_bytes());
        let (code, body) = curl(&cd, &format!("{}/v1/count?{q}", apis[1].url), &[]);
        assert_eq!(code, 200);
        let mut rj = json(&body);
        lj["seconds"] = 0.into();
        rj["seconds"] = 0.into();
        same_but_index_bytes(&mut lj, &mut rj, &format!("/v1/count '{expr}'"));
        assert_eq!(lj, rj, "/v1/count '{expr}'");
        let mut pl = la.clone();
        pl.push("--plan".into());
        pl.extend(expr.split_whitespace().map(String::from));
        pl.insert(0, "extract".into());
        let (_, po, _) = run_wiretape(None, &pl.iter().map(String::as_str).collect::<Vec<_>>());
        let (code, body) = curl(&cd, &format!("{}/v1/plan?{q}", apis[1].url), &[]);
        assert_eq!(code, 200);
        let (mut lp, mut rp) = (json(po.trim().as_bytes()), json(&body));
        same_but_index_bytes(&mut lp, &mut rp, &format!("/v1/plan '{expr}'"));
        assert_eq!(lp, rp, "/v1/plan '{expr}'");
        // Summed over sensors by the client.
        let mut rc = vec!["extract".to_string()];
        rc.extend(apis.iter().map(|a| a.url.clone()));
        rc.extend(cargs.iter().cloned());
        rc.extend(win_args(from, to));
        rc.extend(["--count-only".into(), "--json".into()]);
        rc.extend(expr.split_whitespace().map(String::from));
        let (code, ro, re) = run_wiretape(None, &rc.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(code, 0, "{re}");
        let rj = json(ro.trim().as_bytes());
        let mut lc = vec!["extract".to_string()];
        lc.extend(st.iter().map(|d| d.to_str().unwrap().to_string()));
        lc.extend(win_args(from, to));
        lc.extend(["--count-only".into(), "--json".into()]);
        lc.extend(expr.split_whitespace().map(String::from));
        let (_, lo, _) = run_wiretape(None, &lc.iter().map(String::as_str).collect::<Vec<_>>());
        let lj = json(lo.trim().as_bytes());
        assert_eq!(rj["frames"], lj["frames"], "count over sensors '{expr}'");
        assert_eq!(rj["bytes"], lj["bytes"]);
        assert_eq!(rj["sensors"].as_array().unwrap().len(), 3);
    }

    // The 5-tuple form against its translation.
    let tuples = [
        (
            "src=10.0.0.1&dport=53&proto=udp",
            "host 10.0.0.1 and port 53 and udp",
        ),
        (
            "src=10.0.0.1&dst=10.0.0.2",
            "host 10.0.0.1 and host 10.0.0.2",
        ),
        ("proto=tcp&sport=80", "port 80 and tcp"),
        ("proto=6", "(ip proto 6 or ip6 proto 6)"),
        ("proto=icmp&filter=ip", "icmp and (ip)"),
    ];
    for (q, expr) in tuples {
        let (code, body) = curl(&cd, &format!("{}/v1/extract?{q}", apis[0].url), &[]);
        assert_eq!(code, 200, "{q}: {}", String::from_utf8_lossy(&body));
        let mut args = vec![st[0].to_str().unwrap().to_string()];
        args.extend(expr.split_whitespace().map(String::from));
        let (_, lb, _) = extract_to(&args, &scratch.join("tu.pcap"));
        assert_eq!(body[24..], lb[24..], "{q} = extract {expr}");
    }

    // curl | tshark -r - reads every frame.
    let (code, body) = curl(&cd, &format!("{}/v1/extract", apis[0].url), &[]);
    assert_eq!(code, 200);
    let mut ts = Command::new("tshark")
        .args(["-r", "-", "-T", "fields", "-e", "frame.number"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tshark");
    let mut stdin = ts.stdin.take().unwrap();
    let b = body.clone();
    let w = std::thread::spawn(move || stdin.write_all(&b));
    let out = ts.wait_with_output().unwrap();
    w.join().unwrap().unwrap();
    let counted = String::from_utf8_lossy(&out.stdout).lines().count();
    let p = scratch.join("all0.pcap");
    std::fs::write(&p, &body).unwrap();
    assert_eq!(counted, read_all(&p).len(), "tshark reads every frame");
    assert_eq!(counted, 1200);

    // DuckDB reads /v1/index.parquet, and index --parquet over the sensors.
    let (code, body) = curl(&cd, &format!("{}/v1/index.parquet", apis[2].url), &[]);
    assert_eq!(code, 200);
    let pq = scratch.join("s2.parquet");
    std::fs::write(&pq, &body).unwrap();
    let duck = |sql: &str| -> String {
        let o = Command::new("python3")
            .args([
                "-c",
                &format!("import duckdb; print(duckdb.sql(\"{sql}\").fetchall())"),
            ])
            .output()
            .expect("python3 with duckdb (scripts/setup.sh)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let got = duck(&format!(
        "select count(*)::BIGINT, sum(frames)::BIGINT, min(node), max(node) from '{}'",
        pq.display()
    ));
    let blocks: usize = pcaps(&st[2])
        .iter()
        .map(|f| {
            wiretape::files::index::read(&wiretape::files::index::path_for(f))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(got, format!("[({blocks}, 1200, 'sensor2', 'sensor2')]"));
    let fleet = scratch.join("fleet.parquet");
    let mut ia = vec![
        "index".to_string(),
        "-q".into(),
        "--parquet".into(),
        fleet.to_str().unwrap().into(),
    ];
    ia.extend(apis.iter().map(|a| a.url.clone()));
    ia.extend(cargs.iter().cloned());
    let (code, _, e) = run_wiretape(None, &ia.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, 0, "{e}");
    let got = duck(&format!(
        "select node, sum(frames)::BIGINT from '{}' group by node order by node",
        fleet.display()
    ));
    assert_eq!(
        got,
        "[('sensor0', 1200), ('sensor1', 1200), ('sensor2', 1200)]"
    );

    // A sensor down: named, the others' frames written, exit 1.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        format!("https://{a}")
    };
    let mut args = vec![apis[0].url.clone(), down.clone(), apis[1].url.clone()];
    args.extend(cargs.iter().cloned());
    let (code, got, e) = extract_to(&args, &scratch.join("down.pcap"));
    assert_eq!(code, 1, "{e}");
    assert!(e.contains(&down) && e.contains("cannot connect"), "{e}");
    let (_, want, _) = extract_to(
        &[
            st[0].to_str().unwrap().into(),
            st[1].to_str().unwrap().into(),
        ],
        &scratch.join("down-l.pcap"),
    );
    assert!(got == want, "the other sensors' frames are all written");
    drop(apis);
}

/// One TLS handshake and GET with Python's ssl: Ok(status) or Err(what failed).
fn python_get(url: &str, ca: &Path, cert: Option<(&Path, &Path)>) -> Result<u32, String> {
    let load = match cert {
        Some((c, k)) => format!("ctx.load_cert_chain('{}', '{}')", c.display(), k.display()),
        None => String::new(),
    };
    let hostport = url.trim_start_matches("https://");
    let (host, port) = hostport.rsplit_once(':').unwrap();
    let script = format!(
        "import ssl, http.client, sys\n\
ctx = ssl.create_default_context(cafile='{}')\n\
{load}\n\
try:\n    c = http.client.HTTPSConnection('{host}', {port}, context=ctx, timeout=10)\n    c.request('GET', '/v1/status')\n    print(c.getresponse().status)\n\
except Exception as e:\n    print('ERR', type(e).__name__, e)\n",
        ca.display()
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
    s.parse().map_err(|_| s)
}

#[test]
fn refusals_bad_requests_and_bounds() {
    let t = TempDir::new("apir");
    let st = stores(&t);
    let cd = t.path().join("tls");
    certs(&cd);
    // Another CA, and an expired client of ours.
    let other = t.path().join("other");
    init_ca(&other, &["127.0.0.1"]);
    run_wiretape(
        None,
        &["certs", "client", other.to_str().unwrap(), "mallory"],
    );
    let now = (now_ns() / 1_000_000_000) as i64;
    wiretape::query::tls::issue_client(
        &cd,
        "expired",
        wiretape::query::tls::Validity::between(now - 10 * 86400, now - 86400),
        false,
    )
    .unwrap();
    let api = tls_api(
        &st[0],
        &cd,
        &["--allow-client", "alice", "--allow-client", "expired"],
    );
    let ca = cd.join("ca.pem");
    let pair = |dir: &Path, n: &str| {
        (
            dir.join(format!("client-{n}.pem")),
            dir.join(format!("client-{n}.key")),
        )
    };
    let (ac, ak) = pair(&cd, "alice");
    assert_eq!(python_get(&api.url, &ca, Some((&ac, &ak))), Ok(200));
    // No certificate, another CA's, an expired one: no answer at all.
    for (what, cert) in [
        ("no certificate", None),
        ("another CA's", Some(pair(&other, "mallory"))),
        ("expired", Some(pair(&cd, "expired"))),
    ] {
        let r = python_get(
            &api.url,
            &ca,
            cert.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
        );
        assert!(r.is_err(), "{what}: {r:?}");
    }
    // A name not admitted: 403, never a byte of capture.
    let (bc, bk) = pair(&cd, "bob");
    assert_eq!(python_get(&api.url, &ca, Some((&bc, &bk))), Ok(403));
    let (code, o, e) = run_wiretape(
        None,
        &[
            "extract",
            &api.url,
            "--cert",
            bc.to_str().unwrap(),
            "--key",
            bk.to_str().unwrap(),
            "--ca",
            ca.to_str().unwrap(),
            "-w",
            t.path().join("bob.pcap").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{o}");
    assert!(e.contains("403") && e.contains("not admitted"), "{e}");
    let got = std::fs::metadata(t.path().join("bob.pcap")).unwrap().len();
    assert_eq!(got, 24, "a pcap header and no frame");

    // Every 400 names the parameter; 404, 405; 431 for a huge head.
    for (q, word) in [
        ("filter=port+99999", "illegal port number"),
        ("from=2&to=1", "'to'"),
        ("from=yesterday", "'from'"),
        ("frmo=1", "unknown parameter 'frmo'"),
        ("format=pcapx", "'format'"),
        ("tsprec=ms", "'tsprec'"),
        ("src=10.0.0.300", "'src'"),
        ("dport=70000", "'dport'"),
        ("proto=tcpx", "'proto'"),
    ] {
        let (code, body) = curl(&cd, &format!("{}/v1/extract?{q}", api.url), &[]);
        assert_eq!(code, 400, "{q}");
        let j = json(&body);
        assert!(j["error"].as_str().unwrap().contains(word), "{q}: {j}");
    }
    let (code, body) = curl(&cd, &format!("{}/v1/nope", api.url), &[]);
    assert_eq!(code, 404);
    assert!(json(&body)["error"].is_string());
    let (code, body) = curl(&cd, &format!("{}/v1/extract", api.url), &["-X", "POST"]);
    assert_eq!(code, 405);
    assert!(json(&body)["error"].is_string());
    let big = format!("X-Big: {}", "a".repeat(64 << 10));
    let (code, body) = curl(&cd, &format!("{}/v1/status", api.url), &["-H", &big]);
    assert_eq!(code, 431, "oversized head");
    assert!(
        json(&body)["error"]
            .as_str()
            .unwrap()
            .contains("over 16 KiB"),
        "a JSON answer like every refusal"
    );
    let (code, _) = curl(&cd, &format!("{}/v1/status", api.url), &[]);
    assert_eq!(code, 200, "and the server goes on serving");

    // Without --client-ca, or non-loopback without TLS: exit 2, at once.
    let c = |f: &str| cd.join(f).to_str().unwrap().to_string();
    let t0 = Instant::now();
    let (code, _, e) = run_wiretape(
        None,
        &[
            "api",
            "-w",
            st[0].to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &c("server.pem"),
            "--tls-key",
            &c("server.key"),
        ],
    );
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--client-ca") && e.lines().count() == 1, "{e}");
    let (code, _, e) = run_wiretape(
        None,
        &[
            "api",
            "-w",
            st[0].to_str().unwrap(),
            "--listen",
            "0.0.0.0:0",
        ],
    );
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--tls-cert") && e.contains("--client-ca"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(2));
}

/// A TLS client that asks for the whole store and reads nothing more.
struct Held(std::process::Child);
impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hold_query(url: &str, cd: &Path) -> Held {
    let hostport = url.trim_start_matches("https://");
    let (host, port) = hostport.rsplit_once(':').unwrap();
    let script = format!(
        "import ssl, socket, time\n\
ctx = ssl.create_default_context(cafile='{ca}')\n\
ctx.load_cert_chain('{c}', '{k}')\n\
s = ctx.wrap_socket(socket.create_connection(('{host}', {port})), server_hostname='{host}')\n\
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)\n\
s.sendall(b'GET /v1/extract HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n\
s.recv(100)\n\
print('held', flush=True)\n\
time.sleep(60)\n",
        ca = cd.join("ca.pem").display(),
        c = cd.join("client-alice.pem").display(),
        k = cd.join("client-alice.key").display(),
    );
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The answer's first bytes have arrived: the query holds its slot.
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held", "the held query started");
    Held(child)
}

/// Bytes a process has read (`rchar` of /proc/PID/io: every read and
/// pread, O_DIRECT ones included).
fn rchar(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A store of ~96 MiB: 64,000 frames of 1,500 bytes.
fn big_store(t: &TempDir) -> PathBuf {
    let dir = t.path().join("big");
    let trace = t.path().join("big.pcap");
    let frames: Vec<_> = (0..64_000u64)
        .map(|i| {
            let mut f = vec![(i % 251) as u8; 1500];
            f[..8].copy_from_slice(&i.to_be_bytes());
            f[12] = 0x08;
            f[13] = 0x00;
            (f, 1500u32, T0_US + i * 10)
        })
        .collect();
    write_us_pcap(&trace, &frames);
    record_file(&trace, &dir, &["--rotate-size", "16M"]);
    std::fs::remove_file(&trace).unwrap();
    dir
}

#[test]
fn a_gone_client_stops_its_query_and_idle_connections_cost_little() {
    let t = TempDir::new("apib");
    let dir = big_store(&t);
    let size: u64 = pcaps(&dir)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let cd = t.path().join("tls");
    certs(&cd);
    let api = tls_api(
        &dir,
        &cd,
        &["--max-queries", "1", "--handshake-timeout", "2"],
    );
    let pid = api.pid();
    let c = |f: &str| cd.join(f).to_str().unwrap().to_string();
    // A slow download (1 MB/s), killed after a second and a half.
    let before = rchar(pid);
    let mut dl = Command::new("curl")
        .args(["-s", "--limit-rate", "1M", "-o", "/dev/null", "--cacert"])
        .arg(c("ca.pem"))
        .args([
            "--cert",
            &c("client-alice.pem"),
            "--key",
            &c("client-alice.key"),
        ])
        .arg(format!("{}/v1/extract", api.url))
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let during = rchar(pid) - before;
    dl.kill().unwrap();
    dl.wait().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let after_kill = rchar(pid) - before;
    std::thread::sleep(Duration::from_secs(2));
    let later = rchar(pid) - before;
    eprintln!(
        "store {size} B: read {during} B during the slow download, {after_kill} B 2 s after the client was killed, {later} B 2 s later"
    );
    assert!(during > 0, "the query read");
    assert_eq!(later, after_kill, "no more reads once the client is gone");
    // The query ended (its --max-queries 1 slot is free) and says why.
    let mut api = api;
    api.proc.wait_for_line("the client went away", 5);
    let (code, _) = curl(&cd, &format!("{}/v1/count", api.url), &[]);
    assert_eq!(code, 200, "the killed client's query gave its slot back");
    assert!(
        after_kill < size / 3,
        "back-pressure: read {after_kill} of {size} B"
    );

    // 200 idle connections (TCP, no handshake) while a query is answered.
    let hostport = api.url.trim_start_matches("https://").to_string();
    let idle: Vec<std::net::TcpStream> = (0..200)
        .map(|_| std::net::TcpStream::connect(&hostport).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let rss_kb = |pid: u32| -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap()
            .trim()
            .trim_end_matches(" kB")
            .trim()
            .parse()
            .unwrap()
    };
    let rss = rss_kb(pid);
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "-",
            "--cacert",
            &c("ca.pem"),
            "--cert",
            &c("client-alice.pem"),
        ])
        .args(["--key", &c("client-alice.key")])
        .arg(format!("{}/v1/count?filter=ether+proto+0x0800", api.url))
        .output()
        .unwrap();
    let j = json(&out.stdout);
    assert_eq!(j["frames"], 64_000, "{j}");
    eprintln!("RSS with 200 idle connections: {rss} kB");
    assert!(
        rss < 200_000,
        "200 idle connections cost little memory: {rss} kB"
    );
    // The idle ones are closed by the handshake timeout (2 s here).
    std::thread::sleep(Duration::from_secs(3));
    let mut closed = 0;
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(0) => closed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => closed += 1,
            _ => {}
        }
    }
    assert_eq!(closed, 200, "idle connections time out their TLS handshake");

    // --max-queries 1: a query held by a client that does not read (the
    // channel fills, the query waits), then the next gets 503.
    let held = hold_query(&api.url, &cd);
    let (code, body) = curl(&cd, &format!("{}/v1/count", api.url), &["-D", "-"]);
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
    let text = String::from_utf8_lossy(&body).to_ascii_lowercase();
    assert!(text.contains("retry-after: 1"), "{text}");
    drop(held);
    // Its slot is free again within a few seconds (the merge notices the
    // gone client at its next check; the machine may be busy).
    let deadline = Instant::now() + Duration::from_secs(5);
    let code = loop {
        std::thread::sleep(Duration::from_millis(200));
        let (code, _) = curl(&cd, &format!("{}/v1/count", api.url), &[]);
        if code == 200 || Instant::now() > deadline {
            break code;
        }
    };
    assert_eq!(code, 200, "the held query ended when its client went away");
}

#[test]
fn a_non_loopback_address_without_tls_is_refused_before_listening() {
    require_root();
    let tb = wiretape_testbed::Testbed::create("apil", 1).unwrap();
    tb.ip(&[
        "addr",
        "add",
        "10.199.0.1/24",
        "dev",
        wiretape_testbed::CAP_IF,
    ])
    .unwrap();
    let t = TempDir::new("apil");
    std::fs::create_dir_all(t.path().join("s")).unwrap();
    let start = Instant::now();
    let (code, _, e) = run_wiretape(
        Some(&tb),
        &[
            "api",
            "-w",
            t.path().join("s").to_str().unwrap(),
            "--listen",
            "10.199.0.1:8443",
        ],
    );
    assert_eq!(code, 2, "{e}");
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(e.trim().lines().count(), 1, "one line: {e}");
    assert!(
        e.contains("10.199.0.1:8443") && e.contains("--tls-cert"),
        "{e}"
    );
    // Nothing listens there.
    let ss = tb.exec(&["ss", "-ltn"]).unwrap();
    assert!(!ss.contains("10.199.0.1:8443"), "{ss}");
}

#[test]
fn a_store_being_recorded_is_served_fresh() {
    // `record -r` paced at 2,000 frames/s for ~4 s: while it writes, the
    // API sees the recorder and frames it flushed (1 s flush interval).
    let t = TempDir::new("apiw");
    let dir = t.path().join("live");
    let trace = t.path().join("live.pcap");
    let frames: Vec<_> = mixed(0x11fe, 8000)
        .into_iter()
        .enumerate()
        .map(|(i, (f, w))| (f, w, T0_US + i as u64 * 500))
        .collect();
    write_us_pcap(&trace, &frames);
    let mut c = Command::new(bin());
    c.args([
        "record",
        "-r",
        trace.to_str().unwrap(),
        "-w",
        dir.to_str().unwrap(),
    ]);
    c.args([
        "--speed",
        "2000",
        "--summary-json",
        t.path().join("s.json").to_str().unwrap(),
    ]);
    let mut rec = Recorder::spawn_command(c);
    rec.wait_for_line("wiretape: recording", 10);
    let api = Api::start(&["-w", dir.to_str().unwrap(), "--listen", "127.0.0.1:0", "-q"]);
    std::thread::sleep(Duration::from_millis(2500));
    let get = |path: &str| -> Value {
        let o = Command::new("curl")
            .args(["-s", &format!("{}{path}", api.url)])
            .output()
            .unwrap();
        json(&o.stdout)
    };
    let s = get("/v1/status");
    assert_eq!(s["recording"], true, "{s}");
    assert!(s["files_being_written"].as_u64().unwrap() >= 1, "{s}");
    let mid = get("/v1/count");
    let n = mid["frames"].as_u64().unwrap();
    assert!(
        n > 1000 && n < 8000,
        "flushed frames served while recording: {n}"
    );
    assert!(mid["files_being_written"].as_u64().unwrap() >= 1, "{mid}");
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let done = get("/v1/count");
    assert_eq!(done["frames"], 8000, "{done}");
    let s = get("/v1/status");
    assert_eq!(s["recording"], false);
    assert_eq!(s["frames"], 8000);
}

/// `wiretape extract URL --count-only ARGS`: (exit code, stderr).
fn count_remote(url: &str, args: &[String]) -> (i32, String) {
    let mut a: Vec<&str> = vec!["extract", url, "--count-only"];
    a.extend(args.iter().map(String::as_str));
    let (code, _, e) = run_wiretape(None, &a);
    (code, e)
}

/// The subject of the first certificate of a PEM file.
fn subject(pem: &Path) -> String {
    let der = wiretape::query::tls::load_certs(pem, wiretape::query::tls::PemRole::CaCert).unwrap();
    wiretape::query::tls::explain::cert_info(&der[0])
        .unwrap()
        .subject
}

/// The UTC date of Unix seconds as the messages give it.
fn date(secs: i64) -> String {
    wiretape::query::tls::explain::utc(secs)
}

/// A store of `n` generated frames (seed `seed`), 100 µs apart, recorded
/// by the file engine under `t`.
fn small_store(t: &TempDir, seed: u64, n: usize) -> PathBuf {
    let store = t.path().join("store");
    let trace = t.path().join("t.pcap");
    let frames: Vec<_> = mixed(seed, n)
        .into_iter()
        .enumerate()
        .map(|(i, (f, w))| (f, w, T0_US + i as u64 * 100))
        .collect();
    write_us_pcap(&trace, &frames);
    record_file(&trace, &store, &[]);
    store
}

#[test]
fn every_tls_mistake_says_its_cause_and_its_fix_on_the_side_that_sees_it() {
    let t = TempDir::new("apitls");
    let store = small_store(&t, 0x7e1, 300);
    // A server certificate for 127.0.0.1 only (not localhost).
    let cd = t.path().join("tls");
    init_ca(&cd, &["127.0.0.1"]);
    run_wiretape(None, &["certs", "client", cd.to_str().unwrap(), "alice"]);
    let other = t.path().join("other");
    let o = other.to_str().unwrap();
    let out = init_ca(&other, &["127.0.0.1"]);
    assert!(out.contains("CA 'CN=wiretape CA 127.0.0.1 "), "{out}");
    run_wiretape(None, &["certs", "client", o, "mallory"]);
    // Two `certs init` CAs have names of their own: another site's
    // certificate is an unknown CA, not a bad signature.
    let (ours, theirs) = (subject(&cd.join("ca.pem")), subject(&other.join("ca.pem")));
    assert!(ours.starts_with("CN=wiretape CA 127.0.0.1 "), "{ours}");
    assert_ne!(ours, theirs);
    // --days below 1: refused, exit 2, nothing written.
    let (code, _, e) = run_wiretape(
        None,
        &[
            "certs",
            "client",
            cd.to_str().unwrap(),
            "zero",
            "--days",
            "0",
        ],
    );
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("at least 1 day"), "{e}");
    assert!(!cd.join("client-zero.pem").exists());
    // An expired client, and one not valid for another two days.
    let now = (now_ns() / 1_000_000_000) as i64;
    let (exp_end, fut_start) = (now - 86_400, now + 2 * 86_400);
    wiretape::query::tls::issue_client(
        &cd,
        "expired",
        wiretape::query::tls::Validity::between(now - 10 * 86_400, exp_end),
        false,
    )
    .unwrap();
    wiretape::query::tls::issue_client(
        &cd,
        "future",
        wiretape::query::tls::Validity::between(fut_start, now + 9 * 86_400),
        false,
    )
    .unwrap();
    let mut api = tls_api(&store, &cd, &[]);
    let plain = Api::loopback(&store, false);
    let port = api.url.rsplit_once(':').unwrap().1.to_string();
    let with = |dir: &Path, name: &str, ca: &Path| -> Vec<String> {
        let c = |f: String| dir.join(f).to_str().unwrap().to_string();
        vec![
            "--cert".into(),
            c(format!("client-{name}.pem")),
            "--key".into(),
            c(format!("client-{name}.key")),
            "--ca".into(),
            ca.to_str().unwrap().into(),
        ]
    };
    let ca = cd.join("ca.pem");
    let (code, e) = count_remote(&api.url, &with(&cd, "alice", &ca));
    assert_eq!(code, 0, "{e}");

    // (what, URL, client flags, words on the client, words in the server's log)
    type Case<'a> = (&'a str, String, Vec<String>, Vec<String>, Vec<String>);
    let cases: Vec<Case> = vec![
        (
            "expired client certificate",
            api.url.clone(),
            with(&cd, "expired", &ca),
            vec![
                "alert certificate_expired".into(),
                format!("expired on {}", date(exp_end)),
                "wiretape certs client".into(),
            ],
            vec![format!(
                "client certificate 'CN=expired' expired on {}",
                date(exp_end)
            )],
        ),
        (
            "client certificate not yet valid",
            api.url.clone(),
            with(&cd, "future", &ca),
            vec![format!("is not valid before {}", date(fut_start)), "clock".into()],
            vec![format!(
                "client certificate 'CN=future' is not valid before {}",
                date(fut_start)
            )],
        ),
        (
            "another CA's client certificate",
            api.url.clone(),
            with(&other, "mallory", &ca),
            vec![
                "alert unknown_ca".into(),
                format!("issued by '{theirs}'"),
                format!("the sensor admits certificates of '{ours}'"),
            ],
            vec![format!(
                "client certificate 'CN=mallory' was issued by '{theirs}', not by the CA of --client-ca, '{ours}'"
            )],
        ),
        (
            "the sensor's certificate of another CA",
            api.url.clone(),
            with(&cd, "alice", &other.join("ca.pem")),
            vec![
                format!("the sensor's certificate 'CN=127.0.0.1' (issued by '{ours}'"),
                format!("is not signed by --ca {}", other.join("ca.pem").display()),
                format!("'{theirs}'"),
            ],
            vec!["the client does not trust this server's certificate".into(), "alert unknown_ca".into()],
        ),
        (
            "a name the sensor's certificate lacks",
            format!("https://localhost:{port}"),
            with(&cd, "alice", &ca),
            vec![
                "is for 127.0.0.1,".into(),
                "not for 'localhost'".into(),
                format!("use https://127.0.0.1:{port}"),
            ],
            vec![],
        ),
        (
            "a server certificate as client certificate",
            api.url.clone(),
            vec![
                "--cert".into(),
                cd.join("server.pem").to_str().unwrap().into(),
                "--key".into(),
                cd.join("server.key").to_str().unwrap().into(),
                "--ca".into(),
                ca.to_str().unwrap().into(),
            ],
            vec!["alert unsupported_certificate".into(), "not a client certificate".into()],
            vec!["client certificate 'CN=127.0.0.1' is not a client certificate".into()],
        ),
        (
            "http:// to the TLS sensor",
            api.url.replace("https://", "http://"),
            vec![],
            vec![format!("this sensor speaks HTTPS: use https://127.0.0.1:{port}")],
            vec!["this sensor speaks HTTPS".into()],
        ),
    ];
    for (what, url, flags, client_words, server_words) in &cases {
        let (code, e) = count_remote(url, flags);
        assert_eq!(code, 1, "{what}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{what}: one line: {e}");
        for w in client_words {
            assert!(e.contains(w.as_str()), "{what}: '{w}' not in: {e}");
        }
        for w in server_words {
            api.proc.wait_for_line(w, 5);
        }
    }
    // The localhost case: the server saw the client's bad_certificate.
    api.proc.wait_for_line("alert bad_certificate", 5);

    // https:// to the plain server: both sides name it.
    let purl = plain.url.replace("http://", "https://");
    let (code, e) = count_remote(&purl, &with(&cd, "alice", &ca));
    assert_eq!(code, 1, "{e}");
    let pport = plain.url.rsplit_once(':').unwrap().1;
    assert!(
        e.contains("does not speak TLS") && e.contains(&format!("use http://127.0.0.1:{pport}")),
        "{e}"
    );
    let mut plain = plain;
    plain
        .proc
        .wait_for_line("a TLS handshake on this plain-HTTP server", 5);

    // curl speaking plain HTTP to the TLS port reads a JSON answer.
    let o = Command::new("curl")
        .args([
            "-s",
            &format!("{}/v1/status", api.url.replace("https://", "http://")),
        ])
        .output()
        .unwrap();
    let j = json(&o.stdout);
    assert!(
        j["error"]
            .as_str()
            .unwrap()
            .contains(&format!("use https://127.0.0.1:{port}/v1/status")),
        "{j}"
    );
    // Python's ssl without a certificate, and curl with the expired one:
    // the server's log says why.
    let r = python_get(&api.url, &ca, None);
    assert!(r.is_err(), "{r:?}");
    api.proc
        .wait_for_line("the client presented no certificate", 5);
    let (code, _) = {
        let c = |f: &str| cd.join(f).to_str().unwrap().to_string();
        let o = Command::new("curl")
            .args([
                "-s",
                "--cacert",
                &c("ca.pem"),
                "--cert",
                &c("client-expired.pem"),
            ])
            .args(["--key", &c("client-expired.key")])
            .arg(format!("{}/v1/status", api.url))
            .output()
            .unwrap();
        (o.status.code(), o.stdout)
    };
    assert_ne!(code, Some(0));
    api.proc
        .wait_for_lines("client certificate 'CN=expired' expired on", 2, 5);

    // Which of --cert, --key and --ca is missing; of the server's flags too.
    let c = |f: &str| cd.join(f).to_str().unwrap().to_string();
    let (code, e) = count_remote(
        &api.url,
        &[
            "--cert".into(),
            c("client-alice.pem"),
            "--key".into(),
            c("client-alice.key"),
        ],
    );
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--cert and --key given without --ca"), "{e}");
    let (code, e) = count_remote(&api.url, &["--ca".into(), c("ca.pem")]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--ca given without --cert and --key"), "{e}");
    let (code, _, e) = run_wiretape(
        None,
        &[
            "api",
            "-w",
            store.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--tls-key",
            &c("server.key"),
        ],
    );
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("--tls-key given without --tls-cert and --client-ca"),
        "{e}"
    );
    // An expired server certificate: refused before anything listens.
    wiretape::query::tls::issue_server(
        &other,
        &["127.0.0.1".to_string()],
        wiretape::query::tls::Validity::between(now - 5 * 86_400, now - 3_600),
        true,
    )
    .unwrap();
    let oc = |f: &str| other.join(f).to_str().unwrap().to_string();
    let (code, _, e) = run_wiretape(
        None,
        &[
            "api",
            "-w",
            store.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &oc("server.pem"),
            "--tls-key",
            &oc("server.key"),
            "--client-ca",
            &oc("ca.pem"),
        ],
    );
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains(&format!("expired on {}", date(now - 3_600)))
            && e.contains("wiretape certs server"),
        "{e}"
    );
}

#[test]
fn nothing_a_client_sends_reaches_a_log_or_an_answer_raw() {
    let t = TempDir::new("apiraw");
    let store = small_store(&t, 0x7e2, 200);
    // -q: answered requests are not logged, refusals are.
    let mut api = Api::loopback(&store, true);
    let get = |q: &str, extra: &[&str]| -> (u32, Vec<u8>) {
        let o = Command::new("curl")
            .args(["-s", "-g", "-o", "-", "-w", "\n%{http_code}"])
            .args(extra)
            .arg(format!("{}{q}", api.url))
            .output()
            .unwrap();
        let mut out = o.stdout;
        let nl = out.iter().rposition(|&b| b == b'\n').unwrap();
        let code = String::from_utf8_lossy(&out[nl + 1..])
            .trim()
            .parse()
            .unwrap_or(0);
        out.truncate(nl);
        (code, out)
    };
    // An escape sequence and a NUL in a filter.
    let (code, body) = get("/v1/count?filter=tcp%1b%5b31mRED%00", &[]);
    assert_eq!(code, 400);
    assert!(
        !body.iter().any(|&b| b < 0x20),
        "the answer's bytes: {body:?}"
    );
    let msg = json(&body)["error"].as_str().unwrap().to_string();
    assert!(msg.contains("'tcp\\x1b[31mRED\\x00'"), "{msg}");
    // A 15 KB filter: cut, its length said, in the answer and the log.
    let long = "x".repeat(15_000);
    let (code, body) = get(&format!("/v1/count?filter={long}"), &[]);
    assert_eq!(code, 400);
    let msg = json(&body)["error"].as_str().unwrap().to_string();
    assert!(
        msg.len() < 600 && msg.contains("(15000 bytes in all)"),
        "{} bytes: {msg:.300}",
        msg.len()
    );
    // A C1 control as a time (it made the time parser panic: the
    // connection closed without an answer, found by schemathesis).
    let (code, body) = get("/v1/count?from=%C2%80", &[]);
    assert_eq!(code, 400);
    assert!(
        json(&body)["error"]
            .as_str()
            .unwrap()
            .contains("parameter 'from'"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    // Unknown parameters and paths with controls in them.
    let (code, body) = get("/v1/count?%1b%5b2J=1", &[]);
    assert_eq!(code, 400);
    assert!(json(&body)["error"]
        .as_str()
        .unwrap()
        .contains("unknown parameter '\\x1b[2J'"));
    let (code, body) = get("/v1/x%1b%07", &[]);
    assert_eq!(code, 404);
    assert!(json(&body)["error"].is_string());
    // Stenographer's POST /query: the same in its body (a query with an
    // escape sequence and a NUL), and a body past its 64 KiB read whole
    // before the 400 (the connection stays usable: curl sends the next
    // request on it).
    let q = t.path().join("query.txt");
    std::fs::write(&q, b"host 10.0.0.1 and tcp\x1b[31mRED\x00").unwrap();
    let (code, body) = get("/query", &["--data-binary", &format!("@{}", q.display())]);
    assert_eq!(code, 400);
    assert!(
        !body.iter().any(|&b| b < 0x20),
        "the answer's bytes: {body:?}"
    );
    assert!(json(&body)["error"]
        .as_str()
        .unwrap()
        .contains("could not parse query"));
    let big = t.path().join("big.txt");
    std::fs::write(&big, vec![b'*'; 70_000]).unwrap();
    let o = Command::new("curl")
        .args(["-sv", "-o", "/dev/null", "-w", "%{http_code}\n"])
        .args(["-H", "Steno-Limit-Bytes: x", "--data-binary"])
        .arg(format!("@{}", big.display()))
        .arg(format!("{}/query", api.url))
        .args(["--next", "-s", "-o", "/dev/null", "-w", "%{http_code}\n"])
        .args(["--data-binary", "tcp"])
        .arg(format!("{}/query", api.url))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "400\n200\n", "{err}");
    assert!(err.contains("Re-using existing connection"), "{err}");
    // A head over 16 KiB: 431 in JSON; an unparsable request: 400 in JSON.
    let big = format!("X-Big: {}", "a".repeat(20_000));
    let (code, body) = get("/v1/status", &["-H", &big]);
    assert_eq!(code, 431);
    assert!(
        json(&body)["error"]
            .as_str()
            .unwrap()
            .contains("over 16 KiB"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let mut s = std::net::TcpStream::connect(api.url.trim_start_matches("http://")).unwrap();
    s.write_all(b"GET /v1/status HTTP/1.1\r\nHost: a\r\nBad Header\x1b\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    assert!(text.contains("content-type: application/json"), "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    assert!(json(body.as_bytes())["error"].is_string(), "{text}");
    // A method of 100 letters: 405, cut.
    let (code, body) = get("/v1/status", &["-X", &"X".repeat(100)]);
    assert_eq!(code, 405);
    assert!(json(&body)["error"].as_str().unwrap().len() < 200);
    // An answered request is not logged under -q.
    let (code, _) = get("/v1/status", &[]);
    assert_eq!(code, 200);

    // Every refusal has its line; no line holds a control character or
    // runs past 2,000 characters plus its prefix.
    api.proc.wait_for_lines("-> 4", 10, 10);
    let log = api.proc.drain(Duration::from_millis(300));
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("-> ")).collect();
    for want in ["-> 400", "-> 404", "-> 405", "-> 431"] {
        assert!(
            lines.iter().any(|l| l.contains(want)),
            "{want}: {log:.2000}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains("(request unread) -> 400")),
        "the unparsable request: {log:.2000}"
    );
    assert!(!lines.iter().any(|l| l.contains("-> 200")), "{log:.2000}");
    for l in log.lines() {
        assert!(
            !l.chars().any(|c| c.is_control()),
            "a control character: {l:?}"
        );
        assert!(
            l.chars().count() < 2100,
            "{} characters: {l:.200}",
            l.chars().count()
        );
    }
    let esc: Vec<&&str> = lines.iter().filter(|l| l.contains("RED")).collect();
    assert_eq!(esc.len(), 2, "{esc:?}");
    for l in esc {
        assert!(l.contains("tcp\\x1b[31mRED\\x00"), "{l}");
    }
    let cut = lines.iter().find(|l| l.contains("xxxxxxxx")).unwrap();
    assert!(
        cut.contains("(15000 bytes in all)") && cut.len() < 1000,
        "{} bytes: {cut:.300}",
        cut.len()
    );
}

/// The manual: README.md and the chapters in docs/.
fn manual() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(root.join("README.md")).unwrap();
    if let Ok(rd) = std::fs::read_dir(root.join("docs")) {
        for e in rd.flatten() {
            if e.path().extension().is_some_and(|x| x == "md") {
                text.push_str(&std::fs::read_to_string(e.path()).unwrap());
            }
        }
    }
    text
}

#[test]
fn help_and_manual_name_every_endpoint_and_every_status_field() {
    use wiretape::query::api::spec;
    let (code, help, e) = run_wiretape(None, &["api", "--help"]);
    assert_eq!(code, 0, "{e}");
    let man = manual();
    for ep in spec::ENDPOINTS {
        // `/` as a line of its own in --help.
        let line = help.lines().find(|l| {
            let mut w = l.split_whitespace();
            match ep.method() {
                "GET" => w.next() == Some(ep.path),
                m => w.next() == Some(m) && w.next() == Some(ep.path),
            }
        });
        assert!(line.is_some(), "api --help lacks {}:\n{help}", ep.path);
        assert!(
            man.contains(&format!("`{}", ep.path)),
            "the manual lacks {}",
            ep.path
        );
    }
    for p in spec::PARAMS {
        assert!(
            help.contains(p.name),
            "api --help lacks the parameter {}",
            p.name
        );
    }
    // Every field of /v1/status is documented (frames_partial included),
    // in the manual and in the OpenAPI document.
    let t = TempDir::new("apidoc");
    let store = small_store(&t, 0x7e3, 50);
    let api = Api::loopback(&store, true);
    let get = |p: &str| -> Value {
        let o = Command::new("curl")
            .args(["-s", &format!("{}{p}", api.url)])
            .output()
            .unwrap();
        json(&o.stdout)
    };
    let status = get("/v1/status");
    let doc = get("/v1/openapi.json");
    let row = man
        .lines()
        .find(|l| l.trim_start().starts_with("| `/v1/status`"))
        .expect("the manual's /v1/status row");
    for k in status.as_object().unwrap().keys() {
        assert!(
            row.contains(&format!("`{k}`")),
            "the manual's /v1/status lacks {k}: {row}"
        );
        let d = &doc["components"]["schemas"]["Status"]["properties"][k];
        assert!(d.is_object(), "the OpenAPI Status schema lacks {k}");
    }
    assert!(
        doc["components"]["schemas"]["Status"]["properties"]["frames_partial"]["description"]
            .as_str()
            .unwrap()
            .contains("lower bound")
    );
}
