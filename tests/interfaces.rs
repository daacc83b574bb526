//! Several interfaces in one run (`wiretape record -i a -i b`): two veth
//! pairs in one private namespace, different traffic on each, the real XDP
//! program on both. Every frame of both is recorded byte-identical in the
//! files of its own interface, accounted per interface, and tshark reads
//! everything; bad input on one interface attaches nothing anywhere; an
//! interface that disappears stops the whole run cleanly.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::files::{PcapReader, Record};
use wiretape_testbed::{frames, SizeFn, Testbed, CAP_IF, GEN_IF};

const CAP2: &str = "wt-cap2";
const GEN2: &str = "wt-gen2";

/// A test bed with a second pair: wt-cap (2 queues) and wt-cap2 (1 queue).
fn two_pairs(tag: &str) -> Testbed {
    require_root();
    let tb = Testbed::create(tag, 2).unwrap();
    tb.add_pair(GEN2, CAP2, 1, 0x10).unwrap();
    tb
}

fn attached(tb: &Testbed, ifname: &str) -> bool {
    let out = tb.ip(&["-d", "link", "show", "dev", ifname]).unwrap();
    out.contains("prog/xdp") || out.contains(" xdp")
}

/// The frames in `files`: seq -> (captured bytes, original length), each
/// checked against what the generator built for it; panics on a duplicate.
fn frames_in(files: &[PathBuf]) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    let mut rec = Record::default();
    for f in files {
        let mut r = PcapReader::open(f).unwrap();
        let mut last = 0;
        while r.next_into(&mut rec).unwrap() {
            let (seq, len, flow) = frames::parse(&rec.data)
                .unwrap_or_else(|| panic!("{}: not a test frame", f.display()));
            let want = frames::build(seq, len, flow);
            assert!(
                rec.data == want,
                "frame {seq}: bytes differ from what was sent"
            );
            assert_eq!(rec.orig_len as usize, want.len());
            assert!(rec.ts_ns >= last, "{}: stamps go backwards", f.display());
            last = rec.ts_ns;
            assert!(out.insert(seq, len).is_none(), "frame {seq} recorded twice");
        }
    }
    out
}

/// Files of `ifname` (named `wiretape-<ifname>-q<N>-...`) in `dir`.
fn files_of(dir: &Path, ifname: &str) -> Vec<PathBuf> {
    pcaps(dir)
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(&format!("wiretape-{ifname}-q"))
        })
        .collect()
}

/// tshark's frame count over `files`.
fn tshark_count(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| {
            let out = Command::new("tshark")
                .args(["-n", "-r"])
                .arg(f)
                .args(["-T", "fields", "-e", "frame.number"])
                .output()
                .expect("tshark runs");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).lines().count() as u64
        })
        .sum()
}

fn per_interface<'a>(j: &'a Value, ifname: &str) -> &'a Value {
    j["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["interface"] == ifname)
        .unwrap_or_else(|| panic!("no interface {ifname} in {j:#}"))
}

