//! Dumps of the time-travel ring: a window of frames, merged across queues
//! in time order, exact at the edges, written on a helper thread into a
//! capture file named by its first frame's time.

use super::chunk::{record_at, ChunkRef};
use super::hub::{Hub, QueueLive};
use super::LiveError;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape_files::{naming, Format};
use wiretape_storage::{FileSink, PcapWriter, StorageError};
use wiretape_timestamp::{monotonic_ns, realtime_ns};

/// Which frames a dump writes: stamped in `[from_ns, to_ns)` (UTC ns) and
/// accepted by the filter.
#[derive(Clone, Debug, Default)]
pub struct DumpRequest {
    /// From (inclusive); None: the oldest frame in the ring.
    pub from_ns: Option<u64>,
    /// To (exclusive); None: the moment the dump is asked for.
    pub to_ns: Option<u64>,
    /// A tcpdump expression (`man pcap-filter`); None: every frame.
    pub filter: Option<String>,
    /// Who asked (`SIGUSR1`, `ctl`, `api`): in the report.
    pub trigger: String,
}

impl DumpRequest {
    /// The last `d` before now.
    pub fn last(d: Duration) -> Self {
        let now = realtime_ns();
        DumpRequest {
            from_ns: Some(now.saturating_sub(d.as_nanos() as u64)),
            to_ns: Some(now),
            ..Default::default()
        }
    }
}

/// What a dump wrote.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct DumpReport {
    /// The file (None: no frame was in the window, nothing written).
    pub file: Option<PathBuf>,
    /// Frames written.
    pub frames: u64,
    /// Their captured bytes.
    pub bytes: u64,
    /// Stamps of the first and last frame written (UTC ns).
    pub first_ns: Option<u64>,
    /// See `first_ns`.
    pub last_ns: Option<u64>,
    /// The window, UTC ns: from (inclusive).
    pub from_ns: u64,
    /// To (exclusive).
    pub to_ns: u64,
    /// The filter, if any.
    pub filter: Option<String>,
    /// Stamp of the oldest frame the ring still held when the dump was
    /// taken (0: it held none).
    pub ring_oldest_ns: u64,
    /// The ring had already dropped frames of the window (it does not reach
    /// back to `from_ns`): the dump starts later than asked.
    pub window_overwritten: bool,
    /// Who asked.
    pub trigger: String,
    /// Seconds it took (waiting for the writers, then writing).
    pub seconds: f64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

impl DumpReport {
    /// What a line about the dump adds when the ring no longer reached back
    /// to the window's start (`window_overwritten`), with its leading
    /// space; else nothing.
    pub fn window_note(&self) -> &'static str {
        if self.window_overwritten {
            " (the ring no longer held the start of the window)"
        } else {
            ""
        }
    }
}

/// Where dumps go (set when the run starts).
#[derive(Clone, Debug)]
pub(crate) struct DumpTarget {
    /// The store's volumes (`-w`, each once): a dump goes to the one with
    /// the most free space that takes the file.
    pub(crate) dirs: Vec<PathBuf>,
    pub(crate) prefix: String,
    pub(crate) ifname: String,
    pub(crate) format: Format,
    pub(crate) snaplen: u32,
    /// The frames' link type (the input file's for `record -r`).
    pub(crate) linktype: u32,
}

impl Hub {
    /// Starts a dump on a helper thread; its report comes on the receiver
    /// (and goes into the run's report).
    pub(crate) fn dump(
        self: &Arc<Self>,
        req: DumpRequest,
    ) -> Result<mpsc::Receiver<DumpReport>, LiveError> {
        if self.cfg.ring_bytes == 0 {
            return Err(LiveError::NoRing);
        }
        let target = self.target().ok_or(LiveError::NotRunning)?;
        if self.is_finished() {
            return Err(LiveError::NotRunning);
        }
        let asked_mono = monotonic_ns();
        let from_ns = req.from_ns.unwrap_or(0);
        let to_ns = req.to_ns.unwrap_or_else(realtime_ns);
        if to_ns <= from_ns {
            return Err(LiveError::Window { from_ns, to_ns });
        }
        let filter = match &req.filter {
            Some(e) => Some(wiretape_filter::compile(
                e,
                target.linktype,
                target.snaplen,
            )?),
            None => None,
        };
        let (tx, rx) = mpsc::channel();
        let hub = self.clone();
        let h = std::thread::Builder::new()
            .name("wt-dump".into())
            .spawn(move || {
                // Never at the capture threads' expense on a shared CPU.
                let _ = wiretape_capture::sys::lower_thread_priority(10);
                let t0 = Instant::now();
                let mut r = DumpReport {
                    from_ns,
                    to_ns,
                    filter: req.filter.clone(),
                    trigger: req.trigger.clone(),
                    ..Default::default()
                };
                let from_given = req.from_ns.is_some();
                if let Err(e) = run_dump(
                    &hub,
                    &target,
                    asked_mono,
                    from_given,
                    filter.as_ref(),
                    &mut r,
                ) {
                    r.error = Some(e.to_string());
                }
                r.seconds = t0.elapsed().as_secs_f64();
                hub.dump_done(r.clone());
                let _ = tx.send(r);
            })
            .map_err(|e| LiveError::Dump(format!("cannot start a thread: {e}")))?;
        self.dump_started(h);
        Ok(rx)
    }
}

