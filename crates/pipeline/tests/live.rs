//! Live consumers without root: the file engine feeds a [`Recording`]
//! whose subscribers, ring and dumps are checked frame by frame against the
//! files the same run wrote.

#![allow(unused_crate_dependencies)] // a test crate uses only some of them

use std::path::{Path, PathBuf};
use std::time::Duration;
use wiretape_capture::tx::Speed;
use wiretape_files::{PcapReader, Record};
use wiretape_pipeline::live::Recv;
use wiretape_pipeline::{DumpRequest, Input, RecordConfig, Recording, SubscribeOptions};
use wiretape_storage::{FileSink, PcapWriter};

mod common;
use common::Dir;

fn frame(i: u64) -> Vec<u8> {
    let len = 60 + (i as usize * 131) % 1455;
    let mut f: Vec<u8> = (0..len).map(|j| (i as usize * 7 + j) as u8).collect();
    f[..8].copy_from_slice(&i.to_le_bytes());
    f
}

const T0: u64 = 1_700_000_000_000_000_000;

/// A pcap (ns) of `n` frames stamped `gap_ns` apart.
fn trace(dir: &Path, n: u64, gap_ns: u64) -> PathBuf {
    let p = dir.join("in.pcap");
    let mut w = PcapWriter::new(FileSink::create(&p).unwrap(), 65535);
    for i in 0..n {
        w.write(T0 + i * gap_ns, &frame(i)).unwrap();
    }
    w.close().unwrap();
    p
}

fn read(files: &[PathBuf]) -> Vec<(u64, u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rec = Record::default();
    for f in files {
        let mut r = PcapReader::open(f).unwrap();
        while r.next_into(&mut rec).unwrap() {
            out.push((rec.ts_ns, rec.orig_len, rec.data.clone()));
        }
    }
    out
}

fn paced(cfg: &mut RecordConfig, speed: Speed) {
    if let Input::File(f) = &mut cfg.input {
        f.speed = speed;
    }
}

#[test]
fn lossless_sees_exactly_the_files_and_a_stalled_lossy_one_counts_what_it_missed() {
    let d = Dir::new("live-subs");
    let n = 60_000;
    let input = trace(&d.0, n, 1000);
    let mut cfg = RecordConfig::file(&input, d.0.join("out"));
    cfg.storage.block_size = 256 << 10;
    // 0.6 s: the stalled subscriber comes back while frames still flow.
    paced(&mut cfg, Speed::Pps(100_000.0));
    let mut rec = Recording::new(cfg);
    let mut lossless = rec.subscribe(SubscribeOptions::lossless().name("all"));
    let mut lossy = rec.subscribe(
        SubscribeOptions::lossy()
            .name("stalled")
            .buffer_bytes(2 << 20),
    );
    let all = std::thread::spawn(move || {
        let mut got = Vec::new();
        while let Some(b) = lossless.next_batch() {
            assert_eq!(b.missed_before(), 0, "lossless never misses");
            for f in b.frames() {
                got.push((f.ts_ns, f.orig_len, f.data.to_vec()));
            }
        }
        (got, lossless.report())
    });
    let stalled = std::thread::spawn(move || {
        let (mut got, mut missed) = (0u64, 0u64);
        let mut last_seq: Option<u64> = None;
        let mut first = true;
        loop {
            match lossy.recv_timeout(Duration::from_secs(30)) {
                Recv::Batch(b) => {
                    if first {
                        // Deliberately stalled: the stream runs on without it.
                        std::thread::sleep(Duration::from_millis(200));
                        first = false;
                    }
                    missed += b.missed_before();
                    for f in b.frames() {
                        let seq = u64::from_le_bytes(f.data[..8].try_into().unwrap());
                        assert!(last_seq.is_none_or(|l| seq > l), "order kept");
                        assert_eq!(f.data, &frame(seq)[..], "frame {seq} intact");
                        last_seq = Some(seq);
                        got += 1;
                    }
                }
                Recv::Timeout => panic!("no end"),
                Recv::Ended => break,
            }
        }
        (got, missed, lossy.report())
    });
    rec.start().unwrap();
    let report = rec.wait().unwrap();
    assert!(report.identity_holds());
    assert_eq!(report.written(), n);
    let files: Vec<PathBuf> = report
        .queues
        .iter()
        .flat_map(|q| q.sink.files.clone())
        .collect();
    let in_files = read(&files);
    assert_eq!(in_files.len() as u64, n);

    let (got, r) = all.join().unwrap();
    assert_eq!(got.len() as u64, n, "lossless: every frame");
    assert!(
        got == in_files,
        "lossless: exactly the files' frames, in order"
    );
    assert_eq!((r.delivered, r.skipped, r.received), (n, 0, n));

    let (got, missed, r) = stalled.join().unwrap();
    assert!(r.skipped > 0, "the stalled subscriber skipped: {r:?}");
    assert_eq!(
        r.delivered + r.skipped,
        n,
        "delivered + skipped = the files: {r:?}"
    );
    assert_eq!(got, r.delivered, "it received what was delivered");
    assert_eq!(missed, r.skipped, "it was told every frame it missed");
    assert!(got > n / 4, "it resumed after its stall: {got}");
    let subs = &report.live.subscribers;
    assert_eq!(subs.len(), 2);
    assert_eq!(subs[1].name, "stalled");
    assert_eq!(subs[1].delivered + subs[1].skipped, n);
}

