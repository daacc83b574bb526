//! wiretape: a lossless packet recorder (XDP + AF_XDP to nanosecond pcap).
//!
//! This facade re-exports the crates ([`capture`], [`storage`], [`timestamp`])
//! and joins them: [`PcapFileSink`] is the capture engine's [`FrameSink`]
//! writing one pcap file per queue, and [`record`] runs a whole recording
//! (the `wiretape record` command is a thin layer over it).
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! let mut opts = wiretape::RecordOptions::new("eth0", "/data");
//! opts.capture.count = Some(1000);
//! let report = wiretape::record(&opts, &AtomicBool::new(false), |_| {}).unwrap();
//! assert!(report.identity_holds());
//! ```

pub use wiretape_capture as capture;
pub use wiretape_storage as storage;
pub use wiretape_timestamp as timestamp;

pub mod replay;
pub mod retention;
pub use replay::ReplaySource;
pub use retention::{MinFree, Policy, Retention};

pub use capture::{
    Capture, CaptureConfig, CaptureError, CaptureReport, FrameSink, SinkReport, Snapshot,
    StopReason,
};

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::{AnySink, Format, IoMode, PcapWriter, StorageError};
use timestamp::{format_compact, monotonic_ns, realtime_ns};

/// Default snap length: whole frames (libpcap's maximum).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// How [`PcapFileSink`] writes.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    pub snaplen: u32,
    /// A partly filled block is written after this long.
    pub flush_interval: Duration,
    pub io: IoMode,
    /// Whether the directory takes O_DIRECT (asked once, by [`record`]).
    pub direct_ok: bool,
    pub block_size: usize,
    /// Blocks per file: one being filled, the rest in flight.
    pub buffers: usize,
    /// RAM (bytes) for blocks waiting for the disk, shared by all files.
    pub budget: Option<std::sync::Arc<std::sync::atomic::AtomicI64>>,
    pub format: Format,
    /// Interface name (pcapng's if_name).
    pub ifname: String,
    /// Write a `.idx` sidecar per file.
    pub index: bool,
    /// Registers open files; with `on_full_rotate`, makes room on ENOSPC.
    pub retention: Option<Arc<Retention>>,
    /// On a full disk, delete our oldest files and go on (else stop).
    pub on_full_rotate: bool,
    /// Live backpressure numbers, refreshed about once a second.
    pub gauge: Option<Arc<SinkGauge>>,
}

/// A writer's live backpressure numbers (read by the progress line).
#[derive(Debug, Default)]
pub struct SinkGauge {
    /// Filled blocks waiting in RAM for a write slot.
    pub pending: AtomicU64,
    pub in_flight: AtomicU64,
    /// Write latency (submit to completion) of recent writes, µs.
    pub p50_us: AtomicU64,
    pub p99_us: AtomicU64,
    /// Times the writer waited for a free block.
    pub waits: AtomicU64,
}

impl Default for SinkOptions {
    fn default() -> Self {
        SinkOptions {
            snaplen: DEFAULT_SNAPLEN,
            flush_interval: Duration::from_secs(1),
            io: IoMode::Auto,
            direct_ok: true,
            block_size: storage::block::DEFAULT_BLOCK_SIZE,
            buffers: 16,
            budget: None,
            format: Format::PcapNs,
            ifname: String::new(),
            index: true,
            retention: None,
            on_full_rotate: false,
            gauge: None,
        }
    }
}

/// When [`PcapFileSink`] starts a new file.
#[derive(Clone, Debug)]
pub struct Rotation {
    pub dir: PathBuf,
    pub prefix: String,
    pub ifname: String,
    pub queue: u32,
    /// Start a new file before one would grow past this many bytes.
    pub max_bytes: Option<u64>,
    /// Start a new file for the first frame stamped this long after the
    /// file's first frame (packet time, so files cover even time slices).
    pub max_age: Option<Duration>,
}

