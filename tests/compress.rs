//! `record --compress lz4|zstd` end to end: frames sent through a veth pair
//! and recorded by the real engine come back whole from the compressed
//! files, which the standard tools read (`lz4 -t`, `zstd -t`, `capinfos`
//! and `tshark -r` on .lz4, `zstdcat F | tcpdump -r -`); a recorder killed
//! with SIGKILL leaves files `wiretape repair` closes with every frame of
//! the blocks that went out; `extract` over a compressed store gives the
//! same bytes as over the plain store, for many windows and filters,
//! decompressing only the blocks it selects.

mod common;
#[allow(dead_code, unreachable_pub)]
#[path = "../crates/filter/tests/common/frames.rs"]
mod gen;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::files::index;
use wiretape_testbed::{SizeFn, Testbed};

/// Compressed capture files in `dir`, sorted.
fn zfiles(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.to_str().unwrap();
            n.ends_with(".lz4") || n.ends_with(".zst")
        })
        .collect();
    v.sort();
    v
}

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// How many frames the standard tools read from `f`.
fn tool_count(f: &Path) -> u64 {
    let p = f.display();
    let n = if p.to_string().ends_with(".lz4") {
        sh(&format!("lz4 -t {p}"));
        // Wireshark's readers open the LZ4 frame directly.
        let c = sh(&format!(
            "capinfos -M -c {p} | awk '/Number of packets/ {{print $NF}}'"
        ));
        let t = sh(&format!("tshark -r {p} | wc -l"));
        assert_eq!(c.trim(), t.trim(), "capinfos and tshark on {p}");
        t
    } else {
        sh(&format!("zstd -q -t {p}"));
        sh(&format!("zstdcat {p} | tcpdump -r - 2>/dev/null | wc -l"))
    };
    n.trim().parse().unwrap()
}

#[test]
fn veth_recordings_compressed_hold_every_frame_and_tools_read_them() {
    require_root();
    let tb = Testbed::create("cmp", 2).unwrap();
    for (alg, fmt) in [
        ("lz4", "pcap"),
        ("lz4", "pcapng"),
        ("zstd", "pcap"),
        ("zstd:1", "pcapng"),
    ] {
        let out = TempDir::new("cmp");
        let json = out.path().join("summary.json");
        let dir = out.path().join("cap");
        let n = 8000u64;
        let t0 = now_ns();
        let mut rec = Recorder::start(
            &tb,
            &[
                "-w",
                dir.to_str().unwrap(),
                "-c",
                &n.to_string(),
                "--format",
                fmt,
                "--compress",
                alg,
                "--compress-threads",
                "1",
                "--summary-json",
                json.to_str().unwrap(),
            ],
        );
        let sent = tb.send(0..n, SizeFn::Mixed, 16, Some(100_000)).unwrap();
        assert_eq!(sent.sent, n);
        assert!(rec.wait(30).success(), "{}", rec.stderr_text());
        let t1 = now_ns();
        let files = zfiles(&dir);
        assert_eq!(files.len(), 2, "{alg} {fmt}: one file per queue: {files:?}");
        let ext = if alg == "lz4" { ".lz4" } else { ".zst" };
        assert!(files
            .iter()
            .all(|f| f.to_str().unwrap().ends_with(&format!(".{fmt}{ext}"))));
        let v = verify_files(&files, n, usize::MAX, t0, t1, true);
        assert_eq!(v.frames, n, "{alg} {fmt}");
        assert_eq!(v.original_bytes, sent.bytes);
        let tools: u64 = files.iter().map(|f| tool_count(f)).sum();
        assert_eq!(tools, n, "{alg} {fmt}: frames the standard tools read");
        let j = read_json(&json);
        assert_eq!(j["packets_written"].as_u64(), Some(n));
        assert_identity(&j);
        let c = &j["compress"];
        assert_eq!(c["algorithm"], alg.split(':').next().unwrap(), "{j:#}");
        let level = match alg {
            "zstd" => 3,
            "zstd:1" => 1,
            _ => 0,
        };
        assert_eq!(c["level"], level);
        let on_disk: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        // Out: every byte of the files but lz4's frame header and end.
        let frame_bytes = if alg == "lz4" { 15 * 2 } else { 0 };
        assert_eq!(c["bytes_out"].as_u64().unwrap() + frame_bytes, on_disk);
        // In: the plain stream the files decompress to.
        let plain: u64 = files
            .iter()
            .map(|f| {
                let tool = if alg == "lz4" { "lz4" } else { "zstd" };
                let o = Command::new(tool).arg("-dc").arg(f).output().unwrap();
                o.stdout.len() as u64
            })
            .sum();
        assert_eq!(c["bytes_in"].as_u64(), Some(plain));
        let ratio = c["ratio"].as_f64().unwrap();
        assert!((ratio - on_disk as f64 / plain as f64).abs() < 0.01, "{c}");
        let idx_entries: u64 = files
            .iter()
            .map(|f| index::read(&index::path_for(f)).unwrap().len() as u64)
            .sum();
        assert!(c["blocks"].as_u64().unwrap() >= idx_entries, "{c}");
        assert!(c["blocks_uncompressed"].as_u64().unwrap() <= c["blocks"].as_u64().unwrap());
        // `info` reads them and the index agrees.
        for f in &files {
            let (code, o, e) = run_wiretape(None, &["info", "--json", f.to_str().unwrap()]);
            assert_eq!(code, 0, "{e}");
            let i: Value = serde_json::from_str(o.trim()).unwrap();
            assert_eq!(i["compression"], alg.split(':').next().unwrap());
            assert_eq!(i["index"]["agrees"], true, "{i}");
        }
    }
}

