//! Live consumers of a recording: subscribers, the time-travel ring, dumps,
//! PCAP-over-IP and the control socket.
//!
//! # One copy, many readers
//! When anything live is asked for (a subscriber, `--ring`, `--serve`), each
//! queue's writer thread appends every frame it takes, as a pcap-ns record
//! (16-byte header, captured bytes), to a large aligned chunk of memory,
//! and after each batch publishes the new records. Every consumer reads
//! those same chunks in place: subscribers get [`Batch`]es (ranges of a
//! chunk), the ring is the list of recent chunks, a dump and the
//! PCAP-over-IP server read records straight out of them. Nothing is
//! copied per consumer; a chunk is reused once nobody holds it. (Files, when
//! written, are filled by their own copy into the storage engine's
//! blocks, whose layout the engine owns: O_DIRECT carry-over, pcapng, µs.)
//! With nothing live, the writer does not touch chunks at all.
//!
//! # Policies
//! - [`Policy::Lossless`]: the writer waits for the subscriber when its
//!   buffer ([`SubscribeOptions::buffer_bytes`]) is full. While it waits,
//!   the engine's frames (the UMEM) fill up: what the wait costs appears as
//!   the kernel's counted drops (`fill_ring_empty`), never silently; the
//!   subscriber's `waits`/`wait_ms` say who caused them.
//! - [`Policy::Lossy`]: the writer never waits; a subscriber whose buffer
//!   is full skips the rest of the chunk being filled (whole chunks), and
//!   is told how many frames it missed ([`Batch::missed_before`], `skipped`).
//!   The recorder's files never lose a frame because of it.
//!
//! Per queue, a subscriber gets every frame in order; batches of different
//! queues interleave as the writers publish them. [`Merger`] puts them in
//! timestamp order within a reorder window.
//!
//! # Time travel
//! With [`LiveConfig::ring_bytes`], each queue keeps its most recent chunks
//! (the ring's share of the queue, preallocated at start, huge pages where
//! the kernel gives them) and a dump ([`crate::Recording::dump`], `wiretape
//! ctl dump`, SIGUSR1) writes the frames of a time window, merged across
//! queues in time order, exact at the edges (`from` inclusive, `to`
//! exclusive, ns), into a normal capture file in the output directory named
//! by its first frame's time. The dump is written on a helper thread: it
//! holds the chunks of its window until it has written them, and the
//! writers meanwhile take other chunks (more are made if needed: a dump
//! never stalls capture).

#[allow(unsafe_code)]
mod chunk;
pub mod control;
mod dump;
mod hub;
mod merge;
pub mod serve;

pub use chunk::{Frame, HugePages};
pub use dump::{DumpReport, DumpRequest};
pub use hub::{Batch, Frames, Recv, Subscriber};
pub use merge::Merger;
pub use serve::{ServeConfig, ServeReport};

pub(crate) use dump::DumpTarget;
pub(crate) use hub::{Hub, LiveWriter};

use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The live side for code that runs the stage itself
/// ([`crate::Running::start_with_live`], with its own sinks); a
/// [`crate::Recording`] makes its own. One run per `Live`.
pub struct Live {
    pub(crate) hub: Arc<Hub>,
}

impl Live {
    /// The live side of one run.
    pub fn new(cfg: LiveConfig) -> Live {
        Live { hub: Hub::new(cfg) }
    }

    /// A subscriber (before the run starts: every frame of it).
    pub fn subscribe(&self, opts: impl Into<SubscribeOptions>) -> Subscriber {
        self.hub.subscribe(opts.into())
    }

