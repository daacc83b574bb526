//! The file engine: a capture file fed through the pipeline as if it were
//! one RX queue, with no privileges and no NIC. Records are read straight
//! into a byte ring (the `arena` module) that plays the UMEM's part: the
//! writer gives frames back in order, and when it falls behind the ring
//! fills and reading waits (a file loses nothing). Pacing: as fast as
//! possible, at the file's own gaps, or at a frame or bit rate
//! ([`crate::tx::Speed`]). Frames keep the file's timestamps unless a
//! stamping mode is asked for.
//!
//! The engine reads through a [`RecordSource`] (the pipeline implements it
//! over the storage crate's reader), so capture never depends on storage.
//!
//! A plain pcap file (ns or µs, either byte order: a 24-byte file header,
//! then 16-byte record headers each before its bytes) is read in place
//! instead ([`RecordSource::pcap_in_place`]): the engine maps the file
//! (the `mapped` module), walks its record headers itself and hands out
//! frames that point into the mapping, so no `read()` copies the file and
//! no copy goes into the ring; giving them back costs nothing. Where the
//! walk meets anything but a whole record (a header no record has, a record
//! cut short by the file's end), it hands over to the source at that offset
//! ([`RecordSource::resume_at`]), which reads on as it always did and says
//! what is wrong: every file is read up to its last complete record, with
//! the same error, either way. pcapng goes through the ring.

use crate::arena::{arena, ArenaFiller, ArenaReader, Pushed};
use crate::engine::{Engine, EngineCounters, EngineQueue, FrameStore, RxQueue};
use crate::mapped::MappedFile;
use crate::tx::{Pacer, Speed};
use crate::{CaptureFilter, Desc, StartInfo};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wiretape_timestamp::{AutoClock, Stamper, TaiToUtc, TsMode};

/// One record of a capture file, as announced by [`RecordSource::next`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHead {
    /// Bytes captured (what [`RecordSource::fill`] writes).
    pub caplen: u32,
    /// Length on the wire.
    pub wire_len: u32,
    /// Timestamp, UTC ns.
    pub ts_ns: u64,
}

/// Records of a capture file.
pub trait RecordSource: Send + 'static {
    /// The next record's head; None at the end (or after a read error,
    /// which [`RecordSource::error`] then tells).
    fn next(&mut self) -> Option<RecordHead>;
    /// Writes the bytes of the record announced last (exactly `caplen`).
    fn fill(&mut self, dst: &mut [u8]);
    /// Why reading stopped early, if it did.
    fn error(&self) -> Option<String> {
        None
    }
    /// The file behind the source when it is a plain pcap file the engine
    /// may map and read in place (see the module docs); None (the default):
    /// records come through [`RecordSource::next`] and
    /// [`RecordSource::fill`]. Asked once, before any `next`.
    fn pcap_in_place(&mut self) -> Option<PcapInPlace> {
        None
    }
    /// Reading in place stopped at file offset `offset`, where a record
    /// starts that the engine did not take (a header no record has, or a
    /// record cut short): the source goes on from there, its next
    /// [`RecordSource::next`] reading that record or saying why it cannot.
    fn resume_at(&mut self, offset: u64) {
        let _ = offset;
    }
}

/// A plain pcap file to read in place ([`RecordSource::pcap_in_place`]).
#[derive(Debug)]
pub struct PcapInPlace {
    /// The file, open for reading (the engine maps it).
    pub file: std::fs::File,
    /// File offset of the next record (24 when none was read yet).
    pub offset: u64,
    /// Stamps in nanoseconds (magic a1b23c4d); false: microseconds.
    pub nanos: bool,
    /// The header's numbers are big-endian.
    pub big_endian: bool,
    /// libpcap's snapshot length for the file: a record above it (which
    /// libpcap cuts) is the source's to read.
    pub snapshot: u32,
}