/// A [`FrameSink`] that writes nanosecond pcap files through the block
/// writer, optionally rotating them. Rotation happens between two frames on
/// the writer thread: the old file is finished (exact length, durable) before
/// the next frame goes to the new one, so no frame is lost or duplicated.
pub struct PcapFileSink {
    writer: PcapWriter<AnySink>,
    opts: SinkOptions,
    rotation: Option<Rotation>,
    /// Stamp of the current file's first frame.
    file_start_ns: u64,
    /// Files already closed.
    done: SinkReport,
    flush_every_ns: u64,
    last_flush_ns: u64,
    last_blocks: u64,
    next_gauge_ns: u64,
    error: Option<String>,
    /// Earlier files being finished on helper threads.
    closing: Vec<std::thread::JoinHandle<SinkReport>>,
    /// The next file's engine, being prepared on a helper thread.
    next: Option<std::thread::JoinHandle<std::io::Result<storage::PreparedSink>>>,
}

fn open_writer(path: &Path, o: &SinkOptions) -> Result<PcapWriter<AnySink>, StorageError> {
    open_writer_with(path, o, None)
}

/// Opens a writer, on a prepared engine when there is one (fast: only the
/// file is created).
fn open_writer_with(
    path: &Path,
    o: &SinkOptions,
    prepared: Option<storage::PreparedSink>,
) -> Result<PcapWriter<AnySink>, StorageError> {
    let mut sink = match prepared {
        Some(p) => p.open(path)?,
        None => AnySink::create(
            path,
            o.io,
            o.direct_ok,
            o.block_size,
            o.buffers,
            o.budget.clone(),
        )?,
    };
    if let Some(r) = &o.retention {
        r.opened(path);
        if o.on_full_rotate {
            let r = r.clone();
            sink.set_make_room(Some(Arc::new(move |p: &Path| r.make_room(p))));
        }
    }
    let w = PcapWriter::with_format(sink, o.snaplen, o.format, &o.ifname);
    Ok(if o.index { w.with_index(path) } else { w })
}

/// Closes a writer (flush, wait, exact length, fsync, index): its report.
fn close_writer(w: PcapWriter<AnySink>, retention: Option<&Retention>) -> SinkReport {
    let mut r = SinkReport::default();
    let path = w.path().to_owned();
    if let Some(e) = w.index_error() {
        r.notes.push(format!("index not complete: {e}"));
    }
    r.file_bytes = w.file_bytes();
    r.engine = if w.sink().is_direct() {
        "direct"
    } else {
        "buffered"
    };
    let ws = w.sink_stats();
    let (st, err) = match w.close() {
        Ok(st) => (st, None),
        Err((st, e)) => (st, Some(e)),
    };
    if let Some(ret) = retention {
        ret.closed(&path);
    }
    r.frames = st.frames;
    r.bytes = st.bytes;
    if matches!(err, Some(StorageError::DiskFull { .. })) {
        r.disk_full = st.lost;
    } else {
        r.lost = st.lost;
    }
    r.error = err.map(|e| e.to_string());
    r.truncated = st.truncated;
    r.files.push(path);
    r.block_writes = ws.writes;
    r.block_waits = ws.waits;
    r.latency_p50_us = ws.latency_p50_us;
    r.latency_p99_us = ws.latency_p99_us;
    r.peak_buffered_bytes = ws.peak_buffered_bytes;
    r.full_retries = ws.full_retries;
    r
}

fn join_close(h: std::thread::JoinHandle<SinkReport>) -> SinkReport {
    h.join().unwrap_or_else(|_| SinkReport {
        error: Some("internal error: the thread closing a file panicked".into()),
        ..Default::default()
    })
}

/// Adds one file's report to `into`.
fn merge(into: &mut SinkReport, r: SinkReport) {
    into.frames += r.frames;
    into.bytes += r.bytes;
    into.lost += r.lost;
    into.disk_full += r.disk_full;
    into.truncated += r.truncated;
    into.files.extend(r.files);
    into.file_bytes += r.file_bytes;
    if into.error.is_none() {
        into.error = r.error;
    }
    into.engine = r.engine;
    into.block_writes += r.block_writes;
    into.block_waits += r.block_waits;
    into.latency_p50_us = into.latency_p50_us.max(r.latency_p50_us);
    into.latency_p99_us = into.latency_p99_us.max(r.latency_p99_us);
    into.peak_buffered_bytes = into.peak_buffered_bytes.max(r.peak_buffered_bytes);
    into.full_retries += r.full_retries;
    into.notes.extend(r.notes);
}

impl PcapFileSink {
    pub fn create(path: &Path, o: &SinkOptions) -> Result<Self, storage::StorageError> {
        Self::with_rotation(path, o, None)
    }

