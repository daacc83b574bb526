//! `wiretape extract` against an independent reader: the recorded files
//! merged in time order by `mergecap` (Wireshark), then filtered by
//! `tcpdump -r merged -w - EXPR` (libpcap), then cut to the time window in
//! the test; extract's output must hold the same frames, byte for byte,
//! with the same stamps and wire lengths, in the same order, in pcap and in
//! pcapng output. Where stamps are equal, mergecap's tie order may differ
//! from ours (its choice among inputs is its own), so within a group of
//! equal stamps the frames compare as multisets; across groups the order is
//! exact.
//!
//! * no privileges: two traces of mixed frames (the filter crate's seeded
//!   generator) recorded with `record -r` (the file engine) into one
//!   directory, one as µs pcap and one as pcapng, rotated every 64 KiB,
//!   with interleaved and equal stamps; then damage, a missing index;
//! * root: the same mixed traffic sent through a veth pair on 2 queues at
//!   once (`wiretape replay --queue 0` and `--queue 1`), recorded by the
//!   real engine with rotation; and a live test: `extract --from -2s`
//!   while `record` runs.

mod common;
#[allow(dead_code, unreachable_pub)]
#[path = "../crates/filter/tests/common/frames.rs"]
mod gen;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::files::index;
use wiretape::files::Record;
use wiretape_testbed::{SizeFn, Testbed, GEN_IF};

/// 24 expressions: hosts, nets, ports, protocols, IPv6, VLAN, ARP, ICMP,
/// byte offsets, lengths, boolean combinations.
const EXPRESSIONS: &[&str] = &[
    "",
    "ip",
    "ip6",
    "arp",
    "icmp or icmp6",
    "tcp",
    "not tcp",
    "udp",
    "host 10.0.0.1",
    "src host 10.0.0.2 and dst host 10.0.0.1",
    "net 192.168.0.0/16",
    "ip6 net 2001:db8::/32",
    "port 53",
    "tcp port 80",
    "portrange 5000-5010",
    "vlan",
    "vlan 100",
    "vlan and udp",
    "tcp[13] & 2 != 0",
    "icmp[icmptype] == icmp-echo",
    "less 100",
    "greater 500",
    "not (port 22 or port 80) and ip",
    "(tcp and port 443) or (udp and not port 53) or icmp",
];

/// A classic µs pcap written by hand: (frame, wire length, µs stamp).
/// `n` mixed frames; `sendable`: only frames a veth carries whole.
fn mixed(seed: u64, n: usize, sendable: bool) -> Vec<(Vec<u8>, u32)> {
    let mut rng = gen::Rng::new(seed);
    let mut out = Vec::new();
    while out.len() < n {
        let f = gen::frame(&mut rng);
        let whole = f.data.len() as u32 == f.wire_len;
        if sendable && !(whole && (14..=1514).contains(&f.data.len())) {
            continue;
        }
        // A record of no bytes is no frame (readers take it for padding).
        if f.data.is_empty() {
            continue;
        }
        out.push((f.data, f.wire_len));
    }
    out
}

/// A time window; `rfc`: written as RFC 3339 instead of Unix seconds.
#[derive(Clone, Debug)]
struct Win {
    what: String,
    from: Option<u64>,
    to: Option<u64>,
    rfc: bool,
}

impl Win {
    fn new(what: &str, from: Option<u64>, to: Option<u64>) -> Win {
        Win {
            what: what.into(),
            from,
            to,
            rfc: false,
        }
    }
    fn contains(&self, ts: u64) -> bool {
        self.from.is_none_or(|f| ts >= f) && self.to.is_none_or(|t| ts < t)
    }
    fn args(&self) -> Vec<String> {
        let t = |ns: u64| {
            if self.rfc {
                wiretape::timestamp::format_rfc3339(ns)
            } else {
                format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
            }
        };
        let mut v = Vec::new();
        if let Some(f) = self.from {
            v.extend(["--from".into(), t(f)]);
        }
        if let Some(to) = self.to {
            v.extend(["--to".into(), t(to)]);
        }
        v
    }
}

