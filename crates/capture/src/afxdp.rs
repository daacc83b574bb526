//! The per-queue poll and writer threads, and exact accounting at stop.

use crate::bpf::{SteerProgram, XdpLink, XdpMode, MAX_QUEUES};
use crate::xsk::{self, BindMode, Desc, FillRing, RxRing, Umem, XskConfig, XskFd, XskStats};
use crate::{sys, CaptureError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use wiretape_timestamp::{
    monotonic_ns, AutoClock, RealtimeClock, StampStats, Stamper, TaiToUtc, TsMode,
};

/// What receives frames on a writer thread: copies each frame once (into a
/// block) before the frame goes back to the kernel.
pub trait FrameSink: Send + 'static {
    /// Records one frame stamped `ts_ns` (UTC ns). False when it could not
    /// (the sink has failed; it counts the frame as lost).
    fn write(&mut self, ts_ns: u64, frame: &[u8]) -> bool;
    /// Called about every 100 ms (also when no frames come): a chance to
    /// flush a partly filled block.
    fn idle(&mut self);
    /// Flushes and closes; the final word on what was written.
    fn close(self) -> SinkReport;
}

/// A sink's final counts.
#[derive(Clone, Debug, Default)]
pub struct SinkReport {
    /// Frames durably written.
    pub frames: u64,
    /// Captured bytes of those frames.
    pub bytes: u64,
    /// Frames that reached the sink but are not in the file (write error
    /// other than a full disk).
    pub lost: u64,
    /// Frames that reached the sink but are not in the file: the disk was full.
    pub disk_full: u64,
    /// Frames cut to the snap length.
    pub truncated: u64,
    pub files: Vec<PathBuf>,
    pub file_bytes: u64,
    pub error: Option<String>,
    /// How the files were written (e.g. "direct", "buffered").
    pub engine: &'static str,
    /// Block writes issued, times the writer waited for a free block, and
    /// write latency (submit to completion), when the engine measures it.
    pub block_writes: u64,
    pub block_waits: u64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    /// Most bytes that waited in RAM for the disk.
    pub peak_buffered_bytes: u64,
    /// Writes issued again after room was made on a full disk.
    pub full_retries: u64,
    /// Things worth saying that are not errors (e.g. an incomplete index).
    pub notes: Vec<String>,
}

/// Settings of a capture.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    pub ifname: String,
    /// RX queues to capture; None = all.
    pub queues: Option<Vec<u32>>,
    /// CPUs for the poll threads (queue i on cpus[i % len]); None = the
    /// process's allowed CPUs in turn.
    pub cpus: Option<Vec<usize>>,
    /// None = native, falling back to generic.
    pub xdp_mode: Option<XdpMode>,
    /// None = zero-copy, falling back to copy.
    pub zero_copy: Option<bool>,
    /// UMEM frames per queue (power of two).
    pub frames: u32,
    /// Bytes per UMEM frame (2048 or 4096).
    pub frame_size: u32,
    /// Most descriptors a poll thread takes at once.
    pub batch: usize,
    /// Stop after this many frames in total.
    pub count: Option<u64>,
    /// When the RX ring runs dry, the poll thread sleeps this long before it
    /// looks again, so frames arrive in batches and the writer is woken once
    /// per batch, not per frame (interrupt moderation). After about 10 ms
    /// without frames it blocks in poll(2) instead, costing nothing.
    /// Measured on the veth rig (64 B frames, one CPU for wiretape): 200 µs
    /// with batches of 256 cost 0.45-0.55 CPU s per million frames, 1 ms with
    /// batches of 1024 0.26-0.31. The ring is only empty when it sleeps, so
    /// 1 ms fills at most ~15k of the 32k UMEM frames even at 10 GbE/64 B.
    pub idle_sleep: Duration,
    /// How frames are stamped (default hw, falling back to xdp per frame).
    pub ts_mode: TsMode,
    /// CPUs for the writer threads (queue i's writer on cpus[i % len]);
    /// None = not pinned (the scheduler places them).
    pub writer_cpus: Option<Vec<usize>>,
}