    /// A sink that starts at `path` and rotates as `rotation` says.
    pub fn with_rotation(
        path: &Path,
        o: &SinkOptions,
        rotation: Option<Rotation>,
    ) -> Result<Self, storage::StorageError> {
        Ok(PcapFileSink {
            writer: open_writer(path, o)?,
            opts: o.clone(),
            rotation,
            file_start_ns: 0,
            done: SinkReport::default(),
            flush_every_ns: o.flush_interval.as_nanos() as u64,
            last_flush_ns: monotonic_ns(),
            last_blocks: 0,
            next_gauge_ns: 0,
            error: None,
            closing: Vec::new(),
            next: None,
        }
        .with_next())
    }

    fn with_next(mut self) -> Self {
        self.prepare_next();
        self
    }

    /// With rotation, the next file's engine is made ahead on a helper
    /// thread: allocating and registering its blocks took 10-60 ms on the
    /// writer thread (measured at 5 Gbit/s with --rotate-size 64M), long
    /// enough for frames to pile up in the UMEM and be dropped.
    fn prepare_next(&mut self) {
        if self.rotation.is_none() || self.next.is_some() {
            return;
        }
        let o = &self.opts;
        let (io, ok, bs, nb, budget) =
            (o.io, o.direct_ok, o.block_size, o.buffers, o.budget.clone());
        self.next = std::thread::Builder::new()
            .name("wt-prepare".into())
            .spawn(move || AnySink::prepare(io, ok, bs, nb, budget))
            .ok();
    }

    fn needs_rotation(&self, ts_ns: u64, len: usize) -> bool {
        let Some(r) = &self.rotation else {
            return false;
        };
        if self.writer.stats().frames == 0 {
            return false; // never an empty file
        }
        // The record as the file's format writes it (pcapng: 32 B + padding).
        let rec = self
            .opts
            .format
            .record_len(len.min(self.opts.snaplen as usize)) as u64;
        r.max_bytes
            .is_some_and(|m| self.writer.file_bytes() + rec > m)
            || r.max_age
                .is_some_and(|a| ts_ns >= self.file_start_ns.saturating_add(a.as_nanos() as u64))
    }

    fn rotate(&mut self, ts_ns: u64) -> Result<(), storage::StorageError> {
        let r = self.rotation.as_ref().expect("rotation configured");
        // Names sort by time: the new file's first frame, and never a name
        // at or before the current file's.
        let start = ts_ns.max(self.file_start_ns + 1);
        let path = r.dir.join(capture_file_name_as(
            &r.prefix,
            &r.ifname,
            r.queue,
            start,
            self.opts.format,
        ));
        let prepared = match self.next.take() {
            Some(h) if h.is_finished() => h.join().ok().and_then(Result::ok),
            other => {
                self.next = other; // not ready yet: keep it for next time
                None
            }
        };
        let new = open_writer_with(&path, &self.opts, prepared)?;
        let old = std::mem::replace(&mut self.writer, new);
        self.prepare_next();
        // The old file is finished (last block, wait, exact length, fsync)
        // on a helper thread: that takes tens of ms, during which frames
        // would otherwise pile up in the UMEM (measured: --rotate-size 64M
        // at 5 Gbit/s lost 37 % of the frames when closing inline, 0 % now).
        let ret = self.opts.retention.clone();
        if let Some(r) = &ret {
            r.closing(old.path());
        }
        let h = std::thread::Builder::new()
            .name("wt-close".into())
            .spawn(move || close_writer(old, ret.as_deref()))
            .map_err(|e| StorageError::Write {
                path: path.clone(),
                source: e,
            })?;
        self.closing.push(h);
        self.last_blocks = 0;
        self.last_flush_ns = monotonic_ns();
        // Retention is applied by record()'s control loop (4 times a
        // second), never here: deleting a large file can take tens of ms,
        // which the writer thread must not spend while frames wait.
        Ok(())
    }
}

