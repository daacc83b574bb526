//! A recording's output: [`Store`] opens the directory once (checked, torn
//! tails repaired, O_DIRECT probed, RAM budget and retention set up) and
//! hands out one [`RotatingWriter`] per queue, which writes the queue's
//! frames into files named by [`wiretape_files::naming`], rotating them by size or
//! packet time, with one final [`WriterReport`] and one live [`Gauge`].
//!
//! Rotation happens between two frames on the writer's thread: the old file
//! is finished (exact length, durable) on a helper thread, the next file's
//! engine is prepared ahead on another, so no frame is lost or written twice
//! at a boundary and the writer never waits for either.

use crate::retention::{Limit, Policy, Retention};
use crate::sink::{AnySink, BlockSink, Gate, IoMode, PreparedSink};
use crate::volume::{Volume, Volumes};
use crate::writer::PcapWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use wiretape_files::naming;
use wiretape_files::pcap::Format;
use wiretape_files::StorageError;
use wiretape_timestamp::hist::{self, Histogram};
use wiretape_timestamp::monotonic_ns;

/// Default snap length: whole frames (libpcap's maximum).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// How a recording writes its files. [`StorageConfig::new`] holds every
/// default (the CLI's defaults are these).
#[derive(Clone, Debug)]
pub struct StorageConfig {
    /// Output directory (created if missing): the first volume.
    pub dir: PathBuf,
    /// Further volumes (`-w` given again; [`crate::volume`]): each new
    /// file goes to one of them or to `dir`.
    pub more_dirs: Vec<PathBuf>,
    /// File name prefix.
    pub prefix: String,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// A partly filled block is written after this long.
    pub flush_interval: Duration,
    /// O_DIRECT (auto: where the filesystem takes it) or buffered.
    pub io: IoMode,
    /// Bytes per block.
    pub block_size: usize,
    /// Blocks per file: one being filled, the rest in flight.
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
    /// With the index, the flow keys of each block (hosts, ports,
    /// protocols, VLANs), so that filtered extraction skips blocks.
    pub flow_index: bool,
    /// With the flow index, the exact key index of each file (`.kdx`,
    /// [`crate::keys`]), built off the capture threads.
    pub key_index: bool,
    /// The key index's builder may be waited for (a file source: nothing
    /// is lost by waiting); else a segment it cannot take in time is left
    /// out and the report says so.
    pub key_index_wait: bool,
    /// A session table beside each file (`<file>.sessions.parquet`,
    /// [`crate::sessions`]), made off the capture threads.
    pub sessions: bool,
    /// The session thread may be waited for (a file source); else a block
    /// it cannot take in time is skipped for sessions (counted, the table
    /// marked incomplete).
    pub sessions_wait: bool,
    /// Which of our files to keep (`--keep-*`, `--min-free`).
    pub retention: Policy,
    /// On a full disk: delete our oldest files and go on (else stop).
    pub on_full_rotate: bool,
    /// What the notices of retention's deletions call its limits, and the
    /// notices at opening the rotation's (by default: the fields' names;
    /// the CLI: its flags).
    pub retention_words: crate::retention::LimitWords,
    /// Link type the files state (`LINKTYPE_`): Ethernet for interfaces;
    /// `record -r`: the input file's. The flow index is for Ethernet
    /// only (other link types get time-only index entries).
    pub linktype: u32,
    /// Compress files at rest (`--compress`; [`crate::compress`]).
    pub compress: wiretape_files::compress::Compress,
    /// Compression threads, all queues together (`--compress-threads`).
    pub compress_threads: usize,
    /// Encrypt files at rest to these age recipients (`--encrypt-to`;
    /// [`crate::crypt`]; None or empty: plain). Encrypted files get no
    /// flow sets in their `.idx`, no key index and no session table:
    /// those would hold addresses and names in clear.
    pub encrypt_to: Option<wiretape_files::crypt::Recipients>,
    /// Runs laid out in place are written from where they lie only while
    /// at most this many bytes wait for the disk, else copied
    /// ([`crate::sink::BlockSink::set_direct_backlog`]).
    pub direct_backlog_max: u64,
    /// How our files left by an earlier run are read when repaired at the
    /// start (an encrypted one needs an identity of its recipients), and
    /// `record -r`'s input.
    pub read: wiretape_files::ReadOptions,
}

impl StorageConfig {
    /// The defaults, writing into `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StorageConfig {
            dir: dir.into(),
            more_dirs: Vec::new(),
            prefix: "wiretape".into(),
            snaplen: DEFAULT_SNAPLEN,
            flush_interval: Duration::from_secs(1),
            io: IoMode::Auto,
            block_size: crate::block::DEFAULT_BLOCK_SIZE,
            buffers: 16,
            buffer_bytes: crate::uring::default_buffer_budget(),
            rotate_size: None,
            rotate_time: None,
            format: Format::PcapNs,
            index: true,
            flow_index: true,
            key_index: true,
            key_index_wait: false,
            sessions: true,
            sessions_wait: false,
            retention: Policy::default(),
            on_full_rotate: false,
            retention_words: Default::default(),
            linktype: wiretape_files::pcap::LINKTYPE_ETHERNET,
            compress: wiretape_files::compress::Compress::None,
            compress_threads: default_compress_threads(),
            encrypt_to: None,
            direct_backlog_max: crate::uring::DIRECT_BACKLOG_MAX,
            read: wiretape_files::ReadOptions::default(),
        }
    }

    /// Every volume: `dir`, then `more_dirs`.
    pub fn dirs(&self) -> Vec<PathBuf> {
        std::iter::once(self.dir.clone())
            .chain(self.more_dirs.iter().cloned())
            .collect()
    }

    /// Whether files are encrypted ([`StorageConfig::encrypt_to`]).
    pub fn encrypted(&self) -> bool {
        self.encrypt_to.as_ref().is_some_and(|r| !r.is_empty())
    }

    /// Whether files rotate at all.
    pub fn rotating(&self) -> bool {
        self.rotate_size.is_some() || self.rotate_time.is_some()
    }
}

