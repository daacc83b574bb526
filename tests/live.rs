//! Live consumers on a real veth pair (root): in-process subscribers and a
//! PCAP-over-IP client while recording; the time-travel ring dumped by
//! `wiretape ctl dump` and SIGUSR1, checked against a parallel tcpdump
//! capture; `--serve` read by `nc | tcpdump -r -`. Frames proven by count,
//! sequence number and bytes.

mod common;

use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wiretape::files::Record;
use wiretape::live::Recv;
use wiretape::{RecordConfig, Recording, ServeConfig, SubscribeOptions};
use wiretape_testbed::{frames, SizeFn, Testbed, CAP_IF, GEN_IF};

fn seq(data: &[u8]) -> u64 {
    frames::parse(data).expect("a test frame").0
}

/// Records of a queue's files (names hold `-q<N>-`), in order.
fn queue_files(dir: &Path) -> BTreeMap<u32, Vec<Record>> {
    let mut m: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
    for f in pcaps(dir) {
        let name = f.file_name().unwrap().to_str().unwrap().to_owned();
        let q: u32 = name
            .split("-q")
            .nth(1)
            .and_then(|r| r.split('-').next())
            .and_then(|q| q.parse().ok())
            .unwrap_or_else(|| panic!("not a queue file: {name}"));
        m.entry(q).or_default().extend(read_all(&f));
    }
    m
}

/// Asserts `got` is exactly the frames `want` (by sequence number), each
/// byte-identical to `reference`'s copy, in time order.
fn assert_frames(
    what: &str,
    got: &[Record],
    want: &BTreeSet<u64>,
    reference: &BTreeMap<u64, Record>,
) {
    let seqs: BTreeSet<u64> = got.iter().map(|r| seq(&r.data)).collect();
    assert_eq!(seqs.len(), got.len(), "{what}: a frame twice");
    let missing: Vec<_> = want.difference(&seqs).take(10).collect();
    let extra: Vec<_> = seqs.difference(want).take(10).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{what}: {} frames, want {}; missing {missing:?}, extra {extra:?}",
        got.len(),
        want.len()
    );
    for r in got {
        let s = seq(&r.data);
        let want = &reference[&s];
        assert_eq!(r.data, want.data, "{what}: frame {s}: bytes");
        assert_eq!(r.orig_len, want.orig_len, "{what}: frame {s}: length");
    }
    assert!(
        got.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns),
        "{what}: not in time order"
    );
}

