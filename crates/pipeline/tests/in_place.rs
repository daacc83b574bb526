//! A plain pcap file read in place (the file engine maps it and hands out
//! frames where they lie) gives exactly what reading it into the ring gives:
//! the same frames (bytes, stamps, lengths on the wire) in the same order,
//! the same counters and the same error at the same place, for both byte
//! orders and both resolutions, for files cut short anywhere, with a
//! corrupt record header or a tail of zeros, with a capture filter and
//! with pacing. Both are also checked against the records as written.

#![allow(unused_crate_dependencies)] // a test crate uses only some of them

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape_capture::tx::Speed;
use wiretape_capture::{CaptureFilter, FileConfig, FileEngine};
use wiretape_files::Format;
use wiretape_pipeline::{FileSource, FrameSink, Running, StageConfig, StopReason};
use wiretape_storage::{FileSink, PcapWriter, StorageError, WriterReport};
use wiretape_timestamp::TsMode;

mod common;
use common::Dir;

/// One frame as the stage hands it to its sink.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Frame {
    ts: u64,
    data: Vec<u8>,
    wire: u32,
}

/// A sink that keeps every frame.
/// What one run gave.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    frames: Vec<Frame>,
    seen: u64,
    seen_bytes: u64,
    filtered: u64,
    error: Option<String>,
}

/// A record as written into a test file.
#[derive(Clone, Debug)]
struct Rec {
    sec: u32,
    frac: u32,
    data: Vec<u8>,
    orig: u32,
}

/// `n` records of varied lengths (0 to 1600 bytes, some cut short, some
/// stating a wire length below their length), stamps with every fraction
/// from 0 to the largest.
fn records(n: usize, nanos: bool) -> Vec<Rec> {
    let frac_max: u32 = if nanos { 999_999_999 } else { 999_999 };
    (0..n)
        .map(|i| {
            let len = match i % 7 {
                0 => 0,
                1 => 60,
                2 => 1514,
                3 => 1600,
                _ => (i * 131) % 1601,
            };
            let data: Vec<u8> = (0..len).map(|j| (i * 31 + j * 7) as u8).collect();
            let orig = match i % 5 {
                0 => len as u32 + 100,                      // cut short by a snap length
                1 => (len as u32).saturating_sub(3).max(1), // states less than it holds
                _ => (len as u32).max(1),
            };
            Rec {
                sec: 1_700_000_000 + (i / 3) as u32,
                frac: match i % 4 {
                    0 => 0,
                    1 => frac_max,
                    _ => (i as u32 * 7919) % frac_max,
                },
                data,
                orig,
            }
        })
        .collect()
}