/// Windows over a store: edges exactly on frames, just beside frames,
/// inside one index block, across a rotation of one queue, open at either
/// end, empty before everything.
fn windows(all: &[Record], dir: &Path) -> Vec<Win> {
    let ts: Vec<u64> = all.iter().map(|r| r.ts_ns).collect();
    let n = ts.len();
    let mut v = vec![
        Win::new("everything", None, None),
        Win::new("edges on frames", Some(ts[n / 3]), Some(ts[2 * n / 3])),
        Win::new(
            "edges 1 ns beside frames",
            Some(ts[n / 5] + 1),
            Some(ts[n / 2] - 1),
        ),
        Win::new("only --from", Some(ts[3 * n / 4]), None),
        Win::new("only --to", None, Some(ts[n / 4])),
        Win::new("before everything", None, Some(ts[0])),
    ];
    v[1].rfc = true;
    // Index blocks and rotations: the first series' files, by name.
    let files = pcaps(dir);
    let series = files[0].file_name().unwrap().to_str().unwrap();
    let series = &series[..series.rfind('-').unwrap()];
    let q: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.to_str().unwrap().contains(series))
        .collect();
    assert!(q.len() >= 3, "rotation made several files: {q:?}");
    let idx = |f: &Path| index::read(&index::path_for(f)).unwrap();
    let mid = idx(q[q.len() / 2]);
    let e = mid
        .iter()
        .find(|e| e.count >= 4 && e.last_ns - e.first_ns >= 8)
        .unwrap_or_else(|| panic!("a block of several frames: {mid:?}"));
    let span = e.last_ns - e.first_ns;
    v.push(Win::new(
        "inside one block",
        Some(e.first_ns + span / 4),
        Some(e.first_ns + 3 * span / 4),
    ));
    let (a, b) = (idx(q[q.len() / 2 - 1]), idx(q[q.len() / 2]));
    let (ea, eb) = (a.last().unwrap(), b.first().unwrap());
    v.push(Win::new(
        "across a rotation",
        Some(ea.first_ns + (ea.last_ns - ea.first_ns) / 2),
        Some(eb.first_ns + (eb.last_ns - eb.first_ns) / 2 + 1),
    ));
    v
}

/// Same frames: exact order across different stamps, multisets within a
/// group of equal stamps (tie order is the merger's own).
fn same_frames(what: &str, got: &[Record], want: &[Record]) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: extract gave {} frames, mergecap+tcpdump {}",
        got.len(),
        want.len()
    );
    let mut i = 0;
    while i < want.len() {
        let ts = want[i].ts_ns;
        let mut j = i;
        while j < want.len() && want[j].ts_ns == ts {
            j += 1;
        }
        let key = |r: &Record| (r.ts_ns, r.orig_len, r.data.clone());
        let mut g: Vec<_> = got[i..j].iter().map(key).collect();
        let mut w: Vec<_> = want[i..j].iter().map(key).collect();
        if j - i > 1 {
            g.sort();
            w.sort();
        }
        assert!(
            g == w,
            "{what}: frames {i}..{j} (stamp {ts}) differ from mergecap+tcpdump's"
        );
        i = j;
    }
}

/// Runs `wiretape extract -w OUT ARGS` and reads OUT back.
fn extract(args: &[String], out: &Path) -> (Vec<Record>, String) {
    let mut a: Vec<&str> = vec!["extract", "-w", out.to_str().unwrap(), "-q"];
    a.extend(args.iter().map(String::as_str));
    let (code, _, e) = run_wiretape(None, &a);
    assert_eq!(code, 0, "extract {args:?}: {e}");
    (read_all(out), e)
}

