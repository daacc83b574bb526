//! The per-queue stage: take batches from the engine's receive half, stamp
//! them, copy each frame once into the queue's sink (blocks of a file), give
//! the frames back to the engine and count. [`Running::stop`] ends the
//! input, drains every queue and accounts for every frame the engine saw.
//!
//! By default one thread per queue does all of it (take -> stamp -> copy ->
//! give back): no hand-off of descriptors, no wake-up per batch, each frame
//! touched on one core; only the disk I/O runs elsewhere (io_uring). With a
//! writer CPU of its own (`--writer-cpus`, a different CPU than the poll
//! thread's), a queue runs as two threads instead: a poll thread that takes
//! and stamps, and a writer thread that copies, joined by a channel.

use crate::live::{Hub, LiveWriter};
use crate::report::{Drops, QueueReport, QueueSnapshot, Snapshot};
use crate::PipelineError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wiretape_capture::{sys, Desc, Engine, FrameStore, RxQueue, StartInfo};
use wiretape_storage::{StorageError, WriterReport};
use wiretape_timestamp::{monotonic_ns, AutoClock, StampStats, Stamper};

/// Where the writer thread puts frames: copies each one (into a block)
/// before the frame goes back to the engine.
pub trait FrameSink: Send + 'static {
    /// Records one frame stamped `ts_ns` (UTC ns) whose length on the wire
    /// is `wire_len`. On error the sink has counted the frame as lost.
    fn write(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) -> Result<(), Arc<StorageError>>;
    /// Records a run of pcapng blocks an engine laid out in place
    /// (`frames` frames, the first stamped `first_ns`), written as it lies.
    /// On error the sink has counted its frames as lost. This default
    /// records each of its frames with [`FrameSink::write`].
    fn write_external(
        &mut self,
        ext: wiretape_storage::external::External,
        _frames: u64,
        _first_ns: u64,
    ) -> Result<(), Arc<StorageError>> {
        write_each(self, &ext)
    }
    /// Called about every 100 ms (also when no frames come).
    fn idle(&mut self);
    /// Whether runs written with [`FrameSink::write_external`] wait in the
    /// sink (for company, to go out merged) and hold the engine's memory:
    /// then [`FrameSink::kick`] is due within milliseconds.
    fn runs_waiting(&self) -> bool {
        false
    }
    /// Called whenever the writer has nothing else to do (a dry ring, a
    /// quiet channel): runs that waited long enough go to the disk now. A
    /// ring the kernel cannot fill because its next block waits in the sink
    /// hands over nothing more, so nothing else would send them.
    fn kick(&mut self) {}
    /// Flushes and closes; the final word on what was written.
    fn close(self) -> WriterReport;
}

impl FrameSink for wiretape_storage::RotatingWriter {
    #[inline]
    fn write(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) -> Result<(), Arc<StorageError>> {
        wiretape_storage::RotatingWriter::write(self, ts_ns, frame, wire_len)
    }
    #[inline]
    fn write_external(
        &mut self,
        ext: wiretape_storage::external::External,
        frames: u64,
        first_ns: u64,
    ) -> Result<(), Arc<StorageError>> {
        wiretape_storage::RotatingWriter::write_external(self, ext, frames, first_ns)
    }
    fn idle(&mut self) {
        wiretape_storage::RotatingWriter::idle(self)
    }
    fn runs_waiting(&self) -> bool {
        wiretape_storage::RotatingWriter::runs_waiting(self)
    }
    fn kick(&mut self) {
        wiretape_storage::RotatingWriter::kick(self)
    }
    fn close(self) -> WriterReport {
        wiretape_storage::RotatingWriter::close(self)
    }
}

/// How the stage runs.
#[derive(Clone, Debug)]
pub struct StageConfig {
    /// Most frames a poll thread takes at once.
    pub batch: usize,
    /// When the receive half runs dry, the poll thread sleeps this long
    /// before it looks again, so frames arrive in batches and the writer is
    /// woken once per batch, not per frame (interrupt moderation). After
    /// about 10 ms without frames it blocks instead, costing nothing.
    /// Measured on the veth rig (64 B frames, one CPU for wiretape): 200 µs
    /// with batches of 256 cost 0.45-0.55 CPU s per million frames, 1 ms with
    /// batches of 1024 0.26-0.31. The ring is only empty when it sleeps, so
    /// 1 ms fills at most ~15k of the 32k UMEM frames even at 10 GbE/64 B.
    pub idle_sleep: Duration,
    /// Stop after this many frames in total.
    pub count: Option<u64>,
}