#[test]
fn two_interfaces_every_frame_of_both_byte_identical_and_accounted_per_interface() {
    let tb = two_pairs("mif");
    let out = TempDir::new("mif");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    // Different traffic: mixed sizes over 16 flows on the first pair (both
    // of its queues), 300-byte frames with other numbers on the second.
    let (na, nb) = (12_000u64, 7_000u64);
    let b0 = 1_000_000u64;
    let total = (na + nb).to_string();
    let mut rec = Recorder::start_raw(
        &tb,
        &[
            "-i",
            CAP_IF,
            "-i",
            CAP2,
            "-w",
            dir.to_str().unwrap(),
            "-c",
            &total,
            "--cpus",
            "1,1,0",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(
        attached(&tb, CAP_IF) && attached(&tb, CAP2),
        "one program on each"
    );
    let (sa, sb) = std::thread::scope(|s| {
        let a = s.spawn(|| tb.send_from(GEN_IF, 0..na, SizeFn::Mixed, 16, Some(60_000)));
        let b = s.spawn(|| tb.send_from(GEN2, b0..b0 + nb, SizeFn::Fixed(300), 4, Some(40_000)));
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    let st = rec.wait(60);
    assert!(st.success(), "{}", rec.stderr_text());
    assert!(
        !attached(&tb, CAP_IF) && !attached(&tb, CAP2),
        "both detached"
    );
    let text = rec.stderr_text();
    // One start line per interface; --cpus covers all queues in order.
    assert!(
        text.contains("recording wt-cap queues [0, 1] [q0@1 q1@1]"),
        "{text}"
    );
    assert!(
        text.contains("recording wt-cap2 queues [0] [q0@0]"),
        "{text}"
    );
    assert!(
        text.contains("interface wt-cap2: 7,000 seen, 7,000 written"),
        "{text}"
    );

    // Each interface's files hold exactly its own frames, byte-identical.
    let fa = files_of(&dir, CAP_IF);
    let fb = files_of(&dir, CAP2);
    assert_eq!(fa.len(), 2, "a file per queue of wt-cap: {fa:?}");
    assert_eq!(fb.len(), 1, "a file for wt-cap2: {fb:?}");
    let ga = frames_in(&fa);
    let gb = frames_in(&fb);
    assert_eq!(
        ga.keys().copied().collect::<Vec<_>>(),
        (0..na).collect::<Vec<_>>()
    );
    assert_eq!(
        gb.keys().copied().collect::<Vec<_>>(),
        (b0..b0 + nb).collect::<Vec<_>>()
    );
    assert_eq!(ga.values().map(|&l| l as u64).sum::<u64>(), sa.bytes);
    assert_eq!(gb.values().map(|&l| l as u64).sum::<u64>(), sb.bytes);
    assert_eq!(
        tshark_count(&pcaps(&dir)),
        na + nb,
        "tshark reads every frame"
    );

    // Accounting: per interface, per queue, and totals that sum them.
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(na + nb));
    assert_eq!(j["bytes_written"].as_u64(), Some(sa.bytes + sb.bytes));
    let (ia, ib) = (per_interface(&j, CAP_IF), per_interface(&j, CAP2));
    for (i, n, bytes, queues) in [(ia, na, sa.bytes, 2), (ib, nb, sb.bytes, 1)] {
        assert_eq!(i["packets_seen"].as_u64(), Some(n), "{i:#}");
        assert_eq!(i["packets_written"].as_u64(), Some(n), "{i:#}");
        assert_eq!(i["bytes_written"].as_u64(), Some(bytes));
        assert_eq!(i["drops"]["total"].as_u64(), Some(0));
        assert_eq!(i["identity_holds"], Value::Bool(true));
        assert_eq!(i["per_queue"].as_array().unwrap().len(), queues);
        assert_eq!(i["xdp_mode"], "native");
        assert!(i["ifindex"].as_u64().unwrap() > 0);
        // Its queues name it.
        for q in i["per_queue"].as_array().unwrap() {
            assert_eq!(q["interface"], i["interface"]);
        }
    }
    // wt-cap's 16 flows went to both of its queues.
    assert!(ia["per_queue"]
        .as_array()
        .unwrap()
        .iter()
        .all(|q| q["packets_written"].as_u64().unwrap() > 0));
    assert_eq!(j["per_queue"].as_array().unwrap().len(), 3);
    assert_eq!(j["files"].as_array().unwrap().len(), 3);
}

#[test]
fn a_bad_interface_stops_the_run_before_anything_is_attached() {
    let tb = two_pairs("mie");
    let out = TempDir::new("mie");
    let w = out.path().join("x");
    let w = w.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["record"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-w", w]);
        run_wiretape(Some(&tb), &all)
    };
    let one_line = |code: i32, err: &str, want: &str| {
        assert_eq!(code, 1, "{err}");
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("wiretape: error:"))
            .collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains(want), "want '{want}': {err}");
    };
    // No such interface, after a good one.
    let (code, _, err) = run(&["-i", CAP_IF, "-i", "nosuch0"]);
    one_line(code, &err, "no such interface 'nosuch0'");
    assert!(!attached(&tb, CAP_IF));
    // The same one twice.
    let (code, _, err) = run(&["-i", CAP_IF, "-i", CAP_IF]);
    one_line(code, &err, "given twice");
    assert!(!attached(&tb, CAP_IF));
    // A queue the second lacks (wt-cap has 2, wt-cap2 1).
    // A flag mistake: exit 2.
    let (code, _, err) = run(&["-i", CAP_IF, "-i", CAP2, "--queues", "1"]);
    assert_eq!(code, 2, "{err}");
    one_line(1, &err, "interface wt-cap2 has no RX queue 1");
    assert!(!attached(&tb, CAP_IF) && !attached(&tb, CAP2));
    // An XDP program already on the second: named, and the first untouched.
    let mut other = Recorder::start_raw(
        &tb,
        &["-i", CAP2, "-w", out.path().join("o").to_str().unwrap()],
    );
    assert!(attached(&tb, CAP2));
    let (code, _, err) = run(&["-i", CAP_IF, "-i", CAP2]);
    one_line(
        code,
        &err,
        "interface wt-cap2 already has an XDP program attached",
    );
    assert!(!attached(&tb, CAP_IF), "nothing attached on the first");
    assert!(attached(&tb, CAP2), "the other recorder's program stays");
    other.signal(2);
    assert!(other.wait(20).success(), "{}", other.stderr_text());
    // netmap records one interface per run.
    let (code, _, err) = run(&["--engine", "netmap", "-i", CAP_IF, "-i", CAP2]);
    // A usage error with netmap built in; without, the build is what is wrong.
    let want = if wiretape::capture::netmap::BUILT {
        2
    } else {
        1
    };
    assert_eq!(code, want, "{err}");
    assert!(
        err.contains("--engine afxdp") || err.contains("built without netmap"),
        "{err}"
    );
}

#[test]
fn an_interface_that_disappears_stops_the_whole_run_with_valid_files() {
    let tb = two_pairs("mig");
    let out = TempDir::new("mig");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start_raw(
        &tb,
        &[
            "-i",
            CAP_IF,
            "-i",
            CAP2,
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let n = 5_000u64;
    let sent = tb
        .send_from(GEN_IF, 0..n, SizeFn::Mixed, 8, Some(50_000))
        .unwrap();
    tb.send_from(GEN2, 500_000..500_100, SizeFn::Fixed(100), 1, Some(50_000))
        .unwrap();
    // Let the writers flush (1 s), then take the second pair away.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    tb.ip(&["link", "del", GEN2]).unwrap();
    let st = rec.wait(20);
    assert_eq!(st.code(), Some(1), "{}", rec.stderr_text());
    let text = rec.stderr_text();
    assert!(
        text.contains("interface wt-cap2") && text.contains("disappeared during the recording"),
        "{text}"
    );
    assert!(
        !attached(&tb, CAP_IF),
        "the first interface is detached too"
    );
    // Every frame that arrived before is in valid files.
    let got = frames_in(&files_of(&dir, CAP_IF));
    assert_eq!(got.len() as u64, n);
    assert_eq!(got.values().map(|&l| l as u64).sum::<u64>(), sent.bytes);
    assert_eq!(frames_in(&files_of(&dir, CAP2)).len(), 100);
    assert_eq!(tshark_count(&pcaps(&dir)), n + 100);
    let j = read_json(&json);
    assert_eq!(j["stop_reason"], "interface gone");
    assert_identity(&j);
    assert!(
        j["errors"][0].as_str().unwrap().contains("wt-cap2"),
        "{j:#}"
    );
}