impl CaptureConfig {
    pub fn new(ifname: impl Into<String>) -> Self {
        CaptureConfig {
            ifname: ifname.into(),
            queues: None,
            cpus: None,
            xdp_mode: None,
            zero_copy: None,
            frames: 32768,
            frame_size: 2048,
            batch: 1024,
            count: None,
            idle_sleep: Duration::from_micros(1000),
            ts_mode: TsMode::Hw,
            writer_cpus: None,
        }
    }
}

/// How the capture came up.
#[derive(Clone, Debug)]
pub struct StartInfo {
    pub ifname: String,
    pub ifindex: u32,
    pub queues: Vec<u32>,
    pub xdp_mode: XdpMode,
    pub bind_mode: BindMode,
    /// Why zero-copy was not used (driver refused), when it was tried.
    pub zero_copy_refused: Option<String>,
    /// Why native mode was not used, when generic is in effect after a fallback.
    pub native_refused: Option<String>,
    pub cpus: Vec<Option<usize>>,
    /// Where each queue's writer thread is pinned (None: not pinned).
    pub writer_cpus: Vec<Option<usize>>,
    pub tai_offset_s: u64,
    pub ts_mode: TsMode,
    /// Link speed (ethtool), used by hybrid's saturation test.
    pub link_bps: Option<u64>,
    /// The poll threads' clock (kpt, batch, udts, wdts, hybrid): tsc or clock_gettime.
    pub clock: &'static str,
    /// Why NIC timestamps are not asked for, in mode hw (then: xdp stamps).
    pub hw_refused: Option<String>,
    pub frames: u32,
    pub frame_size: u32,
}

/// Why a capture wants to stop on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    CountReached,
    SinkFailed,
    /// A poll or writer thread ended unexpectedly (a bug: its panic message
    /// is on stderr); the capture stops at once rather than drop silently.
    ThreadDied,
}

/// Live counters of one queue.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueSnapshot {
    pub queue: u32,
    pub seen: u64,
    pub seen_bytes: u64,
    pub received: u64,
    pub written: u64,
    pub bytes: u64,
    pub kernel: XskStats,
}

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub queues: Vec<QueueSnapshot>,
}

impl Snapshot {
    pub fn seen(&self) -> u64 {
        self.queues.iter().map(|q| q.seen).sum()
    }
    pub fn written(&self) -> u64 {
        self.queues.iter().map(|q| q.written).sum()
    }
    pub fn bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.bytes).sum()
    }
    pub fn seen_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.seen_bytes).sum()
    }
    pub fn kernel_drops(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| q.kernel.rx_dropped + q.kernel.rx_ring_full)
            .sum()
    }
}

/// Frames not written, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// The socket's RX ring was full (the poll thread fell behind).
    pub rx_ring_full: u64,
    /// No free UMEM frame in the fill ring (the writer fell behind).
    pub fill_ring_empty: u64,
    /// Other kernel drops (e.g. a frame larger than a UMEM frame).
    pub other: u64,
    /// Received after the -c COUNT limit was reached (not recorded by request).
    pub after_count: u64,
    /// Reached the writer but not the file (a write error).
    pub write_error: u64,
    /// Reached the writer but not the file: the disk was full (`--on-full stop`,
    /// or `rotate` with nothing of ours left to delete).
    pub disk_full: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.rx_ring_full
            + self.fill_ring_empty
            + self.other
            + self.after_count
            + self.write_error
            + self.disk_full
    }
    fn add(&mut self, o: &Drops) {
        self.rx_ring_full += o.rx_ring_full;
        self.fill_ring_empty += o.fill_ring_empty;
        self.other += o.other;
        self.after_count += o.after_count;
        self.write_error += o.write_error;
        self.disk_full += o.disk_full;
    }
}