    /// `n` lossless subscribers (`bench-1`, `bench-2`, ...), each on its
    /// own thread reading every frame's stamp, length and first byte and
    /// dropping the batch: what subscribers cost a recording, for a
    /// benchmark (`record --bench-subscribers N`). Each thread ends with
    /// the run; join them after it.
    pub fn bench_subscribers(&self, n: usize) -> Vec<std::thread::JoinHandle<()>> {
        (0..n)
            .map(|i| {
                let sub =
                    self.subscribe(SubscribeOptions::lossless().name(format!("bench-{}", i + 1)));
                std::thread::spawn(move || {
                    let mut acc = 0u64;
                    for b in sub {
                        for f in b.frames() {
                            acc = acc.wrapping_add(f.ts_ns ^ f.orig_len as u64 ^ f.data[0] as u64);
                        }
                    }
                    std::hint::black_box(acc);
                })
            })
            .collect()
    }

    /// After [`crate::Running::stop`]: subscribers get what is queued, then
    /// the end.
    pub fn finish(&self) {
        self.hub.finish();
    }

    /// Subscribers' counters and the ring.
    pub fn report(&self) -> LiveReport {
        LiveReport {
            subscribers: self.hub.subscriber_reports(),
            ring: self.hub.ring_report(),
            ..Default::default()
        }
    }
}

/// What a subscriber may cost the recorder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// The recorder waits for it (see the module docs).
    Lossless,
    /// It skips whole chunks when it falls behind (see the module docs).
    Lossy,
}

impl Policy {
    /// `lossless` or `lossy`.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Lossless => "lossless",
            Policy::Lossy => "lossy",
        }
    }
}

/// How a subscriber is served.
#[derive(Clone, Debug)]
pub struct SubscribeOptions {
    /// Lossless or lossy.
    pub policy: Policy,
    /// Its name in reports.
    pub name: String,
    /// Bytes of records it may have queued or held at once (default 32 MiB).
    pub buffer_bytes: usize,
    /// Batches it may have queued or held at once (default 256).
    pub max_batches: usize,
    /// Start paused ([`Subscriber::set_paused`]).
    pub paused: bool,
}

impl SubscribeOptions {
    /// Lossless, with the default buffer.
    pub fn lossless() -> Self {
        Policy::Lossless.into()
    }
    /// Lossy, with the default buffer.
    pub fn lossy() -> Self {
        Policy::Lossy.into()
    }
    /// Names it in reports.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Sets its buffer in bytes.
    pub fn buffer_bytes(mut self, bytes: usize) -> Self {
        self.buffer_bytes = bytes;
        self
    }
    /// Sets the most batches it may hold.
    pub fn max_batches(mut self, n: usize) -> Self {
        self.max_batches = n;
        self
    }
}

impl From<Policy> for SubscribeOptions {
    fn from(policy: Policy) -> Self {
        SubscribeOptions {
            policy,
            name: policy.name().into(),
            buffer_bytes: 32 << 20,
            max_batches: 256,
            paused: false,
        }
    }
}

/// A subscriber's counters (also in the summary JSON's `subscribers[]`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SubscriberReport {
    /// Its name.
    pub name: String,
    /// `lossless` or `lossy`.
    pub policy: &'static str,
    /// Frames handed to it (queued for it).
    pub delivered: u64,
    /// Their captured bytes.
    pub delivered_bytes: u64,
    /// Frames it missed: over its buffer (lossy), or after the writer gave
    /// up waiting for it at stop (lossless).
    pub skipped: u64,
    /// Frames it has taken out of its queue so far.
    pub received: u64,
    /// Times a writer waited for it (lossless).
    pub waits: u64,
    /// How long writers waited for it, in total (ms).
    pub wait_ms: f64,
    /// It unsubscribed (was dropped) before the run ended.
    pub closed_early: bool,
    /// Lossless, but it took nothing for 2 s after the run began to stop:
    /// the rest was skipped.
    pub gave_up_waiting: bool,
}