/// Largest caplen of a record taken in place: libpcap's (and the storage
/// reader's) maximum. Anything larger is the source's to judge.
const MAX_CAPLEN: u32 = 262_144;
/// Bytes of a pcap record header.
const RECORD_HEADER: usize = 16;
/// Pages of the mapping are faulted in this many bytes at a time, ahead of
/// the walk (one call per window, not a page fault per 16 pages).
const PREFAULT: usize = 4 << 20;
/// Pages of the mapping are let go this many bytes at a time behind the
/// frames given back, so that reading a file of many GB keeps little of it
/// mapped (each call costs the CPUs a TLB flush: not too often).
const RELEASE: usize = 32 << 20;
/// A take from a mapping stops after this many bytes of records, so that
/// the next take's record headers lie within [`AHEAD`] of the frames the
/// writer copies.
const TAKE_BYTES: usize = 64 << 10;
/// The writer, copying a frame of the mapping, has the CPU fetch the
/// file's bytes this far ahead into its L2 cache (the next take's headers
/// and frames), so that reading the file from memory overlaps the copies
/// instead of stalling the next take. Measured (`benches/pipeline.rs`,
/// 2026-11-22): 64 KiB beat 256 KiB and 1 MiB at 64 and 1514 B frames.
const AHEAD: usize = 64 << 10;

/// Settings of the file engine.
#[derive(Clone, Debug)]
pub struct FileConfig {
    /// The file (named in the start line and the summary).
    pub path: PathBuf,
    /// How fast records are fed.
    pub speed: Speed,
    /// Bytes of the ring between the reader and the writer.
    pub arena_bytes: usize,
    /// CPU for the poll thread.
    pub cpu: Option<usize>,
    /// CPU for the writer thread.
    pub writer_cpu: Option<usize>,
    /// The capture filter (compiled for the file's link type), run on each
    /// record in user space with the classic evaluator; None: every record.
    pub filter: Option<CaptureFilter>,
    /// Read a plain pcap file in place from a mapping of it (the default;
    /// see the module docs); false: read every file into the ring.
    pub in_place: bool,
    /// The per-connection cutoff (`--cutoff SIZE`, `--cutoff-flows N`):
    /// (SIZE bytes, N connections); see [`crate::cutoff`].
    pub cutoff: Option<(u64, usize)>,
}

impl FileConfig {
    /// The defaults: as fast as possible, a 64 MiB ring, not pinned.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileConfig {
            path: path.into(),
            speed: Speed::Max,
            arena_bytes: 64 << 20,
            cpu: None,
            writer_cpu: None,
            filter: None,
            in_place: true,
            cutoff: None,
        }
    }

    /// The name the engine goes by in file names: the file's stem, with
    /// anything but letters, digits, `_` and `.` made `_`.
    pub fn name(&self) -> String {
        let stem = self
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let s: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if s.is_empty() {
            "file".into()
        } else {
            s
        }
    }
}

#[derive(Default)]
struct Counters {
    seen: AtomicU64,
    bytes: AtomicU64,
    filtered: AtomicU64,
    cutoff: AtomicU64,
    cutoff_bytes: AtomicU64,
    evicted: AtomicU64,
    /// Records larger than the whole ring (never fed).
    too_big: AtomicU64,
}

/// The file engine (one queue, number 0).
pub struct FileEngine {
    queue: Option<EngineQueue<FileRx, FileFrames>>,
    counters: Arc<Counters>,
    stopped: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    info: StartInfo,
}

