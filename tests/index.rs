//! The flow index, `wiretape index` and the Parquet fleet table, against
//! independent readers (no privileges needed):
//!
//! * a store whose traffic moves from host to host in phases (each phase
//!   a few blocks: IPv4 TCP/UDP/ICMP, IPv6, VLAN-tagged, ARP) is recorded
//!   by the file engine; for selective filters `extract` skips blocks by
//!   their flow sets, and its output still equals what tcpdump selects from
//!   the mergecap-merged files, frame for frame, and what it extracts with
//!   `--no-flow-index`;
//! * `wiretape index` rebuilds exactly the indexes that are missing, of the
//!   old format, or without flow sets, and nothing on a second run;
//! * DuckDB (its Python package) runs SQL over `wiretape index --parquet`
//!   and finds the same blocks as `extract --plan`.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::files::index;

const PHASES: u8 = 8;
const PER_PHASE: usize = 900;

fn eth(vlan: Option<u16>, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
    if let Some(v) = vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ip4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let len = (20 + l4.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&len.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(l4);
    p
}

fn ports(sport: u16, dport: u16, rest: usize) -> Vec<u8> {
    let mut l4 = sport.to_be_bytes().to_vec();
    l4.extend_from_slice(&dport.to_be_bytes());
    l4.resize(4 + rest, 0x5a);
    l4
}

/// Frame `i` of phase `p`: host 10.9.0.p talks to 10.8.0.1 on port 8000+p.
fn frame(p: u8, i: usize) -> Vec<u8> {
    let host = [10, 9, 0, p];
    let peer = [10, 8, 0, 1];
    let port = 8000 + p as u16;
    let pad = 40 + (i * 7) % 160;
    match i % 10 {
        0 => {
            let mut v6 = vec![0x60, 0, 0, 0];
            v6.extend_from_slice(&((8 + pad) as u16).to_be_bytes());
            v6.extend_from_slice(&[17, 64]);
            let mut a = [0u8; 16];
            a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
            a[15] = p;
            v6.extend_from_slice(&a);
            a[15] = 0xfe;
            v6.extend_from_slice(&a);
            v6.extend_from_slice(&ports(40000 + i as u16, port, pad));
            eth(None, 0x86dd, &v6)
        }
        1 => eth(
            Some(100 + p as u16),
            0x0800,
            &ip4(17, host, peer, &ports(5353, port, pad)),
        ),
        2 => eth(None, 0x0800, &ip4(1, host, peer, &[8, 0, 0, 0, 0, 1, 0, 1])),
        3 if i % 50 == 3 => {
            let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
            a.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
            a.extend_from_slice(&host);
            a.extend_from_slice(&[0; 6]);
            a.extend_from_slice(&peer);
            eth(None, 0x0806, &a)
        }
        4..=6 => eth(
            None,
            0x0800,
            &ip4(17, host, peer, &ports(30000 + i as u16, port, pad)),
        ),
        _ => eth(
            None,
            0x0800,
            &ip4(
                6,
                peer,
                host,
                &ports(port, 50000 + (i % 97) as u16, pad + 16),
            ),
        ),
    }
}

/// Two traces (even and odd µs stamps: no ties), recorded by the file
/// engine into one store: 64 KiB blocks, rotated at 256 KiB. The second
/// is recorded without flow sets.
fn store(t: &TempDir) -> PathBuf {
    let dir = t.path().join("store");
    let t0 = 1_750_000_000_000_000u64;
    for (k, name) in ["ta", "tb"].iter().enumerate() {
        let frames: Vec<(Vec<u8>, u32, u64)> = (0..PHASES)
            .flat_map(|p| (0..PER_PHASE).map(move |i| (p, i)))
            .enumerate()
            .map(|(n, (p, i))| {
                let f = frame(p, i + k * 3);
                let w = f.len() as u32;
                (f, w, t0 + n as u64 * 20 + k as u64)
            })
            .collect();
        let trace = t.path().join(format!("{name}.pcap"));
        write_us_pcap(&trace, &frames);
        let mut args = vec![
            "record",
            "-r",
            trace.to_str().unwrap(),
            "-w",
            dir.to_str().unwrap(),
            "--rotate-size",
            "256K",
            "--block-kib",
            "64",
            "--prefix",
            name,
            "-q",
        ];
        if k == 1 {
            args.push("--no-flow-index");
        }
        let (code, _, e) = run_wiretape(None, &args);
        assert_eq!(code, 0, "{e}");
    }
    dir
}

fn extract_json(dir: &Path, extra: &[&str], expr: &str, out: &Path) -> Value {
    let mut args = vec![
        "extract",
        dir.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    // After --: the tests run in the repository, whose `src/` is also a
    // filter word (`src host ...` is ambiguous there).
    args.push("--");
    args.extend(expr.split_whitespace());
    let (code, o, e) = run_wiretape(None, &args);
    assert_eq!(code, 0, "extract {args:?}: {e}");
    serde_json::from_str(o.trim()).unwrap_or_else(|_| panic!("{o}"))
}

const SELECTIVE: &[&str] = &[
    "host 10.9.0.3",
    "tcp port 8005",
    "ip6 host 2001:db8::6",
    "vlan 104",
    "host 10.9.0.2 and udp",
    "src host 10.8.0.1 and dst host 10.9.0.7",
];

#[test]
fn the_flow_index_skips_blocks_and_changes_no_answer() {
    let t = TempDir::new("fidx");
    let dir = store(&t);
    let scratch = t.path().join("s");
    std::fs::create_dir_all(&scratch).unwrap();
    let merged = scratch.join("merged.pcap");
    mergecap(&pcaps(&dir), &merged);
    let all = read_all(&merged);
    assert_eq!(all.len(), 2 * PHASES as usize * PER_PHASE);
    let mid = all[all.len() / 3].ts_ns;
    let with_flows = pcaps(&dir)
        .iter()
        .flat_map(|f| index::read(&index::path_for(f)).unwrap())
        .filter(|e| e.flows.is_some())
        .count() as u64;
    assert!(with_flows >= 16, "{with_flows} blocks with flow sets");
    let from = format!("{}.{:09}", mid / 1_000_000_000, mid % 1_000_000_000);
    for expr in SELECTIVE.iter().chain(&["arp", "ip", ""]) {
        let want = tcpdump_select(&merged, expr, &scratch);
        let out = scratch.join("x.pcap");
        let j = extract_json(&dir, &[], expr, &out);
        let got = read_all(&out);
        assert_eq!(got.len(), want.len(), "'{expr}': frame count");
        assert!(got == want, "'{expr}': frames differ from tcpdump's");
        assert!(!want.is_empty(), "'{expr}' selects nothing: a vacuous case");
        let skipped = j["blocks_skipped_by_flow_index"].as_u64().unwrap();
        if SELECTIVE.contains(expr) {
            // Phases span blocks: most blocks with flow sets (series ta;
            // tb was recorded without) hold none of the phase's keys.
            assert!(
                skipped * 10 >= with_flows * 7,
                "'{expr}': only {skipped} of {with_flows} blocks skipped: {j}"
            );
        } else if expr.is_empty() {
            assert_eq!(skipped, 0);
        }
        let out2 = scratch.join("y.pcap");
        let j2 = extract_json(&dir, &["--no-flow-index"], expr, &out2);
        assert_eq!(j2["blocks_skipped_by_flow_index"], 0);
        assert!(read_all(&out2) == got, "'{expr}': --no-flow-index differs");
        // With a window starting a third of the way in.
        let j3 = extract_json(&dir, &["--from", &from], expr, &out);
        let want3: Vec<_> = want.iter().filter(|r| r.ts_ns >= mid).cloned().collect();
        assert!(read_all(&out) == want3, "'{expr}' --from {from}: differs");
        assert_eq!(j3["frames"].as_u64().unwrap() as usize, want3.len());
    }
}

#[test]
fn index_rebuilds_what_is_missing_old_or_without_flows() {
    let t = TempDir::new("fidx2");
    let dir = store(&t);
    let files = pcaps(&dir);
    let ta: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("ta-"))
        .collect();
    let tb = files.len() - ta.len();
    assert!(ta.len() >= 3 && tb >= 3, "{} files", files.len());
    // One index missing, one turned into the version 1 format.
    std::fs::remove_file(index::path_for(ta[0])).unwrap();
    let v2 = index::read(&index::path_for(ta[1])).unwrap();
    let mut v1 = b"WTIDX\x01\0\0".to_vec();
    v1.extend_from_slice(&32u32.to_le_bytes());
    v1.extend_from_slice(&[0; 4]);
    for e in &v2 {
        for x in [e.offset, e.first_ns, e.last_ns, e.count] {
            v1.extend_from_slice(&x.to_le_bytes());
        }
    }
    std::fs::write(index::path_for(ta[1]), v1).unwrap();
    let old = index::read(&index::path_for(ta[1])).unwrap();
    assert_eq!(old.len(), v2.len());
    assert!(old.iter().all(|e| e.flows.is_none()));

    let (code, o, e) = run_wiretape(None, &["index", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{e}");
    let j: Value = serde_json::from_str(o.trim()).unwrap();
    // tb's files were recorded without flow sets.
    assert_eq!(j["rebuilt"].as_u64().unwrap() as usize, 2 + tb, "{j}");
    assert_eq!(
        j["up_to_date"].as_u64().unwrap() as usize,
        ta.len() - 2,
        "{j}"
    );
    for f in &files {
        let es = index::read(&index::path_for(f)).unwrap();
        assert!(es.iter().all(|e| e.flows.is_some()), "{}", f.display());
        // The rebuilt index counts every record of the file.
        let n: u64 = es.iter().map(|e| e.count).sum();
        assert_eq!(n as usize, read_all(f).len(), "{}", f.display());
    }
    let (code, o, _) = run_wiretape(None, &["index", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let j: Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(j["rebuilt"], 0, "second run: {j}");
    // Now every series narrows, and answers are unchanged.
    let scratch = t.path().join("s");
    std::fs::create_dir_all(&scratch).unwrap();
    let merged = scratch.join("merged.pcap");
    mergecap(&files, &merged);
    let out = scratch.join("x.pcap");
    let jx = extract_json(&dir, &[], "host 10.9.0.5", &out);
    assert!(read_all(&out) == tcpdump_select(&merged, "host 10.9.0.5", &scratch));
    let skipped = jx["blocks_skipped_by_flow_index"].as_u64().unwrap();
    assert!(skipped > jx["blocks_read"].as_u64().unwrap(), "{jx}");
    // A bad input is named.
    let (code, _, e) = run_wiretape(None, &["index", "/no/such/dir"]);
    assert_eq!(code, 1);
    assert!(e.contains("/no/such/dir"), "{e}");
}

/// `extract --plan`'s blocks as sorted (file, offset) pairs.
fn plan_blocks(dir: &Path, window: &[&str], expr: &str) -> Vec<(String, u64)> {
    let mut args = vec!["extract", dir.to_str().unwrap(), "--plan"];
    args.extend_from_slice(window);
    args.extend(expr.split_whitespace());
    let (code, o, e) = run_wiretape(None, &args);
    assert_eq!(code, 0, "{e}");
    let j: Value = serde_json::from_str(o.trim()).unwrap();
    let mut v: Vec<(String, u64)> = j["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["file"].as_str().unwrap().to_string(),
                b["offset"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn duckdb(parquet: &Path, sql: &str) -> Vec<(String, u64)> {
    let sql = sql.replace("@TABLE@", &format!("'{}'", parquet.display()));
    let script = format!(
        "import duckdb, json\n\
         rows = duckdb.sql(\"\"\"{sql}\"\"\").fetchall()\n\
         print(json.dumps([[r[0], r[1]] for r in rows]))\n"
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "DuckDB (pip package duckdb, installed by scripts/setup.sh): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Vec<(String, u64)> = serde_json::from_slice(&o.stdout).unwrap();
    let mut v = v;
    v.sort();
    v
}

#[test]
fn duckdb_over_the_parquet_index_finds_the_planners_blocks() {
    let t = TempDir::new("fidx3");
    let dir = store(&t);
    let pq = t.path().join("fleet.parquet");
    let (code, o, e) = run_wiretape(
        None,
        &[
            "index",
            dir.to_str().unwrap(),
            "--parquet",
            pq.to_str().unwrap(),
            "--node",
            "sensor-7",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{e}");
    let j: Value = serde_json::from_str(o.trim()).unwrap();
    let total_blocks: usize = pcaps(&dir)
        .iter()
        .map(|f| index::read(&index::path_for(f)).unwrap().len())
        .sum();
    assert_eq!(j["parquet_rows"].as_u64().unwrap() as usize, total_blocks);
    // Frames in the table: every frame of the store.
    let o = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import duckdb; print(duckdb.sql(\"SELECT sum(frames), count(DISTINCT node), min(node) FROM '{}'\").fetchall()[0])",
                pq.display()
            ),
        ])
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.trim() == format!("({}, 1, 'sensor-7')", 2 * PHASES as usize * PER_PHASE),
        "{s} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let all = read_all(&pcaps(&dir)[0]);
    let t1 = all[all.len() / 4].ts_ns;
    let t2 = t1 + 20_000_000; // 20 ms of packet time
    let win = [
        "--from".to_string(),
        format!("{}.{:09}", t1 / 1_000_000_000, t1 % 1_000_000_000),
        "--to".to_string(),
        format!("{}.{:09}", t2 / 1_000_000_000, t2 % 1_000_000_000),
    ];
    let win: Vec<&str> = win.iter().map(String::as_str).collect();
    let cases: &[(&str, &[&str], String)] = &[
        (
            "host 10.9.0.3",
            &[],
            "ip4 IS NULL OR list_contains(ip4, '10.9.0.3')".into(),
        ),
        (
            "host 10.9.0.1",
            &win,
            format!(
                "(ip4 IS NULL OR list_contains(ip4, '10.9.0.1')) AND last_ns >= {t1} AND first_ns < {t2}"
            ),
        ),
        (
            "ip6 host 2001:db8::4",
            &[],
            "ip6 IS NULL OR list_contains(ip6, '2001:db8::4')".into(),
        ),
        (
            "vlan 102",
            &[],
            "vlans IS NULL OR list_contains(vlans, 102)".into(),
        ),
    ];
    for (expr, w, cond) in cases {
        let planner = plan_blocks(&dir, w, expr);
        let sql = format!("SELECT file, \"offset\" FROM @TABLE@ WHERE {cond}");
        let fleet = duckdb(&pq, &sql);
        assert!(!planner.is_empty(), "'{expr}': no block");
        assert_eq!(planner, fleet, "'{expr}': planner vs DuckDB ({sql})");
        assert!(
            planner.len() < total_blocks / 3,
            "'{expr}': {} of {total_blocks} blocks",
            planner.len()
        );
    }
}