#[test]
fn two_subscribers_and_a_pcap_over_ip_client_while_recording() {
    require_root();
    let tb = Testbed::create("live", 2).unwrap();
    let out = TempDir::new("live");
    let dir = out.path().join("cap");
    // This thread records: it enters the test bed's namespace, and the
    // recording's threads (and the TCP client below) are in it too.
    wiretape_testbed::sys::enter_netns(tb.netns()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cfg = RecordConfig::interface(CAP_IF, &dir);
    let mut sc = ServeConfig::new(([127, 0, 0, 1], port).into());
    // 2 MiB: the first client takes a burst released after a queue was
    // held up (a loaded machine); the stuck one is cut off well before
    // the 7.9 MB the second send streams.
    sc.client_buffer = 2 << 20;
    cfg.live.serve = Some(sc);
    let mut rec = Recording::new(cfg);
    let mut all = rec.subscribe(SubscribeOptions::lossless().name("all"));
    let mut stalled = rec.subscribe(
        SubscribeOptions::lossy()
            .name("stalled")
            .buffer_bytes(256 << 10),
    );
    let all_t = std::thread::spawn(move || {
        let mut got: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
        while let Some(b) = all.next_batch() {
            assert_eq!(b.missed_before(), 0);
            let v = got.entry(b.queue()).or_default();
            for f in b.frames() {
                v.push(Record {
                    ts_ns: f.ts_ns,
                    orig_len: f.orig_len,
                    data: f.data.to_vec(),
                    odd: false,
                });
            }
        }
        (got, all.report())
    });
    let stalled_t = std::thread::spawn(move || {
        let (mut batches, mut got, mut told) = (0u32, 0u64, 0u64);
        loop {
            match stalled.recv_timeout(Duration::from_secs(60)) {
                Recv::Batch(b) => {
                    batches += 1;
                    if batches <= 3 {
                        // Deliberately stalled: the recorder must not notice.
                        std::thread::sleep(Duration::from_millis(300));
                    }
                    told += b.missed_before();
                    got += b.len() as u64;
                }
                Recv::Timeout => panic!("no end of stream"),
                Recv::Ended => break,
            }
        }
        (got, told, stalled.report())
    });
    let t0 = now_ns();
    rec.start().unwrap();
    let (n1, n2) = (4000u64, 10_000u64);
    let s1 = tb.send(0..n1, SizeFn::Mixed, 16, Some(40_000)).unwrap();
    std::thread::sleep(Duration::from_millis(500));

    // The PCAP-over-IP client: a real TCP connection whose stream tcpdump
    // reads (`tcpdump -r -`), re-written to a file we read back.
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut hdr = [0u8; 24];
    sock.read_exact(&mut hdr).unwrap(); // accepted: frames from here on
    assert_eq!(&hdr[..4], &0xa1b2_3c4du32.to_le_bytes(), "pcap, ns stamps");
    let client_pcap = out.path().join("client.pcap");
    let mut td = Command::new("tcpdump")
        .args(["--time-stamp-precision=nano", "-r", "-", "-w"])
        .arg(&client_pcap)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump is installed (scripts/setup.sh)");
    let mut stdin = td.stdin.take().unwrap();
    stdin.write_all(&hdr).unwrap();
    let pump = std::thread::spawn(move || std::io::copy(&mut sock, &mut stdin));
    // A second client that reads its header and then nothing (its receive
    // buffer made tiny): cut off once 2 MiB wait for it, never slowing
    // the recorder or the first client.
    let mut stuck = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    set_rcvbuf(&stuck, 4096);
    stuck.read_exact(&mut [0u8; 24]).unwrap();

    let s2 = tb
        .send(n1..n1 + n2, SizeFn::Mixed, 16, Some(40_000))
        .unwrap();
    assert_eq!(s1.sent + s2.sent, n1 + n2);
    std::thread::sleep(Duration::from_millis(300));
    let report = rec.stop().unwrap();
    let t1 = now_ns();
    pump.join()
        .unwrap()
        .expect("the stream ends when the recorder stops");
    let o = td.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "tcpdump: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The files hold every frame sent.
    let n = n1 + n2;
    let v = verify_dir(&dir, n, usize::MAX, t0, t1);
    assert_eq!(v.frames, n, "frames in the files");
    assert_eq!(v.original_bytes, s1.bytes + s2.bytes);
    assert!(report.identity_holds());
    assert_eq!((report.written(), report.drops().total()), (n, 0));
    let files = queue_files(&dir);
    assert_eq!(files.len(), 2, "both queues carried frames");

    // The lossless subscriber saw exactly the files' frames, queue by queue.
    let (got, r) = all_t.join().unwrap();
    assert_eq!((r.delivered, r.skipped), (n, 0), "{r:?}");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>()
    );
    for (q, recs) in &files {
        assert!(
            got[q] == *recs,
            "queue {q}: the subscriber's frames are the file's, in order"
        );
    }

    // The stalled one: delivered + skipped = the files' count.
    let (received, told, r) = stalled_t.join().unwrap();
    assert!(
        r.skipped > 0,
        "stalled 0.9 s with a 256 KiB buffer: it skipped: {r:?}"
    );
    assert_eq!(r.delivered + r.skipped, n, "{r:?}");
    assert_eq!(received, r.delivered);
    assert!(told <= r.skipped);

    // The TCP client's stream, read by tcpdump: the frames recorded after it
    // connected, merged across queues in time order, as in the files. Per
    // queue it is the tail of the queue's file: every frame sent after the
    // connect, and frames sent before it only if their queue's writer
    // published them after it (a writer held off its CPU on a loaded
    // machine), never a gap.
    let reference: BTreeMap<u64, Record> = files
        .values()
        .flatten()
        .map(|r| (seq(&r.data), r.clone()))
        .collect();
    let client = read_all(&client_pcap);
    for (q, recs) in &files {
        let mine: BTreeSet<u64> = recs.iter().map(|r| seq(&r.data)).collect();
        let key = |r: &Record| (r.ts_ns, r.orig_len, r.data.clone());
        let got: Vec<_> = client
            .iter()
            .filter(|r| mine.contains(&seq(&r.data)))
            .map(key)
            .collect();
        let (before, tail) = recs.split_at(recs.len() - got.len().min(recs.len()));
        assert!(
            got == tail.iter().map(key).collect::<Vec<_>>(),
            "queue {q}: the client's frames are the tail of the file"
        );
        assert!(
            before.iter().all(|r| seq(&r.data) < n1),
            "queue {q}: a frame sent after the connect is missing"
        );
    }
    let want: BTreeSet<u64> = client
        .iter()
        .map(|r| seq(&r.data))
        .filter(|&s| s < n1)
        .chain(n1..n)
        .collect();
    assert_frames("PCAP-over-IP client", &client, &want, &reference);
    for r in &client {
        assert_eq!(
            r.ts_ns,
            reference[&seq(&r.data)].ts_ns,
            "stamps as in the files"
        );
    }
    let serve = report.live.serve.as_ref().unwrap();
    assert_eq!(
        (serve.clients, serve.cut_off, serve.refused),
        (2, 1, 0),
        "{serve:?}"
    );
    assert!(
        serve.frames_sent > n2 && serve.frames_sent < 2 * n2,
        "{serve:?}"
    );
    drop(stuck);
    let names: Vec<&str> = report
        .live
        .subscribers
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["all", "stalled", "serve"]);
}