#[test]
fn sigkill_then_repair_keeps_every_block_that_went_out() {
    require_root();
    let tb = Testbed::create("cmpk", 1).unwrap();
    for alg in ["lz4", "zstd"] {
        let out = TempDir::new("cmpk");
        let dir = out.path().join("cap");
        let t0 = now_ns();
        let rec = Recorder::start(&tb, &["-w", dir.to_str().unwrap(), "--compress", alg]);
        let n = 5000u64;
        let sent = tb.send(0..n, SizeFn::Mixed, 4, Some(100_000)).unwrap();
        assert_eq!(sent.sent, n);
        // Past two flush intervals every block is due out; on a loaded
        // machine the compression pool may take longer, so wait (bounded)
        // until the file, read as it is, holds every frame: the promise
        // is that what went out survives the kill, not how fast it went.
        std::thread::sleep(std::time::Duration::from_millis(2500));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let packets = zfiles(&dir).first().and_then(|f| {
                let (_, o, _) = run_wiretape(None, &["info", "--json", f.to_str().unwrap()]);
                serde_json::from_str::<Value>(o.trim()).ok()?["packets"].as_u64()
            });
            if packets == Some(n) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        rec.signal(libc::SIGKILL);
        drop(rec);
        let t1 = now_ns();
        let files = zfiles(&dir);
        assert_eq!(files.len(), 1, "{files:?}");
        let f = files[0].to_str().unwrap();
        let (code, o, e) = run_wiretape(None, &["repair", f]);
        assert_eq!(code, 0, "repair {alg}: {o}{e}");
        assert!(
            o.contains(&format!("{n} records")) || o.contains(&format!("{n} complete records")),
            "{o}"
        );
        let v = verify_files(&files, n, usize::MAX, t0, t1, true);
        assert_eq!(v.frames, n, "{alg}: every frame of the flushed blocks");
        assert_eq!(tool_count(&files[0]), n, "{alg}: the tools after repair");
        let (code, o, _) = run_wiretape(None, &["info", "--json", f]);
        assert_eq!(code, 0);
        let i: Value = serde_json::from_str(o.trim()).unwrap();
        assert_eq!(i["packets"].as_u64(), Some(n));
        assert_eq!(i["index"]["agrees"], true, "{i}");
    }
}

/// A µs pcap of `n` mixed frames (the filter crate's generator: IPv4/6,
/// VLANs, ARP, TCP/UDP/ICMP), 40 µs apart.
fn trace(path: &Path, n: usize) -> Vec<u64> {
    let mut rng = gen::Rng::new(0x00c0_ffee);
    let t0 = 1_700_000_000_000_000u64;
    let mut frames = Vec::new();
    while frames.len() < n {
        let f = gen::frame(&mut rng);
        if f.data.is_empty() {
            continue;
        }
        let us = t0 + frames.len() as u64 * 40;
        frames.push((f.data, f.wire_len, us));
    }
    write_us_pcap(path, &frames);
    frames.iter().map(|f| f.2 * 1000).collect()
}