impl FrameSink for PcapFileSink {
    #[inline]
    fn write(&mut self, ts_ns: u64, frame: &[u8]) -> bool {
        if self.needs_rotation(ts_ns, frame.len()) {
            if let Err(e) = self.rotate(ts_ns) {
                self.error.get_or_insert_with(|| e.to_string());
                if matches!(e, StorageError::DiskFull { .. }) {
                    self.done.disk_full += 1;
                } else {
                    self.done.lost += 1;
                }
                return false;
            }
        }
        if self.writer.stats().frames == 0 {
            self.file_start_ns = ts_ns;
        }
        match self.writer.write(ts_ns, frame) {
            Ok(()) => true,
            Err(e) => {
                self.error.get_or_insert_with(|| e.to_string());
                false
            }
        }
    }

    fn idle(&mut self) {
        let now = monotonic_ns();
        // Collect files finished in the background.
        let mut i = 0;
        while i < self.closing.len() {
            if self.closing[i].is_finished() {
                let h = self.closing.swap_remove(i);
                merge(&mut self.done, join_close(h));
            } else {
                i += 1;
            }
        }
        if let Some(g) = &self.opts.gauge {
            if now >= self.next_gauge_ns {
                self.next_gauge_ns = now + 1_000_000_000;
                let s = self.writer.sink().live_stats();
                g.pending.store(s.pending as u64, Ordering::Relaxed);
                g.in_flight.store(s.in_flight as u64, Ordering::Relaxed);
                g.p50_us.store(s.latency_p50_us as u64, Ordering::Relaxed);
                g.p99_us.store(s.latency_p99_us as u64, Ordering::Relaxed);
                g.waits
                    .store(self.done.block_waits + s.waits, Ordering::Relaxed);
            }
        }
        // While full blocks go out, data is never older than a block's fill
        // time: no flush. A flush waits for every queued write (to cut the
        // file to its exact length), so it must only happen on a quiet link.
        let blocks = self.writer.blocks_submitted();
        if blocks != self.last_blocks {
            self.last_blocks = blocks;
            self.last_flush_ns = now;
            return;
        }
        if now - self.last_flush_ns >= self.flush_every_ns && self.writer.unflushed() {
            self.last_flush_ns = now;
            if let Err(e) = self.writer.flush() {
                self.error.get_or_insert_with(|| e.to_string());
            }
        }
    }

    fn close(self) -> SinkReport {
        if let Some(h) = self.next {
            let _ = h.join(); // an engine made for a file that never came
        }
        let mut r = self.done;
        for h in self.closing {
            merge(&mut r, join_close(h));
        }
        merge(
            &mut r,
            close_writer(self.writer, self.opts.retention.as_deref()),
        );
        // Background closes finish in any order: list files by name (time).
        r.files.sort();
        if let Some(e) = self.error {
            r.error = Some(e);
        }
        r
    }
}

/// Options of a recording.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    pub capture: CaptureConfig,
    pub dir: PathBuf,
    pub snaplen: u32,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// A partly filled block is written after this long.
    pub flush_interval: Duration,
    /// File name prefix.
    pub prefix: String,
    /// O_DIRECT (auto: where the filesystem takes it) or buffered.
    pub io: IoMode,
    pub block_size: usize,
    pub buffers: usize,
    /// RAM for blocks waiting for the disk, all queues together (bytes).
    pub buffer_bytes: u64,
    /// Rotate files before they grow past this many bytes.
    pub rotate_size: Option<u64>,
    /// Rotate files every this much packet time.
    pub rotate_time: Option<Duration>,
    /// pcap (ns or µs) or pcapng.
    pub format: Format,
    /// Write a `.idx` sidecar per file.
    pub index: bool,
    /// Which of our files to keep (`--keep-*`, `--min-free`).
    pub retention: Policy,
    /// On a full disk: delete our oldest files and go on (else stop).
    pub on_full_rotate: bool,
}

impl RecordOptions {
    pub fn new(ifname: &str, dir: impl Into<PathBuf>) -> Self {
        RecordOptions {
            capture: CaptureConfig::new(ifname),
            dir: dir.into(),
            snaplen: DEFAULT_SNAPLEN,
            duration: None,
            flush_interval: Duration::from_secs(1),
            prefix: "wiretape".into(),
            io: IoMode::Auto,
            block_size: storage::block::DEFAULT_BLOCK_SIZE,
            buffers: 16,
            buffer_bytes: storage::uring::default_buffer_budget(),
            rotate_size: None,
            rotate_time: None,
            format: Format::PcapNs,
            index: true,
            retention: Policy::default(),
            on_full_rotate: false,
        }
    }
}

