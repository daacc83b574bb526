//! `wiretape gen` and `wiretape replay` end to end: AF_XDP transmit on a real
//! veth pair, recorded by `wiretape record` on the other end, every frame
//! checked.

mod common;

use common::*;
use std::path::Path;
use wiretape::files::{Format, PcapReader, Record};
use wiretape::storage::{FileSink, PcapWriter};
use wiretape_testbed::{frames, Testbed, GEN_IF};

/// Every record of the capture files in `dir`, in order.
fn records(dir: &Path) -> Vec<Record> {
    let mut out = Vec::new();
    for f in pcaps(dir) {
        let mut r = PcapReader::open(&f).unwrap();
        let mut rec = Record::default();
        while r.next_into(&mut rec).unwrap() {
            out.push(rec.clone());
        }
    }
    out
}

#[test]
fn gen_frames_arrive_numbered_sized_and_timed() {
    require_root();
    let n = 12_000u64;
    let tb = Testbed::create("gen", 1).unwrap();
    let out = TempDir::new("gen");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-c",
            "12000",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let (code, o, e) = run_wiretape(
        Some(&tb),
        &[
            "gen", "-i", GEN_IF, "--size", "imix", "--count", "12000", "--rate", "40000",
            "--flows", "5", "--json", "-q",
        ],
    );
    assert_eq!(code, 0, "{e}");
    let g: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(g["sent"].as_u64(), Some(n), "{g}");
    assert_eq!(g["failed"].as_u64(), Some(0), "{g}");
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    let recs = records(&dir);
    assert_eq!(recs.len() as u64, n);
    let mut bytes = 0u64;
    for (i, r) in recs.iter().enumerate() {
        let (seq, len, flow) = frames::parse(&r.data).expect("a gen frame");
        assert_eq!(seq, i as u64, "in order, none missing or twice");
        let want = wiretape::capture::tx::GenSize::Imix.len(seq);
        assert_eq!((len, r.data.len()), (want, want), "imix size of {seq}");
        assert_eq!(flow, (seq % 5) as u16);
        assert!(frames::ip_checksum_ok(&r.data));
        let sent = frames::gen_send_time(&r.data, r.ts_ns).unwrap();
        // Sent before it was recorded, and not long before (same host).
        assert!(sent <= r.ts_ns, "frame {seq} recorded before it was sent");
        assert!(r.ts_ns - sent < 1_000_000_000, "frame {seq}: one-way delay");
        bytes += r.data.len() as u64;
    }
    assert_eq!(g["bytes"].as_u64(), Some(bytes), "gen's byte count");
}

/// A trace of `n` test frames, 200 µs apart, in `fmt`.
fn trace(path: &Path, n: u64, fmt: Format) -> Vec<Vec<u8>> {
    let mut w = PcapWriter::with_format(FileSink::create(path).unwrap(), 65535, fmt, "x");
    let mut v = Vec::new();
    for i in 0..n {
        let f = frames::build(i, frames::mixed_size(i), 1);
        w.write(1_700_000_000_000_000_000 + i * 200_000, &f)
            .unwrap();
        v.push(f);
    }
    w.close().unwrap();
    v
}

fn replay_into_record(
    tag: &str,
    file: &Path,
    extra: &[&str],
    expect: u64,
) -> (Vec<Record>, serde_json::Value) {
    let tb = Testbed::create(tag, 1).unwrap();
    let out = TempDir::new(tag);
    let dir = out.path().join("cap");
    let c = expect.to_string();
    let mut rec = Recorder::start(&tb, &["-w", dir.to_str().unwrap(), "-c", &c]);
    let mut args = vec![
        "replay",
        file.to_str().unwrap(),
        "-i",
        GEN_IF,
        "--json",
        "-q",
    ];
    args.extend_from_slice(extra);
    let (code, o, e) = run_wiretape(Some(&tb), &args);
    assert_eq!(code, 0, "{e}");
    let r: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(r["sent"].as_u64(), Some(expect), "{r}");
    assert_eq!(r["failed"].as_u64(), Some(0), "{r}");
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    (records(&dir), r)
}

#[test]
fn replay_sends_every_frame_of_pcap_and_pcapng_byte_for_byte() {
    require_root();
    let t = TempDir::new("replay");
    let n = 3000u64;
    for (fmt, name, speed) in [
        (Format::PcapNs, "a.pcap", "max"),
        (Format::PcapUs, "b.pcap", "20000"),
        (Format::PcapNg, "c.pcapng", "1gbit"),
    ] {
        let f = t.path().join(name);
        let sent = trace(&f, n, fmt);
        let (recs, _) =
            replay_into_record(&format!("rp{}", name.len()), &f, &["--speed", speed], n);
        assert_eq!(recs.len() as u64, n, "{name}");
        for (i, r) in recs.iter().enumerate() {
            assert!(
                r.data == sent[i],
                "{name}: frame {i} differs from the trace"
            );
        }
    }
}

#[test]
fn replay_original_keeps_the_gaps_and_loops() {
    require_root();
    let t = TempDir::new("replayorig");
    let n = 2000u64;
    let f = t.path().join("t.pcap");
    let sent = trace(&f, n, Format::PcapNs);
    let (recs, r) = replay_into_record("rporig", &f, &["--loop", "2"], 2 * n);
    assert_eq!(recs.len() as u64, 2 * n);
    for (i, rec) in recs.iter().enumerate() {
        assert!(rec.data == sent[i % n as usize], "frame {i}");
    }
    // Paced, not blasted: two passes of 2000 frames 200 µs apart span
    // 2 x 0.3998 s (frames never leave early); blasted, they would take a
    // few ms. The margin (10 %) is for the first frame's receive stamp
    // being late on a loaded machine (seen: 0.06 ms over a 0.2 ms margin),
    // which shortens the recorded span; it is no speed check.
    let span = recs.last().unwrap().ts_ns - recs[0].ts_ns;
    assert!(
        span >= 2 * 399_800_000 * 9 / 10,
        "recorded span {span} ns is shorter than the trace's"
    );
    assert!(r["max_late_us"].as_f64().is_some());
}

#[test]
fn replay_and_gen_errors_are_one_line_with_the_fix() {
    require_root();
    let t = TempDir::new("replayerr");
    let bad = t.path().join("bad.pcap");
    std::fs::write(&bad, b"not a capture at all, really").unwrap();
    let (code, _, e) = run_wiretape(None, &["replay", bad.to_str().unwrap(), "-i", "lo"]);
    assert_eq!(code, 1);
    assert!(
        e.contains("not a pcap file") && e.lines().count() == 1,
        "{e}"
    );
    let good = t.path().join("g.pcap");
    trace(&good, 3, Format::PcapNs);
    let (code, _, e) = run_wiretape(None, &["replay", good.to_str().unwrap(), "-i", "nosuch0"]);
    assert_eq!(code, 1);
    assert!(e.contains("no such interface 'nosuch0'"), "{e}");
    let (code, _, e) = run_wiretape(None, &["gen", "-i", "lo", "--count", "5", "--size", "12"]);
    assert_eq!(code, 2, "usage error: {e}");
    assert!(e.contains("out of range"), "{e}");
    let (code, _, e) = run_wiretape(
        None,
        &[
            "replay",
            good.to_str().unwrap(),
            "-i",
            "lo",
            "--speed",
            "fast",
        ],
    );
    assert_eq!(code, 2);
    assert!(e.contains("not a speed"), "{e}");
}
