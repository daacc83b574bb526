//! `wiretape record` end to end: real veth pairs in private namespaces, the
//! real XDP program, real AF_XDP sockets; frames proven by count, bytes and content.

mod common;

use common::*;
use serde_json::Value;
use wiretape_testbed::{SizeFn, Testbed};

/// Sends `n` frames of mixed sizes over `flows` flows while recording with
/// `mode`, then checks files, bytes, order and accounting.
fn record_exactly(tag: &str, mode: &str, queues: u32, n: u64, flows: u16) -> (Value, Verified) {
    require_root();
    let tb = Testbed::create(tag, queues).unwrap();
    let out = TempDir::new(tag);
    let json = out.path().join("summary.json");
    let dir = out.path().join("cap");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-c",
            &n.to_string(),
            "--xdp-mode",
            mode,
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(
        rec.stderr_text().contains(&format!("{mode} XDP")),
        "mode not in effect: {}",
        rec.stderr_text()
    );
    let sent = tb.send(0..n, SizeFn::Mixed, flows, Some(100_000)).unwrap();
    assert_eq!(sent.sent, n);
    // Flow f goes out on queue f % queues: with at least as many flows as
    // queues, every queue carries frames.
    sent.require_queues(0..queues as usize).unwrap();
    let st = rec.wait(30);
    let t1 = now_ns();
    assert!(st.success(), "wiretape failed: {}", rec.stderr_text());
    assert!(
        !xdp_attached(&tb),
        "XDP program left attached after a clean stop"
    );

    // The veth pair dropped nothing on its way to the program.
    assert_eq!(tb.link_stat(wiretape_testbed::GEN_IF, "tx_dropped"), 0);
    let j = read_json(&json);
    let v = verify_dir(&dir, n, usize::MAX, t0, t1);
    assert_eq!(v.frames, n, "frames in the files");
    assert_eq!(v.original_bytes, sent.bytes, "bytes in the files");
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    assert_eq!(j["packets_seen"].as_u64(), Some(n));
    assert_eq!(j["bytes_written"].as_u64(), Some(sent.bytes));
    assert_eq!(j["drops"]["total"].as_u64(), Some(0));
    assert_identity(&j);
    assert_eq!(
        j["files"].as_array().unwrap().len(),
        queues as usize,
        "one file per queue"
    );
    (j, v)
}

#[test]
fn native_mode_records_every_frame_byte_identical_on_two_queues() {
    let (j, v) = record_exactly("nat", "native", 2, 20_000, 16);
    assert_eq!(j["xdp_mode"], "native");
    // 16 flows over both queues (8 each): both files hold frames.
    let busy = v.per_file.values().filter(|&&k| k > 0).count();
    assert_eq!(busy, 2, "frames per file: {:?}", v.per_file);
}

#[test]
fn generic_mode_records_every_frame_byte_identical() {
    let (j, _) = record_exactly("gen", "generic", 1, 10_000, 4);
    assert_eq!(j["xdp_mode"], "generic");
}