/// The writers' backpressure, summed over queues (for the progress line).
#[derive(Clone, Copy, Debug, Default)]
pub struct StorageProgress {
    /// Filled blocks waiting in RAM for the disk.
    pub pending_blocks: u64,
    pub in_flight: u64,
    /// Highest of the queues' recent write latencies, µs.
    pub p50_us: u64,
    pub p99_us: u64,
    /// Times a writer waited for a free block.
    pub waits: u64,
    /// Our files deleted by retention or on a full disk (this run).
    pub deleted_files: u64,
    pub deleted_bytes: u64,
}

/// Errors of [`record`].
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("output path {0} exists and is not a directory: give -w a directory")]
    NotADirectory(PathBuf),
    #[error("output directory {path} is not writable ({source}): choose another -w directory or fix its permissions")]
    NotWritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What [`record`] tells its progress callback, about once a second.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    Started(&'a capture::StartInfo),
    Progress {
        elapsed: Duration,
        snapshot: Snapshot,
        storage: StorageProgress,
    },
    Stopping(&'a str),
    /// Something the user should know (a fallback taken, a file repaired).
    Notice(String),
    /// The last word, after the files are closed: storage totals.
    Finished(StorageProgress),
}

/// Checks (and creates) the output directory, proving it writable.
pub fn prepare_dir(dir: &Path) -> Result<(), RecordError> {
    if dir.exists() && !dir.is_dir() {
        return Err(RecordError::NotADirectory(dir.to_owned()));
    }
    std::fs::create_dir_all(dir).map_err(|source| RecordError::NotWritable {
        path: dir.to_owned(),
        source,
    })?;
    let probe = dir.join(format!(".wiretape-probe-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(|source| RecordError::NotWritable {
        path: dir.to_owned(),
        source,
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The file name of queue `queue`'s capture started at `start_ns` (UTC):
/// `<prefix>-<iface>-q<queue>-<YYYYMMDDTHHMMSS.nnnnnnnnnZ>.pcap`, sorting by time.
pub fn capture_file_name(prefix: &str, ifname: &str, queue: u32, start_ns: u64) -> String {
    capture_file_name_as(prefix, ifname, queue, start_ns, Format::PcapNs)
}

/// As [`capture_file_name`], with the extension of `format` (.pcap, .pcapng).
pub fn capture_file_name_as(
    prefix: &str,
    ifname: &str,
    queue: u32,
    start_ns: u64,
    format: Format,
) -> String {
    format!(
        "{prefix}-{ifname}-q{queue}-{}.{}",
        format_compact(start_ns),
        format.extension()
    )
}

/// Trims torn tails off wiretape's own files in `dir` (a crash or a full
/// disk in an earlier run); returns one line per file it changed or could not.
pub fn repair_dir(dir: &Path, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| retention::parse_name(n, prefix).is_some())
        })
        .collect();
    files.sort();
    for f in files {
        match storage::repair::repair(&f) {
            Ok(r) if r.trimmed() > 0 => out.push(format!(
                "repaired {}: trimmed a torn tail of {} bytes, {} complete records kept",
                f.display(),
                r.trimmed(),
                r.records
            )),
            Ok(_) => {}
            Err(e) => out.push(format!("not repaired: {e}")),
        }
    }
    out
}

/// Records until `stop` is set, the count or duration is reached, or the
/// output fails; then stops cleanly and returns the accounting.
pub fn record(
    opts: &RecordOptions,
    stop: &AtomicBool,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<CaptureReport, RecordError> {
    prepare_dir(&opts.dir)?;
    for n in repair_dir(&opts.dir, &opts.prefix) {
        on_event(Event::Notice(n));
    }
    let direct_ok = storage::uring::direct_supported(&opts.dir);
    match opts.io {
        IoMode::Auto if !direct_ok => on_event(Event::Notice(format!(
            "{} does not take O_DIRECT (tmpfs?): writing through the page cache instead",
            opts.dir.display()
        ))),
        IoMode::Direct if !direct_ok => {
            return Err(RecordError::NotWritable {
                path: opts.dir.clone(),
                source: std::io::Error::other(
                    "the filesystem refuses O_DIRECT; use --io auto or buffered",
                ),
            })
        }
        _ => {}
    }
    let sink_opts = SinkOptions {
        snaplen: opts.snaplen,
        flush_interval: opts.flush_interval,
        io: opts.io,
        direct_ok,
        block_size: opts.block_size,
        buffers: opts.buffers,
        budget: Some(std::sync::Arc::new(std::sync::atomic::AtomicI64::new(
            opts.buffer_bytes as i64,
        ))),
        format: opts.format,
        ifname: opts.capture.ifname.clone(),
        index: opts.index,
        retention: Some(Arc::new(Retention::new(
            &opts.dir,
            &opts.prefix,
            opts.retention.clone(),
        ))),
        on_full_rotate: opts.on_full_rotate,
        gauge: None,
    };
    let retention = sink_opts.retention.clone().expect("set above");
    let rotating = opts.rotate_size.is_some() || opts.rotate_time.is_some();
    if !rotating && (opts.on_full_rotate || opts.retention.keep_files.is_some()) {
        on_event(Event::Notice(
            "without --rotate-size or --rotate-time each queue writes one file: retention and \
             --on-full rotate can only delete files of earlier runs"
                .into(),
        ));
    }
    // Room before the first byte: an earlier run may have filled the ring.
    retention.enforce();
    let mut gauges: Vec<Arc<SinkGauge>> = Vec::new();
    let start_ns = realtime_ns();
    let ifname = opts.capture.ifname.clone();
    let cap = Capture::start(&opts.capture, |q| {
        let path = opts.dir.join(capture_file_name_as(
            &opts.prefix,
            &ifname,
            q,
            start_ns,
            opts.format,
        ));
        let gauge = Arc::new(SinkGauge::default());
        gauges.push(gauge.clone());
        let sink_opts = SinkOptions {
            gauge: Some(gauge),
            ..sink_opts.clone()
        };
        let rotation =
            (opts.rotate_size.is_some() || opts.rotate_time.is_some()).then(|| Rotation {
                dir: opts.dir.clone(),
                prefix: opts.prefix.clone(),
                ifname: ifname.clone(),
                queue: q,
                max_bytes: opts.rotate_size,
                max_age: opts.rotate_time,
            });
        PcapFileSink::with_rotation(&path, &sink_opts, rotation).map_err(|e| e.to_string())
    })?;
    on_event(Event::Started(cap.info()));
    let t0 = Instant::now();
    let mut next_progress = Duration::from_secs(1);
    let mut next_retention = Duration::from_millis(250);
    let say_deleted = |on_event: &mut dyn FnMut(Event<'_>)| {
        for l in retention.take_log() {
            on_event(Event::Notice(l));
        }
    };
    let why = loop {
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(Ordering::Relaxed) {
            break "signal";
        }
        match cap.should_stop() {
            Some(StopReason::CountReached) => break "count reached",
            Some(StopReason::SinkFailed) => break "output failed",
            Some(StopReason::ThreadDied) => break "internal error: a capture thread died",
            None => {}
        }
        let el = t0.elapsed();
        if opts.duration.is_some_and(|d| el >= d) {
            break "duration reached";
        }
        if el >= next_retention {
            next_retention += Duration::from_millis(250);
            retention.enforce();
            say_deleted(&mut on_event);
        }
        if el >= next_progress {
            next_progress += Duration::from_secs(1);
            let mut st = StorageProgress::default();
            for g in &gauges {
                st.pending_blocks += g.pending.load(Ordering::Relaxed);
                st.in_flight += g.in_flight.load(Ordering::Relaxed);
                st.p50_us = st.p50_us.max(g.p50_us.load(Ordering::Relaxed));
                st.p99_us = st.p99_us.max(g.p99_us.load(Ordering::Relaxed));
                st.waits += g.waits.load(Ordering::Relaxed);
            }
            (st.deleted_files, st.deleted_bytes) = retention.deleted();
            on_event(Event::Progress {
                elapsed: el,
                snapshot: cap.snapshot(),
                storage: st,
            });
        }
    };
    on_event(Event::Stopping(why));
    let report = cap.stop();
    // The files just closed count too.
    retention.enforce();
    say_deleted(&mut on_event);
    let (deleted_files, deleted_bytes) = retention.deleted();
    on_event(Event::Finished(StorageProgress {
        deleted_files,
        deleted_bytes,
        ..Default::default()
    }));
    Ok(report)
}