impl Default for StageConfig {
    fn default() -> Self {
        StageConfig {
            batch: 1024,
            idle_sleep: Duration::from_micros(1000),
            count: None,
        }
    }
}

/// Why a run wants to stop on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `-c COUNT` frames were taken.
    CountReached,
    /// A sink failed (its error is in the report).
    SinkFailed,
    /// Every queue's input ended (a file was read to its end).
    InputEnded,
    /// A poll or writer thread ended unexpectedly (a bug: its panic message
    /// is on stderr); the run stops at once rather than drop silently.
    ThreadDied,
}

/// Flags shared by all threads of a run.
struct Control {
    /// A `-c COUNT` budget applies (else nothing is reserved per batch).
    limited: bool,
    /// Frames still allowed by -c (u64::MAX without a limit).
    remaining: AtomicU64,
    count_reached: AtomicBool,
    sink_failed: AtomicBool,
}

impl Control {
    /// Reserves up to `n` frames of the count budget; returns how many.
    fn reserve(&self, n: u64) -> u64 {
        let mut taken = 0;
        let _ = self
            .remaining
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                taken = r.min(n);
                Some(r - taken)
            });
        if taken < n || self.remaining.load(Ordering::Relaxed) == 0 {
            self.count_reached.store(true, Ordering::Release);
        }
        taken
    }
}

/// Live counters of one queue, written by its threads.
#[derive(Default)]
struct QueueShared {
    received: AtomicU64,
    written: AtomicU64,
    bytes: AtomicU64,
    /// Frames past the -c budget so far (live; the writer's own count is
    /// the final one).
    after_count: AtomicU64,
    ended: AtomicBool,
}

struct QueueRun {
    queue: u32,
    shared: Arc<QueueShared>,
    poll: Option<JoinHandle<StampStats>>,
    stamps: StampStats,
    /// The poll thread ended in a panic (its message is on stderr).
    poll_panicked: bool,
    /// The writer thread, or the queue's one thread (which also returns its
    /// stamp counts).
    writer: Option<JoinHandle<(WriterReport, u64, Option<StampStats>)>>,
}

/// A running pipeline over an engine.
pub struct Running<E: Engine> {
    // Field order matters on drop: the engine ends its input before the
    // queues' threads are joined.
    engine: E,
    queues: Vec<QueueRun>,
    ctl: Arc<Control>,
    started: Instant,
}

impl<E: Engine> Running<E> {
    /// Starts a poll and a writer thread per queue of `engine`;
    /// `make_sink(queue)` gives each queue its sink.
    pub fn start<S, F>(engine: E, cfg: &StageConfig, make_sink: F) -> Result<Self, PipelineError>
    where
        S: FrameSink,
        F: FnMut(u32) -> Result<S, StorageError>,
    {
        Self::start_live(engine, cfg, make_sink, None)
    }

    /// As [`Running::start`], each writer also feeding `live`'s consumers
    /// (frames cut to `snaplen`); call [`crate::live::Live::finish`] after
    /// [`Running::stop`].
    pub fn start_with_live<S, F>(
        engine: E,
        cfg: &StageConfig,
        make_sink: F,
        live: &crate::live::Live,
        snaplen: u32,
    ) -> Result<Self, PipelineError>
    where
        S: FrameSink,
        F: FnMut(u32) -> Result<S, StorageError>,
    {
        Self::start_live(engine, cfg, make_sink, Some((&live.hub, snaplen)))
    }