/// The records as a classic pcap file, by hand: ns or µs, either byte order.
fn pcap_bytes(recs: &[Rec], nanos: bool, big_endian: bool) -> Vec<u8> {
    let w = |b: &mut Vec<u8>, v: u32| {
        if big_endian {
            b.extend_from_slice(&v.to_be_bytes())
        } else {
            b.extend_from_slice(&v.to_le_bytes())
        }
    };
    let mut b = Vec::new();
    w(&mut b, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    let (major, minor) = (2u16, 4u16);
    if big_endian {
        b.extend_from_slice(&major.to_be_bytes());
        b.extend_from_slice(&minor.to_be_bytes());
    } else {
        b.extend_from_slice(&major.to_le_bytes());
        b.extend_from_slice(&minor.to_le_bytes());
    }
    b.extend_from_slice(&[0; 8]);
    w(&mut b, 262_144);
    w(&mut b, 1);
    for r in recs {
        w(&mut b, r.sec);
        w(&mut b, r.frac);
        w(&mut b, r.data.len() as u32);
        w(&mut b, r.orig);
        b.extend_from_slice(&r.data);
    }
    b
}

/// The frames the stage must hand on for `recs`.
fn want(recs: &[Rec], nanos: bool) -> Vec<Frame> {
    recs.iter()
        .map(|r| Frame {
            ts: r.sec as u64 * 1_000_000_000 + r.frac as u64 * if nanos { 1 } else { 1000 },
            data: r.data.clone(),
            wire: r.orig.max(r.data.len() as u32),
        })
        .collect()
}

/// Frames and outcome of one run (the frames through a shared sink).
fn frames_of(path: &Path, in_place: bool, filter: Option<&str>, speed: Speed) -> Outcome {
    let mut cfg = FileConfig::new(path);
    cfg.in_place = in_place;
    cfg.speed = speed;
    cfg.filter = filter.map(|e| CaptureFilter::compile(e, 1, 262_144).unwrap());
    let engine = FileEngine::open(&cfg, FileSource::open(path).unwrap(), TsMode::Off).unwrap();
    assert_eq!(
        wiretape_capture::Engine::info(&engine)
            .mapped_file
            .is_some(),
        in_place,
        "read in place exactly when asked"
    );
    let shared: Arc<std::sync::Mutex<Vec<Frame>>> = Default::default();
    let s2 = shared.clone();
    let stage = StageConfig {
        batch: 37,
        ..StageConfig::default()
    };
    let run = Running::start(engine, &stage, move |_| {
        Ok::<_, StorageError>(Shared(s2.clone()))
    })
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match run.should_stop() {
            Some(StopReason::InputEnded) => break,
            Some(other) => panic!("stopped: {other:?}"),
            None => {}
        }
        assert!(Instant::now() < deadline, "never ended");
        std::thread::sleep(Duration::from_millis(1));
    }
    let (engine, q, _) = run.stop();
    let q = &q[0];
    assert!(q.identity_holds(), "{q:?}");
    let frames = std::mem::take(&mut *shared.lock().unwrap());
    assert_eq!(q.written, frames.len() as u64);
    Outcome {
        frames,
        seen: q.seen,
        seen_bytes: q.seen_bytes,
        filtered: q.filtered,
        error: engine.error(),
    }
}

/// A sink that keeps every frame in a shared list.
struct Shared(Arc<std::sync::Mutex<Vec<Frame>>>);

impl FrameSink for Shared {
    fn write(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) -> Result<(), Arc<StorageError>> {
        self.0.lock().unwrap().push(Frame {
            ts: ts_ns,
            data: frame.to_vec(),
            wire: wire_len,
        });
        Ok(())
    }
    fn idle(&mut self) {}
    fn close(self) -> WriterReport {
        let v = self.0.lock().unwrap();
        WriterReport {
            frames: v.len() as u64,
            bytes: v.iter().map(|f| f.data.len() as u64).sum(),
            ..Default::default()
        }
    }
}

/// Both ways give the same, and `first` records of `recs` come out.
fn same_both_ways(path: &Path, recs: &[Rec], nanos: bool, first: usize, what: &str) -> Outcome {
    let mapped = frames_of(path, true, None, Speed::Max);
    let ring = frames_of(path, false, None, Speed::Max);
    assert_eq!(mapped.frames.len(), ring.frames.len(), "{what}: frames");
    assert!(
        mapped == ring,
        "{what}: in place and through the ring differ"
    );
    let want = want(&recs[..first], nanos);
    assert_eq!(mapped.frames.len(), want.len(), "{what}: frames as written");
    assert!(mapped.frames == want, "{what}: frames as written");
    assert_eq!(mapped.seen, first as u64, "{what}: seen");
    mapped
}

#[test]
fn whole_files_of_either_byte_order_and_resolution() {
    let d = Dir::new("inplace-whole");
    for nanos in [true, false] {
        for be in [false, true] {
            let recs = records(3000, nanos);
            let p = d.0.join(format!("t-{nanos}-{be}.pcap"));
            std::fs::write(&p, pcap_bytes(&recs, nanos, be)).unwrap();
            let o = same_both_ways(&p, &recs, nanos, recs.len(), &format!("ns {nanos} be {be}"));
            assert_eq!(o.error, None);
            let bytes: u64 = recs.iter().map(|r| r.data.len() as u64).sum();
            assert_eq!(o.seen_bytes, bytes);
        }
    }
    // A file of a header alone: nothing, cleanly.
    let p = d.0.join("empty.pcap");
    std::fs::write(&p, pcap_bytes(&[], true, false)).unwrap();
    let o = same_both_ways(&p, &[], true, 0, "header alone");
    assert_eq!(o.error, None);
}