/// Final accounting of one queue.
#[derive(Clone, Debug, Default)]
pub struct QueueReport {
    pub queue: u32,
    /// Frames the XDP program redirected to our socket.
    pub seen: u64,
    pub seen_bytes: u64,
    /// Frames taken from the RX ring.
    pub received: u64,
    pub written: u64,
    pub bytes_written: u64,
    pub truncated: u64,
    pub drops: Drops,
    /// Where the stamps came from.
    pub stamps: StampStats,
    /// Frames the NIC stamped, by the XDP program's count.
    pub hw_stamped: u64,
    pub files: Vec<PathBuf>,
    pub file_bytes: u64,
    pub error: Option<String>,
    pub kernel: XskStats,
    /// The writer's engine and backpressure numbers.
    pub sink: SinkReport,
}

impl QueueReport {
    /// seen = written + every drop reason.
    pub fn identity_holds(&self) -> bool {
        self.seen == self.written + self.drops.total()
    }
}

/// Final accounting of a capture.
#[derive(Clone, Debug)]
pub struct CaptureReport {
    pub info: StartInfo,
    pub queues: Vec<QueueReport>,
    pub duration: Duration,
}

impl CaptureReport {
    pub fn seen(&self) -> u64 {
        self.queues.iter().map(|q| q.seen).sum()
    }
    pub fn written(&self) -> u64 {
        self.queues.iter().map(|q| q.written).sum()
    }
    pub fn bytes_written(&self) -> u64 {
        self.queues.iter().map(|q| q.bytes_written).sum()
    }
    pub fn drops(&self) -> Drops {
        let mut d = Drops::default();
        for q in &self.queues {
            d.add(&q.drops);
        }
        d
    }
    pub fn identity_holds(&self) -> bool {
        self.queues.iter().all(|q| q.identity_holds())
    }
    pub fn errors(&self) -> Vec<String> {
        self.queues.iter().filter_map(|q| q.error.clone()).collect()
    }
}

/// Flags shared by all threads of a capture.
struct Control {
    /// The XDP program is detached: poll threads drain their ring and end.
    detached: AtomicBool,
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

#[derive(Default)]
struct QueueShared {
    received: AtomicU64,
    written: AtomicU64,
    bytes: AtomicU64,
}

struct QueueRun {
    queue: u32,
    fd: Arc<XskFd>,
    shared: Arc<QueueShared>,
    poll: Option<JoinHandle<StampStats>>,
    stamps: StampStats,
    writer: Option<JoinHandle<(SinkReport, u64)>>,
}

/// A running capture. [`Capture::stop`] ends it and accounts for every frame;
/// dropping it without `stop` detaches the program and ends the threads.
pub struct Capture {
    prog: SteerProgram,
    link: Option<XdpLink>,
    queues: Vec<QueueRun>,
    ctl: Arc<Control>,
    info: StartInfo,
    started: std::time::Instant,
}

impl Capture {
    /// Opens the sockets, attaches the program and starts the threads.
    /// `make_sink(queue)` is called once per queue after the program is attached.
    pub fn start<S, F>(cfg: &CaptureConfig, mut make_sink: F) -> Result<Capture, CaptureError>
    where
        S: FrameSink,
        F: FnMut(u32) -> Result<S, String>,
    {
        if !cfg.frames.is_power_of_two() || cfg.frames < 64 {
            return Err(CaptureError::Config(format!(
                "--frames {} must be a power of two >= 64",
                cfg.frames
            )));
        }
        if cfg.frame_size != 2048 && cfg.frame_size != 4096 {
            return Err(CaptureError::Config(format!(
                "--frame-size {} must be 2048 or 4096",
                cfg.frame_size
            )));
        }
        let ifname = cfg.ifname.clone();
        let ifindex =
            sys::ifindex(&ifname).ok_or_else(|| CaptureError::NoSuchInterface(ifname.clone()))?;
        let count = sys::rx_queue_count(&ifname)
            .unwrap_or(1)
            .clamp(1, MAX_QUEUES);
        let queues: Vec<u32> = match &cfg.queues {
            None => (0..count).collect(),
            Some(list) => {
                for &q in list {
                    if q >= count {
                        return Err(CaptureError::NoSuchQueue {
                            ifname,
                            queue: q,
                            count,
                            last: count - 1,
                        });
                    }
                }
                list.clone()
            }
        };
        if let Some(p) = crate::bpf::attached_program(ifindex) {
            return Err(CaptureError::AlreadyAttached {
                ifname,
                id: p.id,
                name: p.name,
                mode: p.mode,
            });
        }
        sys::raise_memlock();
        let xcfg = XskConfig {
            frames: cfg.frames,
            frame_size: cfg.frame_size,
            zero_copy: cfg.zero_copy,
        };
        let mut socks = Vec::new();
        let mut zc_refused = None;
        for &q in &queues {
            let (x, refused) = xsk::open(ifindex, q, &xcfg).map_err(|e| {
                let hint = match e.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EACCES) => {
                        " (run as root, or grant CAP_NET_RAW and CAP_IPC_LOCK)"
                    }
                    Some(libc::ENOMEM) | Some(libc::ENOBUFS) => {
                        " (not enough locked memory: lower --frames or raise `ulimit -l`)"
                    }
                    Some(libc::EBUSY) => " (another AF_XDP socket is bound to this queue)",
                    Some(libc::EOPNOTSUPP) => {
                        " (the driver refused zero-copy; leave --zero-copy off)"
                    }
                    _ => "",
                };
                CaptureError::Socket {
                    ifname: ifname.clone(),
                    queue: q,
                    source: e,
                    hint,
                }
            })?;
            if let Some(r) = refused {
                zc_refused = Some(r.to_string());
            }
            socks.push((q, x));
        }
        let (prog, link, native_refused, hw_refused) = load_and_attach(cfg, ifindex, &ifname)?;
        for (q, x) in &socks {
            prog.register(*q, x.fd.raw())?;
        }