/// Every expression over every window, in pcap and pcapng output: the
/// frames tcpdump selects from the mergecap merge, cut to the window.
/// Returns (comparisons, frames compared).
fn compare_all(dir: &Path, scratch: &Path, exprs: &[&str]) -> (usize, usize) {
    let files = pcaps(dir);
    let merged = scratch.join("merged.pcap");
    mergecap(&files, &merged);
    let all = read_all(&merged);
    let wins = windows(&all, dir);
    let (mut runs, mut frames) = (0, 0);
    for (k, expr) in exprs.iter().enumerate() {
        let sel = tcpdump_select(&merged, expr, scratch);
        for (wi, w) in wins.iter().enumerate() {
            let want: Vec<Record> = sel
                .iter()
                .filter(|r| w.contains(r.ts_ns))
                .cloned()
                .collect();
            for fmt in ["pcap", "pcapng"] {
                // Formats alternate per window to keep the run short; every
                // window and every expression meets both over the loop.
                if (k + wi) % 2 == (fmt == "pcapng") as usize {
                    continue;
                }
                let mut args = vec![dir.to_str().unwrap().to_string()];
                args.extend(w.args());
                args.extend(["--format".into(), fmt.into()]);
                // After --: the tests run in the repository, whose `src/`
                // is also a filter word (`src host ...` is ambiguous there).
                args.push("--".into());
                args.extend(expr.split_whitespace().map(String::from));
                let out = scratch.join(format!("out.{fmt}"));
                let (got, _) = extract(&args, &out);
                same_frames(&format!("'{expr}', {} ({fmt})", w.what), &got, &want);
                runs += 1;
                frames += got.len();
            }
        }
    }
    (runs, frames)
}

/// Two traces with interleaved µs stamps (every 7th of B equal to A's),
/// recorded by the file engine into one directory (A as µs pcap, B as
/// pcapng), rotated at 192 KiB in 64 KiB blocks.
fn file_store(t: &TempDir) -> PathBuf {
    let dir = t.path().join("store");
    let t0 = 1_700_000_000_000_000u64;
    let a: Vec<_> = mixed(0x0005_eeda, 1500, false)
        .into_iter()
        .enumerate()
        .map(|(i, (f, w))| (f, w, t0 + i as u64 * 40))
        .collect();
    let b: Vec<_> = mixed(0x0005_eedb, 1500, false)
        .into_iter()
        .enumerate()
        .map(|(i, (f, w))| {
            let us = if i % 7 == 0 {
                t0 + i as u64 * 40
            } else {
                t0 + i as u64 * 40 + 13
            };
            (f, w, us)
        })
        .collect();
    for (name, frames, extra) in [
        ("ta", &a, ["--tsprec", "us"]),
        ("tb", &b, ["--format", "pcapng"]),
    ] {
        let trace = t.path().join(format!("{name}.pcap"));
        write_us_pcap(&trace, frames);
        let (code, _, e) = run_wiretape(
            None,
            &[
                "record",
                "-r",
                trace.to_str().unwrap(),
                "-w",
                dir.to_str().unwrap(),
                "--rotate-size",
                "192K",
                "--block-kib",
                "64",
                "-q",
                extra[0],
                extra[1],
            ],
        );
        assert_eq!(code, 0, "{e}");
    }
    dir
}

#[test]
fn extract_of_a_file_engine_store_equals_mergecap_and_tcpdump() {
    let t = TempDir::new("xtrf");
    let dir = file_store(&t);
    let scratch = t.path().join("s");
    std::fs::create_dir_all(&scratch).unwrap();
    let (runs, frames) = compare_all(&dir, &scratch, EXPRESSIONS);
    eprintln!(
        "{} expressions x 8 windows: {runs} extractions, {frames} frames equal to mergecap+tcpdump",
        EXPRESSIONS.len()
    );
    // Only our names in a directory: a stray file is not read.
    std::fs::write(dir.join("notes.pcap"), b"not a capture").unwrap();
    let (code, o, e) = run_wiretape(None, &["extract", dir.to_str().unwrap(), "--count-only"]);
    assert_eq!(code, 0, "{e}");
    assert!(o.starts_with("3000 frames, "), "{o}");
}