fn set_rcvbuf(s: &std::net::TcpStream, bytes: i32) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt on a socket we own, with a valid int and its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as u32,
        )
    };
    assert_eq!(rc, 0);
}

#[test]
fn a_slow_lossless_subscriber_costs_counted_drops_never_silent_ones() {
    require_root();
    let tb = Testbed::create("slow", 1).unwrap();
    let out = TempDir::new("slow");
    let dir = out.path().join("cap");
    wiretape_testbed::sys::enter_netns(tb.netns()).unwrap();
    let mut cfg = RecordConfig::interface(CAP_IF, &dir);
    if let wiretape::Input::Interface(c) = &mut cfg.input {
        c.frames = 2048; // a small UMEM: little slack
    }
    let mut rec = Recording::new(cfg);
    let sub = rec.subscribe(SubscribeOptions::lossless().buffer_bytes(256 << 10));
    let t = std::thread::spawn(move || {
        let mut got = Vec::new();
        for b in sub {
            std::thread::sleep(Duration::from_millis(20)); // slow
            got.extend(b.frames().map(|f| seq(f.data)));
        }
        got
    });
    let t0 = now_ns();
    rec.start().unwrap();
    let n = 20_000;
    let sent = tb.send(0..n, SizeFn::Fixed(1000), 4, None).unwrap();
    assert_eq!(sent.sent, n);
    std::thread::sleep(Duration::from_millis(500));
    let report = rec.stop().unwrap();
    let got = t.join().unwrap();
    let d = report.drops();
    assert!(report.identity_holds(), "every frame accounted for");
    assert_eq!(report.seen(), n, "the XDP program saw every frame");
    assert!(
        d.fill_ring_empty > 0,
        "the wait cost frames, and they are counted: {d:?}"
    );
    assert_eq!(report.written() + d.total(), n);
    let s = &report.live.subscribers[0];
    assert!(s.waits > 0, "{s:?}");
    assert_eq!((s.delivered, s.skipped), (report.written(), 0));
    // It saw exactly what the file holds.
    let v = verify_dir(&dir, n, usize::MAX, t0, now_ns());
    assert_eq!(v.frames, report.written());
    let in_file: Vec<u64> = pcaps(&dir)
        .iter()
        .flat_map(|f| read_all(f))
        .map(|r| seq(&r.data))
        .collect();
    assert_eq!(got, in_file);
}