impl FileEngine {
    /// Feeds `source` (already opened, so a bad file fails here) as queue 0.
    /// `ts_mode` [`TsMode::Off`] keeps the file's stamps; a clock mode
    /// (kpt, batch, udts, wdts, hybrid) stamps frames as they are fed.
    pub fn open(
        cfg: &FileConfig,
        mut source: impl RecordSource,
        ts_mode: TsMode,
    ) -> Result<FileEngine, crate::CaptureError> {
        if ts_mode.uses_xdp_meta() {
            return Err(crate::CaptureError::Config(format!(
                "--ts {} needs the XDP program: a file keeps its own stamps (leave --ts out) \
                 or is stamped as it is fed (--ts kpt, batch, udts, wdts or hybrid)",
                ts_mode.name()
            )));
        }
        // A plain pcap file is read in place when it maps; the ring then
        // only holds what the source reads after the walk handed over to it
        // (records of at most MAX_CAPLEN bytes: 512 KiB holds any).
        let in_place = if cfg.in_place {
            source.pcap_in_place().and_then(InPlace::new)
        } else {
            None
        };
        let ring = if in_place.is_some() {
            512 << 10
        } else {
            cfg.arena_bytes
        };
        let (filler, reader) = arena(ring);
        let counters = Arc::new(Counters::default());
        let stopped = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let tai = TaiToUtc::measure();
        let (stamper, clock) = if ts_mode == TsMode::Off {
            (None, "file")
        } else {
            let c = AutoClock::new();
            let name = c.name();
            (Some(Stamper::new(ts_mode, c, tai)), name)
        };
        let info = StartInfo {
            engine: "file",
            ifname: cfg.name(),
            ifindex: 0,
            source: Some(cfg.path.clone()),
            queues: vec![0],
            xdp_mode: None,
            bind_mode: None,
            zero_copy_refused: None,
            native_refused: None,
            cpus: vec![cfg.cpu],
            writer_cpus: vec![cfg.writer_cpu],
            tai_offset_s: tai.offset().as_secs(),
            ts_mode,
            link_bps: None,
            clock,
            hw_refused: None,
            frames: (filler.capacity() / 2048) as u32,
            frame_size: 2048,
            interfaces: Vec::new(),
            mapped_file: in_place.as_ref().map(|ip| ip.map.len() as u64),
            busy_poll: None,
            in_place: false,
            rx_queues: None,
        };
        let frames = FileFrames {
            reader,
            mapped: in_place.as_ref().map(|ip| ip.map.clone()),
            big_endian: in_place.as_ref().is_some_and(|ip| ip.big_endian),
            ahead: std::cell::Cell::new(0),
            released: 0,
        };
        let rx = FileRx {
            source: Box::new(source),
            filler,
            pacer: Pacer::new(cfg.speed),
            paced: !matches!(cfg.speed, Speed::Max),
            in_place,
            pending: None,
            first_ts: None,
            last_due_src: 0,
            start: None,
            full: false,
            eof: false,
            stamp_here: stamper.is_some(),
            filter: cfg.filter.clone().map(|f| f.program),
            cutoff: cfg
                .cutoff
                .map(|(size, flows)| crate::cutoff::Cutoff::new(size, flows)),
            counters: counters.clone(),
            stopped: stopped.clone(),
            error: error.clone(),
        };
        Ok(FileEngine {
            queue: Some(EngineQueue {
                queue: 0,
                rx,
                frames,
                stamper,
                cpu: cfg.cpu,
                writer_cpu: cfg.writer_cpu,
            }),
            counters,
            stopped,
            error,
            info,
        })
    }

    /// Why reading the file stopped early, if it did.
    pub fn error(&self) -> Option<String> {
        self.error.lock().expect("error").clone()
    }
}

impl Engine for FileEngine {
    type Rx = FileRx;
    type Frames = FileFrames;

    fn info(&self) -> &StartInfo {
        &self.info
    }

    fn take_queues(&mut self) -> Vec<EngineQueue<FileRx, FileFrames>> {
        self.queue.take().into_iter().collect()
    }

    fn counters(&self, _queue: u32) -> EngineCounters {
        EngineCounters {
            seen: self.counters.seen.load(Ordering::Relaxed),
            seen_bytes: self.counters.bytes.load(Ordering::Relaxed),
            filtered: self.counters.filtered.load(Ordering::Relaxed),
            cutoff: self.counters.cutoff.load(Ordering::Relaxed),
            cutoff_bytes: self.counters.cutoff_bytes.load(Ordering::Relaxed),
            cutoff_flows_evicted: self.counters.evicted.load(Ordering::Relaxed),
            other: self.counters.too_big.load(Ordering::Relaxed),
            ..Default::default()
        }
    }

    fn stop(&mut self) {
        self.stopped.store(true, Ordering::Release);
    }
}

