//! The hub of a run's live consumers: the subscriber registry, each queue's
//! chunks and time-travel ring, and the writer thread's side
//! ([`LiveWriter`]): append each frame to the open chunk, publish a
//! writer batch to every subscriber (wait for the lossless ones within
//! their buffer, skip whole chunks for the lossy ones), recycle chunks.

use super::chunk::{record_at, ChunkRef, Frame, HugePages, OpenChunk, Pool, RECORD_HEADER};
use super::dump::{DumpReport, DumpTarget};
use super::{LiveConfig, LiveError, Policy, SubscribeOptions, SubscriberReport};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use wiretape_timestamp::monotonic_ns;

/// How long, once the run is stopping, the writer still waits for a
/// lossless subscriber that takes nothing before it gives up on it (the
/// rest is counted as skipped): a consumer that reads only after stop()
/// must not hang the run. One that takes batches is waited for.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The run's live side (one per run, shared by all its threads).
pub(crate) struct Hub {
    pub(crate) cfg: LiveConfig,
    reg: Mutex<Registry>,
    version: AtomicU64,
    queues: Mutex<Vec<Arc<QueueLive>>>,
    /// Frames are cut to this before they go into chunks.
    snaplen: AtomicUsize,
    /// The run is stopping: lossless waits are bounded by STOP_GRACE.
    pub(crate) stopping: AtomicBool,
    /// Every writer is done: no more batches.
    finished: AtomicBool,
    /// Where dumps go (set at start).
    target: Mutex<Option<DumpTarget>>,
    dump_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    dump_reports: Mutex<Vec<DumpReport>>,
    /// Lines for the user (clients, dumps), shown by the recording's loop.
    notices: Mutex<Vec<String>>,
}

#[derive(Default)]
struct Registry {
    active: Vec<Arc<SubShared>>,
    all: Vec<Arc<SubShared>>,
}

/// One queue's live state, shared by its writer, dumps and status.
pub(crate) struct QueueLive {
    pub(crate) queue: u32,
    pub(crate) pool: Arc<Pool>,
    pub(crate) ring: Mutex<Ring>,
    /// Chunks the ring keeps (sealed ones, besides the open one).
    pub(crate) ring_chunks: usize,
    /// Monotonic ns at which the writer last took a batch (or timed out
    /// waiting for one) and has since published everything before it.
    pub(crate) heartbeat_ns: AtomicU64,
    /// Stamp of the last frame the writer published (handed to every
    /// subscriber): its queue's watermark for [`super::Merger::mark`].
    pub(crate) published_ts: AtomicU64,
    /// UTC ns (CLOCK_REALTIME) of the writer's last quiet pass (no frame
    /// for a while, everything taken published): a quiet queue's watermark
    /// is this less the reorder window.
    pub(crate) quiet_ts: AtomicU64,
    /// Frames and bytes appended to chunks.
    pub(crate) frames: AtomicU64,
    pub(crate) bytes: AtomicU64,
    /// Chunks made beyond the plan (readers held more than their share).
    pub(crate) extra_chunks: AtomicU64,
    /// Frames not put into chunks: no memory could be had for one.
    pub(crate) no_memory: AtomicU64,
    pub(crate) ended: AtomicBool,
}

/// What the ring of one queue holds: sealed chunks, oldest first, and
/// the one being filled.
#[derive(Default)]
pub(crate) struct Ring {
    pub(crate) sealed: VecDeque<ChunkRef>,
    pub(crate) open: Option<ChunkRef>,
    /// Chunks dropped from the ring to make room, and their frames.
    pub(crate) evicted_chunks: u64,
    pub(crate) evicted_frames: u64,
    /// Last stamp of the newest chunk dropped (0: none dropped).
    pub(crate) evicted_last_ts: u64,
}

impl Ring {
    /// Chunks in order, oldest first, the open one last.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = &ChunkRef> {
        self.sealed.iter().chain(self.open.iter())
    }
}

impl Hub {
    pub(crate) fn new(cfg: LiveConfig) -> Arc<Hub> {
        Arc::new(Hub {
            cfg,
            reg: Mutex::new(Registry::default()),
            version: AtomicU64::new(0),
            queues: Mutex::new(Vec::new()),
            snaplen: AtomicUsize::new(wiretape_storage::DEFAULT_SNAPLEN as usize),
            stopping: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            target: Mutex::new(None),
            dump_threads: Mutex::new(Vec::new()),
            dump_reports: Mutex::new(Vec::new()),
            notices: Mutex::new(Vec::new()),
        })
    }