    /// As [`Running::start`]; with `live` (the hub and the snap length),
    /// each writer also feeds the live consumers (see [`crate::live`]).
    pub(crate) fn start_live<S, F>(
        mut engine: E,
        cfg: &StageConfig,
        mut make_sink: F,
        live: Option<(&Arc<Hub>, u32)>,
    ) -> Result<Self, PipelineError>
    where
        S: FrameSink,
        F: FnMut(u32) -> Result<S, StorageError>,
    {
        let ctl = Arc::new(Control {
            limited: cfg.count.is_some(),
            remaining: AtomicU64::new(cfg.count.unwrap_or(u64::MAX)),
            count_reached: AtomicBool::new(false),
            sink_failed: AtomicBool::new(false),
        });
        let parts = engine.take_queues();
        let ids: Vec<u32> = parts.iter().map(|p| p.queue).collect();
        let mut lives: Vec<Option<LiveWriter>> = match live {
            Some((hub, snaplen)) => hub.attach(&ids, snaplen)?.into_iter().map(Some).collect(),
            None => ids.iter().map(|_| None).collect(),
        };
        let mut sinks = Vec::with_capacity(parts.len());
        for p in &parts {
            match make_sink(p.queue) {
                Ok(s) => sinks.push(s),
                Err(e) => {
                    // The files already opened are finished, not left torn.
                    for s in sinks {
                        s.close();
                    }
                    return Err(e.into());
                }
            }
        }
        // From here the run owns the engine: on an error below, dropping it
        // ends the engine's input first, then joins the threads started.
        let mut run = Running {
            engine,
            queues: Vec::new(),
            ctl: ctl.clone(),
            started: Instant::now(),
        };
        for ((p, sink), live) in parts.into_iter().zip(sinks).zip(lives.drain(..)) {
            let q = p.queue;
            let shared = Arc::new(QueueShared::default());
            if p.writer_cpu.is_none() || p.writer_cpu == p.cpu {
                // One thread for the queue.
                let (sh, ctl, cpu) = (shared.clone(), ctl.clone(), p.cpu);
                let t = Taker::new(p.rx, p.stamper, cfg.batch, cfg.idle_sleep);
                let frames = p.frames;
                let one = std::thread::Builder::new()
                    .name(format!("wt-queue-q{q}"))
                    .spawn(move || {
                        pin("queue", cpu);
                        queue_loop(t, Writer::new(sink, frames, live), &sh, &ctl)
                    })
                    .map_err(|e| {
                        PipelineError::Capture(wiretape_capture::CaptureError::Thread(e))
                    })?;
                run.queues.push(QueueRun {
                    queue: q,
                    shared,
                    poll: None,
                    stamps: StampStats::default(),
                    poll_panicked: false,
                    writer: Some(one),
                });
                continue;
            }
            // Unbounded, allocated as used: what is in flight is bounded by
            // the engine's frames (each batch holds at least one), so a
            // send never blocks.
            let (tx, rx) = mpsc::channel::<Vec<Desc>>();
            let (free_tx, free_rx) = mpsc::channel::<Vec<Desc>>();
            let poll = {
                let (shared, cpu) = (shared.clone(), p.cpu);
                let t = Taker::new(p.rx, p.stamper, cfg.batch, cfg.idle_sleep);
                std::thread::Builder::new()
                    .name(format!("wt-poll-q{q}"))
                    .spawn(move || {
                        pin("poll", cpu);
                        poll_loop(t, tx, free_rx, &shared)
                    })
                    .map_err(|e| {
                        PipelineError::Capture(wiretape_capture::CaptureError::Thread(e))
                    })?
            };
            let writer = {
                let (shared, ctl, frames, wcpu) =
                    (shared.clone(), ctl.clone(), p.frames, p.writer_cpu);
                std::thread::Builder::new()
                    .name(format!("wt-write-q{q}"))
                    .spawn(move || {
                        pin("writer", wcpu);
                        let w = Writer::new(sink, frames, live);
                        writer_loop(w, rx, free_tx, &shared, &ctl)
                    })
                    .map_err(|e| {
                        PipelineError::Capture(wiretape_capture::CaptureError::Thread(e))
                    })?
            };
            run.queues.push(QueueRun {
                queue: q,
                shared,
                poll: Some(poll),
                stamps: StampStats::default(),
                poll_panicked: false,
                writer: Some(writer),
            });
        }
        run.started = Instant::now();
        Ok(run)
    }

    /// How the engine came up.
    pub fn info(&self) -> &StartInfo {
        self.engine.info()
    }

    /// How the input's link is (see [`Engine::link_status`]).
    pub fn link_status(&self) -> wiretape_capture::LinkStatus {
        self.engine.link_status()
    }