#[test]
fn extract_says_what_it_skips_and_fails_on_damage() {
    let t = TempDir::new("xtrd");
    let dir = file_store(&t);
    let d = dir.to_str().unwrap();
    let files = pcaps(&dir);
    let json = |o: &str| -> Value { serde_json::from_str(o.trim()).unwrap() };
    let (code, o, e) = run_wiretape(None, &["extract", d, "--count-only", "--json"]);
    assert_eq!(code, 0, "{e}");
    let j = json(&o);
    assert_eq!(j["frames"], 3000);
    assert_eq!(j["files"].as_u64(), Some(files.len() as u64));
    assert_eq!(j["files_scanned_without_index"], 0);
    // A narrow window reads few blocks and skips files.
    let merged = t.path().join("merged.pcap");
    mergecap(&files, &merged);
    let all = read_all(&merged);
    let (f, to) = (all[1000].ts_ns, all[1040].ts_ns);
    let from_s = format!("{}.{:09}", f / 1_000_000_000, f % 1_000_000_000);
    let to_s = format!("{}.{:09}", to / 1_000_000_000, to % 1_000_000_000);
    let (code, o, e) = run_wiretape(
        None,
        &[
            "extract",
            d,
            "--from",
            &from_s,
            "--to",
            &to_s,
            "--count-only",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{e}");
    let j = json(&o);
    assert_eq!(j["frames"], 40);
    assert!(
        j["files_skipped"].as_u64().unwrap() > files.len() as u64 / 2,
        "{j}"
    );
    assert!(
        j["blocks_skipped"].as_u64().unwrap() > j["blocks_read"].as_u64().unwrap(),
        "{j}"
    );
    // Without its `.idx`: planned by its key index (`.kdx`, exact and
    // complete for a finished file).
    let victim = &files[files.len() / 2];
    std::fs::remove_file(index::path_for(victim)).unwrap();
    let (code, o, e) = run_wiretape(None, &["extract", d, "--count-only", "--json"]);
    assert_eq!(code, 0, "{e}");
    assert_eq!(json(&o)["frames"], 3000);
    assert_eq!(json(&o)["files_scanned_without_index"], 0, "{o}");
    // Without either index: read whole, and said so.
    std::fs::remove_file(wiretape::files::keys::path_for(victim)).unwrap();
    let (code, o, e) = run_wiretape(None, &["extract", d, "--count-only", "--json"]);
    assert_eq!(code, 0, "{e}");
    assert_eq!(json(&o)["frames"], 3000);
    assert_eq!(json(&o)["files_scanned_without_index"], 1);
    assert!(
        e.contains(&format!("{}: no index", victim.display())),
        "{e}"
    );
    // A corrupt record in the middle of a file: what is valid is
    // extracted, the file and offset named, exit 1 (0 with --ignore-corrupt).
    let bad = &files[0];
    let recs = {
        let mut w = wiretape::files::walk::Walker::new(std::io::BufReader::new(
            std::fs::File::open(bad).unwrap(),
        ));
        std::iter::from_fn(|| w.next()).collect::<Vec<_>>()
    };
    let at = recs[recs.len() / 3].offset;
    let mut b = std::fs::read(bad).unwrap();
    let l = if bad.extension().unwrap() == "pcapng" {
        4
    } else {
        8
    };
    b[at as usize + l..at as usize + l + 4].copy_from_slice(&[0xff; 4]);
    std::fs::write(bad, &b).unwrap();
    let out = t.path().join("out.pcap");
    let o = out.to_str().unwrap();
    let (code, _, e) = run_wiretape(None, &["extract", d, "-w", o]);
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains(&format!("damaged: {} (byte {at})", bad.display())),
        "{e}"
    );
    let n = read_all(&out).len();
    // With its index, only the rest of the damaged block is lost.
    let idx = index::read(&index::path_for(bad)).unwrap();
    let resume = idx
        .iter()
        .find(|e| e.offset > at)
        .map_or(u64::MAX, |e| e.offset);
    let lost = recs
        .iter()
        .filter(|m| m.offset >= at && m.offset < resume)
        .count();
    assert!(
        resume < u64::MAX,
        "the damage is not in the last block: {idx:?}"
    );
    assert_eq!(n, 3000 - lost, "{e}");
    let (code, oj, e) = run_wiretape(None, &["extract", d, "-w", o, "--ignore-corrupt", "--json"]);
    assert_eq!(code, 0, "{e}");
    let j = json(&oj);
    assert_eq!(j["corrupt"][0]["offset"].as_u64(), Some(at), "{j}");
    assert_eq!(j["corrupt"][0]["file"], bad.to_str().unwrap());
    // A torn tail on a finished file: named, exit 1.
    let last = files.last().unwrap();
    let len = std::fs::metadata(last).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let (code, _, e) = run_wiretape(None, &["extract", last.to_str().unwrap(), "--count-only"]);
    assert_eq!(code, 1, "{e}");
    assert!(e.contains("torn tail"), "{e}");
    // Usage errors: exit 2, one line, nothing written.
    let nothing = t.path().join("nothing.pcap");
    let w = nothing.to_str().unwrap();
    for (args, code, text) in [
        (vec![d, "-w", w, "tcp", "prt", "80"], 2, "syntax error"),
        (
            vec![d, "-w", w, "--from", "-1m", "--to", "-2m"],
            2,
            "is not after --from",
        ),
        (vec![d, "-w", w, "--from", "yesterday"], 2, "is not a time"),
        (vec!["/no/such/dir", "-w", w], 1, "No such file"),
    ] {
        let mut a = vec!["extract"];
        a.extend(args);
        let (c, _, e) = run_wiretape(None, &a);
        assert_eq!(c, code, "{a:?}: {e}");
        assert!(e.contains(text) && e.lines().count() == 1, "{a:?}: {e}");
        assert!(!nothing.exists(), "{a:?} wrote its output");
    }
    // stdout: tcpdump reads it.
    let sh = format!(
        "{} extract {d} -q --ignore-corrupt -w - udp | tcpdump -n -r - 2>/dev/null | wc -l",
        bin().display()
    );
    let o = Command::new("sh").args(["-c", &sh]).output().unwrap();
    let n: usize = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(n > 100, "{n}");
}

/// Splits a trace in two by a seeded choice, for queues 0 and 1.
fn two_traces(t: &TempDir, n: usize) -> (PathBuf, PathBuf) {
    let frames = mixed(0x2_7175_6575, n, true);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut rng = gen::Rng::new(99);
    for (f, w) in frames {
        let v = if rng.chance(50) { &mut a } else { &mut b };
        let us = 1_700_000_000_000_000 + v.len() as u64 * 60;
        v.push((f, w, us));
    }
    let (pa, pb) = (t.path().join("qa.pcap"), t.path().join("qb.pcap"));
    write_us_pcap(&pa, &a);
    write_us_pcap(&pb, &b);
    (pa, pb)
}

#[test]
fn extract_of_a_two_queue_recording_equals_mergecap_and_tcpdump() {
    require_root();
    let t = TempDir::new("xtrq");
    let n = 3000;
    let (qa, qb) = two_traces(&t, n);
    let tb = Testbed::create("xtrq", 2).unwrap();
    let dir = t.path().join("cap");
    let json = t.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-c",
            &n.to_string(),
            "--rotate-size",
            "64K",
            "--block-kib",
            "64",
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ],
    );
    // Both queues at once: their stamps interleave.
    std::thread::scope(|s| {
        for (q, p) in [("0", &qa), ("1", &qb)] {
            let tb = &tb;
            s.spawn(move || {
                let (code, _, e) = run_wiretape(
                    Some(tb),
                    &[
                        "replay",
                        p.to_str().unwrap(),
                        "-i",
                        GEN_IF,
                        "--queue",
                        q,
                        "-q",
                    ],
                );
                assert_eq!(code, 0, "{e}");
            });
        }
    });
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n as u64));
    let files = pcaps(&dir);
    for q in ["-q0-", "-q1-"] {
        let k = files
            .iter()
            .filter(|f| f.to_str().unwrap().contains(q))
            .count();
        assert!(k >= 3, "queue {q}: {k} files (rotation)");
    }
    let scratch = t.path().join("s");
    std::fs::create_dir_all(&scratch).unwrap();
    let (runs, frames) = compare_all(&dir, &scratch, EXPRESSIONS);
    eprintln!(
        "2 queues, {} files: {} expressions, {runs} extractions, {frames} frames equal to mergecap+tcpdump",
        files.len(),
        EXPRESSIONS.len()
    );
}