#[test]
fn a_slow_lossless_subscriber_makes_the_writer_wait_and_nothing_is_lost() {
    let d = Dir::new("live-slow");
    let n = 20_000;
    let input = trace(&d.0, n, 1000);
    let mut cfg = RecordConfig::file(&input, d.0.join("out"));
    cfg.storage.block_size = 64 << 10;
    let mut rec = Recording::new(cfg);
    let sub = rec.subscribe(SubscribeOptions::lossless().buffer_bytes(256 << 10));
    let t = std::thread::spawn(move || {
        let mut k = 0u64;
        for b in sub {
            std::thread::sleep(Duration::from_micros(300));
            for f in b.frames() {
                assert_eq!(f.data, &frame(k)[..]);
                k += 1;
            }
        }
        k
    });
    rec.start().unwrap();
    let report = rec.wait().unwrap();
    assert_eq!(t.join().unwrap(), n);
    assert_eq!(report.written(), n, "the file engine waits: nothing lost");
    let s = &report.live.subscribers[0];
    assert!(s.waits > 0 && s.wait_ms > 0.0, "the writer waited: {s:?}");
    assert_eq!((s.delivered, s.skipped), (n, 0));
}

#[test]
fn dumps_hold_exactly_the_window_and_ring_only_writes_nothing_else() {
    let d = Dir::new("live-dump");
    // 3 s of packet time played at its own pace: dumps happen while it runs.
    let n = 15_000;
    let gap = 200_000;
    let input = trace(&d.0, n, gap);
    for ring_only in [false, true] {
        let out = d.0.join(format!("out-{ring_only}"));
        let mut cfg = RecordConfig::file(&input, &out);
        paced(&mut cfg, Speed::Original(1.0));
        cfg.live.ring_bytes = 16 << 20;
        cfg.live.chunk_bytes = 256 << 10;
        cfg.live.write_files = !ring_only;
        let mut rec = Recording::new(cfg);
        rec.start().unwrap();
        std::thread::sleep(Duration::from_millis(2200));
        // Edges on frames (from inclusive, to exclusive), and 1 ns beside them.
        let windows = [
            (T0 + 1000 * gap, T0 + 3000 * gap, None),
            (T0 + 1000 * gap + 1, T0 + 3000 * gap + 1, None),
            // libpcap's `greater N` is len >= N.
            (T0 + 2 * gap, T0 + 7000 * gap, Some("greater 1000")),
        ];
        let mut dumps = Vec::new();
        for (from, to, filter) in windows {
            let r = rec
                .dump(DumpRequest {
                    from_ns: Some(from),
                    to_ns: Some(to),
                    filter: filter.map(str::to_owned),
                    ..Default::default()
                })
                .unwrap();
            assert!(r.error.is_none(), "{r:?}");
            assert!(!r.window_overwritten);
            dumps.push((from, to, filter, r));
        }
        let report = rec.wait().unwrap();
        assert_eq!(report.written(), n);
        assert_eq!(report.live.dumps.len(), 3);
        let ring = report.live.ring.as_ref().unwrap();
        assert_eq!(ring.frames, n);
        for (from, to, filter, r) in dumps {
            let want: Vec<_> = (0..n)
                .filter(|&i| {
                    let ts = T0 + i * gap;
                    ts >= from && ts < to && (filter.is_none() || frame(i).len() >= 1000)
                })
                .map(|i| (T0 + i * gap, frame(i).len() as u32, frame(i)))
                .collect();
            let file = r.file.clone().expect("a dump file");
            let got = read(std::slice::from_ref(&file));
            assert_eq!(got.len(), want.len(), "{from}..{to} {filter:?}");
            assert!(got == want, "the dump holds exactly the window's frames");
            assert_eq!(r.frames, want.len() as u64);
            let name = file.file_name().unwrap().to_str().unwrap().to_owned();
            assert!(
                name.contains(&wiretape_timestamp::format_compact(want[0].0)),
                "named by its first frame: {name}"
            );
        }
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let dumps = names.iter().filter(|n| n.contains("-dump-")).count();
        assert_eq!(dumps, 3, "{names:?}");
        if ring_only {
            assert_eq!(names.len(), 3, "nothing but the dumps: {names:?}");
            assert!(report.queues[0].sink.files.is_empty());
        }
    }
}

#[test]
fn a_lossless_subscriber_that_reads_nothing_cannot_hang_the_stop() {
    let d = Dir::new("live-stuck");
    let n = 50_000;
    let input = trace(&d.0, n, 1000);
    let mut cfg = RecordConfig::file(&input, d.0.join("out"));
    paced(&mut cfg, Speed::Pps(100_000.0));
    let mut rec = Recording::new(cfg);
    let sub = rec.subscribe(SubscribeOptions::lossless().buffer_bytes(1 << 20));
    rec.start().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = std::time::Instant::now();
    let report = rec.stop().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
    let s = &report.live.subscribers[0];
    assert!(s.gave_up_waiting && s.skipped > 0, "{s:?}");
    assert_eq!(s.delivered + s.skipped, report.written(), "{s:?}");
    assert!(report.identity_holds());
    // What was delivered is still there to read, then the end.
    let got: usize = sub.map(|b| b.len()).sum();
    assert_eq!(got as u64, s.delivered);
}