/// tcpdump capturing on the generator end: the independent record of what
/// was sent (and when).
fn tcpdump_on(tb: &Testbed, iface: &str, file: &Path) -> Child {
    let mut c = tb
        .command("tcpdump")
        .args([
            "-i",
            iface,
            "-n",
            "-U",
            "-s0",
            "--time-stamp-precision=nano",
            "-w",
        ])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump is installed (scripts/setup.sh)");
    let mut err = BufReader::new(c.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !line.contains("listening on") {
        line.clear();
        err.read_line(&mut line).unwrap();
        assert!(Instant::now() < deadline, "tcpdump did not start");
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    c
}

fn stop_tcpdump(mut c: Child) {
    let _ = Command::new("kill")
        .arg("-INT")
        .arg(c.id().to_string())
        .status();
    let _ = c.wait();
}

fn dumps_in(dir: &Path) -> Vec<PathBuf> {
    pcaps(dir)
        .into_iter()
        .filter(|p| p.to_str().unwrap().contains("-dump-"))
        .collect()
}

#[test]
fn ring_only_dumps_hold_exactly_the_window_asked_for() {
    require_root();
    let tb = Testbed::create("ring", 2).unwrap();
    let out = TempDir::new("ring");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let ref_pcap = out.path().join("sent.pcap");
    let td = tcpdump_on(&tb, GEN_IF, &ref_pcap);
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--ring",
            "64M",
            "--ring-only",
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ],
    );
    let (a, b) = (3000u64, 2000u64);
    tb.send(0..a, SizeFn::Mixed, 16, Some(20_000)).unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    tb.send(a..a + b, SizeFn::Mixed, 16, Some(20_000)).unwrap();
    std::thread::sleep(Duration::from_millis(200));

    // ctl dump --last 1s: the second burst only (the first is 2 s older).
    let d = dir.to_str().unwrap();
    let (code, stdout, stderr) = run_wiretape(Some(&tb), &["ctl", "-w", d, "dump", "--last", "1s"]);
    assert_eq!(code, 0, "ctl dump: {stderr}");
    let last1: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(last1["frames"].as_u64(), Some(b), "{last1:#}");
    assert_eq!(last1["window_overwritten"], Value::Bool(false));
    // ctl status: the live counters.
    let (code, stdout, stderr) = run_wiretape(Some(&tb), &["ctl", "-w", d, "status"]);
    assert_eq!(code, 0, "ctl status: {stderr}");
    let st: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(st["ring"]["frames"].as_u64(), Some(a + b), "{st:#}");
    assert_eq!(st["write_files"], Value::Bool(false));
    // SIGUSR1: the whole ring.
    rec.signal(10);
    rec.wait_for_line("dump (SIGUSR1)", 20);
    // A filter too: the odd-sized frames of the window... by a length test.
    let (code, stdout, stderr) = run_wiretape(
        Some(&tb),
        &["ctl", "-w", d, "dump", "--last", "5s", "greater", "1000"],
    );
    assert_eq!(code, 0, "ctl dump with a filter: {stderr}");
    let filtered: Value = serde_json::from_str(&stdout).unwrap();
    // Usage errors come back as such (exit 2), and change nothing.
    for bad in [
        &["dump", "--last", "1s", "tcp", "port"][..],
        &["dump", "--from", "-1s", "--to", "-2s"][..],
        &["dump", "--from", "yesterday"][..],
    ] {
        let args: Vec<&str> = ["ctl", "-w", d].iter().chain(bad).copied().collect();
        let (code, _, err) = run_wiretape(Some(&tb), &args);
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
    rec.signal(2);
    assert!(rec.wait(20).success(), "{}", rec.stderr_text());
    stop_tcpdump(td);

    let sent: BTreeMap<u64, Record> = read_all(&ref_pcap)
        .into_iter()
        .filter(|r| frames::parse(&r.data).is_some())
        .map(|r| (seq(&r.data), r))
        .collect();
    assert_eq!(sent.len() as u64, a + b, "tcpdump saw every frame sent");
    // The window by tcpdump's clock (the sender's side, µs before ours).
    let (from, to) = (
        last1["from_ns"].as_u64().unwrap(),
        last1["to_ns"].as_u64().unwrap(),
    );
    let in_window: BTreeSet<u64> = sent
        .values()
        .filter(|r| r.ts_ns >= from && r.ts_ns < to)
        .map(|r| seq(&r.data))
        .collect();
    assert_eq!(
        in_window,
        (a..a + b).collect(),
        "the parallel capture agrees on the window"
    );
    let f1 = PathBuf::from(last1["file"].as_str().unwrap());
    let got = read_all(&f1);
    assert_frames("ctl dump --last 1s", &got, &in_window, &sent);
    assert!(
        got.iter().all(|r| r.ts_ns >= from && r.ts_ns < to),
        "stamps inside the window"
    );
    assert!(
        f1.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .contains(&wiretape::timestamp::format_compact(got[0].ts_ns)),
        "named by its first frame"
    );
    let all: Vec<PathBuf> = dumps_in(&dir).into_iter().filter(|p| *p != f1).collect();
    let ff = PathBuf::from(filtered["file"].as_str().unwrap());
    let usr1: Vec<&PathBuf> = all.iter().filter(|p| **p != ff).collect();
    assert_eq!(usr1.len(), 1, "{all:?}");
    assert_frames(
        "SIGUSR1 dump",
        &read_all(usr1[0]),
        &sent.keys().copied().collect(),
        &sent,
    );
    let big: BTreeSet<u64> = sent
        .iter()
        .filter(|(_, r)| r.data.len() >= 1000)
        .map(|(s, _)| *s)
        .collect();
    assert_frames("ctl dump greater 1000", &read_all(&ff), &big, &sent);

    // Nothing else was written: the three dumps, no capture file, no index,
    // the control socket gone.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "only the dumps: {names:?}");
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["write_files"], Value::Bool(false));
    assert_eq!(j["files"].as_array().unwrap().len(), 0);
    assert_eq!(
        j["packets_written"].as_u64(),
        Some(a + b),
        "frames kept in the ring"
    );
    assert_eq!(j["ring"]["frames"].as_u64(), Some(a + b));
    assert_eq!(j["dumps"].as_array().unwrap().len(), 3);
}