    /// Live counters (a few syscalls; meant for a once-a-second progress line).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            link: None,
            queues: self
                .queues
                .iter()
                .map(|r| {
                    let c = self.engine.counters(r.queue);
                    QueueSnapshot {
                        queue: r.queue,
                        seen: c.seen,
                        seen_bytes: c.seen_bytes,
                        received: r.shared.received.load(Ordering::Relaxed),
                        filtered: c.filtered,
                        cutoff: c.cutoff,
                        cutoff_bytes: c.cutoff_bytes,
                        written: r.shared.written.load(Ordering::Relaxed),
                        bytes: r.shared.bytes.load(Ordering::Relaxed),
                        kernel: c.kernel,
                        drops: Drops {
                            rx_ring_full: c.rx_ring_full,
                            fill_ring_empty: c.fill_ring_empty,
                            other: c.other,
                            after_count: r.shared.after_count.load(Ordering::Relaxed),
                            ..Drops::default()
                        },
                    }
                })
                .collect(),
        }
    }

    /// Set when the run should end on its own.
    pub fn should_stop(&self) -> Option<StopReason> {
        // Before stop() a thread ends only when its input ended: a poll
        // thread that ended otherwise, or any writer, has died.
        let died = self.queues.iter().any(|r| {
            let input_ended = r.shared.ended.load(Ordering::Acquire);
            !input_ended
                && (r.poll.as_ref().is_some_and(|h| h.is_finished())
                    || r.writer.as_ref().is_some_and(|h| h.is_finished()))
        });
        if died {
            return Some(StopReason::ThreadDied);
        }
        if self.ctl.sink_failed.load(Ordering::Acquire) {
            Some(StopReason::SinkFailed)
        } else if self.ctl.count_reached.load(Ordering::Acquire) {
            Some(StopReason::CountReached)
        } else if self
            .queues
            .iter()
            .all(|r| r.shared.ended.load(Ordering::Acquire))
        {
            Some(StopReason::InputEnded)
        } else {
            None
        }
    }

    /// Ends the input, drains every queue, closes the sinks and accounts
    /// for every frame the engine saw. Returns the engine too (its own
    /// last words, e.g. a file's read error).
    pub fn stop(self) -> (E, Vec<QueueReport>, Duration) {
        let Running {
            mut engine,
            mut queues,
            started,
            ..
        } = self;
        engine.stop();
        for r in &mut queues {
            if let Some(h) = r.poll.take() {
                match h.join() {
                    Ok(s) => r.stamps = s,
                    Err(_) => r.poll_panicked = true,
                }
            }
        }
        let duration = started.elapsed();
        let mut reports = Vec::new();
        for r in &mut queues {
            let (sink, after_count, stamps) = r
                .writer
                .take()
                .and_then(|h| h.join().ok())
                .unwrap_or_else(|| {
                    (
                        WriterReport {
                            error: Some(Arc::new(StorageError::Internal(
                                "the writer thread panicked",
                            ))),
                            ..Default::default()
                        },
                        0,
                        None,
                    )
                });
            if let Some(s) = stamps {
                r.stamps = s;
            }
            let mut sink = sink;
            if r.poll_panicked && sink.error.is_none() {
                sink.error = Some(Arc::new(StorageError::Internal(
                    "the poll thread panicked (frames it had taken are not accounted for)",
                )));
            }
            let c = engine.counters(r.queue);
            reports.push(QueueReport {
                queue: r.queue,
                seen: c.seen,
                seen_bytes: c.seen_bytes,
                received: r.shared.received.load(Ordering::Relaxed),
                written: sink.frames,
                filtered: c.filtered,
                cutoff: c.cutoff,
                cutoff_bytes: c.cutoff_bytes,
                cutoff_flows_evicted: c.cutoff_flows_evicted,
                bytes_written: sink.bytes,
                truncated: sink.truncated,
                drops: Drops {
                    rx_ring_full: c.rx_ring_full,
                    fill_ring_empty: c.fill_ring_empty,
                    other: c.other,
                    after_count,
                    write_error: sink.lost,
                    disk_full: sink.disk_full,
                },
                stamps: r.stamps,
                hw_stamped: c.hw_stamped,
                kernel: c.kernel,
                sink,
            });
        }
        (engine, reports, duration)
    }
}

