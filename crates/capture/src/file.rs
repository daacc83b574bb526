//! The file engine: a capture file fed through the pipeline as if it were
//! one RX queue, with no privileges and no NIC. Records are read straight
//! into a byte ring ([`crate::arena`]) that plays the UMEM's part: the
//! writer gives frames back in order, and when it falls behind the ring
//! fills and reading waits (a file loses nothing). Pacing: as fast as
//! possible, at the file's own gaps, or at a frame or bit rate
//! ([`crate::tx::Speed`]). Frames keep the file's timestamps unless a
//! stamping mode is asked for.
//!
//! The engine reads through a [`RecordSource`] (the pipeline implements it
//! over the storage crate's reader), so capture never depends on storage.

use crate::arena::{arena, ArenaFiller, ArenaReader, Pushed};
use crate::engine::{Engine, EngineCounters, EngineQueue, FrameStore, RxQueue};
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
}

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
        source: impl RecordSource,
        ts_mode: TsMode,
    ) -> Result<FileEngine, crate::CaptureError> {
        if ts_mode.uses_xdp_meta() {
            return Err(crate::CaptureError::Config(format!(
                "--ts {} needs the XDP program: a file keeps its own stamps (leave --ts out) \
                 or is stamped as it is fed (--ts kpt, batch, udts, wdts or hybrid)",
                ts_mode.name()
            )));
        }
        let (filler, reader) = arena(cfg.arena_bytes);
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
        };
        let rx = FileRx {
            source: Box::new(source),
            filler,
            pacer: Pacer::new(cfg.speed),
            pending: None,
            first_ts: None,
            last_due_src: 0,
            start: None,
            full: false,
            eof: false,
            stamp_here: stamper.is_some(),
            filter: cfg.filter.clone().map(|f| f.program),
            counters: counters.clone(),
            stopped: stopped.clone(),
            error: error.clone(),
        };
        Ok(FileEngine {
            queue: Some(EngineQueue {
                queue: 0,
                rx,
                frames: FileFrames { reader },
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
    counters: Arc<Counters>,
    stopped: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
}

impl FileRx {
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

impl RxQueue for FileRx {
    fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        if self.stopped.load(Ordering::Acquire) {
            return 0;
        }
        let start = *self.start.get_or_insert_with(Instant::now);
        // One clock read per batch.
        let now = start.elapsed().as_nanos() as u64;
        let (mut n, mut bytes, mut skipped) = (0usize, 0u64, 0u64);
        self.full = false;
        // A filter rejecting a long run of records: come back up now and
        // then, so a stop is noticed.
        while n < max && skipped < 16 * max as u64 {
            let Some((h, due)) = self.next_head() else {
                break;
            };
            if due.is_some_and(|d| d > now) {
                self.pending = Some((h, due));
                break;
            }
            let (source, filter) = (&mut self.source, &self.filter);
            // Read into the ring, then filtered in place: a rejected record
            // takes no room (the next one is read over it).
            match self.filler.push_if(h.caplen as usize, 0, |dst| {
                source.fill(dst);
                match filter {
                    Some(f) if !f.matches(dst, h.wire_len) => None,
                    _ => Some(h.wire_len),
                }
            }) {
                Pushed::Frame(mut d) => {
                    if !self.stamp_here {
                        d.ts = h.ts_ns;
                    }
                    out.push(d);
                    n += 1;
                    bytes += h.caplen as u64;
                }
                Pushed::Skipped => {
                    skipped += 1;
                    bytes += h.caplen as u64;
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
        if n as u64 + skipped > 0 {
            // Filtered records count as seen first: seen >= written + filtered
            // at every instant.
            self.counters
                .seen
                .fetch_add(n as u64 + skipped, Ordering::Relaxed);
            self.counters.filtered.fetch_add(skipped, Ordering::Relaxed);
            self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        n
    }

    fn wait(&mut self, timeout: Duration) {
        let pause = if self.full {
            // The writer gives frames back soon.
            Duration::from_micros(50)
        } else if let (Some((_, Some(due))), Some(start)) = (self.pending, self.start) {
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

/// The writing half: frames out of the ring, given back in order.
pub struct FileFrames {
    reader: ArenaReader,
}

impl FrameStore for FileFrames {
    #[inline]
    fn frame(&self, d: &Desc) -> (&[u8], u32) {
        self.reader.frame(d)
    }

    #[inline]
    fn give_back(&mut self, descs: std::vec::Drain<'_, Desc>) {
        self.reader.release(descs);
    }
}

impl Drop for FileEngine {
    fn drop(&mut self) {
        self.stop();
    }
}
