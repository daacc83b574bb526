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

pub use capture::{
    Capture, CaptureConfig, CaptureError, CaptureReport, FrameSink, SinkReport, Snapshot,
    StopReason,
};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use storage::{AnySink, IoMode, PcapWriter};
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
        }
    }
}

/// A [`FrameSink`] that writes a nanosecond pcap file through the block writer.
pub struct PcapFileSink {
    writer: PcapWriter<AnySink>,
    flush_every_ns: u64,
    last_flush_ns: u64,
    last_blocks: u64,
    error: Option<String>,
}

impl PcapFileSink {
    pub fn create(path: &Path, o: &SinkOptions) -> Result<Self, storage::StorageError> {
        let sink = AnySink::create(
            path,
            o.io,
            o.direct_ok,
            o.block_size,
            o.buffers,
            o.budget.clone(),
        )?;
        Ok(PcapFileSink {
            writer: PcapWriter::new(sink, o.snaplen),
            flush_every_ns: o.flush_interval.as_nanos() as u64,
            last_flush_ns: monotonic_ns(),
            last_blocks: 0,
            error: None,
        })
    }
}

impl FrameSink for PcapFileSink {
    #[inline]
    fn write(&mut self, ts_ns: u64, frame: &[u8]) -> bool {
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
        let path = self.writer.path().to_owned();
        let file_bytes = self.writer.file_bytes();
        let engine = if self.writer.sink().is_direct() {
            "direct"
        } else {
            "buffered"
        };
        let ws = self.writer.sink_stats();
        let (st, err) = match self.writer.close() {
            Ok(st) => (st, self.error),
            Err((st, e)) => (st, self.error.or(Some(e.to_string()))),
        };
        SinkReport {
            frames: st.frames,
            bytes: st.bytes,
            lost: st.lost,
            truncated: st.truncated,
            files: vec![path],
            file_bytes,
            error: err,
            engine,
            block_writes: ws.writes,
            block_waits: ws.waits,
            latency_p50_us: ws.latency_p50_us,
            latency_p99_us: ws.latency_p99_us,
            peak_buffered_bytes: ws.peak_buffered_bytes,
        }
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
        }
    }
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
    },
    Stopping(&'a str),
    /// Something the user should know (a fallback taken, a file repaired).
    Notice(String),
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
    format!(
        "{prefix}-{ifname}-q{queue}-{}.pcap",
        format_compact(start_ns)
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
            p.extension().is_some_and(|x| x == "pcap")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{prefix}-")))
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
    };
    let start_ns = realtime_ns();
    let ifname = opts.capture.ifname.clone();
    let cap = Capture::start(&opts.capture, |q| {
        let path = opts
            .dir
            .join(capture_file_name(&opts.prefix, &ifname, q, start_ns));
        PcapFileSink::create(&path, &sink_opts).map_err(|e| e.to_string())
    })?;
    on_event(Event::Started(cap.info()));
    let t0 = Instant::now();
    let mut next_progress = Duration::from_secs(1);
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
        if el >= next_progress {
            next_progress += Duration::from_secs(1);
            on_event(Event::Progress {
                elapsed: el,
                snapshot: cap.snapshot(),
            });
        }
    };
    on_event(Event::Stopping(why));
    Ok(cap.stop())
}