/// Dropping a run without [`Running::stop`]: the engine (declared first in
/// [`Running`]) is dropped first and ends its input, then each queue's
/// threads are joined here.
impl Drop for QueueRun {
    fn drop(&mut self) {
        if let Some(h) = self.poll.take() {
            let _ = h.join();
        }
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}

fn pin(what: &str, cpu: Option<usize>) {
    if let Some(c) = cpu {
        if let Err(e) = sys::pin_to_cpu(c) {
            eprintln!("wiretape: warning: cannot pin the {what} thread to CPU {c}: {e}");
        }
    }
}

/// The taking half of a queue: takes batches from the engine's receive
/// half and stamps them, and paces the thread when there is nothing to take.
struct Taker<R> {
    rx: R,
    stamper: Option<Stamper<AutoClock>>,
    batch: usize,
    idle_sleep: Duration,
    /// Sleeps of `idle_sleep` before blocking in the engine: about 10 ms.
    sleeps_before_block: u32,
    idle_rounds: u32,
    /// Busy polling (the engine's [`RxQueue::busy_poll`]): how long, in ns,
    /// a dry ring is taken again at once (each take runs the driver's NAPI)
    /// before the sleeps start; 0: off.
    spin_ns: u64,
    /// When the ring was first found dry in this spell (0: it was not).
    dry_since: u64,
}

/// What [`Taker::take`] found.
enum Took {
    /// A stamped batch (counted in `received`).
    Frames,
    /// Nothing now: the caller does its idle work, then [`Taker::pause`].
    Empty,
    /// The engine's input ended and is drained.
    Ended,
}

impl<R: RxQueue> Taker<R> {
    fn new(rx: R, stamper: Option<Stamper<AutoClock>>, batch: usize, idle_sleep: Duration) -> Self {
        let spin_ns = rx.busy_poll().map_or(0, |d| d.as_nanos() as u64);
        Taker {
            rx,
            stamper,
            batch: batch.max(1),
            idle_sleep,
            sleeps_before_block: (10_000 / idle_sleep.as_micros().max(1)) as u32,
            idle_rounds: 0,
            spin_ns,
            dry_since: 0,
        }
    }

    /// Takes a batch into `v` (empty on entry) and stamps it.
    #[inline]
    fn take(&mut self, v: &mut Vec<Desc>, shared: &QueueShared) -> Took {
        let n = self.rx.take(self.batch, v);
        if n == 0 {
            if self.rx.ended() {
                shared.ended.store(true, Ordering::Release);
                return Took::Ended;
            }
            return Took::Empty;
        }
        // Saturated: frames were waiting (we came back without sleeping or
        // spinning because the last take left frames, or this take filled
        // the batch).
        let saturated = (self.idle_rounds == 0 && self.dry_since == 0) || n == self.batch;
        self.idle_rounds = 0;
        self.dry_since = 0;
        if let Some(s) = &mut self.stamper {
            s.stamp(v, saturated);
        }
        shared.received.fetch_add(n as u64, Ordering::Relaxed);
        Took::Frames
    }

    /// Nothing to take. Busy polling: for the first `spin_ns` of a dry
    /// spell, return at once (the next take runs the driver's NAPI again).
    /// Then (and always without busy polling) sleep `idle_sleep` (so frames
    /// come in batches), and after about 10 ms of that, block in the
    /// engine's wait (it wakes us when frames arrive; the timeout bounds
    /// how late we notice a stop).
    fn pause(&mut self) {
        if self.spin_ns > 0 && self.idle_rounds == 0 {
            // One clock read per dry round (not per frame).
            let now = monotonic_ns();
            if self.dry_since == 0 {
                self.dry_since = now;
            }
            if now - self.dry_since < self.spin_ns {
                std::hint::spin_loop();
                return;
            }
        }
        if self.idle_rounds < self.sleeps_before_block {
            self.idle_rounds += 1;
            std::thread::sleep(self.rx.pause_hint().unwrap_or(self.idle_sleep));
        } else {
            self.rx.wait(Duration::from_millis(50));
        }
    }