        let mut sinks = Vec::new();
        for &q in &queues {
            sinks.push(make_sink(q).map_err(CaptureError::Sink)?);
        }

        let ctl = Arc::new(Control {
            detached: AtomicBool::new(false),
            remaining: AtomicU64::new(cfg.count.unwrap_or(u64::MAX)),
            count_reached: AtomicBool::new(false),
            sink_failed: AtomicBool::new(false),
        });
        let allowed = sys::allowed_cpus();
        let tai = TaiToUtc::measure();
        let link_bps = sys::link_speed_bps(&ifname);
        let mut info = StartInfo {
            ifname: ifname.clone(),
            ifindex,
            queues: queues.clone(),
            xdp_mode: link.mode,
            bind_mode: socks.first().map(|(_, x)| x.mode).unwrap_or(BindMode::Copy),
            zero_copy_refused: zc_refused,
            native_refused,
            cpus: Vec::new(),
            writer_cpus: Vec::new(),
            tai_offset_s: tai.offset().as_secs(),
            ts_mode: cfg.ts_mode,
            link_bps,
            clock: "clock_gettime",
            hw_refused,
            frames: cfg.frames,
            frame_size: cfg.frame_size,
        };
        let mut runs = Vec::new();
        for (i, ((q, x), sink)) in socks.into_iter().zip(sinks).enumerate() {
            let cpu = match &cfg.cpus {
                Some(c) if !c.is_empty() => Some(c[i % c.len()]),
                Some(_) => None,
                None => allowed.get(i % allowed.len().max(1)).copied(),
            };
            info.cpus.push(cpu);
            let wcpu = cfg
                .writer_cpus
                .as_ref()
                .filter(|c| !c.is_empty())
                .map(|c| c[i % c.len()]);
            info.writer_cpus.push(wcpu);
            let shared = Arc::new(QueueShared::default());
            // Capacity above the frame count: a send can never block, since
            // each batch holds at least one of the UMEM's frames.
            let (tx, rx) = mpsc::sync_channel::<Vec<Desc>>(cfg.frames as usize + 1);
            let (free_tx, free_rx) = mpsc::sync_channel::<Vec<Desc>>(cfg.frames as usize + 1);
            let xsk::Xsk {
                fd,
                umem,
                rx: rxring,
                fill,
                ..
            } = x;
            let poll = {
                let (fd, shared, ctl) = (fd.clone(), shared.clone(), ctl.clone());
                let (batch, idle) = (cfg.batch.max(1), cfg.idle_sleep);
                // Clock modes get the calibrated TSC; xdp/hw only need a
                // fallback for frames without a stamp.
                let clock = if cfg.ts_mode.uses_xdp_meta() || cfg.ts_mode == TsMode::Off {
                    AutoClock::Realtime(RealtimeClock)
                } else {
                    AutoClock::new()
                };
                info.clock = clock.name();
                let stamper = Stamper::new(cfg.ts_mode, clock, tai).with_link_speed(link_bps);
                std::thread::Builder::new()
                    .name(format!("wt-poll-q{q}"))
                    .spawn(move || {
                        poll_loop(
                            rxring, fd, tx, free_rx, shared, ctl, cpu, stamper, batch, idle,
                        )
                    })
                    .map_err(|e| CaptureError::Config(format!("cannot start a thread: {e}")))?
            };
            let writer = {
                let (shared, ctl) = (shared.clone(), ctl.clone());
                std::thread::Builder::new()
                    .name(format!("wt-write-q{q}"))
                    .spawn(move || {
                        if let Some(c) = wcpu {
                            if let Err(e) = sys::pin_to_cpu(c) {
                                eprintln!(
                                    "wiretape: warning: cannot pin the writer thread to CPU {c}: {e}"
                                );
                            }
                        }
                        writer_loop(sink, umem, fill, rx, free_tx, shared, ctl)
                    })
                    .map_err(|e| CaptureError::Config(format!("cannot start a thread: {e}")))?
            };
            runs.push(QueueRun {
                queue: q,
                fd,
                shared,
                poll: Some(poll),
                stamps: StampStats::default(),
                writer: Some(writer),
            });
        }
        Ok(Capture {
            prog,
            link: Some(link),
            queues: runs,
            ctl,
            info,
            started: std::time::Instant::now(),
        })
    }

    pub fn info(&self) -> &StartInfo {
        &self.info
    }

    /// Live counters (a few syscalls; meant for a once-a-second progress line).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            queues: self
                .queues
                .iter()
                .map(|r| {
                    let c = self.prog.counters(r.queue);
                    QueueSnapshot {
                        queue: r.queue,
                        seen: c.seen,
                        seen_bytes: c.bytes,
                        received: r.shared.received.load(Ordering::Relaxed),
                        written: r.shared.written.load(Ordering::Relaxed),
                        bytes: r.shared.bytes.load(Ordering::Relaxed),
                        kernel: r.fd.stats().unwrap_or_default(),
                    }
                })
                .collect(),
        }
    }

    /// Set when the capture should end on its own (count reached, sink failed).
    pub fn should_stop(&self) -> Option<StopReason> {
        // Before stop() no thread ends by itself: one that did has died.
        let died = self.queues.iter().any(|r| {
            r.poll.as_ref().is_some_and(|h| h.is_finished())
                || r.writer.as_ref().is_some_and(|h| h.is_finished())
        });
        if died {
            return Some(StopReason::ThreadDied);
        }
        if self.ctl.sink_failed.load(Ordering::Acquire) {
            Some(StopReason::SinkFailed)
        } else if self.ctl.count_reached.load(Ordering::Acquire) {
            Some(StopReason::CountReached)
        } else {
            None
        }
    }

    /// Detaches the program, drains every ring, closes the sinks and accounts
    /// for every frame the program saw.
    pub fn stop(mut self) -> CaptureReport {
        self.shutdown();
        let duration = self.started.elapsed();
        let mut reports = Vec::new();
        for r in &mut self.queues {
            let kernel = r.fd.stats().unwrap_or_default();
            let (sink, after_count) =
                r.writer
                    .take()
                    .and_then(|h| h.join().ok())
                    .unwrap_or_else(|| {
                        (
                            SinkReport {
                                error: Some("writer thread panicked".into()),
                                ..Default::default()
                            },
                            0,
                        )
                    });
            let c = self.prog.counters(r.queue);
            let fill_ring_empty = kernel.rx_fill_ring_empty_descs.min(kernel.rx_dropped);
            reports.push(QueueReport {
                queue: r.queue,
                seen: c.seen,
                seen_bytes: c.bytes,
                received: r.shared.received.load(Ordering::Relaxed),
                written: sink.frames,
                bytes_written: sink.bytes,
                truncated: sink.truncated,
                drops: Drops {
                    rx_ring_full: kernel.rx_ring_full,
                    fill_ring_empty,
                    other: kernel.rx_dropped - fill_ring_empty,
                    after_count,
                    write_error: sink.lost,
                    disk_full: sink.disk_full,
                },
                stamps: r.stamps,
                hw_stamped: c.hw,
                files: sink.files.clone(),
                file_bytes: sink.file_bytes,
                error: sink.error.clone(),
                kernel,
                sink,
            });
        }
        CaptureReport {
            info: self.info.clone(),
            queues: reports,
            duration,
        }
    }

    /// Detach, then let the poll threads drain their rings and end.
    fn shutdown(&mut self) {
        if self.link.take().is_some() {
            // Frames the program redirected just before the detach may still
            // be on their way into the rings (end of the NAPI poll): wait.
            std::thread::sleep(Duration::from_millis(30));
        }
        self.ctl.detached.store(true, Ordering::Release);
        for r in &mut self.queues {
            if let Some(h) = r.poll.take() {
                r.stamps = h.join().unwrap_or_default();
            }
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.shutdown();
        for r in &mut self.queues {
            if let Some(h) = r.writer.take() {
                let _ = h.join();
            }
        }
    }
}