#[test]
fn four_queues_all_accounted() {
    let (j, v) = record_exactly("q4", "native", 4, 20_000, 64);
    let per_q: Vec<u64> = j["per_queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["packets_written"].as_u64().unwrap())
        .collect();
    assert_eq!(per_q.iter().sum::<u64>(), 20_000);
    // 64 flows, 16 per queue: every queue's file holds its quarter.
    assert_eq!(per_q, vec![5_000; 4], "frames per queue");
    assert_eq!(
        v.per_file.values().filter(|&&k| k > 0).count(),
        4,
        "frames per queue: {per_q:?}"
    );
}

#[test]
fn snaplen_cuts_frames_but_keeps_original_length_and_tshark_reads_it() {
    require_root();
    let n = 3000;
    let tb = Testbed::create("snap", 1).unwrap();
    let out = TempDir::new("snap");
    let json = out.path().join("s.json");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            out.path().to_str().unwrap(),
            "-c",
            "3000",
            "-s",
            "100",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let sent = tb.send(0..n, SizeFn::Mixed, 1, Some(100_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let v = verify_dir(out.path(), n, 100, t0, now_ns());
    assert_eq!(v.frames, n);
    assert_eq!(v.original_bytes, sent.bytes, "orig_len kept");
    assert!(v.captured_bytes < sent.bytes);
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["bytes_written"].as_u64(), Some(v.captured_bytes));
    assert!(j["per_queue"][0]["truncated"].as_u64().unwrap() > 0);

    // An independent reader agrees: tshark sees n frames, caplen <= 100, ns times.
    let f = &pcaps(out.path())[0];
    let o = std::process::Command::new("tshark")
        .args([
            "-r",
            f.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
            "-e",
            "frame.time_epoch",
        ])
        .output()
        .expect("tshark is installed (the README's setup installs it)");
    assert!(
        o.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len() as u64, n);
    let orig: u64 = rows.iter().map(|r| r[0].parse::<u64>().unwrap()).sum();
    assert_eq!(orig, sent.bytes);
    assert!(rows.iter().all(|r| r[1].parse::<u32>().unwrap() <= 100));
    assert!(
        rows.iter()
            .all(|r| r[2].split('.').nth(1).map(str::len) == Some(9)),
        "nanosecond times"
    );
}

#[test]
fn duration_and_sigint_stop_cleanly_with_everything_flushed() {
    require_root();
    let tb = Testbed::create("sig", 1).unwrap();
    // -d: stops on its own, exit 0, identity holds even with no traffic
    let out = TempDir::new("dur");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            out.path().to_str().unwrap(),
            "-d",
            "0.5",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(rec.wait(20).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_eq!(j["stop_reason"], "duration reached");
    assert_identity(&j);
    assert!(!xdp_attached(&tb));

    // SIGINT after sending: every frame sent is in the files
    for sig in [2, 15] {
        let out = TempDir::new("sig");
        let json = out.path().join("s.json");
        let t0 = now_ns();
        let mut rec = Recorder::start(
            &tb,
            &[
                "-w",
                out.path().to_str().unwrap(),
                "--summary-json",
                json.to_str().unwrap(),
            ],
        );
        let sent = tb.send(0..5000, SizeFn::Mixed, 1, Some(100_000)).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        rec.signal(sig);
        assert!(rec.wait(20).success(), "{}", rec.stderr_text());
        let v = verify_dir(out.path(), 5000, usize::MAX, t0, now_ns());
        assert_eq!(v.frames, sent.sent, "signal {sig}");
        let j = read_json(&json);
        assert_eq!(j["stop_reason"], "signal");
        assert_eq!(j["packets_written"].as_u64(), Some(5000));
        assert_identity(&j);
        assert!(!xdp_attached(&tb), "left attached after signal {sig}");
    }
}

#[test]
fn count_stops_at_exactly_count_and_accounts_for_the_rest() {
    require_root();
    let tb = Testbed::create("cnt", 1).unwrap();
    let out = TempDir::new("cnt");
    let json = out.path().join("s.json");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            out.path().join("c").to_str().unwrap(),
            "-c",
            "1000",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    // More than COUNT arrive; exactly COUNT are written, the rest are accounted.
    tb.send(0..3000, SizeFn::Fixed(200), 1, Some(200_000))
        .unwrap();
    assert!(rec.wait(20).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_eq!(j["packets_written"].as_u64(), Some(1000));
    assert_eq!(j["stop_reason"], "count reached");
    assert_identity(&j);
    let v = verify_dir(&out.path().join("c"), 3000, usize::MAX, t0, now_ns());
    assert_eq!(v.frames, 1000);
}

#[test]
fn the_demo_as_a_library_run_proves_every_frame_and_keeps_its_files_when_asked() {
    use wiretape_testbed::demo::{self, DemoEvent, DemoOptions};
    require_root();
    let out = TempDir::new("demo-lib");
    let mut opts = DemoOptions::default();
    opts.count = 600;
    opts.dir = Some(out.path().join("cap"));
    let mut seen = Vec::new();
    let r = demo::run(&opts, |ev| {
        seen.push(match ev {
            DemoEvent::Created { .. } => "created",
            DemoEvent::Record {
                event: wiretape::Event::Started(_),
                ..
            } => "started",
            _ => "other",
        })
    })
    .unwrap();
    assert_eq!(&seen[..2], ["created", "started"], "{seen:?}");
    assert!(r.ok(), "{:?}", r.mismatches);
    assert_eq!((r.sent, r.recorded), (600, 600));
    assert!(r.kept && r.dir == out.path().join("cap"));
    // 8 flows over the 2 queues: 300 frames each, one file per queue, and
    // capinfos (an independent reader) agrees on frames and bytes.
    let mut per_queue = [0u64; 2];
    let mut bytes = 0;
    for f in &r.files {
        let (frames, data) = capinfos(&f.path);
        assert_eq!(frames, f.frames, "{}", f.path.display());
        per_queue[f.queue as usize] += frames;
        bytes += data;
    }
    assert_eq!(per_queue, [300, 300]);
    assert_eq!(bytes, r.sent_bytes);
    assert_eq!(r.first_records.len(), 5);
    assert!(r.first_records.windows(2).all(|w| w[0] <= w[1]));
    // The report as JSON: the run's summary is the recorder's own.
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["summary"]["packets_written"], 600, "{j}");
    assert_eq!(j["mismatches"], serde_json::json!([]));
    assert_eq!(j["files"].as_array().unwrap().len(), 2);
    assert_identity(&j["summary"]);
}