    /// The stamp counts (an engine that stamps its frames itself, netmap,
    /// keeps its own).
    fn stamps(self) -> StampStats {
        self.stamper
            .map(|s| s.stats)
            .or_else(|| self.rx.stamp_stats())
            .unwrap_or_default()
    }
}

fn poll_loop<R: RxQueue>(
    mut t: Taker<R>,
    tx: Sender<Vec<Desc>>,
    free: Receiver<Vec<Desc>>,
    shared: &QueueShared,
) -> StampStats {
    let mut spare: Option<Vec<Desc>> = None;
    loop {
        let mut v = spare
            .take()
            .or_else(|| free.try_recv().ok())
            .unwrap_or_else(|| Vec::with_capacity(t.batch));
        match t.take(&mut v, shared) {
            Took::Frames => {
                if tx.send(v).is_err() {
                    break; // writer gone (it panicked); nothing more to do
                }
            }
            Took::Empty => {
                spare = Some(v);
                t.pause();
            }
            Took::Ended => break,
        }
    }
    t.stamps()
}

/// The writing half of a queue: its sink, the engine's frames, the live
/// consumers; copies batches, gives the frames back, counts.
struct Writer<S, F> {
    sink: S,
    frames: F,
    live: Option<LiveWriter>,
    after_count: u64,
    next_idle: u64,
}

/// Writes `frames`' runs laid out in place that are due into `sink`
/// ([`FrameStore::run_due`]); true if one failed (its frames counted lost
/// by the sink).
#[inline]
fn runs_due<S: FrameSink, F: FrameStore>(frames: &mut F, sink: &mut S) -> bool {
    let mut failed = false;
    while let Some(run) = frames.run_due() {
        let (n, first) = (run.frames(), run.first_ns());
        let ext = wiretape_storage::external::External::new(Box::new(RunBytes(run)));
        failed |= sink.write_external(ext, n, first).is_err();
    }
    failed
}

/// [`FrameSink::write`] of every frame of a run laid out in place (what a
/// sink that cannot write runs as they lie does); the first error, if any.
pub(crate) fn write_each<S: FrameSink + ?Sized>(
    sink: &mut S,
    ext: &wiretape_storage::external::External,
) -> Result<(), Arc<StorageError>> {
    let mut r = Ok(());
    let _ = wiretape_storage::external::walk_run(ext.bytes(), |_, ts, f| {
        if let Err(e) = sink.write(ts, f, f.len() as u32) {
            r = Err(e);
        }
    });
    r
}

/// An engine's run as the bytes storage writes.
struct RunBytes(Box<dyn wiretape_capture::LaidOutRun>);

impl AsRef<[u8]> for RunBytes {
    fn as_ref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

/// How often a writer's sink (and live side) hear from it when idle.
const IDLE_NS: u64 = 100_000_000;

impl<S: FrameSink, F: FrameStore> Writer<S, F> {
    fn new(sink: S, frames: F, live: Option<LiveWriter>) -> Self {
        Writer {
            sink,
            frames,
            live,
            after_count: 0,
            next_idle: monotonic_ns() + IDLE_NS,
        }
    }

    /// Copies the frames of `v` into the sink (as far as the -c budget
    /// allows), gives them all back to the engine (`v` is left empty) and
    /// feeds the live consumers.
    /// Returns the time it finished (its one clock read, for the caller).
    #[inline]
    fn batch(&mut self, v: &mut Vec<Desc>, shared: &QueueShared, ctl: &Control) -> u64 {
        // When the batch was taken: a dump waits for the writers to
        // pass the moment it was asked for.
        let took = if self.live.is_some() {
            monotonic_ns()
        } else {
            0
        };
        let n = v.len() as u64;
        let take = if ctl.limited { ctl.reserve(n) } else { n };
        let (mut ok, mut bytes, mut failed) = (0u64, 0u64, false);
        // Whether the live side keeps frames changes only between batches.
        let mut live = self.live.as_mut().filter(|l| l.is_active());
        for d in v.iter().take(take as usize) {
            let placed = self.frames.laid_out(d);
            if !placed {
                // Runs whose frames all came before this copied one go out
                // first: the file keeps the order.
                failed |= runs_due(&mut self.frames, &mut self.sink);
            }
            let (f, wire) = self.frames.frame(d);
            if placed {
                // Already in a run, written as it lies once complete (at
                // the latest at the end of the batch).
                ok += 1;
                bytes += f.len() as u64;
            } else {
                match self.sink.write(d.ts, f, wire) {
                    Ok(()) => {
                        ok += 1;
                        bytes += f.len() as u64;
                    }
                    Err(_) => failed = true,
                }
            }
            if let Some(l) = live.as_deref_mut() {
                l.push(d.ts, f, wire);
            }
        }
        failed |= self.write_runs_due();
        if failed {
            ctl.sink_failed.store(true, Ordering::Release);
        }
        self.after_count += n - take;
        if take < n {
            shared.after_count.fetch_add(n - take, Ordering::Relaxed);
        }
        // The frames are copied: they go back to the engine.
        self.frames.give_back(v.drain(..));
        // Then the live consumers get the batch (a lossless one may
        // make the writer wait here, the engine's frames returned).
        if let Some(l) = &mut self.live {
            l.publish(took);
        }
        shared.written.fetch_add(ok, Ordering::Relaxed);
        shared.bytes.fetch_add(bytes, Ordering::Relaxed);
        let now = monotonic_ns();
        if now >= self.next_idle {
            self.sink.idle();
            self.next_idle = now + IDLE_NS;
        }
        now
    }