/// Loads the program and attaches it, trying what the config allows in
/// order: native XDP with NIC stamps (mode hw), native without, generic.
/// Returns the program, the link, and why native / NIC stamps were refused.
fn load_and_attach(
    cfg: &CaptureConfig,
    ifindex: u32,
    ifname: &str,
) -> Result<(SteerProgram, XdpLink, Option<String>, Option<String>), CaptureError> {
    let want_hw = cfg.ts_mode == TsMode::Hw;
    let modes: &[XdpMode] = match cfg.xdp_mode {
        Some(XdpMode::Native) => &[XdpMode::Native],
        Some(XdpMode::Generic) => &[XdpMode::Generic],
        None => &[XdpMode::Native, XdpMode::Generic],
    };
    let mut native_refused = None;
    let mut hw_refused = None;
    let mut last_err = None;
    for &mode in modes {
        let hw_choices: &[bool] = if want_hw && mode == XdpMode::Native {
            &[true, false]
        } else {
            &[false]
        };
        if want_hw && mode == XdpMode::Generic && hw_refused.is_none() {
            hw_refused = Some("device-bound programs cannot run in generic XDP mode".to_string());
        }
        for &hw in hw_choices {
            let prog = if hw {
                match SteerProgram::load_hw(ifindex) {
                    Ok(p) => p,
                    Err(e @ CaptureError::Permission(_)) => return Err(e),
                    Err(e) => {
                        hw_refused =
                            Some(format!("the driver gives no XDP receive timestamps ({e})"));
                        continue;
                    }
                }
            } else {
                SteerProgram::load()?
            };
            if let Some(p) = prog.attached(ifindex) {
                return Err(CaptureError::AlreadyAttached {
                    ifname: ifname.into(),
                    id: p.id,
                    name: p.name,
                    mode: p.mode,
                });
            }
            match prog.attach(ifindex, ifname, mode) {
                Ok(link) => return Ok((prog, link, native_refused, hw_refused)),
                Err(e @ (CaptureError::AlreadyAttached { .. } | CaptureError::Permission(_))) => {
                    return Err(e)
                }
                Err(e) if hw => {
                    hw_refused = Some(format!("the device-bound program did not attach ({e})"))
                }
                Err(e) => {
                    if mode == XdpMode::Native {
                        native_refused = Some(e.to_string());
                    }
                    last_err = Some(e);
                }
            }
        }
    }
    Err(last_err.unwrap_or_else(|| CaptureError::Bpf("no XDP mode could be attached".into())))
}