    /// A line for the user.
    pub(crate) fn notice(&self, m: String) {
        self.notices.lock().expect("hub").push(m);
    }

    pub(crate) fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *self.notices.lock().expect("hub"))
    }

    /// The ring now (None without one).
    pub(crate) fn ring_report(&self) -> Option<super::RingReport> {
        if self.cfg.ring_bytes == 0 {
            return None;
        }
        let qs = self.queues();
        let mut r = super::RingReport {
            bytes: self.cfg.ring_bytes,
            huge_pages: self.huge_pages().map(|h| h.name()).unwrap_or("no"),
            oldest_ns: u64::MAX,
            ..Default::default()
        };
        for q in &qs {
            r.chunk_bytes = q.pool.chunk_size();
            r.chunks_per_queue = q.ring_chunks;
            r.frames += q.frames.load(Ordering::Relaxed);
            r.frames_bytes += q.bytes.load(Ordering::Relaxed);
            r.extra_chunks += q.extra_chunks.load(Ordering::Relaxed);
            r.no_memory += q.no_memory.load(Ordering::Relaxed);
            let ring = q.ring.lock().expect("ring");
            r.overwritten_frames += ring.evicted_frames;
            for c in ring.chunks() {
                let n = c.frames();
                if n == 0 {
                    continue;
                }
                r.held_frames += n as u64;
                let (a, b) = c.span();
                r.oldest_ns = r.oldest_ns.min(a);
                r.newest_ns = r.newest_ns.max(b);
            }
        }
        if r.oldest_ns == u64::MAX {
            r.oldest_ns = 0;
        }
        Some(r)
    }

    /// Where dumps go.
    pub(crate) fn set_target(&self, t: DumpTarget) {
        *self.target.lock().expect("hub") = Some(t);
    }

    pub(crate) fn target(&self) -> Option<DumpTarget> {
        self.target.lock().expect("hub").clone()
    }

    pub(crate) fn dump_started(&self, h: std::thread::JoinHandle<()>) {
        let mut v = self.dump_threads.lock().expect("hub");
        v.retain(|h| !h.is_finished());
        v.push(h);
    }

    pub(crate) fn dump_done(&self, r: DumpReport) {
        self.notice(match (&r.error, &r.file) {
            (Some(e), _) => format!("dump ({}) failed: {e}", r.trigger),
            (None, Some(f)) => format!(
                "dump ({}): {} frames, {} bytes -> {}{}",
                r.trigger,
                r.frames,
                r.bytes,
                f.display(),
                r.window_note()
            ),
            (None, None) => format!(
                "dump ({}): no frame in the window, nothing written",
                r.trigger
            ),
        });
        self.dump_reports.lock().expect("hub").push(r);
    }

    /// Waits for the dumps being written; their reports.
    pub(crate) fn wait_dumps(&self) -> Vec<DumpReport> {
        let hs: Vec<_> = self.dump_threads.lock().expect("hub").drain(..).collect();
        for h in hs {
            let _ = h.join();
        }
        self.dump_reports.lock().expect("hub").clone()
    }

    /// Makes each queue's pool (the ring preallocated) and returns the
    /// writers' sides, in the order of `queues`.
    pub(crate) fn attach(
        self: &Arc<Self>,
        queues: &[u32],
        snaplen: u32,
    ) -> Result<Vec<LiveWriter>, LiveError> {
        self.snaplen.store(snaplen as usize, Ordering::Relaxed);
        let chunk = self
            .cfg
            .chunk_bytes
            .max(snaplen as usize + RECORD_HEADER)
            .max(64 << 10);
        let per_queue = self.cfg.ring_bytes / queues.len().max(1) as u64;
        let ring_chunks = if self.cfg.ring_bytes > 0 {
            ((per_queue as usize) / chunk).max(2)
        } else {
            0
        };
        let mut out = Vec::new();
        let mut qs = self.queues.lock().expect("hub");
        qs.clear();
        for &q in queues {
            let pool = Pool::new(chunk);
            // The ring, the one being filled and one to switch to: made now,
            // in one region (huge pages where the kernel gives them).
            pool.grow(ring_chunks + 2)
                .map_err(|source| LiveError::Memory {
                    bytes: (ring_chunks as u64 + 2) * chunk as u64,
                    source,
                })?;
            let ql = Arc::new(QueueLive {
                queue: q,
                pool,
                ring: Mutex::new(Ring::default()),
                ring_chunks,
                heartbeat_ns: AtomicU64::new(monotonic_ns()),
                published_ts: AtomicU64::new(0),
                quiet_ts: AtomicU64::new(0),
                frames: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
                extra_chunks: AtomicU64::new(0),
                no_memory: AtomicU64::new(0),
                ended: AtomicBool::new(false),
            });
            qs.push(ql.clone());
            let mut w = LiveWriter {
                hub: self.clone(),
                q: ql,
                open: None,
                start: 0,
                start_frames: 0,
                parts: Vec::with_capacity(4),
                subs: Vec::new(),
                version: u64::MAX,
                active: ring_chunks > 0,
                seq: 0,
                snaplen: snaplen as usize,
                batch_frames: 0,
                batch_bytes: 0,
            };
            // Subscribers that came before the start get the first frame.
            w.refresh();
            out.push(w);
        }
        Ok(out)
    }

    /// The queues (after start).
    pub(crate) fn queues(&self) -> Vec<Arc<QueueLive>> {
        self.queues.lock().expect("hub").clone()
    }

    /// The snap length frames are cut to.
    pub(crate) fn snaplen(&self) -> u32 {
        self.snaplen.load(Ordering::Relaxed) as u32
    }

    /// How the rings' memory is backed (None before start).
    pub(crate) fn huge_pages(&self) -> Option<HugePages> {
        self.queues().first().and_then(|q| q.pool.huge())
    }

    pub(crate) fn subscribe(self: &Arc<Self>, o: SubscribeOptions) -> Subscriber {
        let s = Arc::new(SubShared {
            name: o.name,
            policy: o.policy,
            budget: o.buffer_bytes.max(1),
            max_batches: o.max_batches.max(1),
            mb: Mutex::new(Mailbox {
                items: VecDeque::with_capacity(o.max_batches.max(1)),
                ended: self.finished.load(Ordering::Acquire),
                sleeping: false,
                missed: 0,
                skip_to: Vec::new(),
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            outstanding: AtomicUsize::new(0),
            batches: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            paused: AtomicBool::new(o.paused),
            demoted: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            delivered_bytes: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            received: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
        });
        let mut r = self.reg.lock().expect("hub");
        r.active.push(s.clone());
        r.all.push(s.clone());
        drop(r);
        self.version.fetch_add(1, Ordering::Release);
        Subscriber {
            s,
            hub: self.clone(),
        }
    }

    fn unsubscribe(&self, s: &Arc<SubShared>) {
        let mut r = self.reg.lock().expect("hub");
        r.active.retain(|x| !Arc::ptr_eq(x, s));
        drop(r);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Every writer is done: subscribers get what is queued, then the end.
    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        for q in self.queues() {
            q.ended.store(true, Ordering::Release);
        }
        let subs = self.reg.lock().expect("hub").all.clone();
        for s in subs {
            let mut mb = s.mb.lock().expect("mailbox");
            mb.ended = true;
            drop(mb);
            s.ready.notify_all();
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Counters of every subscriber the run had.
    pub(crate) fn subscriber_reports(&self) -> Vec<SubscriberReport> {
        let all = self.reg.lock().expect("hub").all.clone();
        all.iter().map(|s| s.report()).collect()
    }
}

/// A subscriber's state, shared by the writers (producers) and the consumer.
pub(crate) struct SubShared {
    name: String,
    policy: Policy,
    budget: usize,
    max_batches: usize,
    mb: Mutex<Mailbox>,
    ready: Condvar,
    room: Condvar,
    /// Bytes of batches queued or held by the consumer.
    outstanding: AtomicUsize,
    /// Batches queued or held.
    batches: AtomicUsize,
    /// Writers waiting for room (lossless).
    waiters: AtomicUsize,
    closed: AtomicBool,
    /// Paused: nothing is delivered, nothing counted (the PCAP-over-IP
    /// server while it has no client).
    paused: AtomicBool,
    /// A lossless subscriber the writer gave up waiting for at stop.
    demoted: AtomicBool,
    delivered: AtomicU64,
    delivered_bytes: AtomicU64,
    skipped: AtomicU64,
    received: AtomicU64,
    waits: AtomicU64,
    wait_ns: AtomicU64,
}

struct Mailbox {
    items: VecDeque<Delivery>,
    ended: bool,
    /// The consumer waits on `ready`.
    sleeping: bool,
    /// Frames skipped since the last delivery (told with the next one).
    missed: u64,
    /// Per queue: skip the rest of this chunk (lossy: whole chunks).
    skip_to: Vec<(u32, u64)>,
}

impl SubShared {
    fn report(&self) -> SubscriberReport {
        SubscriberReport {
            name: self.name.clone(),
            policy: self.policy.name(),
            delivered: self.delivered.load(Ordering::Relaxed),
            delivered_bytes: self.delivered_bytes.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            wait_ms: self.wait_ns.load(Ordering::Relaxed) as f64 / 1e6,
            closed_early: self.closed.load(Ordering::Relaxed),
            gave_up_waiting: self.demoted.load(Ordering::Relaxed),
        }
    }

    fn over(&self, bytes: usize) -> bool {
        let o = self.outstanding.load(Ordering::SeqCst);
        (o > 0 && o + bytes > self.budget)
            || self.batches.load(Ordering::SeqCst) >= self.max_batches
    }

    /// Hands one part of a queue's chunk to the subscriber: waits for room
    /// if lossless, skips (whole chunks) if lossy and full.
    fn deliver(&self, p: &Part, queue: u32, stopping: &AtomicBool) {
        if self.closed.load(Ordering::Relaxed) || self.paused.load(Ordering::Relaxed) {
            return;
        }
        let bytes = p.end - p.start;
        let mut mb = self.mb.lock().expect("mailbox");
        let lossy = self.policy == Policy::Lossy || self.demoted.load(Ordering::Relaxed);
        if lossy {
            let seq = p.chunk.seq();
            let skipping = mb.skip_to.iter().any(|&(q, s)| q == queue && s == seq);
            if skipping || self.over(bytes) {
                if !skipping {
                    // From here the rest of this chunk is skipped: a lossy
                    // subscriber resumes at a chunk boundary.
                    match mb.skip_to.iter_mut().find(|(q, _)| *q == queue) {
                        Some(e) => e.1 = seq,
                        None => mb.skip_to.push((queue, seq)),
                    }
                }
                mb.missed += p.frames as u64;
                self.skipped.fetch_add(p.frames as u64, Ordering::Relaxed);
                return;
            }
        } else if self.over(bytes) {
            let t0 = Instant::now();
            self.waits.fetch_add(1, Ordering::Relaxed);
            self.waiters.fetch_add(1, Ordering::SeqCst);
            // Once stopping: since when it took nothing (a slow consumer
            // that makes progress is waited for; a stuck one is not).
            let mut idle_since: Option<(Instant, u64)> = None;
            while self.over(bytes) && !self.closed.load(Ordering::Relaxed) {
                if stopping.load(Ordering::Relaxed) {
                    let took = self.received.load(Ordering::Relaxed);
                    match idle_since {
                        Some((_, t)) if t != took => idle_since = Some((Instant::now(), took)),
                        Some((s, _)) if s.elapsed() >= STOP_GRACE => {
                            self.demoted.store(true, Ordering::Relaxed);
                            break;
                        }
                        Some(_) => {}
                        None => idle_since = Some((Instant::now(), took)),
                    }
                }
                mb = self
                    .room
                    .wait_timeout(mb, Duration::from_millis(5))
                    .expect("mailbox")
                    .0;
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            self.wait_ns
                .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            if self.closed.load(Ordering::Relaxed) {
                return;
            }
            if self.demoted.load(Ordering::Relaxed) {
                mb.missed += p.frames as u64;
                self.skipped.fetch_add(p.frames as u64, Ordering::Relaxed);
                return;
            }
        }
        self.outstanding.fetch_add(bytes, Ordering::SeqCst);
        self.batches.fetch_add(1, Ordering::SeqCst);
        let missed = std::mem::take(&mut mb.missed);
        mb.items.push_back(Delivery {
            chunk: p.chunk.clone(),
            start: p.start,
            end: p.end,
            frames: p.frames,
            queue,
            missed,
            last_ts: p.last_ts,
        });
        self.delivered.fetch_add(p.frames as u64, Ordering::Relaxed);
        self.delivered_bytes.fetch_add(
            (bytes - p.frames as usize * RECORD_HEADER) as u64,
            Ordering::Relaxed,
        );
        let wake = mb.sleeping;
        drop(mb);
        if wake {
            self.ready.notify_one();
        }
    }

    /// A batch was dropped by the consumer: room for the writers.
    fn release(&self, bytes: usize) {
        self.outstanding.fetch_sub(bytes, Ordering::SeqCst);
        self.batches.fetch_sub(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.mb.lock().expect("mailbox");
            self.room.notify_all();
        }
    }
}

/// A range of records of one chunk, as delivered.
struct Delivery {
    chunk: ChunkRef,
    start: usize,
    end: usize,
    frames: u32,
    queue: u32,
    missed: u64,
    last_ts: u64,
}

/// Records of a chunk published by one writer batch.
struct Part {
    chunk: ChunkRef,
    start: usize,
    end: usize,
    frames: u32,
    last_ts: u64,
}

/// The writer thread's side of the live path, for one queue.
pub(crate) struct LiveWriter {
    hub: Arc<Hub>,
    q: Arc<QueueLive>,
    open: Option<OpenChunk>,
    /// First byte (and frame) of the open chunk not yet delivered.
    start: usize,
    start_frames: u32,
    /// Chunks sealed during this batch: delivered with it.
    parts: Vec<Part>,
    subs: Vec<Arc<SubShared>>,
    version: u64,
    /// Frames go into chunks (a ring, or someone subscribed).
    active: bool,
    seq: u64,
    snaplen: usize,
    batch_frames: u64,
    batch_bytes: u64,
}

impl LiveWriter {
    /// Whether frames are kept at all (a ring, or a subscriber): changes
    /// only when a batch is published, so a writer asks once per batch.
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    /// Appends one frame (cut to the snap length) to the open chunk.
    #[inline]
    pub(crate) fn push(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) {
        if !self.active {
            return;
        }
        let data = &frame[..frame.len().min(self.snaplen)];
        if let Some(o) = &mut self.open {
            if o.push(ts_ns, data, wire_len) {
                self.batch_frames += 1;
                self.batch_bytes += data.len() as u64;
                return;
            }
            self.seal();
        }
        if self.open_next() {
            let o = self.open.as_mut().expect("just opened");
            let ok = o.push(ts_ns, data, wire_len);
            debug_assert!(ok, "a chunk holds at least one record of the snap length");
            self.batch_frames += 1;
            self.batch_bytes += data.len() as u64;
        } else {
            self.q.no_memory.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Commits the open chunk and keeps it in the ring as sealed.
    fn seal(&mut self) {
        let Some(mut o) = self.open.take() else {
            return;
        };
        o.commit();
        if o.len() > self.start {
            self.parts.push(Part {
                chunk: o.share(),
                start: self.start,
                end: o.len(),
                frames: o.frames() - self.start_frames,
                last_ts: o.last_ts(),
            });
        }
        let mut ring = self.q.ring.lock().expect("ring");
        ring.open = None;
        if self.q.ring_chunks > 0 {
            ring.sealed.push_back(o.share());
        }
        drop(ring);
        self.start = 0;
        self.start_frames = 0;
    }

    /// Opens the next chunk: a free one, else the ring's oldest once the
    /// ring is full, else a new one (a reader holds more than planned).
    fn open_next(&mut self) -> bool {
        let c = loop {
            if let Some(c) = self.q.pool.take() {
                break Some(c);
            }
            let mut ring = self.q.ring.lock().expect("ring");
            if !ring.sealed.is_empty() && ring.sealed.len() >= self.q.ring_chunks {
                if let Some(old) = ring.sealed.pop_front() {
                    ring.evicted_chunks += 1;
                    ring.evicted_frames += old.frames() as u64;
                    ring.evicted_last_ts = old.span().1;
                    drop(old); // back to the pool unless a reader holds it
                }
                continue;
            }
            drop(ring);
            match self.q.pool.grow(1) {
                Ok(()) => {
                    self.q.extra_chunks.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    let mut ring = self.q.ring.lock().expect("ring");
                    match ring.sealed.pop_front() {
                        Some(old) => {
                            ring.evicted_chunks += 1;
                            ring.evicted_frames += old.frames() as u64;
                            ring.evicted_last_ts = old.span().1;
                        }
                        None => break None,
                    }
                }
            }
        };
        let Some(c) = c else {
            return false;
        };
        let o = OpenChunk::new(c, self.seq);
        self.seq += 1;
        self.q.ring.lock().expect("ring").open = Some(o.share());
        self.open = Some(o);
        true
    }

    /// After a writer batch: publishes what it appended and hands it to
    /// every subscriber. `took_ns`: when the writer took the batch.
    pub(crate) fn publish(&mut self, took_ns: u64) {
        if self.hub.version.load(Ordering::Acquire) != self.version {
            self.refresh();
        }
        if let Some(o) = &mut self.open {
            o.commit();
            if o.len() > self.start {
                self.parts.push(Part {
                    chunk: o.share(),
                    start: self.start,
                    end: o.len(),
                    frames: o.frames() - self.start_frames,
                    last_ts: o.last_ts(),
                });
                self.start = o.len();
                self.start_frames = o.frames();
            }
        }
        if !self.parts.is_empty() {
            for s in &self.subs {
                for p in &self.parts {
                    s.deliver(p, self.q.queue, &self.hub.stopping);
                }
            }
            // Every subscriber has had (or skipped) the frames: the queue
            // is past their stamps (a queue's frames are in order).
            let last = self.parts.iter().map(|p| p.last_ts).max().unwrap_or(0);
            self.q.published_ts.fetch_max(last, Ordering::Release);
            self.parts.clear();
        }
        if self.batch_frames > 0 {
            self.q
                .frames
                .fetch_add(self.batch_frames, Ordering::Relaxed);
            self.q.bytes.fetch_add(self.batch_bytes, Ordering::Relaxed);
            self.batch_frames = 0;
            self.batch_bytes = 0;
        }
        self.q.heartbeat_ns.store(took_ns, Ordering::Release);
    }

    /// No batch came for a while: everything taken is published, and the
    /// queue's watermark moves on with the clock (see [`QueueLive::quiet_ts`]).
    pub(crate) fn idle(&mut self, now_ns: u64) {
        self.publish(now_ns);
        self.q
            .quiet_ts
            .fetch_max(wiretape_timestamp::realtime_ns(), Ordering::Release);
    }

    fn refresh(&mut self) {
        let r = self.hub.reg.lock().expect("hub");
        self.version = self.hub.version.load(Ordering::Acquire);
        self.subs.clear();
        self.subs.extend(r.active.iter().cloned());
        drop(r);
        self.active = self.q.ring_chunks > 0 || !self.subs.is_empty();
    }
}

impl Drop for LiveWriter {
    fn drop(&mut self) {
        // Everything appended is published (a writer that ended mid-batch).
        self.publish(monotonic_ns());
        self.q.ended.store(true, Ordering::Release);
    }
}

/// A live consumer of the run's frames (see [`crate::live`]): batches of
/// frames, per queue in order, borrowed from the chunks the writers fill.
/// Dropping it unsubscribes.
pub struct Subscriber {
    s: Arc<SubShared>,
    hub: Arc<Hub>,
}

/// What [`Subscriber::recv_timeout`] got.
pub enum Recv {
    /// A batch.
    Batch(Batch),
    /// Nothing within the time.
    Timeout,
    /// The run ended and everything was received.
    Ended,
}

impl Subscriber {
    /// The next batch; blocks until one comes. None once the run has ended
    /// and every batch was received.
    pub fn next_batch(&mut self) -> Option<Batch> {
        loop {
            match self.recv_timeout(Duration::from_secs(3600)) {
                Recv::Batch(b) => return Some(b),
                Recv::Ended => return None,
                Recv::Timeout => {}
            }
        }
    }

    /// The next batch, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Recv {
        let deadline = Instant::now() + timeout;
        let mut mb = self.s.mb.lock().expect("mailbox");
        loop {
            if let Some(d) = mb.items.pop_front() {
                drop(mb);
                self.s
                    .received
                    .fetch_add(d.frames as u64, Ordering::Relaxed);
                return Recv::Batch(Batch {
                    d,
                    s: self.s.clone(),
                });
            }
            if mb.ended {
                return Recv::Ended;
            }
            let now = Instant::now();
            if now >= deadline {
                return Recv::Timeout;
            }
            mb.sleeping = true;
            mb = self
                .s
                .ready
                .wait_timeout(mb, deadline - now)
                .expect("mailbox")
                .0;
            mb.sleeping = false;
        }
    }

    /// A batch if one is queued, without waiting.
    pub fn try_next(&mut self) -> Recv {
        self.recv_timeout(Duration::ZERO)
    }

    /// Its counters so far.
    pub fn report(&self) -> SubscriberReport {
        self.s.report()
    }

    /// The run's queues (empty before it started).
    pub fn queues(&self) -> Vec<u32> {
        self.hub.queues().iter().map(|q| q.queue).collect()
    }

    /// The stamp every queue of the run has published up to: the least of
    /// the queues' watermarks (a queue's last stamp published, or, while
    /// its link is quiet, the clock of its last quiet pass less
    /// `quiet_slack_ns`; an ended queue none). Every frame stamped at or
    /// before it was queued for this subscriber (or skipped) before this
    /// call returned. None before the run started.
    pub(crate) fn published_floor(&self, quiet_slack_ns: u64) -> Option<u64> {
        let qs = self.hub.queues();
        if qs.is_empty() {
            return None;
        }
        let mut floor = u64::MAX;
        for q in &qs {
            if q.ended.load(Ordering::Acquire) {
                continue;
            }
            let published = q.published_ts.load(Ordering::Acquire);
            let quiet = q
                .quiet_ts
                .load(Ordering::Acquire)
                .saturating_sub(quiet_slack_ns);
            floor = floor.min(published.max(quiet));
        }
        Some(floor)
    }

    /// Stops or resumes deliveries (nothing is delivered nor counted while
    /// paused): a consumer that has nothing to do for a while.
    pub fn set_paused(&self, paused: bool) {
        self.s.paused.store(paused, Ordering::Relaxed);
    }

    /// The run has ended (all batches are queued; some may still be unread).
    pub fn run_ended(&self) -> bool {
        self.hub.is_finished()
    }
}

impl Iterator for Subscriber {
    type Item = Batch;
    fn next(&mut self) -> Option<Batch> {
        self.next_batch()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.s.closed.store(true, Ordering::Relaxed);
        self.hub.unsubscribe(&self.s);
        let mut mb = self.s.mb.lock().expect("mailbox");
        let left: Vec<Delivery> = mb.items.drain(..).collect();
        drop(mb);
        for d in left {
            self.s.release(d.end - d.start);
        }
        let _g = self.s.mb.lock().expect("mailbox");
        self.s.room.notify_all();
    }
}

/// Frames of one queue, in order, as a writer batch published them: a
/// range of records in a chunk the writer filled (nothing copied). Holding
/// it keeps its chunk from being reused, and counts against the
/// subscriber's buffer: drop it when done.
pub struct Batch {
    d: Delivery,
    s: Arc<SubShared>,
}

impl Batch {
    /// The queue the frames came from.
    pub fn queue(&self) -> u32 {
        self.d.queue
    }

    /// Frames in the batch.
    pub fn len(&self) -> usize {
        self.d.frames as usize
    }

    /// Whether it holds no frame (never, as delivered).
    pub fn is_empty(&self) -> bool {
        self.d.frames == 0
    }

    /// Frames this subscriber missed (lossy, over its buffer) just before
    /// this batch. Frames missed after its last batch are in
    /// [`Subscriber::report`]'s `skipped` (the total).
    pub fn missed_before(&self) -> u64 {
        self.d.missed
    }

    /// Stamp of its first frame.
    pub fn first_ts(&self) -> u64 {
        super::chunk::ts_at(self.as_pcap_records(), 0)
    }

    /// Stamp of its last frame.
    pub fn last_ts(&self) -> u64 {
        self.d.last_ts
    }

    /// The records as pcap-ns record bytes (16-byte little-endian header,
    /// then the captured bytes): after a pcap-ns file header this is a
    /// valid capture as is.
    pub fn as_pcap_records(&self) -> &[u8] {
        self.d.chunk.bytes(self.d.start, self.d.end)
    }

    /// The frames in order.
    pub fn frames(&self) -> Frames<'_> {
        Frames {
            b: self.as_pcap_records(),
            off: 0,
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.s.release(self.d.end - self.d.start);
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("queue", &self.d.queue)
            .field("frames", &self.d.frames)
            .field("bytes", &(self.d.end - self.d.start))
            .field("missed_before", &self.d.missed)
            .finish()
    }
}

/// The frames of a [`Batch`], in order.
pub struct Frames<'a> {
    b: &'a [u8],
    off: usize,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Frame<'a>;
    #[inline]
    fn next(&mut self) -> Option<Frame<'a>> {
        if self.off >= self.b.len() {
            return None;
        }
        let (f, next) = record_at(self.b, self.off);
        self.off = next;
        Some(f)
    }
}