    /// Writes the runs laid out in place that are due ([`FrameStore::run_due`]);
    /// true if one failed (its frames counted lost by the sink).
    #[inline]
    fn write_runs_due(&mut self) -> bool {
        runs_due(&mut self.frames, &mut self.sink)
    }

    /// Nothing to do right now: runs waiting in the sink that waited long
    /// enough go (see [`FrameSink::kick`]).
    #[inline]
    fn kick(&mut self) {
        self.sink.kick();
    }

    /// No frames for a while: the sink's housekeeping (a quiet link's
    /// flush), and the live side learns the writer has passed `now`.
    fn quiet(&mut self, now: u64) {
        self.write_runs_due();
        self.sink.idle();
        self.next_idle = now + IDLE_NS;
        if let Some(l) = &mut self.live {
            l.idle(now);
        }
    }

    /// Publishes what the live side holds, closes the sink.
    fn close(mut self) -> (WriterReport, u64) {
        self.write_runs_due();
        drop(self.live); // publishes the rest and marks the queue ended
        (self.sink.close(), self.after_count)
    }
}

fn writer_loop<S: FrameSink, F: FrameStore>(
    mut w: Writer<S, F>,
    rx: Receiver<Vec<Desc>>,
    free: Sender<Vec<Desc>>,
    shared: &QueueShared,
    ctl: &Control,
) -> (WriterReport, u64, Option<StampStats>) {
    // When frames last came, for the quiet calls: the wait is short while
    // runs wait in the sink (they hold ring blocks the kernel needs back).
    let mut last_frames = monotonic_ns();
    loop {
        let wait = if w.sink.runs_waiting() { 2 } else { 100 };
        match rx.recv_timeout(Duration::from_millis(wait)) {
            Ok(mut v) => {
                last_frames = w.batch(&mut v, shared, ctl);
                let _ = free.send(v);
            }
            Err(RecvTimeoutError::Timeout) => {
                w.kick();
                let now = monotonic_ns();
                if now >= last_frames + IDLE_NS && now >= w.next_idle {
                    w.quiet(now);
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let (report, after_count) = w.close();
    (report, after_count, None)
}

/// A queue on one thread: take a batch, stamp it, copy it, give it back;
/// when the receive half runs dry, sleep `idle_sleep` (so frames come in
/// batches), and after about 10 ms of that, block in the engine's wait.
/// A queue on one thread: take a batch, stamp it, copy it, give it back.
fn queue_loop<R: RxQueue, S: FrameSink, F: FrameStore>(
    mut t: Taker<R>,
    mut w: Writer<S, F>,
    shared: &QueueShared,
    ctl: &Control,
) -> (WriterReport, u64, Option<StampStats>) {
    let mut v: Vec<Desc> = Vec::with_capacity(t.batch);
    // When frames last came (for the sink's and the live side's idle calls).
    let mut last_frames = monotonic_ns();
    loop {
        match t.take(&mut v, shared) {
            Took::Frames => last_frames = w.batch(&mut v, shared, ctl),
            Took::Empty => {
                w.kick();
                let now = monotonic_ns();
                if now >= w.next_idle && now >= last_frames + IDLE_NS {
                    w.quiet(now);
                }
                t.pause();
            }
            Took::Ended => break,
        }
    }
    let (report, after_count) = w.close();
    (report, after_count, Some(t.stamps()))
}