/// The reading half: records into the ring, paced.
pub struct FileRx {
    source: Box<dyn RecordSource>,
    filler: ArenaFiller,
    pacer: Pacer,
    /// Fed at a pace (not as fast as possible): due times are computed.
    paced: bool,
    /// Reading a plain pcap file in place, until its end or a record it
    /// does not take (then the source reads on).
    in_place: Option<InPlace>,
    /// A record announced but not fed yet (not due, or no room), with its due time.
    pending: Option<(RecordHead, Option<u64>)>,
    first_ts: Option<u64>,
    last_due_src: u64,
    start: Option<Instant>,
    /// The last take found no room in the ring.
    full: bool,
    eof: bool,
    /// A stamper overwrites the stamps (no need to set them).
    stamp_here: bool,
    /// The capture filter's classic program.
    filter: Option<wiretape_filter::Program>,
    /// The per-connection cutoff, after the filter.
    cutoff: Option<crate::cutoff::Cutoff>,
    counters: Arc<Counters>,
    stopped: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
}

/// What one take fed: frames, their bytes, the records filtered out and
/// those the cutoff cut (and their bytes).
#[derive(Default)]
struct Tally {
    n: usize,
    bytes: u64,
    skipped: u64,
    cut: u64,
    cut_bytes: u64,
}

/// The walk of a plain pcap file mapped in place.
struct InPlace {
    map: Arc<MappedFile>,
    /// File offset of the next record.
    off: usize,
    nanos: bool,
    big_endian: bool,
    /// Records above this caplen are handed over to the source.
    snap: u32,
    /// The record at `off` was announced to the pacer and is not due yet:
    /// when it is.
    due: Option<u64>,
    /// The mapping is faulted in up to here.
    ready: usize,
}

impl InPlace {
    /// Maps the file; None (it is read through the source) if it cannot be.
    fn new(p: PcapInPlace) -> Option<InPlace> {
        let map = MappedFile::map(&p.file).ok()?;
        let off = usize::try_from(p.offset).ok()?;
        (off <= map.len()).then(|| InPlace {
            map: Arc::new(map),
            off,
            nanos: p.nanos,
            big_endian: p.big_endian,
            snap: p.snapshot.min(MAX_CAPLEN),
            due: None,
            ready: 0,
        })
    }
}

/// How a walk in place ended.
enum WalkEnd {
    /// Whole records up to the file's end.
    Clean,
    /// A record it does not take starts at `off`: the source reads on.
    HandOver,
}

impl FileRx {
    /// Feeds records from the mapping, up to `max` frames in `out`.
    #[inline]
    fn take_in_place(&mut self, max: usize, out: &mut Vec<Desc>, now: u64, t: &mut Tally) {
        let ip = self.in_place.as_mut().expect("reading in place");
        let map = &*ip.map;
        let bytes = map.bytes();
        // Fault the pages ahead in (once per window of PREFAULT bytes).
        while ip.off + PREFAULT / 2 > ip.ready && ip.ready < bytes.len() {
            map.prefault(ip.ready, PREFAULT);
            ip.ready += PREFAULT;
        }
        if !self.paced && self.filter.is_none() && self.cutoff.is_none() {
            // As fast as possible, every record: the loop below without
            // its pacing and filter, for each byte order and resolution.
            let room = max.saturating_sub(t.n);
            let snap = ip.snap;
            let (off, end) = match (ip.big_endian, ip.nanos) {
                (false, true) => walk_plain::<false, true>(map, ip.off, snap, room, out, t),
                (false, false) => walk_plain::<false, false>(map, ip.off, snap, room, out, t),
                (true, true) => walk_plain::<true, true>(map, ip.off, snap, room, out, t),
                (true, false) => walk_plain::<true, false>(map, ip.off, snap, room, out, t),
            };
            ip.off = off;
            self.walk_ended(end);
            return;
        }
        let (be, nanos, snap) = (ip.big_endian, ip.nanos, ip.snap);
        let mut end = None;
        let mut off = ip.off;
        let stop_at = off + TAKE_BYTES;
        // A filter rejecting a long run of records: come back up now and
        // then, so a stop is noticed.
        while t.n < max && t.skipped + t.cut < 16 * max as u64 && off < stop_at {
            let (at, next, caplen, orig, ts) = match next_record(map, off, be, nanos, snap) {
                Ok(r) => r,
                Err(e) => {
                    end = Some(e);
                    break;
                }
            };
            if self.paced {
                let due = match ip.due.take() {
                    Some(d) => d,
                    None => {
                        // The file's own gaps; never earlier than the record before.
                        let first = *self.first_ts.get_or_insert(ts);
                        let due_src = ts.saturating_sub(first).max(self.last_due_src);
                        self.last_due_src = due_src;
                        self.pacer.due(caplen as usize, due_src).unwrap_or(0)
                    }
                };
                if due > now {
                    ip.due = Some(due);
                    break;
                }
            }
            t.bytes += caplen as u64;
            if let Some(f) = &self.filter {
                if !f.matches(&bytes[at..next], orig.max(caplen)) {
                    t.skipped += 1;
                    off = next;
                    continue;
                }
            }
            if let Some(c) = &mut self.cutoff {
                if !c.keep(&bytes[at..next], orig.max(caplen)) {
                    t.cut += 1;
                    t.cut_bytes += caplen as u64;
                    off = next;
                    continue;
                }
            }
            out.push(map.desc(at, caplen, ts));
            t.n += 1;
            off = next;
        }
        ip.off = off;
        self.walk_ended(end);
    }