#[test]
fn a_file_cut_short_anywhere_ends_at_its_last_whole_record_with_the_same_error() {
    let d = Dir::new("inplace-cut");
    let recs = records(400, true);
    let full = pcap_bytes(&recs, true, false);
    // Where each record ends in the file.
    let mut ends = vec![24usize];
    for r in &recs {
        ends.push(ends.last().unwrap() + 16 + r.data.len());
    }
    let mut cuts: Vec<usize> = vec![25, 24 + 15, 24 + 16, full.len() - 1];
    let mut x = 12345usize;
    for _ in 0..12 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        cuts.push(24 + (x >> 20) % (full.len() - 24));
    }
    cuts.push(ends[200]); // exactly after a record: a clean end
    for cut in cuts {
        let p = d.0.join(format!("cut-{cut}.pcap"));
        std::fs::write(&p, &full[..cut]).unwrap();
        let whole = ends.iter().filter(|&&e| e <= cut).count() - 1;
        let o = same_both_ways(&p, &recs, true, whole, &format!("cut at {cut}"));
        if ends.contains(&cut) {
            assert_eq!(o.error, None, "cut at {cut}: clean");
        } else {
            let e = o.error.unwrap_or_else(|| panic!("cut at {cut}: no error"));
            assert!(e.contains("truncated"), "cut at {cut}: {e}");
        }
    }
}

#[test]
fn a_corrupt_header_or_a_tail_of_zeros_stops_where_the_reader_stops() {
    let d = Dir::new("inplace-bad");
    let recs = records(300, true);
    let full = pcap_bytes(&recs, true, false);
    let mut ends = vec![24usize];
    for r in &recs {
        ends.push(ends.last().unwrap() + 16 + r.data.len());
    }
    let at = ends[150];
    // Odd records libpcap reads as frames: the walk in place hands them
    // over, the reader takes them, and everything after them comes too.
    for (what, patch) in [
        ("no length on the wire", (12usize, 0u32)),
        ("fraction of a second too large", (4, 1_000_000_000)),
    ] {
        let mut b = full.clone();
        b[at + patch.0..at + patch.0 + 4].copy_from_slice(&patch.1.to_le_bytes());
        let mut odd = recs.clone();
        match patch.0 {
            12 => odd[150].orig = 0,
            _ => odd[150].frac = patch.1,
        }
        let p = d.0.join("odd.pcap");
        std::fs::write(&p, &b).unwrap();
        let o = same_both_ways(&p, &odd, true, odd.len(), what);
        assert_eq!(o.error, None, "{what}");
    }
    // A caplen above libpcap's maximum: corrupt, the reader's error.
    let what = "caplen too large";
    let mut b = full.clone();
    b[at + 8..at + 12].copy_from_slice(&300_000u32.to_le_bytes());
    let p = d.0.join("bad.pcap");
    std::fs::write(&p, &b).unwrap();
    let o = same_both_ways(&p, &recs, true, 150, what);
    let e = o.error.unwrap_or_else(|| panic!("{what}: no error"));
    assert!(
        e.contains(&format!("corrupt record at byte {at}:")),
        "{what}: {e}"
    );
    // Zeros from a record's start to the end (an interrupted aligned write).
    let mut b = full.clone();
    b[at..].fill(0);
    let p = d.0.join("zeros.pcap");
    std::fs::write(&p, &b).unwrap();
    let o = same_both_ways(&p, &recs, true, 150, "zeros");
    let e = o.error.expect("zeros: the strict reader's error");
    assert!(
        e.contains(&format!("corrupt record at byte {at}:")),
        "zeros: {e}"
    );
}