/// Checks (and creates) the output directory, proving it writable.
pub fn prepare_dir(dir: &Path) -> Result<(), StorageError> {
    if dir.exists() && !dir.is_dir() {
        return Err(StorageError::NotADirectory(dir.to_owned()));
    }
    let not_writable = |source| StorageError::NotWritable {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(not_writable)?;
    let probe = dir.join(format!(".wiretape-probe-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(not_writable)?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Trims torn tails off wiretape's own files in `dir` (a crash or a full
/// disk in an earlier run), and removes those a crash left without a
/// complete header (read with `opts`: an encrypted file needs an identity);
/// returns one line per file it changed or could not.
/// Only the newest files of each interface and queue can need it, so only
/// those are read (a directory of 50,000 files of earlier runs took seconds
/// to read at every start): newest first, down to the first that holds a
/// frame, and at least two. A writer's next file goes to disk only once the
/// file before it is written whole (the gate at rotation), so a file
/// holding a frame has only whole files before it.
pub fn repair_dir(dir: &Path, prefix: &str, opts: &wiretape_files::ReadOptions) -> Vec<String> {
    let mut out = Vec::new();
    let files = naming::list(dir, prefix);
    let mut series: std::collections::BTreeMap<(String, u32), Vec<&naming::OurFile>> =
        Default::default();
    for f in &files {
        let Some(n) = f
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| naming::parse(n, prefix))
        else {
            continue;
        };
        series
            .entry((n.ifname.to_string(), n.queue))
            .or_default()
            .push(f);
    }
    for files in series.values() {
        for (k, f) in files.iter().rev().enumerate() {
            let held_a_frame = match crate::repair::repair_with(&f.path, opts) {
                Ok(r) if r.busy => {
                    out.push(format!(
                        "{} is being written by another recorder: not repaired",
                        f.path.display()
                    ));
                    false
                }
                Ok(r) if r.removed => {
                    out.push(format!(
                        "removed {}: no complete file header ({} bytes; a crash right after it was created), it held no frame",
                        f.path.display(),
                        r.len_before
                    ));
                    false
                }
                Ok(r) => {
                    if r.changed() {
                        out.push(format!(
                            "repaired {}: trimmed a torn tail of {} bytes, {} complete records kept",
                            f.path.display(),
                            r.trimmed(),
                            r.records
                        ));
                    }
                    r.records > 0
                }
                Err(e) => {
                    out.push(format!("not repaired: {e}"));
                    false
                }
            };
            if held_a_frame && k >= 1 {
                break;
            }
        }
    }
    out
}

/// A writer's live numbers, refreshed about once a second and at its close
/// (read by a progress line or a metrics endpoint).
#[derive(Debug, Default)]
pub struct Gauge {
    /// Frames lost to a write error so far (live: frames of a failed block
    /// are counted when the file closes).
    pub lost: AtomicU64,
    /// Frames lost to a full disk so far (likewise).
    pub disk_full: AtomicU64,
    /// Files opened (the first one and each rotation's).
    pub files_opened: AtomicU64,
    /// Files finished and closed.
    pub files_closed: AtomicU64,
    /// Rotations (a new file started, the old one finished).
    pub rotations: AtomicU64,
    /// Block writes issued.
    pub block_writes: AtomicU64,
    /// Bytes of filled blocks in RAM not yet on disk (waiting or in flight).
    pub buffered_bytes: AtomicU64,
    /// Every block write's latency so far, all files (µs).
    pub latency: Mutex<Option<Histogram<u64>>>,
    /// The writer's first error, when it failed.
    pub error: Mutex<Option<String>>,
    /// Filled blocks waiting in RAM for a write slot.
    pub pending: AtomicU64,
    /// Writes submitted and not completed.
    pub in_flight: AtomicU64,
    /// Write latency (submit to completion) of recent writes, µs.
    pub p50_us: AtomicU64,
    /// As `p50_us`, the 99th percentile.
    pub p99_us: AtomicU64,
    /// Times the writer waited for a free block.
    pub waits: AtomicU64,
}

/// One queue's writers (every writer it had: a run that went on after its
/// interface came back has more than one), live.
#[derive(Clone, Debug, Default)]
pub struct QueueStorage {
    /// The interface.
    pub ifname: String,
    /// The queue.
    pub queue: u32,
    /// Filled blocks waiting in RAM for a write slot.
    pub pending_blocks: u64,
    /// Writes in flight.
    pub in_flight: u64,
    /// Bytes of filled blocks in RAM not yet on disk.
    pub buffered_bytes: u64,
    /// Block writes issued.
    pub block_writes: u64,
    /// Frames lost to a write error so far.
    pub lost: u64,
    /// Frames lost to a full disk so far.
    pub disk_full: u64,
    /// Files being written or finished right now.
    pub files_open: u64,
    /// Files opened in all.
    pub files_opened: u64,
    /// Rotations.
    pub rotations: u64,
    /// Every block write's latency (µs), if the engine measures it.
    pub latency_us: Option<Histogram<u64>>,
    /// The first error.
    pub error: Option<String>,
    /// Our files of this interface and queue deleted by retention (this run).
    pub deleted_files: u64,
    /// Their bytes.
    pub deleted_bytes: u64,
}

/// The writers' backpressure, summed over queues, and what retention did.
#[derive(Clone, Debug, Default)]
pub struct StorageProgress {
    /// Filled blocks waiting in RAM for the disk.
    pub pending_blocks: u64,
    /// Writes in flight.
    pub in_flight: u64,
    /// Highest of the queues' recent write latencies, µs.
    pub p50_us: u64,
    /// As `p50_us`, the 99th percentile.
    pub p99_us: u64,
    /// Times a writer waited for a free block.
    pub waits: u64,
    /// Our files deleted by retention or on a full disk (this run).
    pub deleted_files: u64,
    /// Their bytes.
    pub deleted_bytes: u64,
    /// Compression so far (`--compress`; None without).
    pub compress: Option<crate::compress::CompressReport>,
    /// Per interface and queue (also the files of other interfaces and
    /// queues retention deleted, with nothing else).
    pub queues: Vec<QueueStorage>,
    /// (free for unprivileged users, total) bytes of the output filesystem.
    pub fs_space: Option<(u64, u64)>,
    /// The RAM budget for blocks waiting for the disk (`--buffer-mib`).
    pub buffer_limit_bytes: u64,
    /// The session tables so far (None: `--no-sessions`).
    pub sessions: Option<crate::sessions::SessionStats>,
    /// Each volume's state, with several (`-w` given more than once;
    /// empty with one).
    pub volumes: Vec<crate::volume::VolumeState>,
}

/// `--compress-threads` when not given: the cores less one (the capture
/// and writer threads need theirs), at least one.
pub fn default_compress_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

/// A recording's output directory, opened once.
pub struct Store {
    cfg: StorageConfig,
    volumes: Arc<Volumes>,
    budget: Arc<AtomicI64>,
    retention: Arc<Retention>,
    gauges: Mutex<Vec<(String, u32, Arc<Gauge>)>>,
    /// Bumped by [`Store::rotate_all`]; each writer rotates when it changes.
    rotate_epoch: Arc<AtomicU64>,
    /// The compression threads (with `--compress`).
    pool: Option<Arc<crate::compress::Pool>>,
    /// The key index's builder thread (with the key index).
    keys: Option<Arc<crate::keys::Builder>>,
    /// The session thread (with session tables).
    sessions: Option<Arc<crate::sessions::SessionRecorder>>,
}

impl Drop for Store {
    fn drop(&mut self) {
        self.finish_sessions();
    }
}

impl Store {
    /// Checks and prepares `cfg.dir`: creates it, proves it writable, trims
    /// torn tails of our earlier files, asks whether it takes O_DIRECT and
    /// applies retention once (an earlier run may have filled the disk).
    /// Returns the store and what the user should be told.
    pub fn open(mut cfg: StorageConfig) -> Result<(Store, Vec<String>), StorageError> {
        let dirs = cfg.dirs();
        let mut notices = Vec::new();
        let mut volumes = Vec::new();
        for dir in &dirs {
            prepare_dir(dir)?;
        }
        for dir in &dirs {
            notices.extend(repair_dir(dir, &cfg.prefix, &cfg.read));
            let direct_ok = crate::uring::direct_supported(dir);
            match cfg.io {
                IoMode::Auto if !direct_ok => notices.push(format!(
                    "{} does not take O_DIRECT (tmpfs?): writing through the page cache instead",
                    dir.display()
                )),
                IoMode::Direct if !direct_ok => {
                    return Err(StorageError::DirectRefused { path: dir.clone() })
                }
                _ => {}
            }
            volumes.push(Volume::new(dir, direct_ok));
        }
        if dirs.len() > 1 {
            crate::volume::write_description(&dirs)
                .map_err(|(path, source)| StorageError::NotWritable { path, source })?;
            if !cfg.rotating() {
                cfg.rotate_size = Some(crate::volume::DEFAULT_ROTATE_SIZE);
                let w = &cfg.retention_words;
                notices.push(format!(
                    "{} volumes and no {} or {}: files rotate at {} MiB, \
                     so that each queue's files spread over the volumes",
                    dirs.len(),
                    w.of(Limit::RotateSize),
                    w.of(Limit::RotateTime),
                    crate::volume::DEFAULT_ROTATE_SIZE >> 20
                ));
            }
        }
        if !cfg.rotating() && (cfg.on_full_rotate || cfg.retention.keep_files.is_some()) {
            let w = &cfg.retention_words;
            notices.push(format!(
                "without {} or {} each queue writes one file: retention and {} can only delete \
                 files of earlier runs",
                w.of(Limit::RotateSize),
                w.of(Limit::RotateTime),
                w.of(Limit::OnFullRotate)
            ));
        }
        let pool = if cfg.compress.is_on() {
            Some(
                crate::compress::Pool::new(cfg.compress_threads).map_err(|e| {
                    StorageError::Create {
                        path: cfg.dir.clone(),
                        source: std::io::Error::other(format!(
                            "cannot start the compression threads: {e}"
                        )),
                    }
                })?,
            )
        } else {
            None
        };
        let keys_on = cfg.index
            && !cfg.encrypted()
            && cfg.flow_index
            && cfg.key_index
            && cfg.linktype == wiretape_files::pcap::LINKTYPE_ETHERNET;
        let keys = if keys_on {
            Some(
                crate::keys::Builder::start().map_err(|e| StorageError::Create {
                    path: cfg.dir.clone(),
                    source: std::io::Error::other(format!(
                        "cannot start the key index's thread: {e}"
                    )),
                })?,
            )
        } else {
            None
        };
        let sessions = if cfg.sessions && !cfg.encrypted() {
            Some(
                crate::sessions::SessionRecorder::start().map_err(|e| StorageError::Create {
                    path: cfg.dir.clone(),
                    source: std::io::Error::other(format!("cannot start the session thread: {e}")),
                })?,
            )
        } else {
            None
        };
        let retention = Arc::new(
            Retention::with_dirs(&dirs, &cfg.prefix, cfg.retention.clone())
                .with_words(cfg.retention_words.clone()),
        );
        retention.enforce();
        notices.extend(retention.take_log());
        Ok((
            Store {
                budget: Arc::new(AtomicI64::new(cfg.buffer_bytes as i64)),
                cfg,
                volumes: Arc::new(Volumes::new(volumes)),
                retention,
                gauges: Mutex::new(Vec::new()),
                rotate_epoch: Arc::new(AtomicU64::new(0)),
                pool,
                keys,
                sessions,
            },
            notices,
        ))
    }

    /// The key index's builder: segments built, and its CPU time (ns).
    pub fn key_builder_stats(&self) -> Option<(u64, u64)> {
        self.keys.as_ref().map(|b| {
            (
                b.built.load(Ordering::Relaxed),
                b.cpu_ns.load(Ordering::Relaxed),
            )
        })
    }

    /// Writes the session tables of every file ended so far and ends the
    /// session thread (call it once the writers are closed; later files get
    /// no table).
    pub fn finish_sessions(&self) {
        if let Some(s) = &self.sessions {
            s.shutdown();
        }
    }

    /// The configuration.
    pub fn config(&self) -> &StorageConfig {
        &self.cfg
    }

    /// Asks every writer to start a new file at its next frame and finish
    /// the current one (SIGHUP); a writer sees it within about 100 ms. A
    /// file with no frame yet is kept (no file is ever empty).
    pub fn rotate_all(&self) {
        self.rotate_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// The compression counts so far, all queues (None: not compressing).
    pub fn compress_report(&self) -> Option<crate::compress::CompressReport> {
        self.pool
            .as_ref()
            .map(|p| p.stats.report(self.cfg.compress))
    }

    /// The store's volumes (one per `-w`).
    pub fn volumes(&self) -> &Arc<Volumes> {
        &self.volumes
    }

    /// The retention shared by this store's writers.
    pub fn retention(&self) -> &Arc<Retention> {
        &self.retention
    }

    /// Opens the writer of `ifname` queue `queue`; its first file is named
    /// by `start_ns` (UTC).
    pub fn writer(
        &self,
        ifname: &str,
        queue: u32,
        start_ns: u64,
    ) -> Result<RotatingWriter, StorageError> {
        let gauge = Arc::new(Gauge::default());
        self.gauges
            .lock()
            .expect("gauges")
            .push((ifname.to_owned(), queue, gauge.clone()));
        let mut w = RotatingWriter {
            cfg: self.cfg.clone(),
            ifname: ifname.to_owned(),
            queue,
            volumes: self.volumes.clone(),
            vol: 0,
            rescued_full: 0,
            rescued_err: 0,
            rescue: Arc::new(Mutex::new(Vec::new())),
            budget: self.budget.clone(),
            unwritten: Arc::new(AtomicI64::new(0)),
            retention: self.retention.clone(),
            gauge,
            writer: None,
            file_start_ns: start_ns,
            name_ns: start_ns,
            rotate_failed: None,
            done: WriterReport::default(),
            flush_every_ns: self.cfg.flush_interval.as_nanos() as u64,
            last_flush_ns: monotonic_ns(),
            last_blocks: 0,
            next_gauge_ns: 0,
            error: None,
            closing: Vec::new(),
            next: None,
            rotate_epoch: self.rotate_epoch.clone(),
            seen_epoch: self.rotate_epoch.load(Ordering::Acquire),
            rotate_requested: false,
            pool: self.pool.clone(),
            keys: self.keys.clone(),
            sessions: self.sessions.as_ref().map(|s| (s.clone(), s.series())),
        };
        w.writer = Some(w.open_on_a_volume(start_ns, None, None)?);
        w.prepare_next();
        Ok(w)
    }

    /// The writers' live numbers, summed and per queue, what retention
    /// deleted and the output filesystem's free space (one statvfs).
    pub fn progress(&self) -> StorageProgress {
        let mut st = StorageProgress::default();
        for (ifname, queue, g) in self.gauges.lock().expect("gauges").iter() {
            let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
            st.pending_blocks += load(&g.pending);
            st.in_flight += load(&g.in_flight);
            st.p50_us = st.p50_us.max(load(&g.p50_us));
            st.p99_us = st.p99_us.max(load(&g.p99_us));
            st.waits += load(&g.waits);
            let i = match st
                .queues
                .iter()
                .position(|q| q.ifname == *ifname && q.queue == *queue)
            {
                Some(i) => i,
                None => {
                    st.queues.push(QueueStorage {
                        ifname: ifname.clone(),
                        queue: *queue,
                        ..Default::default()
                    });
                    st.queues.len() - 1
                }
            };
            let q = &mut st.queues[i];
            q.pending_blocks += load(&g.pending);
            q.in_flight += load(&g.in_flight);
            q.buffered_bytes += load(&g.buffered_bytes);
            q.block_writes += load(&g.block_writes);
            q.lost += load(&g.lost);
            q.disk_full += load(&g.disk_full);
            let (opened, closed) = (load(&g.files_opened), load(&g.files_closed));
            q.files_opened += opened;
            q.files_open += opened.saturating_sub(closed);
            q.rotations += load(&g.rotations);
            if let Some(h) = g.latency.lock().expect("gauge").as_ref() {
                match &mut q.latency_us {
                    Some(m) => {
                        let _ = m.add(h);
                    }
                    None => q.latency_us = Some(h.clone()),
                }
            }
            if q.error.is_none() {
                q.error = g.error.lock().expect("gauge").clone();
            }
        }
        st.compress = self.compress_report();
        for (ifname, queue, files, bytes) in self.retention.deleted_by_series() {
            match st
                .queues
                .iter_mut()
                .find(|q| q.ifname == ifname && q.queue == queue)
            {
                Some(q) => {
                    q.deleted_files += files;
                    q.deleted_bytes += bytes;
                }
                None => st.queues.push(QueueStorage {
                    ifname,
                    queue,
                    deleted_files: files,
                    deleted_bytes: bytes,
                    ..Default::default()
                }),
            }
        }
        (st.deleted_files, st.deleted_bytes) = self.retention.deleted();
        st.fs_space = crate::sys::fs_space(&self.cfg.dir);
        if self.volumes.len() > 1 {
            st.volumes = self.volumes.states();
            for v in &mut st.volumes {
                let own = self.cfg.retention.of_volume(&v.dir);
                (v.keep_bytes, v.min_free) = (own.keep_bytes, own.min_free);
            }
        }
        st.buffer_limit_bytes = self.cfg.buffer_bytes;
        st.sessions = self.sessions.as_ref().map(|s| s.stats());
        st
    }
}

/// What a queue's writer did, over all its files: the final word.
#[derive(Clone, Debug, Default)]
pub struct WriterReport {
    /// Frames durably written.
    pub frames: u64,
    /// Captured bytes of those frames.
    pub bytes: u64,
    /// Frames that reached the writer but are not in the file (a write
    /// error other than a full disk).
    pub lost: u64,
    /// Frames that reached the writer but are not in the file: the disk was full.
    pub disk_full: u64,
    /// Frames cut to the snap length.
    pub truncated: u64,
    /// The files, sorted by name (time).
    pub files: Vec<PathBuf>,
    /// Their bytes.
    pub file_bytes: u64,
    /// The first error, if any.
    pub error: Option<Arc<StorageError>>,
    /// How the files were written ("direct" or "buffered").
    pub engine: &'static str,
    /// Block writes issued.
    pub block_writes: u64,
    /// Times the writer waited for a free block.
    pub block_waits: u64,
    /// Write latency (submit to completion), µs: the median of every block
    /// write of every file (from `latency_us`).
    pub latency_p50_us: f64,
    /// As `latency_p50_us`, the 99th percentile.
    pub latency_p99_us: f64,
    /// Every block write's latency, µs (None: the engine does not measure
    /// it, as the buffered one).
    pub latency_us: Option<Histogram<u64>>,
    /// Most bytes that waited in RAM for the disk.
    pub peak_buffered_bytes: u64,
    /// Writes issued again after room was made on a full disk.
    pub full_retries: u64,
    /// Runs laid out in place written.
    pub runs: u64,
    /// Of them, those written from where they lay (the others were copied:
    /// the disk was behind, or the sink copies every run).
    pub runs_direct: u64,
    /// Things worth saying that are not errors (e.g. an incomplete index).
    pub notes: Vec<String>,
    /// Key index segments written.
    pub key_segments: u64,
    /// Blocks left out of the key index (its builder fell behind).
    pub key_dropped_blocks: u64,
    /// Frames not read for the session tables (their thread was behind).
    pub sessions_skipped: u64,
}

impl WriterReport {
    /// Adds a later writer's report (of the same queue: a run that went on
    /// after its interface came back).
    pub fn absorb(&mut self, r: WriterReport) {
        self.merge(r);
        self.files.sort();
    }

    /// Adds one file's report.
    fn merge(&mut self, r: WriterReport) {
        self.frames += r.frames;
        self.bytes += r.bytes;
        self.lost += r.lost;
        self.disk_full += r.disk_full;
        self.truncated += r.truncated;
        self.files.extend(r.files);
        self.file_bytes += r.file_bytes;
        if self.error.is_none() {
            self.error = r.error;
        }
        self.engine = r.engine;
        self.block_writes += r.block_writes;
        self.block_waits += r.block_waits;
        if let Some(h) = r.latency_us {
            match &mut self.latency_us {
                Some(m) => {
                    let _ = m.add(&h);
                }
                None => self.latency_us = Some(h),
            }
        }
        if let Some(h) = &self.latency_us {
            self.latency_p50_us = hist::quantile(h, 0.5) as f64;
            self.latency_p99_us = hist::quantile(h, 0.99) as f64;
        }
        self.peak_buffered_bytes = self.peak_buffered_bytes.max(r.peak_buffered_bytes);
        self.full_retries += r.full_retries;
        self.runs += r.runs;
        self.runs_direct += r.runs_direct;
        self.notes.extend(r.notes);
        self.key_segments += r.key_segments;
        self.key_dropped_blocks += r.key_dropped_blocks;
        self.sessions_skipped += r.sessions_skipped;
    }
}

/// Writes one queue's frames into rotating files (see the module docs).
pub struct RotatingWriter {
    cfg: StorageConfig,
    ifname: String,
    queue: u32,
    /// The store's volumes, and the one the current file is on.
    volumes: Arc<Volumes>,
    vol: usize,
    /// Frames a failed volume's file counted as lost (or disk full) that
    /// were written to another volume after all.
    rescued_full: u64,
    rescued_err: u64,
    /// Frames the close of a file on a failing volume left in RAM, by
    /// cause (disk full or not), for a file on another volume.
    rescue: Arc<Mutex<Vec<(bool, Rescued)>>>,
    budget: Arc<AtomicI64>,
    /// Bytes this queue's files (the one being written and those still
    /// closing after a rotation) have waiting for the disk: a run laid out
    /// in place queues behind all of them.
    unwritten: Arc<AtomicI64>,
    retention: Arc<Retention>,
    gauge: Arc<Gauge>,
    /// The file being written (None only while being replaced).
    writer: Option<PcapWriter<AnySink>>,
    /// Stamp of the current file's first frame.
    file_start_ns: u64,
    /// The time in the current file's name (the next name is later still,
    /// even when stamps go backwards, so names always sort by time).
    name_ns: u64,
    /// A rotation failed: the writer is done (no retry per frame).
    rotate_failed: Option<Arc<StorageError>>,
    /// Files already closed.
    done: WriterReport,
    flush_every_ns: u64,
    last_flush_ns: u64,
    last_blocks: u64,
    next_gauge_ns: u64,
    error: Option<Arc<StorageError>>,
    /// Earlier files being finished on helper threads.
    closing: Vec<JoinHandle<WriterReport>>,
    /// The next file's engine, being prepared on a helper thread (for a
    /// volume taking O_DIRECT or not, as the flag says).
    next: Option<(bool, JoinHandle<std::io::Result<PreparedSink>>)>,
    /// The store's rotation requests ([`Store::rotate_all`]) and the last
    /// one this writer took.
    rotate_epoch: Arc<AtomicU64>,
    seen_epoch: u64,
    /// Rotate before the next frame (asked by [`Store::rotate_all`]).
    rotate_requested: bool,
    /// The store's compression threads (with `--compress`).
    pool: Option<Arc<crate::compress::Pool>>,
    /// The store's key index builder.
    keys: Option<Arc<crate::keys::Builder>>,
    /// The store's session thread, and this writer's series of files.
    sessions: Option<(Arc<crate::sessions::SessionRecorder>, u64)>,
}

impl RotatingWriter {
    fn path_for(&self, vol: usize, start_ns: u64) -> PathBuf {
        let mut name = naming::file_name(
            &self.cfg.prefix,
            &self.ifname,
            self.queue,
            start_ns,
            self.cfg.format,
        );
        name.push_str(self.cfg.compress.suffix());
        if self.cfg.encrypted() {
            name.push_str(wiretape_files::crypt::SUFFIX);
        }
        self.volumes.get(vol).dir.join(name)
    }

    /// Opens the next file, named by `name_ns`, on the volume
    /// [`Volumes::pick`] gives; a volume where that fails is taken out and
    /// the next one tried (with several). Sets the current volume.
    /// `after`: the file before it, its volume and the gate it opens once
    /// written: the new file's writes wait for it when both are on the
    /// same volume (one disk: a crash then leaves no gap between them).
    /// On another volume they go at once: a queue's files then write in
    /// parallel, each on its own disk, and one queue gets past one disk's
    /// rate (a crash may then lose the old file's last blocks while the
    /// new file's first ones are kept; readers merge by time either way).
    fn open_on_a_volume(
        &mut self,
        name_ns: u64,
        mut prepared: Option<(bool, PreparedSink)>,
        after: Option<(usize, Arc<Gate>)>,
    ) -> Result<PcapWriter<AnySink>, StorageError> {
        loop {
            let prev = after.as_ref().map(|(v, _)| *v);
            let vol = self.volumes.pick_after(prev).ok_or(StorageError::Internal(
                "every volume of the store has failed",
            ))?;
            let path = self.path_for(vol, name_ns);
            let direct_ok = self.volumes.get(vol).direct_ok;
            // An engine made for the other kind of filesystem is not used.
            let p = prepared.take_if(|(d, _)| *d == direct_ok).map(|(_, p)| p);
            let gate = after
                .as_ref()
                .filter(|(v, _)| *v == vol)
                .map(|(_, g)| g.clone());
            match self.open(vol, &path, p, gate) {
                Ok(w) => {
                    self.vol = vol;
                    return Ok(w);
                }
                Err(e) if self.volumes.len() > 1 && volume_error(&e) => {
                    self.volumes.fail(vol, &e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Opens a file on volume `vol`, on a prepared engine when there is one
    /// (fast: only the file is created).
    fn open(
        &self,
        vol: usize,
        path: &Path,
        prepared: Option<PreparedSink>,
        after: Option<Arc<Gate>>,
    ) -> Result<PcapWriter<AnySink>, StorageError> {
        let c = &self.cfg;
        // Registered before it exists: retention, listing the directory on
        // the control thread meanwhile, must never see it as a closed file.
        self.retention.opened(path);
        let sink = match prepared {
            Some(p) => p.open(path),
            None => AnySink::create(
                path,
                c.io,
                self.volumes.get(vol).direct_ok,
                c.block_size,
                c.buffers,
                Some(self.budget.clone()),
            ),
        };
        let mut sink = sink.inspect_err(|_| self.retention.closed(path))?;
        sink.set_direct_backlog(c.direct_backlog_max, self.unwritten.clone());
        self.gauge.files_opened.fetch_add(1, Ordering::Relaxed);
        if c.on_full_rotate {
            let r = self.retention.clone();
            sink.set_make_room(Some(Arc::new(move |p: &Path| r.make_room(p))));
        }
        let mut sink = sink
            .encrypted(c.encrypt_to.as_ref())
            .and_then(|s| s.compressed(c.compress, self.pool.as_ref()))
            .inspect_err(|_| self.retention.closed(path))?;
        self.volumes.get(vol).file_opened();
        if let Some(g) = after {
            sink.write_after(g);
        }
        let w = PcapWriter::with_link(sink, c.snaplen, c.format, &self.ifname, c.linktype)
            .compressed(c.compress.is_on() && self.pool.is_some())
            .encrypted(c.encrypted());
        let w = match &self.sessions {
            Some((rec, series)) => w.with_sessions(crate::sessions::SessionFeed::new(
                rec.clone(),
                *series,
                path,
                c.sessions_wait,
            )),
            None => w,
        };
        let flows =
            c.flow_index && !c.encrypted() && c.linktype == wiretape_files::pcap::LINKTYPE_ETHERNET;
        Ok(match (c.index, flows) {
            (true, true) if self.keys.is_some() => {
                w.with_index(path)
                    .with_keys(path, self.keys.clone(), c.key_index_wait)
            }
            (true, true) => w.with_index(path),
            (true, false) => w.with_index_no_flows(path),
            (false, _) => w,
        })
    }

    fn current(&self) -> &PcapWriter<AnySink> {
        self.writer.as_ref().expect("a file is open")
    }

    fn current_mut(&mut self) -> &mut PcapWriter<AnySink> {
        self.writer.as_mut().expect("a file is open")
    }

    /// With rotation, the next file's engine is made ahead on a helper
    /// thread: allocating and registering its blocks took 10-60 ms on the
    /// writer thread (measured at 5 Gbit/s with --rotate-size 64M), long
    /// enough for frames to pile up in the UMEM and be dropped.
    fn prepare_next(&mut self) {
        if !self.cfg.rotating() || self.next.is_some() {
            return;
        }
        let c = &self.cfg;
        // For the kind of filesystem the volumes have (mixed: the next
        // file's volume may not take it, then it is made again there).
        let ok = self
            .volumes
            .iter()
            .find(|v| v.ok())
            .is_some_and(|v| v.direct_ok);
        let (io, bs, nb, budget) = (c.io, c.block_size, c.buffers, Some(self.budget.clone()));
        self.next = std::thread::Builder::new()
            .name("wt-prepare".into())
            .spawn(move || AnySink::prepare(io, ok, bs, nb, budget))
            .ok()
            .map(|h| (ok, h));
    }

    fn needs_rotation(&self, ts_ns: u64, len: usize) -> bool {
        // The record as the file's format writes it (pcapng: 32 B + padding).
        let rec = self
            .cfg
            .format
            .record_len(len.min(self.cfg.snaplen as usize)) as u64;
        self.needs_rotation_for(ts_ns, rec)
    }

    /// Whether the file is due before `bytes` more stamped `ts_ns` go in.
    fn needs_rotation_for(&self, ts_ns: u64, bytes: u64) -> bool {
        if self.current().stats().frames == 0 {
            return false; // never an empty file
        }
        if self.rotate_requested {
            return true;
        }
        if !self.cfg.rotating() {
            return false;
        }
        self.cfg
            .rotate_size
            .is_some_and(|m| self.current().file_bytes() + bytes > m)
            || self
                .cfg
                .rotate_time
                .is_some_and(|a| ts_ns >= self.file_start_ns.saturating_add(a.as_nanos() as u64))
    }

    fn rotate(&mut self, ts_ns: u64) -> Result<(), StorageError> {
        self.rotate_on(ts_ns, false)
    }

    /// [`RotatingWriter::rotate`]; `failed_over`: the current file's volume
    /// failed, its error is a note of the run, not its end.
    fn rotate_on(&mut self, ts_ns: u64, failed_over: bool) -> Result<(), StorageError> {
        self.rotate_requested = false;
        // Names sort by time: the new file's first frame, and never a name
        // at or before the current file's.
        let name_ns = ts_ns.max(self.name_ns + 1);
        let prepared = match self.next.take() {
            Some((ok, h)) if h.is_finished() => h.join().ok().and_then(Result::ok).map(|p| (ok, p)),
            other => {
                self.next = other; // not ready yet: keep it for next time
                None
            }
        };
        // On one disk the new file comes after the old one: its writes go
        // out once the old file's last write is done (a crash then never
        // leaves a gap between them); on another volume at once (see
        // `open_on_a_volume`). After a volume failed the old file takes no
        // more writes: no gate.
        let gate = Arc::new(Gate::default());
        let old_vol = self.vol;
        let after = (!failed_over).then(|| (old_vol, gate.clone()));
        let new = self.open_on_a_volume(name_ns, prepared, after)?;
        self.name_ns = name_ns;
        let mut old = self.writer.replace(new).expect("a file is open");
        // Its session table ends here, before the new file's first block.
        old.end_sessions(false);
        old.sink_mut().open_when_done(gate);
        self.prepare_next();
        // The old file is finished (last block, wait, exact length, fsync)
        // on a helper thread: that takes tens of ms, during which frames
        // would otherwise pile up in the UMEM (measured: --rotate-size 64M
        // at 5 Gbit/s lost 37 % of the frames when closing inline, 0 % now).
        self.retention.closing(old.path());
        self.gauge.rotations.fetch_add(1, Ordering::Relaxed);
        self.close_in_background(old, old_vol, failed_over);
        self.last_blocks = 0;
        self.last_flush_ns = monotonic_ns();
        // Retention is applied by the recording's control loop (4 times a
        // second), never here: deleting a large file can take tens of ms,
        // which the writer thread must not spend while frames wait.
        Ok(())
    }

    /// What closing a file on volume `vol` needs (see [`close_file`]).
    fn close_ctx(&self, vol: usize, failed_over: bool) -> CloseCtx {
        CloseCtx {
            retention: self.retention.clone(),
            gauge: self.gauge.clone(),
            volumes: self.volumes.clone(),
            vol,
            failed_over,
            rescue: self.rescue.clone(),
            format: self.cfg.format,
            snaplen: self.cfg.snaplen,
            ifname: self.ifname.clone(),
            linktype: self.cfg.linktype,
        }
    }

    /// Finishes `old` (on volume `vol`) on a helper thread.
    fn close_in_background(&mut self, old: PcapWriter<AnySink>, vol: usize, failed_over: bool) {
        let ctx = self.close_ctx(vol, failed_over);
        let (tx, rx) = std::sync::mpsc::channel::<PcapWriter<AnySink>>();
        let v = self.volumes.get(vol).clone();
        v.closing_started();
        match std::thread::Builder::new()
            .name("wt-close".into())
            .spawn(move || {
                let r = match rx.recv() {
                    Ok(old) => close_file(old, &ctx),
                    Err(_) => WriterReport::default(),
                };
                v.closing_done();
                r
            }) {
            Ok(h) => {
                let _ = tx.send(old);
                self.closing.push(h);
            }
            // No thread to be had: finish it here rather than lose it.
            Err(_) => {
                let ctx = self.close_ctx(vol, failed_over);
                self.done.merge(close_file(old, &ctx));
                self.volumes.get(vol).closing_done();
            }
        }
    }

    /// Frames a file's close could not write (its volume failed then,
    /// [`close_file`]) go into a file of their own on another volume,
    /// named by their first stamp (each file stays in time order).
    fn write_rescues(&mut self) {
        let batches = std::mem::take(&mut *self.rescue.lock().expect("rescue"));
        for (full, recs) in batches {
            let Some((first, _)) = recs.first() else {
                continue;
            };
            let mut name_ns = first.ts_ns;
            let mut w = loop {
                let Some(vol) = self.volumes.pick() else {
                    return; // no volume left: they stay counted as lost
                };
                // A name no volume has (the file it comes from may share
                // its first stamp).
                let taken = |ns: u64| {
                    let name = self.path_for(0, ns);
                    let name = name.file_name().unwrap_or_default();
                    self.volumes.iter().any(|v| v.dir.join(name).exists())
                };
                while taken(name_ns) {
                    name_ns += 1;
                }
                let path = self.path_for(vol, name_ns);
                match self.open(vol, &path, None, None) {
                    Ok(w) => break (vol, w),
                    Err(e) if volume_error(&e) => {
                        self.volumes.fail(vol, &e.to_string());
                    }
                    Err(_) => return,
                }
            };
            let mut n = 0;
            for (m, data) in &recs {
                if w.1.write_wire(m.ts_ns, data, m.orig_len).is_err() {
                    break;
                }
                n += 1;
            }
            if full {
                self.rescued_full += n;
            } else {
                self.rescued_err += n;
            }
            self.retention.closing(w.1.path());
            self.close_in_background(w.1, w.0, false);
        }
    }

    fn keep_error(&mut self, e: StorageError) -> Arc<StorageError> {
        let e = Arc::new(e);
        self.error.get_or_insert_with(|| e.clone());
        e
    }

    /// Appends one frame stamped `ts_ns` (UTC ns), cut to the snap length,
    /// rotating first when the file is due. On error the frame is counted as
    /// lost (or `disk_full`) and the error returned; every later frame fails
    /// the same way.
    #[inline]
    pub fn write(
        &mut self,
        ts_ns: u64,
        frame: &[u8],
        wire_len: u32,
    ) -> Result<(), Arc<StorageError>> {
        if let Some(e) = &self.rotate_failed {
            if matches!(**e, StorageError::DiskFull { .. }) {
                self.done.disk_full += 1;
            } else {
                self.done.lost += 1;
            }
            return Err(e.clone());
        }
        if self.needs_rotation(ts_ns, frame.len()) {
            if let Err(e) = self.rotate(ts_ns) {
                let full = matches!(e, StorageError::DiskFull { .. });
                let e = self.keep_error(e);
                self.rotate_failed = Some(e.clone());
                if full {
                    self.done.disk_full += 1;
                } else {
                    self.done.lost += 1;
                }
                return Err(e);
            }
        }
        let w = self.current_mut();
        let first = w.stats().frames == 0;
        match w.write_wire(ts_ns, frame, wire_len) {
            Ok(()) => {
                if first {
                    self.file_start_ns = ts_ns;
                }
                Ok(())
            }
            Err(e) => {
                // The old file counted this frame as lost: it goes to the
                // new volume's file instead.
                if self.fail_over(&e, ts_ns)
                    && self
                        .current_mut()
                        .write_wire(ts_ns, frame, wire_len)
                        .is_ok()
                {
                    self.rescued(&e, 1);
                    return Ok(());
                }
                Err(self.keep_error(e))
            }
        }
    }

    fn rescued(&mut self, e: &StorageError, frames: u64) {
        if matches!(e, StorageError::DiskFull { .. }) {
            self.rescued_full += frames;
        } else {
            self.rescued_err += frames;
        }
    }

    /// The current file's volume failed with `e` (a write, or the file's
    /// creation): with another volume in use, takes this one out, starts a
    /// new file on another and writes into it the frames of the blocks the
    /// failed write left in RAM. Whether the writer can go on.
    fn fail_over(&mut self, e: &StorageError, ts_ns: u64) -> bool {
        if self.volumes.len() < 2 || !volume_error(e) {
            return false;
        }
        self.volumes.fail(self.vol, &e.to_string());
        if !self.volumes.any_ok() {
            return false;
        }
        let left = self.current_mut().take_unwritten();
        let c = &self.cfg;
        let frames = left
            .map(|u| records_in(c.format, c.snaplen, &self.ifname, c.linktype, &u))
            .unwrap_or_default();
        // Named by the oldest frame it will hold.
        let first = frames.first().map_or(ts_ns, |(m, _)| m.ts_ns.min(ts_ns));
        if let Err(e2) = self.rotate_on(first, true) {
            self.keep_error(e2);
            return false;
        }
        let mut n = 0;
        for (m, data) in &frames {
            if self
                .current_mut()
                .write_wire(m.ts_ns, data, m.orig_len)
                .is_err()
            {
                break;
            }
            n += 1;
        }
        self.rescued(e, n);
        true
    }

    /// Appends `ext`, a run of pcapng blocks laid out in place holding
    /// `frames` frames, the first stamped `first_ns` (see
    /// [`crate::external`]; the files must be pcapng, uncompressed, and no
    /// frame longer than the snap length), rotating first when the file is
    /// due. On error its frames are counted as lost (or `disk_full`), unless
    /// another volume takes them (see [`crate::volume`]).
    pub fn write_external(
        &mut self,
        ext: crate::external::External,
        frames: u64,
        first_ns: u64,
    ) -> Result<(), Arc<StorageError>> {
        let lost = |s: &mut Self, e: &StorageError| {
            if matches!(e, StorageError::DiskFull { .. }) {
                s.done.disk_full += frames;
            } else {
                s.done.lost += frames;
            }
        };
        if let Some(e) = self.rotate_failed.clone() {
            lost(self, &e);
            return Err(e);
        }
        if self.needs_rotation_for(first_ns, ext.len() as u64) {
            if let Err(e) = self.rotate(first_ns) {
                lost(self, &e);
                let e = self.keep_error(e);
                self.rotate_failed = Some(e.clone());
                return Err(e);
            }
        }
        let w = self.current_mut();
        let first = w.stats().frames == 0;
        match w.write_external(ext) {
            Ok(info) => {
                if first && info.frames > 0 {
                    self.file_start_ns = first_ns;
                }
                Ok(())
            }
            // The sink copied the run out (its memory is its owner's
            // again) and gives it back with the blocks the failed write
            // left: another volume takes them all.
            Err(e) if self.fail_over(&e, first_ns) => Ok(()),
            Err(e) => Err(self.keep_error(e)),
        }
    }

    /// Whether runs laid out in place wait in the sink for company, holding
    /// their owner's memory ([`crate::sink::BlockSink::runs_waiting`]).
    pub fn runs_waiting(&self) -> bool {
        self.writer.as_ref().is_some_and(|w| w.runs_waiting())
    }

    /// Sends runs that waited long enough on their way: call it whenever
    /// there is nothing else to do ([`crate::sink::BlockSink::kick`]).
    pub fn kick(&mut self) {
        if let Some(w) = &mut self.writer {
            w.kick();
        }
    }

    /// Housekeeping, about every 100 ms also when no frames come: collects
    /// files finished in the background, refreshes the gauge, and writes a
    /// partly filled block after the flush interval on a quiet link.
    pub fn idle(&mut self) {
        let now = monotonic_ns();
        let epoch = self.rotate_epoch.load(Ordering::Acquire);
        if epoch != self.seen_epoch {
            self.seen_epoch = epoch;
            // A file without frames is already what a new one would be.
            self.rotate_requested = self.current().stats().frames > 0;
        }
        if !self.rescue.lock().expect("rescue").is_empty() {
            self.write_rescues();
        }
        let mut i = 0;
        while i < self.closing.len() {
            if self.closing[i].is_finished() {
                let h = self.closing.swap_remove(i);
                self.done.merge(join_close(h));
            } else {
                i += 1;
            }
        }
        if now >= self.next_gauge_ns {
            self.next_gauge_ns = now + 1_000_000_000;
            let s = self.current().sink().live_stats();
            let g = &self.gauge;
            g.pending.store(s.pending as u64, Ordering::Relaxed);
            g.in_flight.store(s.in_flight as u64, Ordering::Relaxed);
            g.p50_us.store(s.latency_p50_us as u64, Ordering::Relaxed);
            g.p99_us.store(s.latency_p99_us as u64, Ordering::Relaxed);
            g.waits
                .store(self.done.block_waits + s.waits, Ordering::Relaxed);
            let bs = self.cfg.block_size as u64;
            g.buffered_bytes.store(
                (s.pending as u64 + s.in_flight as u64) * bs,
                Ordering::Relaxed,
            );
            g.block_writes
                .store(self.done.block_writes + s.writes, Ordering::Relaxed);
            let w = self.current();
            let (lost, disk_full) =
                if matches!(self.error.as_deref(), Some(StorageError::DiskFull { .. })) {
                    (self.done.lost, self.done.disk_full + w.stats().lost)
                } else {
                    (self.done.lost + w.stats().lost, self.done.disk_full)
                };
            g.lost
                .store(lost.saturating_sub(self.rescued_err), Ordering::Relaxed);
            g.disk_full.store(
                disk_full.saturating_sub(self.rescued_full),
                Ordering::Relaxed,
            );
            let mut lat = self.done.latency_us.clone();
            if let Some(h) = w.sink().latency() {
                match &mut lat {
                    Some(m) => {
                        let _ = m.add(h);
                    }
                    None => lat = Some(h.clone()),
                }
            }
            *g.latency.lock().expect("gauge") = lat;
            if let Some(e) = &self.error {
                let mut ge = g.error.lock().expect("gauge");
                if ge.is_none() {
                    *ge = Some(e.to_string());
                }
            }
        }
        // While full blocks go out, data is never older than a block's fill
        // time: no flush. A flush waits for every queued write (to cut the
        // file to its exact length), so it must only happen on a quiet link.
        let blocks = self.current().blocks_submitted();
        if blocks != self.last_blocks {
            self.last_blocks = blocks;
            self.last_flush_ns = now;
            return;
        }
        if now - self.last_flush_ns >= self.flush_every_ns && self.current().unflushed() {
            self.last_flush_ns = now;
            if let Err(e) = self.current_mut().flush() {
                if !self.fail_over(&e, self.name_ns + 1) {
                    self.keep_error(e);
                }
            }
        }
    }

    /// Flushes and closes every file; the final word on what was written.
    pub fn close(mut self) -> WriterReport {
        if let Some((_, h)) = self.next.take() {
            let _ = h.join(); // an engine made for a file that never came
        }
        if let Some(w) = self.writer.take() {
            let vol = self.vol;
            self.retention.closing(w.path());
            self.close_in_background(w, vol, false);
        }
        // Closes may hand frames back (their volume failed): those go to
        // files of their own, closed in turn.
        let mut r = std::mem::take(&mut self.done);
        while !self.closing.is_empty() {
            for h in std::mem::take(&mut self.closing) {
                r.merge(join_close(h));
            }
            self.write_rescues();
        }
        // Frames a failed volume's file gave up and another volume took.
        r.disk_full = r.disk_full.saturating_sub(self.rescued_full);
        r.lost = r.lost.saturating_sub(self.rescued_err);
        // Background closes finish in any order: list files by name (time).
        r.files.sort();
        if let Some(e) = self.error.take() {
            r.error = Some(e);
        }
        // The last word for live readers too.
        let g = &self.gauge;
        for a in [&g.pending, &g.in_flight, &g.buffered_bytes] {
            a.store(0, Ordering::Relaxed);
        }
        g.lost.store(r.lost, Ordering::Relaxed);
        g.disk_full.store(r.disk_full, Ordering::Relaxed);
        g.block_writes.store(r.block_writes, Ordering::Relaxed);
        *g.latency.lock().expect("gauge") = r.latency_us.clone();
        if let Some(e) = &r.error {
            *g.error.lock().expect("gauge") = Some(e.to_string());
        }
        r
    }
}

/// Closes a file (flush, wait, exact length, fsync, index): its report.
/// A write that fails while closing (the last blocks go out then) takes
/// the volume out, with another left: the frames still in RAM go to the
/// writer ([`RotatingWriter::write_rescues`]) and the error becomes a note.
fn close_file(w: PcapWriter<AnySink>, ctx: &CloseCtx) -> WriterReport {
    let (retention, gauge) = (&ctx.retention, &ctx.gauge);
    let vol = ctx.volumes.get(ctx.vol);
    let mut failed_over = ctx.failed_over;
    let mut r = WriterReport::default();
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
    let (closed, mut sink, left) = w.close_parts();
    if let Err((_, e)) = &closed {
        if ctx.volumes.len() > 1 && volume_error(e) {
            ctx.volumes.fail(ctx.vol, &e.to_string());
            if ctx.volumes.any_ok() {
                failed_over = true;
                if let Some(u) = left.or_else(|| sink.take_unwritten()) {
                    let recs = records_in(ctx.format, ctx.snaplen, &ctx.ifname, ctx.linktype, &u);
                    let full = matches!(e, StorageError::DiskFull { .. });
                    ctx.rescue.lock().expect("rescue").push((full, recs));
                }
            }
        }
    }
    // After the close: the last block's write counts too.
    let ws = sink.stats();
    let latency = sink.latency().cloned();
    drop(sink);
    let (st, err) = match closed {
        Ok(st) => (st, None),
        Err((st, e)) => (st, Some(e)),
    };
    retention.closed(&path);
    vol.file_closed(std::fs::metadata(&path).map_or(0, |m| m.len()));
    gauge.files_closed.fetch_add(1, Ordering::Relaxed);
    r.frames = st.frames;
    r.bytes = st.bytes;
    if matches!(err, Some(StorageError::DiskFull { .. })) {
        r.disk_full = st.lost;
    } else {
        r.lost = st.lost;
    }
    r.error = err.map(Arc::new);
    if failed_over {
        if let Some(e) = r.error.take() {
            r.notes.push(format!(
                "volume {} taken out: {e}; {} frames kept in {}, the recording went on on the \
                 other volumes",
                vol.dir.display(),
                st.frames,
                path.display()
            ));
        }
    }
    r.truncated = st.truncated;
    // A file its failed volume took no frame of (not even its header, at
    // times) is no capture: removed, so that readers never meet it.
    let empty = failed_over && st.frames == 0 && std::fs::remove_file(&path).is_ok();
    if empty {
        wiretape_files::naming::remove_sidecars(&path);
    } else {
        r.files.push(path.clone());
    }
    r.block_writes = ws.writes;
    r.block_waits = ws.waits;
    r.latency_p50_us = ws.latency_p50_us;
    r.latency_p99_us = ws.latency_p99_us;
    r.latency_us = latency;
    r.peak_buffered_bytes = ws.peak_buffered_bytes;
    r.full_retries = ws.full_retries;
    r.runs = st.runs;
    r.runs_direct = ws.runs_direct;
    r.key_segments = st.key_segments;
    r.key_dropped_blocks = st.key_dropped_blocks;
    if st.key_dropped_blocks > 0 {
        r.notes.push(format!(
            "key index of {}: {} blocks left out (its builder fell behind; they are found by \
             their flow sets); `wiretape index --force` rebuilds it",
            path.display(),
            st.key_dropped_blocks
        ));
    }
    r.sessions_skipped = st.sessions_skipped;
    if st.sessions_skipped > 0 {
        r.notes.push(format!(
            "session table of {}: {} frames not read (its thread fell behind): marked incomplete",
            path.display(),
            st.sessions_skipped
        ));
    }
    if st.key_failed {
        r.notes.push(format!(
            "key index of {} not complete (a write failed); `wiretape index --force` rebuilds it",
            path.display()
        ));
    }
    r
}

use crate::writer::Rescued;

/// The records of `u` the failed file does not keep: those in its blocks
/// (a file's bytes from stream offset `u.off` on; at 0 they start with the
/// file header) that end past `u.kept`, chosen by offset.
fn records_in(
    format: wiretape_files::pcap::Format,
    snaplen: u32,
    ifname: &str,
    linktype: u32,
    u: &crate::sink::Unwritten,
) -> Rescued {
    let header = format.file_header(snaplen, ifname, linktype);
    crate::writer::split_unwritten(&header, u).0
}

/// What closing a file needs: where its numbers go, its volume, and where
/// frames its close could not write go.
struct CloseCtx {
    retention: Arc<Retention>,
    gauge: Arc<Gauge>,
    volumes: Arc<Volumes>,
    vol: usize,
    /// The volume failed already and the writer went on on another.
    failed_over: bool,
    rescue: Arc<Mutex<Vec<(bool, Rescued)>>>,
    format: wiretape_files::pcap::Format,
    snaplen: u32,
    ifname: String,
    linktype: u32,
}

/// Whether `e` is the volume's fault (full, I/O error, read-only, gone):
/// then another volume may take the file.
fn volume_error(e: &StorageError) -> bool {
    matches!(
        e,
        StorageError::DiskFull { .. }
            | StorageError::Write { .. }
            | StorageError::Create { .. }
            | StorageError::NotWritable { .. }
            | StorageError::DirectRefused { .. }
    )
}

fn join_close(h: JoinHandle<WriterReport>) -> WriterReport {
    h.join().unwrap_or_else(|_| WriterReport {
        error: Some(Arc::new(StorageError::Internal(
            "the thread closing a file panicked",
        ))),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retention::LimitWords;

    /// The notices at opening name rotation's and retention's settings in
    /// the library's words (no CLI flag), or in the words an embedder gives.
    #[test]
    fn opening_notices_name_settings_in_library_words_or_the_embedder_s() {
        let d = std::env::temp_dir().join(format!("wt-open-words-{}", std::process::id()));
        let flags = LimitWords::naming(&|l| format!("--{}", l.to_string().replace('_', "-")));
        for named in [false, true] {
            let _ = std::fs::remove_dir_all(&d);
            let open = |more_dirs: Vec<PathBuf>| {
                let mut cfg = StorageConfig::new(d.join("a"));
                cfg.more_dirs = more_dirs;
                cfg.sessions = false;
                cfg.on_full_rotate = true;
                cfg.retention.keep_files = Some(1);
                if named {
                    cfg.retention_words = flags.clone();
                }
                let (store, notices) = Store::open(cfg).unwrap();
                drop(store);
                notices
            };
            let one = open(Vec::new());
            let two = open(vec![d.join("b")]);
            let (size, time, full) = if named {
                ("--rotate-size", "--rotate-time", "--on-full-rotate")
            } else {
                ("rotate_size", "rotate_time", "on_full_rotate")
            };
            let without = format!(
                "without {size} or {time} each queue writes one file: retention and {full} can \
                 only delete files of earlier runs"
            );
            assert!(one.contains(&without), "{one:?}");
            let volumes = format!("2 volumes and no {size} or {time}: files rotate at ");
            assert!(two.iter().any(|n| n.starts_with(&volumes)), "{two:?}");
            // Rotating now: the other notice is not given.
            assert!(!two.iter().any(|n| n.starts_with("without ")), "{two:?}");
            // These two name settings (another, such as O_DIRECT refused
            // on tmpfs, names none).
            let ours = one.iter().chain(&two).filter(|n| n.contains(" or "));
            assert_eq!(ours.clone().count(), 2);
            for n in ours {
                assert_eq!(n.contains("--"), named, "{n}");
            }
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