    /// After a walk in place: at the file's end, or where the source goes on.
    fn walk_ended(&mut self, end: Option<WalkEnd>) {
        let off = self.in_place.as_ref().map_or(0, |ip| ip.off);
        match end {
            None => {}
            Some(WalkEnd::Clean) => {
                self.eof = true;
                self.in_place = None;
            }
            Some(WalkEnd::HandOver) => {
                self.source.resume_at(off as u64);
                self.in_place = None;
            }
        }
    }

    /// Feeds records read by the source into the ring.
    fn take_read(&mut self, max: usize, out: &mut Vec<Desc>, now: u64, t: &mut Tally) {
        // A filter rejecting a long run of records: come back up now and
        // then, so a stop is noticed.
        while t.n < max && t.skipped + t.cut < 16 * max as u64 {
            let Some((h, due)) = self.next_head() else {
                break;
            };
            if due.is_some_and(|d| d > now) {
                self.pending = Some((h, due));
                break;
            }
            let (source, filter, cutoff) = (&mut self.source, &self.filter, &mut self.cutoff);
            let mut cut = false;
            // Read into the ring, then filtered (and cut) in place: a
            // rejected record takes no room (the next one is read over it).
            match self.filler.push_if(h.caplen as usize, 0, |dst| {
                source.fill(dst);
                match filter {
                    Some(f) if !f.matches(dst, h.wire_len) => None,
                    _ => {
                        if cutoff.as_mut().is_some_and(|c| !c.keep(dst, h.wire_len)) {
                            cut = true;
                            None
                        } else {
                            Some(h.wire_len)
                        }
                    }
                }
            }) {
                Pushed::Frame(mut d) => {
                    if !self.stamp_here {
                        d.ts = h.ts_ns;
                    }
                    out.push(d);
                    t.n += 1;
                    t.bytes += h.caplen as u64;
                }
                Pushed::Skipped if cut => {
                    t.cut += 1;
                    t.cut_bytes += h.caplen as u64;
                    t.bytes += h.caplen as u64;
                }
                Pushed::Skipped => {
                    t.skipped += 1;
                    t.bytes += h.caplen as u64;
                }
                Pushed::NoRoom => {
                    self.pending = Some((h, due));
                    self.full = true;
                    break;
                }
                Pushed::TooBig => {
                    // Seen, and dropped for good (drops.other): the ring is
                    // smaller than this one record.
                    self.counters.seen.fetch_add(1, Ordering::Relaxed);
                    self.counters.too_big.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn next_head(&mut self) -> Option<(RecordHead, Option<u64>)> {
        if let Some(p) = self.pending.take() {
            return Some(p);
        }
        let Some(h) = self.source.next() else {
            self.eof = true;
            if let Some(e) = self.source.error() {
                *self.error.lock().expect("error") = Some(e);
            }
            return None;
        };
        // The file's own gaps; never earlier than the record before.
        let first = *self.first_ts.get_or_insert(h.ts_ns);
        let due_src = h.ts_ns.saturating_sub(first).max(self.last_due_src);
        self.last_due_src = due_src;
        let due = self.pacer.due(h.caplen as usize, due_src);
        Some((h, due))
    }
}

/// One step of a walk in place: the record whose header starts at `off`, as
/// (start of its bytes, end of its bytes, caplen, wire length, stamp ns), or
/// how the walk ends there: Clean at the file's very end; HandOver at a
/// header cut short, an odd record (orig_len 0, a fraction out of range,
/// a caplen above `snap`: the storage reader reads those as libpcap does)
/// or a header no record has (what it is, corrupt or zeros, is the
/// source's to judge), or a record cut short by the file's end. Inlined
/// into each walk, where `be` and `nanos` are known.
#[inline(always)]
fn next_record(
    map: &MappedFile,
    off: usize,
    be: bool,
    nanos: bool,
    snap: u32,
) -> Result<(usize, usize, u32, u32, u64), WalkEnd> {
    let bytes = map.bytes();
    let Some(h) = bytes.get(off..off + RECORD_HEADER) else {
        return Err(if off == bytes.len() {
            WalkEnd::Clean
        } else {
            WalkEnd::HandOver
        });
    };
    let word = |o: usize| {
        let v = [h[o], h[o + 1], h[o + 2], h[o + 3]];
        if be {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        }
    };
    let (sec, frac, caplen, orig) = (word(0), word(4), word(8), word(12));
    let (frac_max, scale) = if nanos {
        (1_000_000_000, 1)
    } else {
        (1_000_000, 1000)
    };
    if caplen > snap || orig == 0 || frac >= frac_max {
        return Err(WalkEnd::HandOver);
    }
    let at = off + RECORD_HEADER;
    let next = at + caplen as usize;
    if next > bytes.len() {
        return Err(WalkEnd::HandOver);
    }
    // The header a few records on, were they all of this size (the walk is
    // a chain of dependent loads: each from L1, not L2).
    map.prefetch_l1(next + (next - off) * 8);
    let ts = sec as u64 * 1_000_000_000 + frac as u64 * scale;
    Ok((at, next, caplen, orig, ts))
}

/// [`FileRx::take_in_place`] as fast as possible and with no filter: whole
/// records from file offset `off`, up to `max` frames or [`TAKE_BYTES`];
/// returns where it stopped, and how, if the walk ended. `BE`: big-endian
/// headers; `NANOS`: ns stamps (else µs).
#[inline(always)]
fn walk_plain<const BE: bool, const NANOS: bool>(
    map: &MappedFile,
    mut off: usize,
    snap: u32,
    max: usize,
    out: &mut Vec<Desc>,
    t: &mut Tally,
) -> (usize, Option<WalkEnd>) {
    let stop_at = off + TAKE_BYTES;
    let (mut n, mut fed) = (0usize, 0u64);
    out.reserve(max);
    let mut end = None;
    while n < max && off < stop_at {
        let (at, next, caplen, _, ts) = match next_record(map, off, BE, NANOS, snap) {
            Ok(r) => r,
            Err(e) => {
                end = Some(e);
                break;
            }
        };
        out.push(map.desc(at, caplen, ts));
        n += 1;
        fed += caplen as u64;
        off = next;
    }
    t.n += n;
    t.bytes += fed;
    (off, end)
}

impl RxQueue for FileRx {
    fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        if self.stopped.load(Ordering::Acquire) {
            return 0;
        }
        let start = *self.start.get_or_insert_with(Instant::now);
        // One clock read per batch (none unless paced).
        let now = if self.paced {
            start.elapsed().as_nanos() as u64
        } else {
            0
        };
        let mut t = Tally::default();
        self.full = false;
        if self.in_place.is_some() {
            self.take_in_place(max, out, now, &mut t);
        }
        // (A walk in place that reached the file's end leaves the source
        // where it was: at the first record.)
        if self.in_place.is_none() && !self.eof {
            self.take_read(max, out, now, &mut t);
        }
        if t.n as u64 + t.skipped + t.cut > 0 {
            // Filtered and cut records count as seen first: seen >= written
            // + filtered + cutoff at every instant.
            self.counters
                .seen
                .fetch_add(t.n as u64 + t.skipped + t.cut, Ordering::Relaxed);
            self.counters
                .filtered
                .fetch_add(t.skipped, Ordering::Relaxed);
            if let Some(c) = &self.cutoff {
                self.counters.cutoff.fetch_add(t.cut, Ordering::Relaxed);
                self.counters
                    .cutoff_bytes
                    .fetch_add(t.cut_bytes, Ordering::Relaxed);
                self.counters.evicted.store(c.evicted, Ordering::Relaxed);
            }
            self.counters.bytes.fetch_add(t.bytes, Ordering::Relaxed);
        }
        t.n
    }

    fn wait(&mut self, timeout: Duration) {
        let pause = if self.full {
            // The writer gives frames back soon.
            Duration::from_micros(50)
        } else if let (Some(due), Some(start)) = (
            self.in_place
                .as_ref()
                .and_then(|ip| ip.due)
                .or(self.pending.and_then(|(_, due)| due)),
            self.start,
        ) {
            let now = start.elapsed().as_nanos() as u64;
            Duration::from_nanos(due.saturating_sub(now))
        } else {
            Duration::ZERO
        };
        let pause = pause.min(timeout);
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }

    fn ended(&mut self) -> bool {
        self.stopped.load(Ordering::Acquire) || (self.eof && self.pending.is_none())
    }
}

/// The writing half: frames out of the mapping (nothing to give back) or
/// out of the ring (given back in order).
pub struct FileFrames {
    reader: ArenaReader,
    /// The mapping of a file read in place.
    mapped: Option<Arc<MappedFile>>,
    /// Its record headers are big-endian.
    big_endian: bool,
    /// The mapping is prefetched up to here (see [`AHEAD`]).
    ahead: std::cell::Cell<usize>,
    /// The pages of the mapping below here are let go (their frames were
    /// given back).
    released: usize,
}

impl FrameStore for FileFrames {
    #[inline(always)]
    fn frame(&self, d: &Desc) -> (&[u8], u32) {
        if let Some(m) = &self.mapped {
            if m.owns(d) {
                // The record header ends with the length on the wire.
                let at = d.addr() as usize;
                let end = at + d.len() as usize;
                let mut pf = self.ahead.get();
                if end + AHEAD > pf {
                    while pf < end + AHEAD {
                        m.prefetch_l2(pf);
                        pf += 64;
                    }
                    self.ahead.set(pf);
                }
                let b = &m.bytes()[at - 4..end];
                let orig = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                let orig = if self.big_endian {
                    orig.swap_bytes()
                } else {
                    orig
                };
                return (&b[4..], orig.max(d.len()));
            }
        }
        self.reader.frame(d)
    }

    #[inline]
    fn give_back(&mut self, descs: std::vec::Drain<'_, Desc>) {
        if let Some(m) = &self.mapped {
            // Frames of the mapping need nothing back. Those of the ring
            // (after a hand-over) follow them: a batch whose last frame is
            // in the mapping has none.
            match descs.as_slice().last() {
                None => return,
                Some(d) if m.owns(d) => {
                    // Frames are given back in order: the pages of whole
                    // windows before this frame are copied, and go.
                    let done = d.addr() as usize / RELEASE * RELEASE;
                    if done > self.released {
                        m.release(self.released, done - self.released);
                        self.released = done;
                    }
                    return;
                }
                Some(_) => {}
            }
            self.reader.release(descs.filter(|d| !m.owns(d)));
            return;
        }
        self.reader.release(descs);
    }
}

impl Drop for FileEngine {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain pcap file (ns, little-endian) offered for reading in place,
    /// whose own reader (next/fill, from where the walk hands over) takes
    /// records up to 1 MiB: larger than the walk takes, so a hand-over
    /// mid-file goes on through the ring.
    struct Lenient {
        file: std::fs::File,
        bytes: Vec<u8>,
        off: usize,
    }

    impl RecordSource for Lenient {
        fn next(&mut self) -> Option<RecordHead> {
            let h = self.bytes.get(self.off..self.off + 16)?;
            let w = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
            let caplen = w(8);
            (self.off + 16 + caplen as usize <= self.bytes.len()).then(|| RecordHead {
                caplen,
                wire_len: w(12).max(caplen),
                ts_ns: w(0) as u64 * 1_000_000_000 + w(4) as u64,
            })
        }
        fn fill(&mut self, dst: &mut [u8]) {
            let at = self.off + 16;
            dst.copy_from_slice(&self.bytes[at..at + dst.len()]);
            self.off = at + dst.len();
        }
        fn pcap_in_place(&mut self) -> Option<PcapInPlace> {
            Some(PcapInPlace {
                file: self.file.try_clone().unwrap(),
                offset: 24,
                nanos: true,
                big_endian: false,
                snapshot: 262_144,
            })
        }
        fn resume_at(&mut self, offset: u64) {
            self.off = offset as usize;
        }
    }

    fn pcap(sizes: &[usize]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&(1u32 << 20).to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        for (i, &n) in sizes.iter().enumerate() {
            for v in [1_700_000_000, i as u32, n as u32, n as u32] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend((0..n).map(|j| (i + j) as u8));
        }
        b
    }

    #[test]
    fn a_hand_over_mid_file_goes_on_through_the_ring_in_the_same_batch() {
        // 5 records in place, then one the walk refuses (300 000 bytes),
        // then 3 more: read by the source into the ring.
        let sizes = [60, 1514, 0, 100, 64, 300_000, 70, 80, 90];
        let bytes = pcap(&sizes);
        let p = std::env::temp_dir().join(format!("wt-handover-{}.pcap", std::process::id()));
        std::fs::write(&p, &bytes).unwrap();
        let file = std::fs::File::open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        let src = Lenient {
            file,
            bytes,
            off: 24,
        };
        let mut e = FileEngine::open(&FileConfig::new(&p), src, TsMode::Off).unwrap();
        assert!(e.info().mapped_file.is_some());
        let mut q = e.take_queues().pop().unwrap();
        let mut v = Vec::new();
        // One take: the walk's 5 frames, then the source's 4, together.
        assert_eq!(q.rx.take(64, &mut v), sizes.len());
        for (i, d) in v.iter().enumerate() {
            let (f, wire) = q.frames.frame(d);
            assert_eq!(f.len(), sizes[i], "frame {i}");
            assert_eq!(wire as usize, sizes[i]);
            assert_eq!(d.ts, 1_700_000_000_000_000_000 + i as u64);
            assert!(f.iter().enumerate().all(|(j, &b)| b == (i + j) as u8));
        }
        q.frames.give_back(v.drain(..));
        assert_eq!(q.rx.take(64, &mut v), 0);
        assert!(q.rx.ended());
        assert_eq!(e.counters(0).seen, sizes.len() as u64);
        assert!(e.error().is_none());
    }

    #[test]
    fn frames_of_the_mapping_are_refused_by_another_queue() {
        let bytes = pcap(&[60, 60]);
        let p = std::env::temp_dir().join(format!("wt-foreign-{}.pcap", std::process::id()));
        std::fs::write(&p, &bytes).unwrap();
        let open = || {
            let src = Lenient {
                file: std::fs::File::open(&p).unwrap(),
                bytes: bytes.clone(),
                off: 24,
            };
            FileEngine::open(&FileConfig::new(&p), src, TsMode::Off).unwrap()
        };
        let (mut a, mut b) = (open(), open());
        std::fs::remove_file(&p).unwrap();
        let mut qa = a.take_queues().pop().unwrap();
        let qb = b.take_queues().pop().unwrap();
        let mut v = Vec::new();
        assert_eq!(qa.rx.take(64, &mut v), 2);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = qb.frames.frame(&v[0]);
        }));
        assert!(r.is_err(), "a frame of another queue's mapping is refused");
        qa.frames.give_back(v.drain(..));
    }
}