#[allow(clippy::too_many_arguments)]
fn poll_loop(
    mut rx: RxRing,
    fd: Arc<XskFd>,
    tx: SyncSender<Vec<Desc>>,
    free: Receiver<Vec<Desc>>,
    shared: Arc<QueueShared>,
    ctl: Arc<Control>,
    cpu: Option<usize>,
    mut stamper: Stamper<AutoClock>,
    batch: usize,
    idle_sleep: Duration,
) -> StampStats {
    // Sleeps of idle_sleep before blocking in poll(2): about 10 ms.
    let sleeps_before_block = (10_000 / idle_sleep.as_micros().max(1)) as u32;
    let mut idle_rounds = 0u32;
    if let Some(c) = cpu {
        if let Err(e) = sys::pin_to_cpu(c) {
            eprintln!("wiretape: warning: cannot pin the poll thread to CPU {c}: {e}");
        }
    }
    let mut spare: Option<Vec<Desc>> = None;
    let mut empty_after_detach = 0;
    loop {
        let mut v = spare
            .take()
            .or_else(|| free.try_recv().ok())
            .unwrap_or_else(|| Vec::with_capacity(batch));
        let n = rx.take(batch, &mut v);
        if n == 0 {
            spare = Some(v);
            if ctl.detached.load(Ordering::Acquire) {
                // Nothing new can arrive once detached; look a few times to
                // be sure the last NAPI batch has landed, then end.
                empty_after_detach += 1;
                if empty_after_detach >= 3 {
                    break;
                }
                fd.wait_rx(5);
            } else if idle_rounds < sleeps_before_block {
                idle_rounds += 1;
                std::thread::sleep(idle_sleep);
            } else {
                // Quiet link: the kernel wakes us when frames arrive; the
                // timeout only bounds how late we notice a stop.
                fd.wait_rx(50);
            }
            continue;
        }
        // Saturated: frames were waiting (we came back without sleeping
        // because the last take left frames, or this take filled the batch).
        let saturated = idle_rounds == 0 || n == batch;
        empty_after_detach = 0;
        idle_rounds = 0;
        stamper.stamp(&mut v, saturated);
        shared.received.fetch_add(n as u64, Ordering::Relaxed);
        if tx.send(v).is_err() {
            break; // writer gone (it panicked); nothing more to do
        }
    }
    stamper.stats
}

