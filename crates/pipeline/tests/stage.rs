//! The pipeline without root: the file engine feeds the per-queue stage,
//! which writes through the storage crate's rotating writer. Every test
//! counts frames and bytes and reads the files back.

#![allow(unused_crate_dependencies)] // a test crate uses only some of them

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use wiretape_capture::{FileConfig, FileEngine};
use wiretape_files::{Format, PcapReader, Record};
use wiretape_pipeline::{
    record, Event, FileSource, FrameSink, RecordConfig, Running, StageConfig, StopReason,
};
use wiretape_storage::{FileSink, PcapWriter, StorageError, WriterReport};
use wiretape_timestamp::TsMode;

mod common;
use common::Dir;

fn frame(i: u64) -> Vec<u8> {
    let len = 60 + (i as usize * 131) % 1455;
    (0..len).map(|j| (i as usize * 7 + j) as u8).collect()
}

/// A pcap (ns) of `n` frames, stamped 1 µs apart.
fn trace(dir: &Path, n: u64) -> PathBuf {
    let p = dir.join("in.pcap");
    let mut w = PcapWriter::new(FileSink::create(&p).unwrap(), 65535);
    for i in 0..n {
        w.write(1_700_000_000_000_000_000 + i * 1000, &frame(i))
            .unwrap();
    }
    w.close().unwrap();
    p
}

fn read_all(files: &[PathBuf]) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rec = Record::default();
    for f in files {
        let mut r = PcapReader::open(f).unwrap();
        while r.next_into(&mut rec).unwrap() {
            out.push((rec.ts_ns, rec.data.clone()));
        }
    }
    out
}

#[test]
fn record_from_a_file_writes_every_frame_in_order() {
    let d = Dir::new("stage-all");
    let input = trace(&d.0, 20_000);
    let out = d.0.join("out");
    let mut cfg = RecordConfig::file(&input, &out);
    cfg.storage.rotate_size = Some(1 << 20);
    cfg.storage.block_size = 64 << 10;
    let mut started = false;
    let rep = record(&cfg, &AtomicBool::new(false), |e| {
        if let Event::Started(i) = e {
            started = i.engine == "file" && i.ifname == "in";
        }
    })
    .unwrap();
    assert!(started);
    assert!(rep.identity_holds());
    assert_eq!(rep.seen(), 20_000);
    assert_eq!(rep.written(), 20_000);
    let want_bytes: u64 = (0..20_000).map(|i| frame(i).len() as u64).sum();
    assert_eq!(rep.bytes_written(), want_bytes);
    let files = &rep.queues[0].sink.files;
    assert!(files.len() > 5, "rotated: {} files", files.len());
    for f in files {
        assert!(
            std::fs::metadata(f).unwrap().len() <= 1 << 20,
            "{f:?} within the size"
        );
    }
    let got = read_all(files);
    assert_eq!(got.len(), 20_000);
    for (i, (ts, data)) in got.iter().enumerate() {
        assert_eq!(
            *ts,
            1_700_000_000_000_000_000 + i as u64 * 1000,
            "stamp {i}"
        );
        assert_eq!(*data, frame(i as u64), "frame {i}");
    }
}

#[test]
fn count_budget_is_exact_and_the_rest_is_after_count() {
    let d = Dir::new("stage-count");
    let input = trace(&d.0, 5000);
    let mut cfg = RecordConfig::file(&input, d.0.join("out"));
    cfg.stage.count = Some(1234);
    cfg.stage.batch = 100;
    let rep = record(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    assert!(rep.identity_holds());
    assert_eq!(rep.written(), 1234);
    assert_eq!(rep.drops().after_count, rep.seen() - 1234);
    assert_eq!(read_all(&rep.queues[0].sink.files).len(), 1234);
}

/// A sink that counts, and fails (like a broken disk) from frame `fail_at` on.
struct Failing {
    frames: u64,
    lost: u64,
    fail_at: u64,
}

impl FrameSink for Failing {
    fn write(&mut self, _ts: u64, _f: &[u8], _wire: u32) -> Result<(), Arc<StorageError>> {
        if self.frames >= self.fail_at {
            self.lost += 1;
            return Err(Arc::new(StorageError::Internal("injected")));
        }
        self.frames += 1;
        Ok(())
    }
    fn idle(&mut self) {}
    fn close(self) -> WriterReport {
        WriterReport {
            frames: self.frames,
            lost: self.lost,
            error: (self.lost > 0).then(|| Arc::new(StorageError::Internal("injected"))),
            ..Default::default()
        }
    }
}

#[test]
fn a_failing_sink_stops_the_run_and_every_frame_is_accounted_for() {
    let d = Dir::new("stage-fail");
    let input = trace(&d.0, 10_000);
    let engine = FileEngine::open(
        &FileConfig::new(&input),
        FileSource::open(&input).unwrap(),
        TsMode::Off,
    )
    .unwrap();
    let run = Running::start(engine, &StageConfig::default(), |_| {
        Ok::<_, StorageError>(Failing {
            frames: 0,
            lost: 0,
            fail_at: 3000,
        })
    })
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let why = loop {
        if let Some(w) = run.should_stop() {
            break w;
        }
        assert!(std::time::Instant::now() < deadline, "never stopped");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(why, StopReason::SinkFailed);
    let (_engine, queues, _) = run.stop();
    let q = &queues[0];
    assert_eq!(q.written, 3000);
    assert!(q.drops.write_error > 0);
    assert!(q.identity_holds(), "{q:?}");
    assert!(q.error().is_some());
}

#[test]
fn stamping_a_file_as_it_is_fed_replaces_its_stamps() {
    let d = Dir::new("stage-kpt");
    let input = trace(&d.0, 3000);
    let mut cfg = RecordConfig::file(&input, d.0.join("out"));
    cfg.ts = TsMode::Kpt;
    let t0 = wiretape_timestamp::realtime_ns();
    let rep = record(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
    let t1 = wiretape_timestamp::realtime_ns();
    assert_eq!(rep.written(), 3000);
    let got = read_all(&rep.queues[0].sink.files);
    assert!(
        got.iter().all(|(ts, _)| *ts >= t0 && *ts <= t1),
        "stamped now"
    );
    for (i, (_, data)) in got.iter().enumerate() {
        assert_eq!(*data, frame(i as u64));
    }
    let mut cfg = RecordConfig::file(&input, d.0.join("out2"));
    cfg.ts = TsMode::Xdp;
    assert!(record(&cfg, &AtomicBool::new(false), |_| {})
        .unwrap_err()
        .to_string()
        .contains("needs the XDP program"));
}

#[test]
fn formats_round_trip_through_the_stage() {
    for fmt in [Format::PcapNs, Format::PcapUs, Format::PcapNg] {
        let d = Dir::new("stage-fmt");
        let input = trace(&d.0, 4000);
        let mut cfg = RecordConfig::file(&input, d.0.join("out"));
        cfg.storage.format = fmt;
        let rep = record(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
        let got = read_all(&rep.queues[0].sink.files);
        assert_eq!(got.len(), 4000, "{fmt:?}");
        for (i, (ts, data)) in got.iter().enumerate() {
            let want = 1_700_000_000_000_000_000 + i as u64 * 1000;
            let want = if fmt == Format::PcapUs {
                want / 1000 * 1000
            } else {
                want
            };
            assert_eq!(*ts, want, "{fmt:?} stamp {i}");
            assert_eq!(*data, frame(i as u64), "{fmt:?} frame {i}");
        }
    }
}