/// The time-travel ring at the end of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RingReport {
    /// Its size, all queues (bytes asked for).
    pub bytes: u64,
    /// Bytes per chunk.
    pub chunk_bytes: usize,
    /// Chunks kept per queue.
    pub chunks_per_queue: usize,
    /// `hugetlb`, `transparent` or `no`.
    pub huge_pages: &'static str,
    /// Frames that went into chunks (all queues).
    pub frames: u64,
    /// Their captured bytes.
    pub frames_bytes: u64,
    /// Frames the ring held at the end.
    pub held_frames: u64,
    /// Stamp of the oldest frame it held (UTC ns; 0: none).
    pub oldest_ns: u64,
    /// Stamp of the newest.
    pub newest_ns: u64,
    /// Frames dropped from the ring to make room for newer ones.
    pub overwritten_frames: u64,
    /// Chunks made beyond the plan (readers held more than their share).
    pub extra_chunks: u64,
    /// Frames not put into chunks: no memory could be had.
    pub no_memory: u64,
}

/// The live side of a run, in [`crate::RecordReport::live`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct LiveReport {
    /// Every subscriber the run had (the PCAP-over-IP server's is `serve`).
    pub subscribers: Vec<SubscriberReport>,
    /// The ring, if there was one.
    pub ring: Option<RingReport>,
    /// PCAP-over-IP, if it served.
    pub serve: Option<ServeReport>,
    /// Dumps written (or failed).
    pub dumps: Vec<DumpReport>,
    /// The control socket, if there was one.
    pub control: Option<PathBuf>,
}

/// The live settings of a recording ([`crate::RecordConfig::live`]).
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// Bytes of the time-travel ring, all queues together (0: no ring).
    pub ring_bytes: u64,
    /// Write capture files (false: only the ring and subscribers get
    /// frames; `--ring-only`).
    pub write_files: bool,
    /// Bytes per chunk (at least a record of the snap length).
    pub chunk_bytes: usize,
    /// What a trigger dumps: the last this long (None: all of the ring).
    pub trigger_window: Option<Duration>,
    /// Set it to dump [`LiveConfig::trigger_window`] (SIGUSR1); the
    /// recording clears it.
    pub trigger: Option<Arc<AtomicBool>>,
    /// A Unix socket for `wiretape ctl` (status, dump), mode 0600.
    pub control: Option<PathBuf>,
    /// PCAP-over-IP.
    pub serve: Option<ServeConfig>,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            ring_bytes: 0,
            write_files: true,
            chunk_bytes: 1 << 20,
            trigger_window: None,
            trigger: None,
            control: None,
            serve: None,
        }
    }
}

impl LiveConfig {
    /// Whether anything live is asked for ([`crate::record()`] then sets up
    /// the hub; a [`crate::Recording`] always does).
    pub fn enabled(&self) -> bool {
        self.ring_bytes > 0
            || !self.write_files
            || self.serve.is_some()
            || self.control.is_some()
            || self.trigger.is_some()
    }
}

/// The rule for every listener of a recording (PCAP-over-IP, the metrics
/// endpoint): a loopback address, or `allow_remote` (the user said so),
/// since anyone who reaches it gets what it serves.
pub fn may_listen(addr: std::net::SocketAddr, allow_remote: bool) -> bool {
    addr.ip().is_loopback() || allow_remote
}