#[test]
fn a_filter_and_pacing_see_the_same_records_either_way() {
    let d = Dir::new("inplace-filter");
    let recs = records(3000, true);
    let p = d.0.join("f.pcap");
    std::fs::write(&p, pcap_bytes(&recs, true, false)).unwrap();
    // "greater 700": the length on the wire, which a record states.
    let mapped = frames_of(&p, true, Some("greater 700"), Speed::Max);
    let ring = frames_of(&p, false, Some("greater 700"), Speed::Max);
    assert!(
        mapped == ring,
        "filtered: in place and through the ring differ"
    );
    let want: Vec<Frame> = want(&recs, true)
        .into_iter()
        .filter(|f| f.wire >= 700)
        .collect();
    assert!(mapped.frames == want, "filtered as the records say");
    assert_eq!(mapped.filtered, (recs.len() - want.len()) as u64);
    assert_eq!(mapped.seen, recs.len() as u64);
    // Paced at 100k frames/s: 3000 frames take about 30 ms.
    let t = Instant::now();
    let paced = frames_of(&p, true, None, Speed::Pps(100_000.0));
    assert!(
        t.elapsed() >= Duration::from_millis(25),
        "paced: {:?}",
        t.elapsed()
    );
    assert!(paced.frames == want_all(&recs), "paced: every frame");
    let paced = frames_of(&p, true, None, Speed::Original(1000.0));
    assert!(
        paced.frames == want_all(&recs),
        "at the file's gaps: every frame"
    );
}

fn want_all(recs: &[Rec]) -> Vec<Frame> {
    want(recs, true)
}

#[test]
fn pcapng_is_not_read_in_place() {
    let d = Dir::new("inplace-ng");
    let p = d.0.join("t.pcapng");
    let mut w = PcapWriter::with_format(FileSink::create(&p).unwrap(), 65535, Format::PcapNg, "x");
    for i in 0..100u64 {
        w.write(1_700_000_000_000_000_000 + i, &[i as u8; 100])
            .unwrap();
    }
    w.close().unwrap();
    let engine = FileEngine::open(
        &FileConfig::new(&p),
        FileSource::open(&p).unwrap(),
        TsMode::Off,
    )
    .unwrap();
    assert_eq!(wiretape_capture::Engine::info(&engine).mapped_file, None);
    let o = frames_of_ng(&p);
    assert_eq!(o, 100);
}

fn frames_of_ng(p: &Path) -> u64 {
    let engine = FileEngine::open(
        &FileConfig::new(p),
        FileSource::open(p).unwrap(),
        TsMode::Off,
    )
    .unwrap();
    let run = Running::start(engine, &StageConfig::default(), |_| {
        Ok::<_, StorageError>(Shared(Default::default()))
    })
    .unwrap();
    while run.should_stop().is_none() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (_, q, _) = run.stop();
    q[0].written
}

/// A file wiretape is still writing (it holds the file's lock) is cut at
/// every flush, so it is read through the ring, never mapped: a mapping
/// would fault past such a cut. The frames are the same.
#[test]
fn a_file_being_written_is_read_through_the_ring() {
    use std::os::fd::AsRawFd;
    let d = Dir::new("inplace-busy");
    let recs = records(500, true);
    let p = d.0.join("busy.pcap");
    std::fs::write(&p, pcap_bytes(&recs, true, false)).unwrap();
    let writer = std::fs::File::open(&p).unwrap();
    // SAFETY: flock on a descriptor this test keeps open; no memory involved.
    let rc = unsafe { libc::flock(writer.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(rc, 0);
    let engine = FileEngine::open(
        &FileConfig::new(&p),
        FileSource::open(&p).unwrap(),
        TsMode::Off,
    )
    .unwrap();
    assert_eq!(wiretape_capture::Engine::info(&engine).mapped_file, None);
    drop(engine);
    let o = frames_of(&p, false, None, Speed::Max);
    assert!(o.frames == want(&recs, true));
    // Once the writer is done, the same file is read in place.
    drop(writer);
    let o = frames_of(&p, true, None, Speed::Max);
    assert!(o.frames == want(&recs, true));
}