/// Waits until every writer has published what it took before the dump was
/// asked (its next pass began 60 ms later; at most 2 s).
fn wait_for_writers(queues: &[Arc<QueueLive>], asked_mono: u64) {
    let due = asked_mono + 60_000_000;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        let behind = queues.iter().any(|q| {
            !q.ended.load(Ordering::Acquire) && q.heartbeat_ns.load(Ordering::Acquire) < due
        });
        if !behind {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A queue's chunks of the window, read in order.
struct Cursor {
    chunks: std::collections::VecDeque<(ChunkRef, usize)>,
    off: usize,
}

impl Cursor {
    /// The next record's bytes and offset, dropping chunks read to the end.
    fn head(&mut self) -> Option<u64> {
        loop {
            let (c, end) = self.chunks.front()?;
            if self.off < *end {
                return Some(super::chunk::ts_at(c.bytes(0, *end), self.off));
            }
            self.chunks.pop_front();
            self.off = 0;
        }
    }
}

fn run_dump(
    hub: &Hub,
    target: &DumpTarget,
    asked_mono: u64,
    from_given: bool,
    filter: Option<&wiretape_filter::Program>,
    r: &mut DumpReport,
) -> Result<(), StorageError> {
    let queues = hub.queues();
    wait_for_writers(&queues, asked_mono);
    let (from, to) = (r.from_ns, r.to_ns);
    // Take the window's chunks (and how far each was committed) under each
    // ring's lock, briefly; from here the writers go on with other chunks.
    let mut cursors = Vec::new();
    let mut oldest = u64::MAX;
    for q in &queues {
        let ring = q.ring.lock().expect("ring");
        let mut chunks = std::collections::VecDeque::new();
        for c in ring.chunks() {
            let end = c.committed().len();
            if end == 0 {
                continue;
            }
            let (first, last) = c.span();
            oldest = oldest.min(first);
            if last < from || first >= to {
                continue;
            }
            chunks.push_back((c.clone(), end));
        }
        // "Everything in the ring" (no --from) is never short.
        if from_given && ring.evicted_chunks > 0 && ring.evicted_last_ts >= from {
            r.window_overwritten = true;
        }
        drop(ring);
        cursors.push(Cursor { chunks, off: 0 });
    }
    r.ring_oldest_ns = if oldest == u64::MAX { 0 } else { oldest };
    let mut out: Option<PcapWriter<FileSink>> = None;
    loop {
        // The earliest head of all queues (few queues: a linear scan).
        let mut best: Option<(usize, u64)> = None;
        for (i, c) in cursors.iter_mut().enumerate() {
            if let Some(ts) = c.head() {
                if best.is_none_or(|(_, t)| ts < t) {
                    best = Some((i, ts));
                }
            }
        }
        let Some((i, ts)) = best else { break };
        let c = &mut cursors[i];
        let (chunk, end) = c.chunks.front().expect("a head");
        let (f, next) = record_at(chunk.bytes(0, *end), c.off);
        c.off = next;
        if ts < from || ts >= to {
            continue;
        }
        if let Some(p) = filter {
            if !p.matches(f.data, f.orig_len) {
                continue;
            }
        }
        let w = match &mut out {
            Some(w) => w,
            None => out.insert(create(target, ts)?),
        };
        w.write_wire(ts, f.data, f.orig_len)?;
        r.frames += 1;
        r.bytes += f.data.len() as u64;
        r.first_ns.get_or_insert(ts);
        r.last_ns = Some(ts);
    }
    if let Some(w) = out {
        r.file = Some(w.path().to_owned());
        w.close().map_err(|(_, e)| e)?;
    }
    Ok(())
}

/// Creates the dump file named by its first frame (never over another
/// file), on the volume with the most free space now; one that refuses it
/// (failed: read-only, gone) gives way to the next.
fn create(t: &DumpTarget, first_ns: u64) -> Result<PcapWriter<FileSink>, StorageError> {
    let mut dirs: Vec<(u64, &PathBuf)> = t
        .dirs
        .iter()
        .map(|d| (wiretape_storage::fs_space(d).map_or(0, |(free, _)| free), d))
        .collect();
    dirs.sort_by_key(|(free, _)| std::cmp::Reverse(*free));
    let mut last = None;
    for (_, dir) in dirs {
        match create_in(t, dir, first_ns) {
            Ok(w) => return Ok(w),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(StorageError::Internal("a store without a volume")))
}

/// [`create`] in `dir`.
fn create_in(
    t: &DumpTarget,
    dir: &std::path::Path,
    first_ns: u64,
) -> Result<PcapWriter<FileSink>, StorageError> {
    let mut n = 1;
    loop {
        let p = dir.join(naming::dump_name(
            &t.prefix, &t.ifname, first_ns, n, t.format,
        ));
        match FileSink::create(&p) {
            Ok(s) => {
                return Ok(PcapWriter::with_link(
                    s, t.snaplen, t.format, &t.ifname, t.linktype,
                ))
            }
            Err(StorageError::Create { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 =>
            {
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