/// Errors of the live side; each names the thing and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// The ring's memory could not be had.
    #[error(
        "cannot allocate {bytes} bytes for the live chunks: {source}; give the ring a smaller size"
    )]
    Memory {
        /// Bytes asked for.
        bytes: u64,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A dump was asked of a run without a ring.
    #[error("this recording keeps no time-travel ring: start `wiretape record` with --ring SIZE")]
    NoRing,
    /// The dump's filter expression.
    #[error(transparent)]
    Filter(#[from] wiretape_filter::FilterError),
    /// A dump's window is empty or reversed.
    #[error("dump window: --to ({to_ns}) is not after --from ({from_ns})")]
    Window {
        /// From, UTC ns.
        from_ns: u64,
        /// To, UTC ns.
        to_ns: u64,
    },
    /// The recording is not running (not started, or ended).
    #[error("the recording is not running")]
    NotRunning,
    /// The PCAP-over-IP address is not loopback (and remote clients were
    /// not allowed).
    #[error("PCAP-over-IP address {0}: not a loopback address, so anyone who can reach it receives every frame recorded; use 127.0.0.1:PORT, or allow remote clients to serve it anyway")]
    NotLoopback(std::net::SocketAddr),
    /// The PCAP-over-IP listener.
    #[error("cannot listen on {addr} for PCAP-over-IP: {source}; choose another address or port")]
    Serve {
        /// The address.
        addr: std::net::SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The control socket.
    #[error("cannot create the control socket {path}: {source}; give it another path")]
    Control {
        /// The socket's path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Another process listens on the control socket.
    #[error("another wiretape is listening on the control socket {0}: give it another path")]
    ControlInUse(PathBuf),
    /// A dump could not be written.
    #[error("dump: {0}")]
    Dump(String),
}

/// The answer to `wiretape ctl status`: the live counters as JSON.
pub(crate) fn status_json(
    hub: &Hub,
    ifname: &str,
    elapsed: Duration,
    s: &crate::Snapshot,
    st: &wiretape_storage::StorageProgress,
    serve: Option<ServeReport>,
) -> Value {
    json!({
        "interface": ifname,
        "elapsed_s": elapsed.as_secs_f64(),
        "write_files": hub.cfg.write_files,
        "packets_seen": s.seen(),
        "packets_written": s.written(),
        "packets_filtered": s.filtered(),
        "packets_cutoff": s.queues.iter().map(|q| q.cutoff).sum::<u64>(),
        "bytes_cutoff": s.queues.iter().map(|q| q.cutoff_bytes).sum::<u64>(),
        "bytes_written": s.bytes(),
        "kernel_drops": s.kernel_drops(),
        "per_queue": s.queues.iter().map(|q| json!({
            "queue": q.queue,
            "packets_seen": q.seen,
            "packets_received": q.received,
            "packets_written": q.written,
            "packets_filtered": q.filtered,
            "packets_cutoff": q.cutoff,
            "bytes_cutoff": q.cutoff_bytes,
            "bytes_written": q.bytes,
            "kernel": {
                "rx_dropped": q.kernel.rx_dropped,
                "rx_ring_full": q.kernel.rx_ring_full,
                "rx_fill_ring_empty_descs": q.kernel.rx_fill_ring_empty_descs,
            },
        })).collect::<Vec<_>>(),
        "storage": {
            "pending_blocks": st.pending_blocks,
            "in_flight": st.in_flight,
            "write_p50_us": st.p50_us,
            "write_p99_us": st.p99_us,
            "deleted_files": st.deleted_files,
        },
        "volume_failed": st.volumes.iter()
            .map(|v| (v.dir.display().to_string(), json!(v.failures)))
            .collect::<serde_json::Map<_, _>>(),
        "volumes": st.volumes.iter().map(|v| {
            let mut j = json!({
                "dir": v.dir.display().to_string(),
                "files": v.files,
                "bytes": v.bytes,
                "files_in_flight": v.files_in_flight,
                "failed": v.failed,
            });
            // Its own limits, when set (as in the summary).
            if let Some(b) = v.keep_bytes {
                j["keep_bytes"] = json!(b);
            }
            if let Some(m) = v.min_free {
                j["min_free"] = json!(crate::summary::MinFreeSummary::from(m));
            }
            j
        }).collect::<Vec<_>>(),
        "compress": crate::report::compress_json(st.compress.as_ref()),
        "sessions_skipped": st.sessions.map_or(0, |x| x.skipped_frames),
        "sessions": crate::report::sessions_json(st.sessions.as_ref()),
        "ring": hub.ring_report(),
        "subscribers": hub.subscriber_reports(),
        "serve": serve,
    })
}