#[test]
fn extract_over_compressed_equals_extract_over_plain() {
    let t = TempDir::new("cmpx");
    let tr = t.path().join("trace.pcap");
    let ts = trace(&tr, 20_000);
    let mut stores = Vec::new();
    for (name, extra) in [
        ("plain", vec![]),
        ("lz4", vec!["--compress", "lz4"]),
        ("zstd", vec!["--compress", "zstd"]),
    ] {
        let d = t.path().join(name);
        let mut a = vec!["--block-kib", "64", "--rotate-size", "512K"];
        a.extend(extra);
        record_file(&tr, &d, &a);
        stores.push(d);
    }
    assert!(zfiles(&stores[1]).len() >= 3, "rotated into several files");
    let n = ts.len();
    let sec = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let windows: Vec<Vec<String>> = vec![
        vec![],
        vec![
            "--from".into(),
            sec(ts[n / 3]),
            "--to".into(),
            sec(ts[n / 3 + 40]),
        ],
        vec![
            "--from".into(),
            sec(ts[n / 5] + 1),
            "--to".into(),
            sec(ts[n / 2] - 1),
        ],
        vec!["--from".into(), sec(ts[9 * n / 10])],
        vec!["--to".into(), sec(ts[n / 7])],
        vec!["--to".into(), sec(ts[0])],
    ];
    let filters = [
        "",
        "tcp",
        "udp and not port 53",
        "vlan",
        "ip6",
        "arp or icmp",
    ];
    let mut compared = 0;
    for (wi, w) in windows.iter().enumerate() {
        for (fi, flt) in filters.iter().enumerate() {
            if (wi + fi) % 2 == 1 && wi > 0 {
                continue; // half of the pairs: the run stays short
            }
            let mut outs = Vec::new();
            for (si, s) in stores.iter().enumerate() {
                let o = t.path().join(format!("x-{wi}-{fi}-{si}.pcap"));
                let mut a: Vec<String> = vec!["extract".into(), s.display().to_string()];
                a.extend(w.iter().cloned());
                a.extend(["-w".into(), o.display().to_string(), "--json".into()]);
                a.extend(flt.split_whitespace().map(String::from));
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                let (code, out, e) = run_wiretape(None, &a);
                assert_eq!(code, 0, "{a:?}: {e}");
                let j: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| {
                    serde_json::from_str(e.lines().last().unwrap_or("")).unwrap()
                });
                outs.push((std::fs::read(&o).unwrap(), j));
            }
            let (plain, pj) = &outs[0];
            for (bytes, j) in &outs[1..] {
                assert!(
                    bytes == plain,
                    "window {w:?} filter '{flt}': compressed differs"
                );
                assert_eq!(j["frames"], pj["frames"]);
                if wi == 1 && flt.is_empty() {
                    // 40 frames: a block or two decompressed, not the store.
                    let d = j["blocks_decompressed"].as_u64().unwrap();
                    assert!((1..=4).contains(&d), "{j}");
                }
            }
            assert_eq!(pj["blocks_decompressed"], 0);
            compared += 1;
        }
    }
    assert!(compared >= 18);
}

#[test]
fn a_bad_compress_flag_is_one_line_before_anything_is_made() {
    let t = TempDir::new("cmpe");
    let tr = t.path().join("trace.pcap");
    trace(&tr, 10);
    let out = t.path().join("never");
    for bad in ["gzip", "zstd:99", "lz4:1"] {
        let (code, _, e) = run_wiretape(
            None,
            &[
                "record",
                "-r",
                tr.to_str().unwrap(),
                "-w",
                out.to_str().unwrap(),
                "--compress",
                bad,
            ],
        );
        assert_ne!(code, 0, "{bad}");
        assert_eq!(e.trim().lines().count(), 1, "{bad}: {e}");
        assert!(e.contains(&format!("--compress {bad}")), "{e}");
        assert!(!out.exists(), "{bad}: nothing made");
    }
}