#[test]
fn extract_while_recording_returns_what_was_flushed() {
    require_root();
    let t = TempDir::new("xtrl");
    let tb = Testbed::create("xtrl", 1).unwrap();
    let dir = t.path().join("cap");
    let flush_ns = 200_000_000u64;
    let mut rec = Recorder::start(
        &tb,
        &["-w", dir.to_str().unwrap(), "--flush-interval", "0.2", "-q"],
    );
    let out = t.path().join("live.pcap");
    let (j, started) = std::thread::scope(|s| {
        let sender = s.spawn(|| tb.send(0..8000, SizeFn::Mixed, 1, Some(2000)).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(2600));
        let started = now_ns();
        let (code, o, e) = run_wiretape(
            None,
            &[
                "extract",
                dir.to_str().unwrap(),
                "--from",
                "-2s",
                "-w",
                out.to_str().unwrap(),
                "--json",
            ],
        );
        assert_eq!(code, 0, "{e}");
        sender.join().unwrap();
        (serde_json::from_str::<Value>(o.trim()).unwrap(), started)
    });
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    assert!(j["files_being_written"].as_u64().unwrap() >= 1, "{j}");
    let from = j["from_ns"].as_u64().unwrap();
    assert!(from < started && started - from < 2_100_000_000);
    let got = read_all(&out);
    let fin: Vec<Record> = pcaps(&dir).iter().flat_map(|f| read_all(f)).collect();
    let in_final: std::collections::HashSet<(u64, Vec<u8>)> =
        fin.iter().map(|r| (r.ts_ns, r.data.clone())).collect();
    for r in &got {
        assert!(r.ts_ns >= from, "before --from");
        assert!(
            in_final.contains(&(r.ts_ns, r.data.clone())),
            "an extracted frame is not in the final files"
        );
    }
    let flushed: Vec<&Record> = fin
        .iter()
        .filter(|r| r.ts_ns >= from && r.ts_ns < started - flush_ns)
        .collect();
    let got_set: std::collections::HashSet<(u64, Vec<u8>)> =
        got.iter().map(|r| (r.ts_ns, r.data.clone())).collect();
    let missing = flushed
        .iter()
        .filter(|r| !got_set.contains(&(r.ts_ns, r.data.clone())))
        .count();
    assert!(
        flushed.len() > 2000,
        "{} frames in the window",
        flushed.len()
    );
    assert_eq!(
        missing,
        0,
        "{missing} of {} frames stamped before the extraction minus the flush interval were not extracted",
        flushed.len()
    );
    eprintln!(
        "live: {} frames extracted while recording; all {} flushed ones of the window among them",
        got.len(),
        flushed.len()
    );
}