fn writer_loop<S: FrameSink>(
    mut sink: S,
    umem: Arc<Umem>,
    mut fill: FillRing,
    rx: Receiver<Vec<Desc>>,
    free: SyncSender<Vec<Desc>>,
    shared: Arc<QueueShared>,
    ctl: Arc<Control>,
) -> (SinkReport, u64) {
    const IDLE_NS: u64 = 100_000_000;
    let mut after_count = 0u64;
    let mut next_idle = monotonic_ns() + IDLE_NS;
    let mut failed = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(mut v) => {
                let n = v.len() as u64;
                let take = ctl.reserve(n);
                let mut bytes = 0u64;
                let mut ok = 0u64;
                for d in v.iter().take(take as usize) {
                    let f = umem.frame(d);
                    if sink.write(d.ts, f) {
                        ok += 1;
                        bytes += f.len() as u64;
                    } else {
                        failed = true;
                    }
                }
                if failed {
                    ctl.sink_failed.store(true, Ordering::Release);
                }
                after_count += n - take;
                // The frames are copied: they go back to the kernel.
                fill.give(v.drain(..));
                let _ = free.try_send(v);
                shared.written.fetch_add(ok, Ordering::Relaxed);
                shared.bytes.fetch_add(bytes, Ordering::Relaxed);
                let now = monotonic_ns();
                if now >= next_idle {
                    sink.idle();
                    next_idle = now + IDLE_NS;
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                sink.idle();
                next_idle = monotonic_ns() + IDLE_NS;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    (sink.close(), after_count)
}