#[test]
fn serve_streams_to_nc_and_tcpdump_reads_it() {
    require_root();
    let tb = Testbed::create("serve", 2).unwrap();
    let out = TempDir::new("serve");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--serve",
            "127.0.0.1:57012",
            "--serve-max-clients",
            "2",
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ],
    );
    let (n1, n2) = (2000u64, 3000u64);
    let t0 = now_ns();
    tb.send(0..n1, SizeFn::Mixed, 16, Some(40_000)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client_pcap = out.path().join("client.pcap");
    let client = tb
        .command("sh")
        .arg("-c")
        .arg(format!(
            "nc -d 127.0.0.1 57012 | tcpdump --time-stamp-precision=nano -r - -w {}",
            client_pcap.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rec.wait_for_line("serve: client", 10);
    // A second client, tshark; a third one is over --serve-max-clients.
    let tshark = tb
        .command("sh")
        .arg("-c")
        .arg("nc -d 127.0.0.1 57012 | tshark -r - -T fields -e frame.len")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rec.wait_for_lines("serve: client", 2, 10);
    let third = tb
        .command("nc")
        .args(["-d", "127.0.0.1", "57012"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    rec.wait_for_line("serve: refused", 10);
    tb.send(n1..n1 + n2, SizeFn::Mixed, 16, Some(40_000))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rec.signal(2);
    assert!(rec.wait(20).success(), "{}", rec.stderr_text());
    let o = client.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "nc | tcpdump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ts = tshark.wait_with_output().unwrap();
    assert!(
        ts.status.success(),
        "nc | tshark: {}",
        String::from_utf8_lossy(&ts.stderr)
    );
    let lens: Vec<u64> = String::from_utf8_lossy(&ts.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert!(
        third.wait_with_output().unwrap().stdout.is_empty(),
        "refused: nothing sent"
    );

    let v = verify_dir(&dir, n1 + n2, usize::MAX, t0, now_ns());
    assert_eq!(v.frames, n1 + n2);
    let reference: BTreeMap<u64, Record> = queue_files(&dir)
        .into_values()
        .flatten()
        .map(|r| (seq(&r.data), r))
        .collect();
    assert_frames(
        "nc | tcpdump -r -",
        &read_all(&client_pcap),
        &(n1..n1 + n2).collect(),
        &reference,
    );
    // tshark read the same frames: count and bytes.
    let phase2: u64 = (n1..n1 + n2).map(|s| reference[&s].orig_len as u64).sum();
    assert_eq!(
        (lens.len() as u64, lens.iter().sum::<u64>()),
        (n2, phase2),
        "tshark -r -"
    );
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["serve"]["clients"].as_u64(), Some(2));
    assert_eq!(j["serve"]["refused"].as_u64(), Some(1));
    assert_eq!(j["serve"]["frames_sent"].as_u64(), Some(2 * n2));
    assert_eq!(j["subscribers"][0]["name"], "serve");
    assert_eq!(j["subscribers"][0]["delivered"].as_u64(), Some(n2));

    // A non-loopback address is refused before anything is attached.
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-i",
            CAP_IF,
            "-w",
            dir.to_str().unwrap(),
            "--serve",
            "0.0.0.0:57013",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--serve-allow-remote"), "{err}");
    assert!(!xdp_attached(&tb));
}

#[test]
fn live_flags_and_ctl_fail_clearly() {
    let tmp = TempDir::new("ctlerr");
    let d = tmp.path().to_str().unwrap();
    let (code, _, err) = run_wiretape(None, &["ctl", "-w", d, "status"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot reach the recorder"), "{err}");
    let o = Command::new(bin())
        .args(["ctl", "status"])
        .current_dir(tmp.path())
        .env_remove("WIRETAPE_CONTROL")
        .output()
        .unwrap();
    // Which recorder is not said: a usage error.
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give -w DIR"));
    let (code, _, err) = run_wiretape(None, &["ctl", "-w", d, "dump", "--from", "nonsense"]);
    assert_eq!(code, 2, "{err}");
    for (args, says) in [
        (&["--ring", "1M"][..], "too small"),
        (&["--ring-only"][..], "--ring"),
        (&["--serve", "0.0.0.0:57099"][..], "--serve-allow-remote"),
        (&["--serve-max-clients", "3"][..], "--serve"),
    ] {
        let mut a = vec!["record", "-r", "/nonexistent.pcap", "-w", d];
        a.extend_from_slice(args);
        let (code, _, err) = run_wiretape(None, &a);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
